"""Reliability: no stale page, no unsafe load, no wrong cache hit, one sentence for every bad file or value.

One test (or a few) per item of the reliability issue:

1. the book shows only the scale it was built at (two builds of a tiny book at two scales);
2. a CIFAR pickle is read without running pickled code;
3. two runs of one notebook at once cannot leave a failed copy passing for a finished one;
4. cached predictions and models are keyed by the content of the data read, not only its name;
5. an unusable cache folder is one sentence before any work;
6. truncated or corrupt data files name the file, the fault and where to get a good copy;
7. parameter values are typed strictly and checked against their preset's type and range;
8. the smaller ones: ``Store.load`` race, cache file modes, the staging folder guard, the rerun check
   of ``book/data`` and ``$ENSDIV_DATA``, and ``disagreement_matrix``'s input checks.
"""

from __future__ import annotations

import gzip
import os
import pickle
import stat
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from ensdiv.book import cli
from ensdiv.book import run as runner
from ensdiv.book import site as book_site
from ensdiv.config import between, one_of, resolve_preset
from ensdiv.data import fashion
from ensdiv.data import registry as reg
from ensdiv.data.paper import sets as ps
from ensdiv.data.paper import tensors as pt
from ensdiv.errors import (
    CacheError,
    CorruptDataError,
    DataNotFoundError,
    EnsdivError,
    InvalidInputError,
    UnknownNameError,
)
from ensdiv.metrics import disagreement_matrix
from ensdiv.predict import predict
from ensdiv.store import Store, config_key
from ensdiv.train import build
from ensdiv.train.recipes import Recipe

ROOT = Path(__file__).resolve().parent.parent
BASICS = str(ROOT / "notebooks" / "foundations" / "deep_ensemble_basics.ipynb")


def _notebook(path: Path, body: str, params: str = 'scale = "cpu"\nvalue = 1') -> Path:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# Tiny page"), cell, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _one_sentence(text: str) -> None:
    text = text.strip()
    assert "Traceback" not in text and "\n" not in text and text.endswith("."), text


@pytest.fixture
def build_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))
    return tmp_path


# ------------------------------------------------------------------------------------------------ 1
@pytest.mark.kernel
def test_book_pages_come_from_the_scale_asked_for(build_env):
    """cpu, smoke, then cpu again (its notebook cached, its executed copy older than the smoke build):
    the HTML holds the scale asked for each time. A real Jupyter Book build of a one-page book (~7 s)."""
    book = build_env / "book"
    (book).mkdir()
    (book / "_config.yml").write_text('title: tiny\nauthor: t\nonly_build_toc_files: true\n'
                                      'execute:\n  execute_notebooks: "off"\n')
    (book / "_toc.yml").write_text("format: jb-book\nroot: page\n")
    _notebook(book / "page.ipynb", 'print("holds at scale", scale)', params='scale = "cpu"')
    seen = []
    for scale in ("cpu", "smoke", "cpu"):
        results, index = book_site.build_book(scale=scale, root=book)
        html = (index.parent / "page.html").read_text()
        seen.append((scale, results[0].status, "holds at scale smoke" in html, "holds at scale cpu" in html))
    assert seen == [("cpu", "ok", False, True), ("smoke", "ok", True, False), ("cpu", "cached", False, True)]


