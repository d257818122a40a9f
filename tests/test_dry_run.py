"""Dry runs of the paper presets (issue #33 item 3): the fake data in every published layout, the preset's "dry"
sizes, random weights for pretrained models, every verdict not testable, and ``ensdiv run --dry-run``.

The fake data is checked by the loaders themselves: every registry and stream set of the paper scale opens
from it with the shapes and labels its layout promises (a loader that rejects a layout would fail here, as it
would on a researcher's folder laid out the same way)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from test_notebooks import NO_CLAIM

import ensdiv as ed
from ensdiv.book import cli, ledger
from ensdiv.book.dry import dry_environment
from ensdiv.config import DRY_RUN_ENV, check_dry_block, resolve_preset
from ensdiv.data.corruptions import CBAR_CORRUPTIONS
from ensdiv.data.paper import sets as ps
from ensdiv.data.paper import stream as data_stream
from ensdiv.data.paper import tensors
from ensdiv.data.paper.common import CIFAR_C_CORRUPTIONS
from ensdiv.data.paper.fake import default_wnids, is_fake_data, write_fake_data, write_training_methods
from ensdiv.data.paper.imagenet import _timm_list
from ensdiv.errors import EnsdivError, InvalidInputError
from ensdiv.report import verdict

WNIDS = _timm_list("imagenet_synsets.txt")


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory):
    return write_fake_data(tmp_path_factory.mktemp("fake") / "data",
                           cbar_levels={c: [t] for c, t in ed.data.PAPER_CBAR.items()})


@pytest.fixture
def fake_env(fake_root, monkeypatch):
    monkeypatch.setenv("ENSDIV_DATA", str(fake_root))
    for memo in (data_stream._OPENED, data_stream._FILE_KEYS):
        memo.clear()
    tensors._read.cache_clear()
    tensors._imagenet_val_subset.cache_clear()
    yield fake_root
    for memo in (data_stream._OPENED, data_stream._FILE_KEYS):
        memo.clear()
    tensors._read.cache_clear()
    tensors._imagenet_val_subset.cache_clear()


# ---- the fake data, read by the real loaders -----------------------------------------------------------------
def test_default_wnids_are_in_imagenet_r_and_a():
    w = default_wnids()
    assert len(w) == 4 and w == sorted(w)
    for synsets in ("imagenet_r_synsets.txt", "imagenet_a_synsets.txt", "imagenet_synsets.txt"):
        assert set(w) <= set(_timm_list(synsets))


def test_registry_sets_load_from_the_fake_folder(fake_env):
    c10, c100 = ed.get_dataset("cifar10/train"), ed.get_dataset("cifar100/test")
    assert c10.x.shape == (50, 3, 32, 32) and sorted(set(c10.y.tolist())) == list(range(10))
    assert c100.x.shape == (100, 3, 32, 32) and sorted(set(c100.y.tolist())) == list(range(100))
    assert ed.get_dataset("cifar10/test").x.shape[0] == 10
    svhn = ed.get_dataset("svhn/test")
    assert len(svhn) == 10 and (svhn.y == -1).all()
    val = ed.get_dataset("imagenet/val-5k")  # five per class of the four fake classes
    assert val.x.shape == (20, 3, 224, 224) and sorted(set(val.y.tolist())) == [WNIDS.index(w) for w in default_wnids()]
    assert 0.0 <= float(val.x.min()) and float(val.x.max()) <= 1.0


def test_stream_sets_open_from_the_fake_folder(fake_env):
    index = [WNIDS.index(w) for w in default_wnids()]
    for name, n, labels in [("imagenet/train", 16, index), ("imagenet/val", 20, index), ("imagenet-v2", 8, index),
                            ("imagenet-c/fog/3", 20, index), ("imagenet-cbar/lines/1.6", 20, index),
                            ("imagenet-r", 8, index), ("imagenet-a", 8, index),
                            ("imagenet-o", 8, [-1]), ("inaturalist", 8, [-1]), ("openimages-o", 8, [-1]),
                            ("textures", 4, [-1])]:
        ds = data_stream.open_stream_set(name)
        assert len(ds) == n, name
        assert sorted(set(int(t) for t in ds.targets)) == labels, name
        x, _ = ds[0]
        assert x.shape == (3, 224, 224), name


def test_a_stream_set_in_memory_is_framed_in_pixels(fake_env):
    # Packed-Ensembles Table 2 scores registry sets: the ImageNet folders are read into memory at 224 px, [0, 1]
    val = data_stream.stream_tensor_set("imagenet/val")
    assert val.x.shape == (20, 3, 224, 224) and val.name == "imagenet/val"
    assert 0.0 <= float(val.x.min()) and float(val.x.max()) <= 1.0 and float(val.x.std()) > 0.1  # noise, unscaled
    assert sorted(set(val.y.tolist())) == [WNIDS.index(w) for w in default_wnids()]
    sub = data_stream.stream_tensor_set("imagenet-r", 5, seed=3)
    assert sub.x.shape == (5, 3, 224, 224) and sub.name == "imagenet-r[5@3]"
    assert torch.equal(sub.x, data_stream.stream_tensor_set("imagenet-r", 5, seed=3).x)
    assert (data_stream.stream_tensor_set("textures").y == -1).all()
    with pytest.raises(ed.UnknownNameError, match="stream set"):
        data_stream.stream_tensor_set("imagenet/nope")


def test_stream_rows_and_file_keys_pair_a_corrupted_set_with_val(fake_env):
    keys = data_stream.stream_file_keys("imagenet/val")
    assert keys[0] == f"{default_wnids()[0]}/img0" and len(keys) == 20
    assert data_stream.stream_file_keys("imagenet-cbar/lines/1.6") == keys  # the published sets keep val's names
    rows = data_stream.stream_tensor_set("imagenet-c/fog/1", rows=[3, 0])
    ds = data_stream.open_stream_set("imagenet-c/fog/1", data_config=data_stream.PIXEL_CONFIG)
    assert torch.equal(rows.x[0], ds[3][0]) and torch.equal(rows.x[1], ds[0][0])  # exactly those rows, in order
    assert rows.y.tolist() == [int(ds.targets[3]), int(ds.targets[0])]
    assert rows.name.startswith("imagenet-c/fog/1[rows-")
    with pytest.raises(InvalidInputError, match=r"must lie in \[0, 20\)"):
        data_stream.stream_tensor_set("imagenet-c/fog/1", rows=[20])
    for bad in ("imagenet-cbar", "imagenet-cbar/lines", "imagenet-cbar/lines/strong", "imagenet-c"):
        with pytest.raises(ed.UnknownNameError, match="stream set"):
            data_stream.open_stream_set(bad)


def test_corruptions_page_scores_paired_and_independent_sets_at_paper_scale(fake_env):
    """The foundations corruptions page at paper scale: ImageNet-C / -C̄ are scored on exactly the val images the
    clean set draws (same files), so they share its bootstrap sample; ImageNetV2 and -R are other images, each a
    sample of its own; -R is scored over its 200 classes. Checked against the model's logits computed by hand."""
    from ensdiv.chapters import foundations as fd

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, 1000)).eval()
    correct, sample = fd.shift_correct(model, {"scale": "paper", "eval_subset": 6, "build_sets": False})
    assert set(correct) == set(fd.shift_roles()) and len(correct) == 3 + 4 + 30
    assert {r for r, s in sample.items() if s == "clean"} == set(fd.shift_roles()) - {"v2", "r"}
    assert sample["v2"] == "v2" and sample["r"] == "r"
    assert all(len(correct[r]) == 6 for r in correct if sample[r] == "clean") and len(correct["v2"]) == 6
    rows = ed.data.registry.subset_indices(20, 6, seed=0).tolist()
    with torch.no_grad():
        fog = data_stream.stream_tensor_set("imagenet-c/fog/5", rows=rows)
        assert np.array_equal(correct["c/fog/5"], (model(fog.x).argmax(-1) == fog.y).double().numpy())
        r = data_stream.stream_tensor_set("imagenet-r", 6, seed=0)
        mask = data_stream.stream_files("imagenet-r").class_mask
        by_hand = mask[model(r.x)[:, mask].argmax(-1)] == r.y  # the argmax over R's 200 classes only
    assert np.array_equal(correct["r"], by_hand.double().numpy())
    assert fd.shift_set_name("cbar/lines/1.6", "paper") == "imagenet-cbar/lines/1.6"
    assert fd.shift_set_name("cbar/lines/1.6", "cpu") == "fmnist-cbar/lines/1.6"
    with pytest.raises(ed.UnknownNameError, match="corruptions page role"):
        fd.shift_set_name("c/fog/3", "paper")  # severities 1 and 5 only


