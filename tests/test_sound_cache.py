"""Cache entries keyed by the code that computed them (ensdiv.store, ensdiv.tracing): an edit to code an entry's
computation ran recomputes it and what was computed from it; a docstring, a comment, a new function or a new
import recomputes nothing; a changed default changes the key; pages re-run by what they used.

The package-level tests edit a copy of the package in a temporary folder (never the checkout the other tests
import), in one subprocess: staleness is decided from the sources as they are on disk, so a process can train,
edit and ask again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ensdiv as ed
from ensdiv import tracing
from ensdiv.store import Store

pytestmark = pytest.mark.xdist_group("sound-cache")


def _copy_package(tmp: Path) -> Path:
    src = Path(ed.__file__).resolve().parent
    dest = tmp / "pkg"
    shutil.copytree(src, dest / "ensdiv", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _python(code: str, pkg: Path, cache: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(pkg), "ENSDIV_CACHE": str(cache), "ENSDIV_PROGRESS": "lines",
           "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("ENSDIV_TRACE_LOG", None)
    env.pop("ENSDIV_TRACE_ROOTS", None)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                         timeout=600, cwd=pkg)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


SETUP = """
import json, ensdiv as ed
from ensdiv.data.registry import registered_fingerprint
from ensdiv.predict import predictions_config
from ensdiv.train import model_cache_config
assert ed.__file__.startswith({pkg!r}), ed.__file__
store = ed.default_store()
recipe = ed.Recipe.make(model="test_cnn", epochs=1, batch_size=64, train_subset=128, seed=0)
mcfg = model_cache_config(recipe)
pcfg = predictions_config(recipe, "fmnist/test#" + registered_fingerprint("fmnist/test"))
def reasons():
    return {{"model": store.stale_reason("model", mcfg), "predictions": store.stale_reason("predictions", pcfg)}}
"""


@pytest.mark.slow
def test_an_edit_to_training_code_recomputes_the_model_and_its_predictions(tmp_path):
    """Train a model and predict with it; then, on the sources as edited on disk: a docstring, a comment, a new
    function in a metric module and a new import change nothing; a statement added to the training loop makes the
    model *and* its predictions stale, naming ``fit``; the next run retrains (the record names the new source)
    and the one after serves both again. Fails on the hand-bumped version integers, where every edit is a hit."""
    pkg = _copy_package(tmp_path)
    cache = tmp_path / "cache"
    loop, metrics = pkg / "ensdiv/train/loop.py", pkg / "ensdiv/metrics/diversity.py"
    setup = SETUP.format(pkg=str(pkg))
    first = _python(setup + """
print(json.dumps(reasons()))
ed.predict(recipe, "fmnist/test")
print(json.dumps(reasons()))
""", pkg, cache).strip().splitlines()
    assert json.loads(first[0]) == {"model": "missing", "predictions": "missing"}
    assert json.loads(first[-1]) == {"model": None, "predictions": None}
    ask = setup + "print(json.dumps(reasons()))"

    _edit(loop, '"""Train ``model`` on ``train_set``', '"""Train the model ``model`` on ``train_set``')
    _edit(loop, "def fit(", "# a comment\ndef fit(")
    _edit(metrics, "def disagreement_matrix(",
          "def added_measure(preds):\n    return preds\n\n\ndef disagreement_matrix(")
    _edit(loop, "from __future__ import annotations\n", "from __future__ import annotations\n\nimport fractions\n")
    assert json.loads(_python(ask, pkg, cache)) == {"model": None, "predictions": None}

    _edit(loop, "def fit(", "def _unused_helper():\n    return 1\n\n\ndef fit(")  # a new function: nothing
    source = loop.read_text()
    opening = source.index('"""', source.index("def fit("))
    closing = source.index('"""', opening + 3) + 3  # the end of fit's docstring: a statement added after it
    loop.write_text(source[:closing] + "\n    _edited = True" + source[closing:])
    stale = json.loads(_python(ask, pkg, cache))
    assert stale["model"] == "ensdiv/train/loop.py::fit changed"
    assert stale["predictions"] == "ensdiv/train/loop.py::fit changed"  # they carry their model's training code

    again = _python(setup + """
before = reasons()
ed.predict(recipe, "fmnist/test")
print(json.dumps([before, reasons()]))
""", pkg, cache)
    lines = again.strip().splitlines()
    assert any(ln.startswith("predictions ") and "recomputed, ensdiv/train/loop.py::fit changed" in ln for ln in lines)
    assert any(ln.startswith("trained test_cnn-s0") for ln in lines)  # the model was trained again
    assert json.loads(lines[-1])[1] == {"model": None, "predictions": None}