def test_staging_refreshes_changed_files_and_keeps_unchanged_ones(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.ipynb").write_text("smoke copy")
    (src / "b.md").write_text("same")
    old = time.time() - 3600
    for f in src.iterdir():
        os.utime(f, (old, old))
    site = tmp_path / "site"
    book_site._stage(site, {Path("a.ipynb"): src / "a.ipynb", Path("b.md"): src / "b.md"}, "smoke")
    first_b = (site / "b.md").stat().st_mtime
    assert (site / "a.ipynb").stat().st_mtime > old + 1800  # fresh, never the executed copy's old time
    (src / "a.ipynb").write_text("cpu copy")
    os.utime(src / "a.ipynb", (old, old))  # an executed copy from long ago
    time.sleep(0.01)
    assert book_site._stage(site, {Path("a.ipynb"): src / "a.ipynb", Path("b.md"): src / "b.md"}, "cpu") is True
    assert (site / "a.ipynb").read_text() == "cpu copy"
    assert (site / "a.ipynb").stat().st_mtime > first_b
    assert (site / "b.md").stat().st_mtime == first_b  # unchanged: not re-rendered


# ------------------------------------------------------------------------------------------------ 2
class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_cifar_pickle_runs_nothing(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    marker = tmp_path / "pwned"
    with open(folder / "test_batch", "wb") as fh:
        pickle.dump({b"data": _Evil(marker), b"labels": [0]}, fh)
    with pytest.raises(CorruptDataError) as info:
        ps.cifar(tmp_path, name="cifar10")
    assert not marker.exists()
    msg = str(info.value)
    _one_sentence(msg)
    assert "test_batch" in msg and "system" in msg and "cs.toronto.edu" in msg


def test_real_format_pickles_still_load(tmp_path):
    """numpy arrays pickled at protocols 2 (as the published files) to 5 are admitted."""
    for protocol in (2, 4, 5):
        folder = tmp_path / f"p{protocol}" / "cifar-10-batches-py"
        folder.mkdir(parents=True)
        data = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072)
        with open(folder / "test_batch", "wb") as fh:
            pickle.dump({b"batch_label": b"x", b"data": data, b"labels": [3, 4]}, fh, protocol=protocol)
        ds = ps.cifar(folder.parent, name="cifar10", transform=lambda im: np.asarray(im))
        assert len(ds) == 2 and ds[1][1] == 4 and ds[0][0].shape == (32, 32, 3)


# ------------------------------------------------------------------------------------------------ 3
_RUN = ("import sys; from pathlib import Path; from ensdiv.book import run as runner; "
        "r = runner.run_notebooks([sys.argv[1]], scale='smoke', params={'value': int(sys.argv[2])}, "
        "out_root=Path(sys.argv[3]), progress=False); print(r[0].status)")


@pytest.mark.kernel
def test_two_runs_of_one_notebook_at_once(build_env):
    """A slow failing run (value 0) and a quick good run (value 1) of one notebook at the same time:
    afterwards a run with value 1 must show value 1's output, never the failed copy."""
    nb = _notebook(build_env / "nb.ipynb",
                   "import time\nif value == 0:\n    time.sleep(4)\n    raise ValueError('slow failure')\n"
                   "print('result', value)")
    out = build_env / "out"
    env = {**os.environ}
    slow = subprocess.Popen([sys.executable, "-c", _RUN, str(nb), "0", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(0.5)
    quick = subprocess.Popen([sys.executable, "-c", _RUN, str(nb), "1", str(out)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert quick.communicate(timeout=300)[0].strip() == "ok"
    assert slow.communicate(timeout=300)[0].strip() == "failed"
    (again,) = runner.run_notebooks([nb], scale="smoke", params={"value": 1}, out_root=out, progress=False)
    executed = nbformat.read(again.output, as_version=4)
    text = "".join(o.get("text", "") for o in executed.cells[-1].outputs)
    assert "result 1" in text and again.status in ("ok", "cached")
    assert executed.metadata["ensdiv"]["status"] == "ok"


@pytest.mark.kernel
def test_stamp_lives_in_the_executed_copy(build_env):
    nb = _notebook(build_env / "a.ipynb", "raise ValueError('no')")
    (res,) = runner.run_notebooks([nb], scale="smoke", out_root=build_env / "out", progress=False)
    assert res.status == "failed"
    meta = nbformat.read(res.output, as_version=4).metadata["ensdiv"]
    assert meta["status"] == "failed" and meta["stamp"] is None  # a failed copy carries no stamp to be reused
    assert meta["claims"] == [] and meta["reads"] is None and "ValueError: no" in meta["error"]
    assert not list((build_env / "out").glob("*.stamp.json"))


# ------------------------------------------------------------------------------------------------ 4
def _write_fmnist(folder: Path, seed: int, n_train: int = 40, n_test: int = 12) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for (img, lbl), n in zip(fashion._FILES.values(), (n_train, n_test), strict=True):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        header = bytes([0, 0, 8, 3]) + b"".join(d.to_bytes(4, "big") for d in images.shape)
        with gzip.open(folder / f"{img}.gz", "wb") as fh:
            fh.write(header + images.tobytes())
        (folder / lbl).write_bytes(bytes([0, 0, 8, 1]) + n.to_bytes(4, "big") + labels.tobytes())


@pytest.fixture
def fake_fmnist(tmp_path, monkeypatch):
    monkeypatch.setattr(fashion, "DEBIAN_DIR", tmp_path / "no-debian")
    monkeypatch.setattr(fashion, "VAL_SIZE", 4)
    fashion._load_raw.cache_clear()
    reg._FINGERPRINTS.clear()
    yield tmp_path
    fashion._load_raw.cache_clear()
    reg._FINGERPRINTS.clear()


def test_other_data_means_other_predictions_and_models(fake_fmnist, tmp_store, monkeypatch):
    _write_fmnist(fake_fmnist / "a", seed=0)
    _write_fmnist(fake_fmnist / "b", seed=1)  # same names, same sizes, other pixels
    recipe = Recipe.make(model="test_cnn", epochs=1, batch_size=16, seed=0)
    monkeypatch.setenv("ENSDIV_DATA", str(fake_fmnist / "a"))
    key_a = config_key(build.model_cache_config(recipe))
    logits_a = predict(recipe, "fmnist/test", store=tmp_store)
    monkeypatch.setenv("ENSDIV_DATA", str(fake_fmnist / "b"))
    key_b = config_key(build.model_cache_config(recipe))
    logits_b = predict(recipe, "fmnist/test", store=tmp_store)
    assert key_a != key_b  # the model is keyed by its training data's content
    assert not torch.equal(logits_a, logits_b)  # recomputed, not the cached logits of the old files
    assert len(tmp_store.entries("predictions")) == 2 and len(tmp_store.entries("model")) == 2
    monkeypatch.setenv("ENSDIV_DATA", str(fake_fmnist / "a"))
    assert torch.equal(predict(recipe, "fmnist/test", store=tmp_store), logits_a)  # a hit again


def test_fingerprint_is_memoised_and_cheap(fake_fmnist, monkeypatch):
    _write_fmnist(fake_fmnist / "a", seed=0)
    monkeypatch.setenv("ENSDIV_DATA", str(fake_fmnist / "a"))
    first = reg.registered_fingerprint("fmnist/train")
    assert first.startswith("fmnist:") and first.endswith("/train")
    calls = []
    monkeypatch.setattr(reg, "get_dataset", lambda name: calls.append(name))
    assert reg.registered_fingerprint("fmnist/train") == first and calls == []
    sub = reg.TensorSet(torch.zeros(4, 1, 2, 2), torch.zeros(4, dtype=torch.long), "s", fingerprint="f")
    assert sub.subset(2, seed=3).fingerprint == "f[2@3]"


# ------------------------------------------------------------------------------------------------ 5
def test_unusable_cache_is_one_sentence_before_training(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("ENSDIV_CACHE", str(blocker / "cache"))
    trained = []
    monkeypatch.setattr(build, "load_training_set", lambda recipe: trained.append(recipe))
    monkeypatch.setattr(build, "model_cache_config", lambda recipe: {"recipe": "x"})
    with pytest.raises(CacheError) as info:
        build.train_recipe(Recipe.make(model="test_cnn", epochs=1))
    assert trained == []  # refused before any data was read or any epoch trained
    _one_sentence(str(info.value))
    assert "ENSDIV_CACHE" in str(info.value) and "file is in the way" in str(info.value)


def test_store_check_writable_and_unexpected_os_errors(tmp_path, monkeypatch):
    assert Store(tmp_path / "new" / "cache").check_writable().is_dir()  # created
    st = Store(tmp_path / "c2")

    def vanished(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(os, "replace", vanished)
    with pytest.raises(CacheError, match="not writable \\(No such file or directory\\); set ENSDIV_CACHE"):
        st.save("k", {"a": 1}, torch.ones(1))


def test_runner_checks_the_cache_before_running(build_env, monkeypatch, capsys):
    blocker = build_env / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("ENSDIV_CACHE", str(blocker))
    nb = _notebook(build_env / "a.ipynb", "print(1)")
    assert cli.main(["run", str(nb), "--scale", "smoke"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ensdiv: The cache folder") and err.count("\n") == 1
    assert not (build_env / "build" / "executed" / "smoke" / "a.ipynb").exists()


# ------------------------------------------------------------------------------------------------ 6
def test_corrupt_fashion_mnist_files_name_the_file(fake_fmnist, monkeypatch):
    folder = fake_fmnist / "d"
    monkeypatch.setenv("ENSDIV_DATA", str(folder))
    img = folder / "t10k-images-idx3-ubyte.gz"
    lbl = folder / "t10k-labels-idx1-ubyte"
    short_idx = bytes([0, 0, 8, 3]) + (12).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2 + bytes(100)
    cases = [
        (img, "not a complete gzip file", lambda: img.write_bytes(img.read_bytes()[:-40])),  # truncated download
        (img, "truncated", lambda: img.write_bytes(gzip.compress(short_idx))),  # whole gzip, short IDX
        (lbl, "not an IDX file", lambda: lbl.write_bytes(b"<html>404</html>")),  # a web page saved instead
    ]
    for path, what, damage in cases:
        _write_fmnist(folder, 0)
        damage()
        fashion._load_raw.cache_clear()
        with pytest.raises(CorruptDataError) as info:
            fashion.load_fashion_mnist("test")
        msg = str(info.value)
        _one_sentence(msg)
        assert str(path) in msg and what in msg and "good copy" in msg


def _cifar_batch(folder: Path, obj) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "test_batch", "wb") as fh:
        pickle.dump(obj, fh)


def test_corrupt_cifar_pickles_name_the_file(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    _cifar_batch(folder, {b"data": np.zeros((2, 3072), np.uint8), b"labels": [1, 2]})
    (folder / "test_batch").write_bytes((folder / "test_batch").read_bytes()[:100])
    for expect, setup in [
        ("truncated", None),
        ("needs the keys data and labels", {b"labels": [1]}),
        ("not (N, 3072) uint8", {b"data": np.zeros((2, 100), np.uint8), b"labels": [1, 2]}),
    ]:
        if setup is not None:
            _cifar_batch(folder, setup)
        with pytest.raises(CorruptDataError) as info:
            ps.cifar(tmp_path, name="cifar10")
        msg = str(info.value)
        _one_sentence(msg)
        assert str(folder / "test_batch") in msg and expect in msg and "cs.toronto.edu" in msg
    (folder / "test_batch").write_bytes(b"\x80\x04garbage")
    with pytest.raises(CorruptDataError, match="not a valid pickle"):
        ps.cifar(tmp_path, name="cifar10")


def test_corrupt_svhn_and_cifar_c_name_the_file(tmp_path):
    (tmp_path / "svhn").mkdir()
    mat = tmp_path / "svhn" / "test_32x32.mat"
    mat.write_bytes(b"MATLAB 5.0 MAT-file" + b"\0" * 20)
    with pytest.raises(CorruptDataError) as info:
        ps.svhn(tmp_path)
    _one_sentence(str(info.value))
    assert str(mat) in str(info.value) and "ufldl.stanford.edu" in str(info.value)
    from scipy.io import savemat

    savemat(mat, {"X": np.zeros((4, 4), np.uint8)})
    with pytest.raises(CorruptDataError, match="not SVHN format 2"):
        ps.svhn(tmp_path)
    folder = tmp_path / "CIFAR-10-C"
    folder.mkdir()
    np.save(folder / "labels.npy", np.zeros(10, np.int64))
    np.save(folder / "fog.npy", np.zeros((10, 32, 32, 3), np.uint8))
    raw = (folder / "fog.npy").read_bytes()
    (folder / "fog.npy").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CorruptDataError) as info:
        ps.cifar_c(tmp_path, "fog", 1)
    msg = str(info.value)
    _one_sentence(msg)
    assert str(folder / "fog.npy") in msg and "truncated" in msg and "zenodo.org" in msg
    assert isinstance(info.value, DataNotFoundError)  # a usable copy is not on this machine


def test_corrupt_registry_set_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path))
    pt._read.cache_clear()
    try:
        folder = tmp_path / "cifar-10-batches-py"
        _cifar_batch(folder, {b"data": np.zeros((2, 3072), np.uint8), b"labels": [1, 2]})
        (folder / "test_batch").write_bytes(b"")
        with pytest.raises(CorruptDataError, match="test_batch is truncated"):
            reg.get_dataset("cifar10/test")
    finally:
        pt._read.cache_clear()


# ------------------------------------------------------------------------------------------------ 7
@pytest.mark.parametrize(
    ("params", "expect"),
    [
        (["-p", "test_subset", "-5"], "Parameter 'test_subset' of preset 'foundations/deep_ensemble_basics' "
                                      "must be at least 0, got -5."),
        (["-p", "num_members", "0"], "Parameter 'num_members' of preset 'foundations/deep_ensemble_basics' "
                                     "must be at least 1, got 0."),
        (["-p", "num_members", "no"], "must be an integer (like 4), got the str 'no'."),
        (["-p", "zoo_entry", "arch/nope"], "Unknown zoo entry 'arch/nope'."),
        (["-p", "test_subset", "[1, 2"], "The value '[1, 2' of parameter 'test_subset' is not valid YAML"),
        (["-p", "scale", "cpu"], "Set the scale with --scale cpu, not with -p scale."),
        (["-p", "seed", "1", "-p", "seed", "2"], "Parameter 'seed' is given twice with -p; give it once."),
    ],
)
def test_bad_parameter_values_are_one_sentence_before_any_run(params, expect, build_env, capsys):
    assert cli.main(["run", BASICS, "--scale", "smoke", *params]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ensdiv: ") and expect in err and err.count("\n") == 1, err
    assert not (build_env / "build" / "executed").exists()  # nothing ran


def test_param_values_are_yaml_1_2():
    assert cli._params([["lr", "1e-3"], ["ood", "no"], ["flag", "true"], ["n", "4"], ["xs", "[1, 2.5, off]"],
                        ["root", "/data/x"], ["none", "null"], ["day", "2024-01-01"]]) == {
        "lr": 0.001, "ood": "no", "flag": True, "n": 4, "xs": [1, 2.5, "off"], "root": "/data/x", "none": None,
        "day": "2024-01-01"}


def test_scale_is_refused_as_a_parameter_by_the_runner_and_presets(build_env):
    nb = _notebook(build_env / "a.ipynb", "print(1)")
    with pytest.raises(EnsdivError, match="Set the scale with the scale argument"):
        runner.run_notebooks([nb], scale="smoke", params={"scale": "cpu"})
    with pytest.raises(InvalidInputError, match="'scale' .* cannot be overridden"):
        resolve_preset("demo/x", {"common": {"seed": 0}}, "smoke", scale="cpu")


SPEC = {
    "common": {"seed": 0, "num_members": 4, "train_subset": 0, "ci": 0.9, "alpha": 2, "ood": "inverted",
               "seeds": [0, 1], "lr": 0.1, "root": None},
    "smoke": {}, "cpu": {}, "paper": {},
    "ranges": {"alpha": (1, 8), "ood": one_of("inverted", "noise"), "ci": between(0, 1)},
    "types": {"root": str},
}


@pytest.mark.parametrize(
    ("override", "expect"),
    [
        ({"train_subset": -1}, "'train_subset' of preset 'demo/x' must be at least 0, got -1."),
        ({"num_members": 0}, "'num_members' of preset 'demo/x' must be at least 1, got 0."),
        ({"seeds": [0, -2]}, "'seeds' of preset 'demo/x' must be at least 0, got [0, -2] (the element -2)."),
        ({"alpha": 9}, "'alpha' of preset 'demo/x' must be between 1 and 8, got 9."),
        ({"ood": "uniform"}, "'ood' of preset 'demo/x' must be one of 'inverted', 'noise', got 'uniform'."),
        ({"ci": 1.5}, "'ci' of preset 'demo/x' must be between 0 and 1, got 1.5."),
        ({"lr": "1e-3"}, "'lr' of preset 'demo/x' must be a number (like 0.1), got the str '1e-3'."),
        ({"num_members": 2.0}, "'num_members' of preset 'demo/x' must be an integer (like 4), got the float 2.0."),
    ],
)
def test_preset_types_and_ranges(override, expect):
    with pytest.raises(InvalidInputError) as info:
        resolve_preset("demo/x", SPEC, "cpu", verbose=False, **override)
    assert str(info.value) == f"Parameter {expect}"


def test_preset_ranges_accept_good_values_and_check_the_preset_itself():
    cfg = resolve_preset("demo/x", SPEC, "cpu", verbose=False, lr=1e-3, alpha=8, ood="noise", root="/any")
    assert cfg.lr == 1e-3 and cfg.alpha == 8
    broken = {"common": {"epochs": 0}}
    with pytest.raises(InvalidInputError, match="'epochs' of preset 'demo/y' must be at least 1, got 0"):
        resolve_preset("demo/y", broken, "cpu", verbose=False)
    scaled = {"common": {"zoo_entry": "a"}, "ranges": {"zoo_entry": one_of(lambda cfg: {"a", f"b-{cfg.scale}"})}}
    assert resolve_preset("demo/z", scaled, "smoke", verbose=False, zoo_entry="b-smoke").zoo_entry == "b-smoke"
    with pytest.raises(InvalidInputError, match="zoo_entry"):
        resolve_preset("demo/z", scaled, "cpu", verbose=False, zoo_entry="b-smoke")


def test_unknown_zoo_entry_is_one_sentence_from_the_runner():
    with pytest.raises(UnknownNameError) as info:
        runner.check_parameters(Path(BASICS), "cpu", {"zoo_entry": "arch/small_cnnn"})
    assert "Did you mean 'arch/small_cnn'" in str(info.value)


# ------------------------------------------------------------------------------------------------ 8
def test_load_tolerates_an_entry_removed_after_the_exists_check(tmp_store, monkeypatch):
    cfg = {"x": 1}
    path = tmp_store.save("k", cfg, torch.ones(2))
    path.unlink()
    monkeypatch.setattr(Path, "exists", lambda self: True)  # another process removed it after exists()
    assert tmp_store.load("k", cfg) is None


def test_cache_files_follow_the_umask(tmp_path):
    old = os.umask(0o002)
    try:
        import ensdiv.store as store_mod

        monkey_old, store_mod._UMASK = store_mod._UMASK, None
        path = Store(tmp_path / "c").save("k", {"a": 1}, torch.ones(1))
        mode = stat.S_IMODE(path.stat().st_mode)
    finally:
        os.umask(old)
        store_mod._UMASK = monkey_old
    assert mode == 0o664  # group-readable (and writable) like any new file, not mkstemp's 0600


def test_book_never_deletes_a_folder_it_did_not_make(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "precious.txt").write_text("mine")
    with pytest.raises(EnsdivError, match="is not a staging folder of `ensdiv book`") as info:
        book_site._stage(site, {}, "cpu")
    _one_sentence(str(info.value))
    assert (site / "precious.txt").read_text() == "mine"
    book_site._stage(tmp_path / "fresh", {}, "cpu")  # an absent or empty folder becomes ours
    (tmp_path / "fresh" / "stale.html").write_text("old")
    book_site._stage(tmp_path / "fresh", {}, "cpu")
    assert not (tmp_path / "fresh" / "stale.html").exists()


@pytest.mark.kernel
def test_rerun_check_sees_book_data_and_ensdiv_data(build_env, monkeypatch):
    project = build_env / "project"
    (project / "book" / "data").mkdir(parents=True)
    (project / "book" / "data" / "table.csv").write_text("a,1\n")
    monkeypatch.setattr(runner, "project_root", lambda: project)
    data = build_env / "data"
    data.mkdir()
    monkeypatch.setenv("ENSDIV_DATA", str(data))
    nb = _notebook(build_env / "a.ipynb", "print(value)")
    out = build_env / "out"

    def status() -> str:
        return runner.run_notebooks([nb], scale="smoke", out_root=out, progress=False)[0].status

    assert status() == "ok" and status() == "cached"
    (project / "book" / "data" / "table.csv").write_text("a,2\n")
    assert status() == "ok" and status() == "cached"
    (data / "test_batch").write_bytes(b"new data")
    assert status() == "ok"
    monkeypatch.setenv("ENSDIV_DATA", str(build_env))
    assert status() == "ok"


def test_disagreement_matrix_checks_its_input():
    with pytest.raises(InvalidInputError, match="at least one sample"):
        disagreement_matrix(torch.zeros(2, 0, dtype=torch.long))
    with pytest.raises(InvalidInputError, match="integer class"):
        disagreement_matrix(torch.rand(2, 3))
    with pytest.raises(InvalidInputError, match="negative"):
        disagreement_matrix(torch.tensor([[0, -1]]))
    assert disagreement_matrix(torch.tensor([[0, 1], [0, 2]])).tolist() == [[0.0, 0.5], [0.5, 0.0]]


@pytest.mark.kernel
def test_claims_page_lists_every_claim_and_every_failed_page(build_env):
    """A tiny book with a claim page, a second claim page and a page that fails: the generated claims
    page has one row per claim with its verdict and a link, and the failed page is shown as failed."""
    book = build_env / "book"
    (book / "book").mkdir(parents=True)
    (book / "_config.yml").write_text('title: tiny\nauthor: t\nonly_build_toc_files: true\n'
                                      'execute:\n  execute_notebooks: "off"\n')
    (book / "_toc.yml").write_text("format: jb-book\nroot: book/claims\nchapters:\n- file: a\n- file: b\n- file: c\n")
    (book / "book" / "claims.md").write_text("# Claims at a glance\n\nplaceholder\n")
    claim = ('import ensdiv as ed\n'
             'ed.report.claim(paper="foundations", item="{item}", claim="x is below y.", '
             'checks=[ed.report.less("x", "y", null=ed.report.Null("x = y", [{{"x": 2}}] * 39))], '
             'ours={{"x": {x}, "y": 2}}, unit="released artefact", scale=scale)')
    _notebook(book / "a.ipynb", claim.format(item="Fig. A", x=1), params='scale = "cpu"')
    _notebook(book / "b.ipynb", claim.format(item="Fig. B", x=3), params='scale = "cpu"')
    _notebook(book / "c.ipynb", 'raise RuntimeError("broken page")', params='scale = "cpu"')
    results, index = book_site.build_book(scale="cpu", root=book)
    assert [r.status for r in results] == ["ok", "ok", "failed"]  # the CLI exits 1 on this
    page = (build_env / "build" / "claims.md").read_text()
    html = (index.parent / "book" / "claims.html").read_text()  # the rendered claims page
    assert "does not hold" in html and "failed" in html
    rows = [line for line in page.splitlines() if line.startswith("| ") and "---" not in line
            and not line.startswith("| page |")]
    assert len(rows) == 3
    assert any("Fig. A" in r and "ensdiv-badge holds" in r and "</a>" in r for r in rows)
    assert any("Fig. B" in r and "ensdiv-badge does-not-hold" in r for r in rows)
    assert any("</c>" in r and "ensdiv-badge failed" in r and "broken page" in r for r in rows)