def test_corrupted_sets_cover_every_corruption_and_severity(fake_env):
    for c in CIFAR_C_CORRUPTIONS:
        for name in ("cifar10", "cifar100"):
            ds = ps.cifar_c(fake_env, c, 5, name=name)
            assert len(ds) == 20
        assert len(ps.imagenet_c(fake_env / "imagenet-c", c, 1)) == 20  # every val image, under its own name
    assert len(ps.imagenet_cbar(fake_env / "imagenet-cbar", "lines", 1.6)) == 20
    assert len(ps.imagenet_cbar(fake_env / "imagenet-cbar", "water_drop", 7.0)) == 20
    assert is_fake_data(fake_env) and not is_fake_data(fake_env / "imagenet")


def test_fake_data_is_seeded(tmp_path):
    a = write_fake_data(tmp_path / "a", cbar_levels={})
    b = write_fake_data(tmp_path / "b", cbar_levels={})
    c = write_fake_data(tmp_path / "c", cbar_levels={}, seed=1)
    f = "imagenet/train/" + default_wnids()[0] + "/img0.JPEG"
    assert (a / f).read_bytes() == (b / f).read_bytes() != (c / f).read_bytes()
    assert np.array_equal(np.load(a / "CIFAR-10-C" / "fog.npy"), np.load(b / "CIFAR-10-C" / "fog.npy"))