@pytest.mark.slow
def test_a_changed_default_changes_the_key(tmp_path):
    """A field at its default is part of the key (no field drops out at its default any more): flipping
    ``Optim.nesterov``'s default changes the key of every recipe that leaves it unset, so its model is a miss.
    Fails where defaults of "keyless" fields were left out of the key."""
    pkg = _copy_package(tmp_path)
    ask = ("import ensdiv as ed, json\nfrom ensdiv.train import model_cache_config\n"
           "r = ed.Recipe.make(model='test_cnn', epochs=1)\n"
           "print(json.dumps([ed.store.config_key(model_cache_config(r)), r.key()['optim']['nesterov']]))")
    before = json.loads(_python(ask, pkg, tmp_path / "cache"))
    _edit(pkg / "ensdiv/train/recipes.py", "    nesterov: bool = False\n", "    nesterov: bool = True\n")
    after = json.loads(_python(ask, pkg, tmp_path / "cache"))
    assert before[1] is False and after[1] is True
    assert before[0] != after[0]


def test_every_field_of_every_part_is_in_the_key_at_its_default():
    recipe = ed.Recipe.make(model="test_cnn", epochs=1)
    key = recipe.key()
    assert {"nesterov", "lr_decay"} <= set(key["optim"])
    heads = ed.Heads(backbone=recipe.to_dict(), members=2)
    pre = ed.Pretrain(dataset="pretrain/shapes")
    assert "init" in heads.to_dict() and {"head", "source_size"} <= set(pre.to_dict())


def test_no_hand_bumped_version_remains_in_the_keys():
    from ensdiv.predict import predictions_config
    from ensdiv.train import model_cache_config

    recipe = ed.Recipe.make(model="test_cnn", epochs=1)
    assert set(model_cache_config(recipe)) == {"recipe", "data"}
    assert "recipe_version" not in recipe.key()
    assert "version" not in predictions_config(recipe, "fmnist/test")
    assert not hasattr(ed.models.model_info("test_cnn"), "version")


# --- the entry's record, in this process ---------------------------------------------------------------------

def _write_pkg(root: Path, body: str) -> Path:
    pkg = root / "labpkg"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(body)
    return pkg


def test_an_entry_records_what_its_computation_ran_and_a_load_checks_it(tmp_path, monkeypatch):
    """A computation in a small package: its entry records the function it ran (and the constant it read), not
    the functions it did not run; the entry of a computation that loaded it records its units too."""
    import importlib

    body = ('"""A lab."""\nSCALE = 2\n\n\ndef compute():\n    return {"v": helper() * SCALE}\n\n\n'
            'def helper():\n    return 3\n\n\ndef unused():\n    return 0\n\n\n'
            'def derived(store):\n    return {"w": store.get_or_compute("base", {"a": 1}, compute)["v"] + 1}\n')
    pkg = _write_pkg(tmp_path / "src", body)
    monkeypatch.setenv("ENSDIV_TRACE_ROOTS", str(pkg))
    monkeypatch.syspath_prepend(str(pkg.parent))
    monkeypatch.setattr(tracing, "_STATE", {**tracing._STATE, "roots": (str(pkg) + os.sep,)})
    lab = importlib.import_module("labpkg")
    store = Store(tmp_path / "cache")
    assert store.get_or_compute("derived", {"b": 1}, lambda: lab.derived(store)) == {"w": 7}

    def record(kind: str, config: dict) -> dict:
        from ensdiv.store import _decode, config_key

        return _decode(store.path(kind, config_key(config)).read_bytes())["code"]["units"]

    base, derived = record("base", {"a": 1}), record("derived", {"b": 1})
    names = {k.split("::")[1] for k in base}
    assert names == {"compute", "helper", "<module>"}  # the module's effect statements: none here
    assert {k.split("::")[1] for k in derived} == {"compute", "helper", "derived", "<module>"}
    assert store.stale_reason("derived", {"b": 1}) is None
    (pkg / "__init__.py").write_text(body.replace("return 0", "return 5"))  # a function neither ran
    importlib.reload(lab)
    assert store.stale_reason("base", {"a": 1}) is None
    (pkg / "__init__.py").write_text(body.replace("SCALE = 2", "SCALE = 4"))  # a constant compute reads
    assert store.stale_reason("base", {"a": 1}) is None  # the code this process runs has not changed ...
    importlib.reload(lab)  # ... until it imports the edit
    assert store.stale_reason("base", {"a": 1}).endswith("::compute changed")
    assert store.stale_reason("derived", {"b": 1}).endswith("::compute changed")
    assert store.load("derived", {"b": 1}) is None  # a stale entry is a miss


def test_an_entry_from_another_environment_is_a_miss(tmp_path, monkeypatch):
    from ensdiv import environment

    store = Store(tmp_path)
    assert store.get_or_compute("k", {"a": 1}, lambda: {"v": 1}) == {"v": 1}
    assert store.stale_reason("k", {"a": 1}) is None
    monkeypatch.setitem(environment._MEMO, "fingerprint", "another environment")
    assert store.stale_reason("k", {"a": 1}).startswith("the environment changed")
    assert store.load("k", {"a": 1}) is None


def test_entries_without_a_record_are_recomputed(tmp_path):
    """An entry written by an ensdiv that recorded no code (or any entry without the record) is never served."""
    import hashlib
    import io

    import torch

    from ensdiv.store import _MAGIC, config_key

    store = Store(tmp_path)
    buf = io.BytesIO()
    torch.save({"config": {"a": 1}, "payload": {"v": 1}}, buf)
    data = buf.getvalue()
    path = store.path("k", config_key({"a": 1}))
    path.parent.mkdir(parents=True)
    path.write_bytes(_MAGIC + hashlib.sha256(data).hexdigest().encode() + b"\n" + data)
    assert store.stale_reason("k", {"a": 1}) == "it has no record of the code that computed it"
    assert store.get_or_compute("k", {"a": 1}, lambda: {"v": 2}) == {"v": 2}


# --- unit hashes -----------------------------------------------------------------------------------------------

def _traced_package(tmp_path, monkeypatch, name):
    """An empty package ``name`` under ``tmp_path`` that the recorder treats as a root."""
    pkg = tmp_path / name
    pkg.mkdir()
    monkeypatch.setenv("ENSDIV_TRACE_ROOTS", str(pkg))
    (pkg / "__init__.py").write_text("")
    return pkg


def test_unit_hashes_follow_the_bindings_a_unit_names(tmp_path, monkeypatch):
    """A function's hash covers the module constants it names, followed through ``from … import`` and
    ``module.NAME``; adding a function, an import or an unrelated constant changes no unit; the module unit holds
    only the statements run for their effect (a registration call), not definitions or assignments."""
    pkg = _traced_package(tmp_path, monkeypatch, "hpkg")
    (pkg / "consts.py").write_text("LEVEL = 0.9\nOTHER = 1\n")
    main = pkg / "main.py"
    src = ('from hpkg.consts import LEVEL\nfrom hpkg import consts\n\nREG = {}\n\n\n'
           'def a():\n    return LEVEL\n\n\ndef b():\n    return consts.OTHER\n\n\ndef c():\n    return 1\n\n\n'
           'REG["x"] = 1\nprint("registered")\n')
    main.write_text(src)
    units = [(str(main), q) for q in ("a", "b", "c", "<module>")]

    def now() -> dict[str, str]:
        return {k.split("::")[1]: v for k, v in tracing.code_hashes(units).items()}

    h0 = now()
    main.write_text("import json\n" + src.replace("REG = {}", "REG = {}\nNEW = 3") + "\n\ndef d():\n    return 2\n")
    assert now() == h0
    (pkg / "consts.py").write_text("LEVEL = 0.95\nOTHER = 1\n")
    h1 = now()
    assert h1["a"] != h0["a"] and h1["b"] == h0["b"] and h1["c"] == h0["c"] and h1["<module>"] == h0["<module>"]
    (pkg / "consts.py").write_text("LEVEL = 0.95\nOTHER = 2\n")
    h2 = now()
    assert h2["b"] != h1["b"] and h2["a"] == h1["a"]
    main.write_text(src.replace('print("registered")', 'print("registered twice")'))
    assert now()["<module>"] != h2["<module>"]
    assert tracing.code_hashes([(str(main), tracing.BIND + "REG")]) != tracing.code_hashes(
        [(str(main), tracing.BIND + "NOPE")])