def test_bad_inputs_of_the_fake_data(tmp_path):
    with pytest.raises(InvalidInputError, match="at least one image"):
        write_fake_data(tmp_path, per_class=0)
    with pytest.raises(InvalidInputError, match="Unknown ImageNet-C-bar corruption.*not_a_corruption"):
        write_fake_data(tmp_path, cbar_levels={"not_a_corruption": [1.0]})
    with pytest.raises(InvalidInputError, match="exactly one role 'base'"):
        write_training_methods(tmp_path / "tm", [("a", "arch", "main", 0.5)])
    with pytest.raises(InvalidInputError, match="exactly one role 'base'"):
        write_training_methods(tmp_path / "tm", [])
    with pytest.raises(InvalidInputError, match=r"accuracy must lie in \[0, 1\]"):
        write_training_methods(tmp_path / "tm", [("a", "arch", "base", 1.5)])
    assert set(CBAR_CORRUPTIONS) >= {"lines", "water_drop", "plasma_noise", "checkerboard_cutout"}


def test_training_methods_folder_layout(tmp_path):
    models = [("base", "reinit", "base", 0.75), ("ViT-G/14", "arch", "main", 0.25)]
    root = write_training_methods(tmp_path / "tm", models, n=40, classes=1000, dim=3)
    assert (root / "models.csv").read_text().splitlines() == ["name,category,role", "base,reinit,base",
                                                               "ViT-G/14,arch,main"]
    labels = np.load(root / "labels_test.npy")
    assert labels.tolist() == list(range(40))
    for name, acc in (("base", 0.75), ("ViT-G/14", 0.25)):  # the accuracy asked for (the rest: chance, 1 in 1000)
        logits = np.load(root / name / "logits_val.npy")
        assert logits.shape == (40, 1000)
        assert abs((logits.argmax(1) == np.load(root / "labels_val.npy")).mean() - acc) <= 1 / 40
    down = np.load(root / "labels_down-test.npy")
    assert down.shape == (40, 20) and (down.sum(1) >= 1).all()
    assert np.load(root / "base" / "features_down-train.npy").shape == (40, 3)
    assert not (root / "base" / "logits_train.npy").exists()


# ---- presets: the "dry" block changes sizes only, and only in a dry run at paper scale ---------------------------
_SPEC = {"common": {"seed": 0, "eval_images": 0, "zoo": ["a", "b", "c"], "model": "resnet50", "lr": 0.1},
         "smoke": {}, "cpu": {}, "paper": {"epochs": 90, "milestones": [30, 60]},
         "dry": {"eval_images": 8, "zoo": ["c", "a"], "epochs": 2, "milestones": [1]}}


def test_the_dry_block_applies_only_in_a_dry_run_at_paper_scale(monkeypatch):
    monkeypatch.delenv(DRY_RUN_ENV, raising=False)
    assert resolve_preset("demo/x", _SPEC, "paper", verbose=False)["epochs"] == 90
    monkeypatch.setenv(DRY_RUN_ENV, "1")
    cfg = resolve_preset("demo/x", _SPEC, "paper", verbose=False)
    assert (cfg["epochs"], cfg["eval_images"], cfg["zoo"], cfg["milestones"]) == (2, 8, ["c", "a"], [1])
    assert cfg["model"] == "resnet50" and cfg["lr"] == 0.1
    assert "epochs" not in resolve_preset("demo/x", _SPEC, "cpu", verbose=False)
    assert resolve_preset("demo/x", _SPEC, "paper", verbose=False, epochs=3)["epochs"] == 3  # a parameter wins


@pytest.mark.parametrize("dry,match", [
    ({"model": "resnet18"}, "changes 'model'"),  # a string is no size
    ({"lr": 0.01}, "changes 'lr'"),  # nor is a learning rate, though smaller
    ({"zoo": ["a", "z"]}, "changes 'zoo'"),  # a model the paper list does not hold
    ({"nope": 1}, "no field"),
])
def test_a_dry_block_that_changes_more_than_sizes_is_refused(dry, match):
    paper = {**_SPEC["common"], **_SPEC["paper"]}
    with pytest.raises(TypeError, match=match):
        check_dry_block("demo/x", paper, dry)


def test_a_dry_block_may_pick_what_a_pattern_or_a_token_of_the_paper_list_stands_for():
    import ensdiv.models.paper  # noqa: F401  (registers "sat69")
    from ensdiv.models.paper import sat_model_names

    paper = {"zoo": ["sat69", "arch/*"], "seed": 0}
    check_dry_block("demo/x", paper, {"zoo": ["resnet50", "arch/vit", "vit_small_patch16_224"]})
    assert "resnet50" in sat_model_names()  # the token's own list, read from the SAT table
    for bad in (["resnet18"], ["dd/vit"], ["arch"]):  # not one of the 69, not matched by the pattern
        with pytest.raises(TypeError, match="changes 'zoo'"):
            check_dry_block("demo/x", paper, {"zoo": bad})
    with pytest.raises(TypeError, match="changes 'zoo'"):  # an unregistered token stands only for itself
        check_dry_block("demo/x", {"zoo": ["sat70"]}, {"zoo": ["resnet50"]})