@pytest.mark.kernel
def test_a_page_reruns_when_a_constant_its_cells_read_changes(tmp_path, monkeypatch):
    """A page's own cells read ``labpkg2.LIMIT`` (no package function of it runs): the page re-runs when that
    constant changes, and not when another one does."""
    from ensdiv.book import run as runner

    pkg = tmp_path / "src" / "labpkg2"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("LIMIT = 1\nOTHER = 2\n")
    monkeypatch.setenv("ENSDIV_TRACE_ROOTS", str(pkg))
    monkeypatch.setenv("ENSDIV_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    nb = tmp_path / "p.ipynb"
    cells = [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "scale = 'cpu'",
              "outputs": [], "execution_count": None, "id": "p"},
             {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "id": "c",
              "source": f"import sys\nimport ensdiv\nsys.path.insert(0, {str(pkg.parent)!r})\nimport labpkg2\n"
                        "print(labpkg2.LIMIT)"}]
    nb.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "language": "python",
                  "display_name": "Python 3"}}, "nbformat": 4, "nbformat_minor": 5}))

    def status() -> str:
        return runner.run_notebooks([nb], scale="cpu", out_root=tmp_path / "out", progress=False,
                                    root=tmp_path)[0].status

    assert status() == "ok" and status() == "cached"
    (pkg / "__init__.py").write_text("LIMIT = 1\nOTHER = 3\n")
    assert status() == "cached"
    (pkg / "__init__.py").write_text("LIMIT = 5\nOTHER = 3\n")
    assert status() == "ok"


def test_a_call_that_mutates_a_binding_belongs_to_the_binding_not_the_module(tmp_path, monkeypatch):
    """``register(SPECS, ...)`` and ``SPECS.update(...)`` at import change what ``SPECS`` holds: a function that
    reads ``SPECS`` re-hashes when either changes, and the module unit (which every page importing the module
    records) does not. (``PRESETS`` is hashed per entry instead: the next test.)"""
    pkg = _traced_package(tmp_path, monkeypatch, "mpkg")
    main = pkg / "chapter.py"
    src = ('SPECS = {"fig1": {"epochs": 2}}\n\n\ndef add(presets, sizes):\n    presets.update(sizes)\n\n\n'
           'def preset(name):\n    return SPECS[name]\n\n\ndef other():\n    return 1\n\n\n'
           'add(SPECS, {"dry": 1})\nSPECS.update({"fig2": {"epochs": 3}})\nprint("imported")\n')
    main.write_text(src)
    units = [(str(main), q) for q in ("preset", "other", "<module>")]

    def now() -> dict[str, str]:
        return {k.split("::")[1]: v for k, v in tracing.code_hashes(units).items()}

    h0 = now()
    main.write_text(src.replace('{"dry": 1}', '{"dry": 2}'))
    h1 = now()
    assert h1["preset"] != h0["preset"] and h1["<module>"] == h0["<module>"] and h1["other"] == h0["other"]
    main.write_text(src.replace('"fig2": {"epochs": 3}', '"fig2": {"epochs": 4}'))
    h2 = now()
    assert h2["preset"] not in (h0["preset"], h1["preset"]) and h2["<module>"] == h0["<module>"]
    main.write_text(src.replace('print("imported")', 'print("imported twice")'))
    assert now()["<module>"] != h0["<module>"]  # a plain effect statement stays in the module unit
    # a nested entry's update and a loop over the binding mutate it too (the attack-similarity and design-diversity
    # chapters do both at import: before, an edit to either chapter's presets re-ran every page of the book)
    nested = src.replace('print("imported")', 'SPECS["fig1"].update({"lr": 1})\nfor _s in SPECS.values():\n'
                                             '    _s["smoke"] = 1\nprint("imported")')
    main.write_text(nested)
    h3 = now()
    for edit in ('{"lr": 2}', '_s["smoke"] = 2'):
        main.write_text(nested.replace(edit.replace("2", "1"), edit))
        h4 = now()
        assert h4["preset"] != h3["preset"] and h4["<module>"] == h3["<module>"] and h4["other"] == h3["other"]