def test_add_dry_blocks_picks_through_patterns_and_tokens():
    from ensdiv.chapters._presets import add_dry_blocks

    presets = {"a": {"common": {"zoo": ["sat69"], "n_draws": 50}, "paper": {}},
               "b": {"common": {"zoo": ["arch/*", "x"]}, "paper": {"steps": 50}},
               "c": {"common": {"zoo": ["y"]}, "paper": {}}}
    add_dry_blocks(presets, {"n_draws": 5, "steps": 2}, pick={"zoo": ["x", "arch/vit", "resnet50", "arch/mlp"]})
    assert presets["a"]["dry"] == {"n_draws": 5, "zoo": ["resnet50"]}
    assert presets["b"]["dry"] == {"steps": 2, "zoo": ["arch/vit", "arch/mlp", "x"]}  # paper order, then pick order
    assert presets["c"]["dry"] == {}  # nothing picked: the paper list stays


def test_every_chapter_dry_block_changes_sizes_only(monkeypatch):
    from ensdiv.chapters import MODULES

    monkeypatch.setenv(DRY_RUN_ENV, "1")
    for mod in MODULES:
        for name, spec in mod.PRESETS.items():
            if "dry" in spec:
                resolve_preset(name, spec, "paper", verbose=False)  # check_dry_block runs here


def test_a_dry_run_verdict_is_not_testable(monkeypatch):
    monkeypatch.delenv(DRY_RUN_ENV, raising=False)
    assert verdict(["pass", "pass"], scale="paper") == "holds"
    monkeypatch.setenv(DRY_RUN_ENV, "1")
    assert verdict(["pass", "pass"], scale="paper") == "not testable at this scale"


def test_a_dry_run_builds_pretrained_models_with_random_weights_and_their_data_config(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "no-hub"))  # no weights anywhere
    monkeypatch.delenv(DRY_RUN_ENV, raising=False)
    with pytest.raises(EnsdivError, match="not on this machine"):
        ed.create_model("deit_tiny_patch16_224.fb_in1k", num_classes=1000, in_chans=3, img_size=224, pretrained=True)
    monkeypatch.setenv(DRY_RUN_ENV, "1")
    m = ed.create_model("deit_tiny_patch16_224.fb_in1k", num_classes=1000, in_chans=3, img_size=224, pretrained=True)
    assert m.ensdiv_input.size == 224 and m.ensdiv_input.mean == pytest.approx((0.485, 0.456, 0.406))
    assert m.ensdiv_weights == "" and m(torch.rand(1, 3, 224, 224)).shape == (1, 1000)


# ---- the command ------------------------------------------------------------------------------------------------
def test_dry_run_refuses_another_scale(capsys):
    assert cli.main(["run", "notebooks/foundations/eq01_ambiguity_decomposition.ipynb", "--dry-run", "--scale",
                     "cpu"]) == 2
    assert "--dry-run runs the paper presets" in capsys.readouterr().err


def test_dry_environment_sets_and_restores_the_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_DATA", "/somewhere")
    monkeypatch.delenv(DRY_RUN_ENV, raising=False)
    import os

    with dry_environment(tmp_path / "dry") as root:
        assert os.environ["ENSDIV_DATA"] == str(root / "data") and os.environ[DRY_RUN_ENV] == "1"
        assert os.environ["ENSDIV_CACHE"] == str(root / "cache") and is_fake_data(root / "data")
        assert (root / "data" / "imagenet-cbar" / "lines" / "1.6").is_dir()  # the design-diversity strengths
    assert os.environ["ENSDIV_DATA"] == "/somewhere" and DRY_RUN_ENV not in os.environ


# ---- every notebook with a "dry" block runs its paper preset to its claim ------------------------------------------
#: pages whose paper path a dry run shows broken, with why (an expected failure: the test fails once it runs, so
#: the entry must then leave; the README lists them as not yet runnable at paper scale)
DRY_NOT_YET: dict[str, str] = {}  # page -> why its dry run still fails (a strict expected failure); none today


#: the pages `make test` dry-runs every time, one per kind of paper data path that no unit test runs through a page:
#: timm stand-ins scored on the ImageNet val / V2 / C-bar folders, the training-methods logits folder, a paper zoo
#: recipe trained from the ImageNet folder. Every other page is dry-run when its entry in the dry-run ledger
#: (tests/dry_runs.json, ensdiv.book.ledger) is missing or stale: when code its last passing dry run executed,
#: its notebook, book/data, the fake-data generator or a dependency changed. `make dry-run` runs those and records
#: them; `make dry-run DRY_ALL=1` runs all 56 pages (about 40 minutes on two cores).
DRY_IN_MAKE_TEST = {
    "design-diversity/tab01_architecture_resiliency", "training-methods/fig01_error_inconsistency",
    "foundations/deep_ensemble_basics",
}
DRY_ALL = os.environ.get("ENSDIV_DRY_ALL") == "1"


def _dry_notebooks() -> list:
    from ensdiv.chapters import list_dry_presets
    from ensdiv.paths import project_root

    names = set(list_dry_presets())
    paths = sorted(p for p in (project_root() / "notebooks").rglob("*.ipynb")
                   if f"{p.parent.name}/{p.stem}" in names and ".ipynb_checkpoints" not in p.parts)
    out = []
    for p in paths:
        name = f"{p.parent.name}/{p.stem}"
        # one xdist worker runs every dry run in turn: two ImageNet-size dry trainings side by side held about
        # 11 GB each and the kernel killed one on the 24 GB machine (make test runs two workers)
        marks = [pytest.mark.xdist_group("dry-runs")]
        if name in DRY_NOT_YET:
            marks.append(pytest.mark.xfail(strict=True, reason=DRY_NOT_YET[name]))
        out.append(pytest.param(p, id=name, marks=marks))
    return out


@pytest.fixture(scope="module")
def dry_root(tmp_path_factory):
    """One dry-run folder for the module (per test worker): the fake data is written once, and the dry cache
    serves every page after the first that needs an entry (the design-diversity stand-ins' logits, say)."""
    return tmp_path_factory.mktemp("dry-run")


@pytest.mark.notebook
@pytest.mark.parametrize("path", _dry_notebooks())
def test_notebook_dry_runs_its_paper_preset(path, dry_root, monkeypatch):
    from ensdiv.book import page_run, run_notebooks
    from ensdiv.paths import project_root

    name, book = f"{path.parent.name}/{path.stem}", project_root() / ledger.LEDGER
    recording = os.environ.get(ledger.RECORD_ENV) == "1"  # make dry-run: every page by the ledger
    if not DRY_ALL and (recording or name not in DRY_IN_MAKE_TEST):
        recorded = ledger.read_ledger(book)
        if ledger.stale_reason(recorded, path) is None:
            entry = recorded["pages"][path.relative_to(project_root()).as_posix()]
            pytest.skip(f"its dry run passed on {entry['when']} and nothing it ran has changed since "
                        "(tests/dry_runs.json)")
    monkeypatch.setenv("ENSDIV_BUILD", str(dry_root / "build"))
    with dry_environment(dry_root) as root:
        (res,) = run_notebooks([path], scale="paper", out_root=root / "executed", force=True, progress=False)
    assert res.status == "ok", res.error
    if recording:
        ledger.record_dry_run(book, path, ledger.dry_entry(res.output, path, seconds=res.seconds))
    rel = path.relative_to(project_root()).as_posix()
    records = page_run(res.output, rel).records
    if rel in NO_CLAIM:  # a page of measurements or a worked example: it ran, and records nothing
        assert not records
        return
    assert records, "the page records no claim"
    assert {r["verdict"] for r in records} == {"not testable at this scale"}
    assert all(r["scale"] == "paper" for r in records)


def test_the_pages_not_yet_dry_runnable_are_dry_pages():
    from ensdiv.chapters import list_dry_presets

    assert set(DRY_NOT_YET) | DRY_IN_MAKE_TEST <= set(list_dry_presets())