def test_one_entry_of_a_keyed_mapping_hashes_alone(tmp_path, monkeypatch):
    """``PRESETS`` is hashed per page: an edit to one entry (in the dict literal, in an ``update``, by key) changes
    that entry's unit alone; a statement that touches every entry (``add(PRESETS, ...)``) changes them all; a
    function that reads the mapping by a computed key changes for none (its caller notes the entry it read), one
    that reads an entry by a constant key changes with that entry; adding an entry changes no unit."""
    pkg = _traced_package(tmp_path, monkeypatch, "kpkg")
    main = pkg / "chapter.py"
    src = ('def _with(epochs):\n    return {"epochs": epochs}\n\n\n'
           'PRESETS = {"fig1": {"epochs": 2}, "fig2": _with(3)}\nPRESETS["fig3"] = {"epochs": 4}\n'
           'PRESETS.update({"fig4": {"epochs": 5}})\nPRESETS["fig1"]["lr"] = 0.1\n_BASE = PRESETS["fig2"]\n\n\n'
           'def add(presets, sizes):\n    presets.update(sizes)\n\n\n'
           'def preset(name):\n    return PRESETS[name]\n\n\ndef base():\n    return _BASE\n\n\n'
           'add(PRESETS, {"dry": 1})\n')
    main.write_text(src)
    figs = ("fig1", "fig2", "fig3", "fig4", "fig5")
    units = [(str(main), f"{tracing.ENTRY}PRESETS[{f}]") for f in figs] + [(str(main), q) for q in ("preset", "base")]

    def changed(text: str) -> set[str]:
        main.write_text(src)
        before = {k.split("::")[1].removeprefix(tracing.ENTRY): v for k, v in tracing.code_hashes(units).items()}
        main.write_text(text)
        after = {k.split("::")[1].removeprefix(tracing.ENTRY): v for k, v in tracing.code_hashes(units).items()}
        return {k for k in before if before[k] != after[k]}

    main.write_text(src.replace('add(PRESETS, {"dry": 1})\n', ""))
    assert tracing.code_hashes(units[4:5]) == {f"{main}::{tracing.ENTRY}PRESETS[fig5]": "missing"}
    assert changed(src.replace('"fig1": {"epochs": 2}', '"fig1": {"epochs": 9}')) == {"PRESETS[fig1]"}
    assert changed(src.replace('["lr"] = 0.1', '["lr"] = 0.2')) == {"PRESETS[fig1]"}
    assert changed(src.replace("_with(3)", "_with(7)")) == {"PRESETS[fig2]", "base"}
    assert changed(src.replace('return {"epochs": epochs}', 'return {"epochs": epochs + 1}')) == {
        "PRESETS[fig2]", "base"}
    assert changed(src.replace('{"epochs": 4}', '{"epochs": 8}')) == {"PRESETS[fig3]"}
    assert changed(src.replace('{"epochs": 5}', '{"epochs": 6}')) == {"PRESETS[fig4]"}
    # a statement on every entry is part of each (fig5's too: it could be what makes fig5)
    assert changed(src.replace('{"dry": 1}', '{"dry": 2}')) == {f"PRESETS[{f}]" for f in figs} | {"base"}
    assert changed(src.replace('PRESETS["fig3"] =', 'PRESETS["fig5"] = {}\nPRESETS["fig3"] =')) == {"PRESETS[fig5]"}
    assert changed(src.replace('PRESETS["fig3"] = {"epochs": 4}\n', "")) == {"PRESETS[fig3]"}
    # keys the hash cannot read (an f-string, a comprehension): the statement is part of every entry, never missing
    computed = src.replace('"fig1": {"epochs": 2}', 'f"{SLUG}1": {"epochs": 2}')
    computed = computed.replace("PRESETS = {", 'SLUG = "fig"\nPRESETS = {')
    main.write_text(computed)
    before = tracing.code_hashes(units[:4])
    assert "missing" not in before.values()
    main.write_text(computed.replace('"fig2": _with(3)', '"fig2": _with(4)'))
    after = tracing.code_hashes(units[:4])
    assert all(after[k] != before[k] for k in before if "fig3" not in k and "fig4" not in k)


def _in_copy(units: list[tuple[str, str]], pkg: Path) -> list[tuple[str, str]]:
    """The package's units, named in a copy of the package made by :func:`_copy_package`."""
    real = str(Path(ed.__file__).resolve().parent)
    return [(f.replace(real, str(pkg / "ensdiv"), 1), q) for f, q in units if f.startswith(real)]


def test_a_new_page_changes_no_other_pages_preset_unit(tmp_path, monkeypatch):
    """``ensdiv new-page`` inserts its preset into the chapter's module: every other preset of the chapter, the
    chapter's ``preset()`` and its module unit hash as before (so no other page's record is stale)."""
    from ensdiv.book import newpage
    from ensdiv.chapters import sed

    pkg = _copy_package(tmp_path)
    monkeypatch.setenv("ENSDIV_TRACE_ROOTS", str(pkg / "ensdiv"))
    file = pkg / "ensdiv" / "chapters" / "sed" / "__init__.py"
    units = [(str(file), f"{tracing.ENTRY}PRESETS[{name}]") for name in sed.PRESETS]
    units += [(str(file), "preset"), (str(file), "<module>")]
    before = tracing.code_hashes(units)
    newpage._insert_preset(file, "sed/fig09_new_figure")
    assert tracing.code_hashes(units) == before and "missing" not in before.values()
    new = tracing.code_hashes([(str(file), f"{tracing.ENTRY}PRESETS[sed/fig09_new_figure]")])
    assert set(new.values()) != {"missing"}


@pytest.mark.kernel
def test_a_page_records_its_own_preset_not_its_chapters(tmp_path, monkeypatch):
    """A page that resolves its preset notes that preset's entry unit, and no unit whose hash covers the chapter's
    whole ``PRESETS``: an edit to another page's preset of the chapter leaves every unit it recorded as it was,
    an edit to its own changes its entry."""
    from ensdiv.chapters import sed

    log = tmp_path / "page.log"
    code = "from ensdiv.chapters import sed as ch\ncfg = ch.preset('tab01_unique', 'smoke', verbose=False)\n"
    env = {**os.environ, tracing.LOG_ENV: str(log), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop(tracing.ROOTS_ENV, None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    real = str(Path(sed.__file__).resolve())
    entry = f"{tracing.ENTRY}PRESETS[sed/tab01_unique]"
    assert (real, entry) in tracing.read_log(log)
    pkg = _copy_package(tmp_path)
    monkeypatch.setenv("ENSDIV_TRACE_ROOTS", str(pkg / "ensdiv"))
    units = _in_copy(tracing.read_log(log), pkg)
    file = pkg / "ensdiv" / "chapters" / "sed" / "__init__.py"
    text = file.read_text()
    before = tracing.code_hashes(units)
    file.write_text(text + '\nPRESETS["sed/tab02_generalisation"]["cpu"]["n_resamples"] = 7\n')
    assert tracing.code_hashes(units) == before
    file.write_text(text + '\nPRESETS["sed/tab01_unique"]["cpu"]["n_resamples"] = 7\n')
    after = tracing.code_hashes(units)
    assert {k for k in before if after[k] != before[k]} == {f"{file}::{entry}"}
