"""What a cache entry records of the code that computed it (ensdiv.tracing, ensdiv.store): no stale result is
served when code ran before the entry's miss, was memoised, was edited while it ran, ran beside a debugger, was
patched, or only lent a class its defaults; and nothing stays installed once a computation is saved.

Each in-process case writes a small package of its own under ``$ENSDIV_TRACE_ROOTS`` (the import hook instruments
it as it does ``ensdiv``); "the running code changed" is an edit followed by a reload, as a new process would see
it. The Fashion-MNIST case edits a copy of the package in a subprocess, as the reliability probe did."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path

import pytest
from test_sound_cache import SETUP, _copy_package, _edit, _python

from ensdiv import tracing
from ensdiv.store import RECOMPUTE_ENV, Store, _decode, config_key

pytestmark = pytest.mark.xdist_group("sound-cache")


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """``make(name, source)``: a module of a package of this test's own, imported through the hook."""
    root = tmp_path / "src"
    made = []

    def make(name: str, source: str):
        pkg = root / name
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text(textwrap.dedent(source))
        monkeypatch.setenv("ENSDIV_TRACE_ROOTS", str(pkg))
        made.append(name)
        return importlib.import_module(name)

    monkeypatch.syspath_prepend(str(root))
    yield make
    for name in made:
        sys.modules.pop(name, None)


def _record(store: Store, kind: str, config: dict) -> dict[str, str]:
    return _decode(store.path(kind, config_key(config)).read_bytes())["code"]["units"]


def _names(record: dict[str, str]) -> set[str]:
    return {k.split("::")[1] for k in record}


def _rewrite(module, old: str, new: str):
    path = Path(module.__file__)
    path.write_text(path.read_text().replace(old, new, 1))
    return importlib.reload(module)


def test_a_memoised_loader_that_ran_before_the_miss_is_in_every_entry_it_served(lab, tmp_path):
    """The data comes from an ``lru_cache`` loader that first ran while the key was computed, before any miss:
    both entries that were served its answer record it, and an edit to it makes both stale. On the previous
    recorder the loader ran outside every record, and the edited loader's entries were served."""
    mod = lab("rec_memo", """
        import functools

        @functools.lru_cache(maxsize=2)
        def load(split):
            return [v * 2 for v in range(4)]

        def key(split):
            return {"split": split, "n": len(load(split))}

        def mean(split):
            data = load(split)
            return {"v": sum(data) / len(data)}

        def total(split):
            return {"v": sum(load(split))}
    """)
    store = Store(tmp_path / "cache")
    cfg = mod.key("train")  # the loader runs here, outside any computation
    assert store.get_or_compute("mean", cfg, lambda: mod.mean("train")) == {"v": 3.0}
    assert store.get_or_compute("total", cfg, lambda: mod.total("train")) == {"v": 12}
    assert "load" in _names(_record(store, "mean", cfg)) and "load" in _names(_record(store, "total", cfg))
    mod = _rewrite(mod, "v * 2", "v * 3")  # the loader's answers change, the key does not
    assert mod.key("train") == cfg
    assert store.stale_reason("mean", cfg).endswith("::load changed")
    assert store.stale_reason("total", cfg).endswith("::load changed")
    assert store.get_or_compute("mean", cfg, lambda: mod.mean("train")) == {"v": 4.5}


def test_an_edit_while_the_entry_computes_stamps_the_code_that_ran(lab, tmp_path):
    """The source is edited on disk while the computation runs: the entry records the hash of the code that ran,
    so the process that imports the edit recomputes it. The previous recorder hashed the disk at save time and
    served the old result under the new code."""
    mod = lab("rec_edit", """
        from pathlib import Path

        def compute():
            here = Path(__file__)
            here.write_text(here.read_text().replace("return {'v': 1}", "return {'v': 2}"))
            return {'v': 1}
    """)
    store = Store(tmp_path / "cache")
    assert store.get_or_compute("k", {"a": 1}, mod.compute) == {"v": 1}
    assert store.stale_reason("k", {"a": 1}) is None  # this process still runs the code that computed it
    importlib.reload(mod)
    assert store.stale_reason("k", {"a": 1}).endswith("::compute changed")
    assert store.get_or_compute("k", {"a": 1}, mod.compute) == {"v": 2}


def test_a_debugger_trace_function_does_not_empty_the_record(lab, tmp_path):
    """A foreign trace function (what ``breakpoint()``, a debugger or coverage installs) is set in the middle of
    the computation and removed at its end: the record still holds every function that ran. On the previous
    recorder the record lost what ran after it, and was served for ever."""
    mod = lab("rec_debugger", """
        import sys

        def compute():
            sys.settrace(lambda frame, event, arg: None)
            try:
                return {"v": helper()}
            finally:
                sys.settrace(None)

        def helper():
            return 3
    """)
    store = Store(tmp_path / "cache")
    previous = sys.gettrace()
    try:
        assert store.get_or_compute("k", {"a": 1}, mod.compute) == {"v": 3}
    finally:
        sys.settrace(previous)
    assert {"compute", "helper"} <= _names(_record(store, "k", {"a": 1}))
    mod = _rewrite(mod, "return 3", "return 4")
    assert store.stale_reason("k", {"a": 1}).endswith("::helper changed")


def test_nothing_stays_installed_after_a_computation(lab, tmp_path):
    """No trace function is installed by recording (the previous recorder left a ``sys.settrace`` function for
    the rest of the process after the first miss), and every function's flag is back to "nothing records"."""
    mod = lab("rec_clean", "def compute():\n    return {'v': 1}\n")
    before = sys.gettrace()
    Store(tmp_path / "cache").get_or_compute("k", {"a": 1}, mod.compute)
    assert sys.gettrace() is before
    if not tracing._STATE["page_log"] and not tracing._STACK:
        assert all(all(t.seen) for t in tracing._TALLIES)


def test_a_patched_function_or_method_is_not_saved(lab, tmp_path, monkeypatch, capsys):
    """A run-time patch of a module function or a class's method (a test's or a notebook's monkeypatch) is
    detected: the computation returns its value, nothing is saved under the standard key, and one line says
    why; once the patch is undone the entry is saved. The previous recorder saved the patched result (zero
    logits) under the standard key, for every later run."""
    mod = lab("rec_patch", """
        class Net:
            def forward(self):
                return 1

        def helper():
            return 2

        def compute():
            return {"v": Net().forward() + helper()}
    """)
    store = Store(tmp_path / "cache")
    forward = mod.Net.forward
    with monkeypatch.context() as patch:
        patch.setattr(mod.Net, "forward", lambda self: 0)
        assert store.get_or_compute("k", {"a": 1}, mod.compute) == {"v": 2}
        assert not store.path("k", config_key({"a": 1})).exists()
        assert "rec_patch/__init__.py::Net.forward was replaced at run time" in capsys.readouterr().out
        patch.setattr(mod, "helper", lambda: 0)
        patch.setattr(mod.Net, "forward", forward)
        assert store.get_or_compute("k", {"a": 1}, mod.compute) == {"v": 1}
        assert "::helper was replaced" in capsys.readouterr().out
    assert store.get_or_compute("k", {"a": 1}, mod.compute) == {"v": 3}
    assert store.path("k", config_key({"a": 1})).exists()
    with monkeypatch.context() as patch:  # a run that patches on purpose and answers for what it saves
        patch.setattr(mod, "helper", lambda: 5)
        patch.setenv(tracing.ALLOW_PATCHED_ENV, "1")
        assert store.get_or_compute("k2", {"a": 1}, mod.compute) == {"v": 6}
        assert store.path("k2", config_key({"a": 1})).exists()


def test_a_class_default_read_without_a_method_call_is_in_the_record(lab, tmp_path):
    """A dataclass's field default is read by building it (its ``__init__`` is generated, no method of the
    package runs): the function that names the class carries its fields, so a changed default recomputes.
    Before, a class counted only when one of its methods ran."""
    mod = lab("rec_default", """
        from dataclasses import dataclass

        @dataclass
        class Opts:
            lr: float = 0.1

        def compute():
            return {"v": Opts().lr}
    """)
    store = Store(tmp_path / "cache")
    assert store.get_or_compute("k", {"a": 1}, mod.compute) == {"v": 0.1}
    mod = _rewrite(mod, "lr: float = 0.1", "lr: float = 0.5")
    assert store.stale_reason("k", {"a": 1}).endswith("::compute changed")
    assert store.get_or_compute("k", {"a": 1}, mod.compute) == {"v": 0.5}


def test_an_object_built_before_the_miss_lends_its_code_to_the_entry(lab, tmp_path):
    """An object built by a memo before the computation that takes it (the frozen backbone of the stream
    pipeline) carries the units that built it; the computation notes them, so an edit to the builder recomputes
    the entry."""
    mod = lab("rec_built", """
        from ensdiv import tracing

        class Box:
            def __init__(self, v):
                self.v = v

        def scale():
            return 2

        @tracing.memo
        def build(n):
            return Box(n * scale())

        def compute(box):
            tracing.note_units(tracing.built_by(box))
            return {"v": box.v + 1}
    """)
    store = Store(tmp_path / "cache")
    box = mod.build(3)  # before any miss
    assert {u[1] for u in tracing.built_by(box)} >= {"build", "scale"}
    assert store.get_or_compute("k", {"a": 1}, lambda: mod.compute(box)) == {"v": 7}
    assert {"build", "scale", "compute"} <= _names(_record(store, "k", {"a": 1}))
    mod = _rewrite(mod, "return 2", "return 5")
    assert store.stale_reason("k", {"a": 1}).endswith("::scale changed")


def _spawned_work():
    import rec_spawn

    rec_spawn.in_child()


@pytest.mark.slow
def test_a_spawned_process_reports_the_units_it_ran(lab, tmp_path):
    """A process spawned while an entry computes (a ``DataLoader`` worker under the spawn start method) appends
    what it runs to the recorder's log: the record holds the child's function. Before, spawned workers were in
    no record."""
    mod = lab("rec_spawn", """
        import ensdiv  # installs the hook in the child too

        def in_child():
            return 1

        def compute(target):
            import multiprocessing

            p = multiprocessing.get_context("spawn").Process(target=target)
            p.start()
            p.join()
            return {"code": p.exitcode}
    """)
    store = Store(tmp_path / "cache")
    assert store.get_or_compute("k", {"a": 1}, lambda: mod.compute(_spawned_work)) == {"code": 0}
    assert "in_child" in _names(_record(store, "k", {"a": 1}))


def test_recompute_makes_each_entry_a_miss_once(tmp_path, monkeypatch):
    """``$ENSDIV_RECOMPUTE=1`` (``ensdiv run --recompute``): an entry in the cache is computed again and
    overwritten, then served to the rest of the run."""
    store = Store(tmp_path / "cache")
    calls = []

    def compute():
        calls.append(1)
        return {"v": len(calls)}

    assert store.get_or_compute("r", {"a": 1}, compute) == {"v": 1}
    monkeypatch.setenv(RECOMPUTE_ENV, "1")
    monkeypatch.setattr("ensdiv.store._FRESH", set())
    assert store.get_or_compute("r", {"a": 1}, compute) == {"v": 2}
    assert store.get_or_compute("r", {"a": 1}, compute) == {"v": 2} and len(calls) == 2


def test_an_entry_of_an_older_recorder_is_recomputed(tmp_path):
    """An entry whose record was written by another recording engine (the trace function before this one) is
    never served: its record may lack what that engine could not see."""
    import hashlib
    import io

    import torch

    from ensdiv import environment
    from ensdiv.store import _MAGIC

    store = Store(tmp_path)
    buf = io.BytesIO()
    torch.save({"config": {"a": 1}, "payload": {"v": 1},
                "code": {"units": {}, "environment": environment.fingerprint()}}, buf)
    path = store.path("k", config_key({"a": 1}))
    path.parent.mkdir(parents=True)
    path.write_bytes(_MAGIC + hashlib.sha256(buf.getvalue()).hexdigest().encode() + b"\n" + buf.getvalue())
    assert store.stale_reason("k", {"a": 1}) == "it was recorded by an older recorder (ensdiv.tracing)"


@pytest.mark.slow
def test_fashion_mnist_code_after_the_fingerprint_is_in_the_model_and_its_predictions(tmp_path):
    """The reliability probe's case on a copy of the package: inverting every image in ``_load_raw`` after the
    bytes are fingerprinted leaves the key as it was; the model and its predictions must not be served. Before,
    ``_load_raw`` ran while the key was computed, outside the record, and both were served unchanged."""
    pkg = _copy_package(tmp_path)
    cache = tmp_path / "cache"
    setup = SETUP.format(pkg=str(pkg))
    first = _python(setup + "ed.predict(recipe, 'fmnist/test')\nprint(json.dumps(reasons()))", pkg, cache)
    assert json.loads(first.strip().splitlines()[-1]) == {"model": None, "predictions": None}
    _edit(pkg / "ensdiv/data/fashion.py", "    images = torch.from_numpy(raw_images.copy())",
          "    images = 255 - torch.from_numpy(raw_images.copy())")
    stale = json.loads(_python(setup + "print(json.dumps(reasons()))", pkg, cache).strip().splitlines()[-1])
    assert stale == {"model": "ensdiv/data/fashion.py::_load_raw changed",
                     "predictions": "ensdiv/data/fashion.py::_load_raw changed"}


def test_a_page_log_names_the_sources_its_kernel_compiled_and_an_edit_since_refuses_the_record(tmp_path):
    """A page's kernel logs the SHA-256 of each package source it compiled beside its units; after the run, a file
    edited on disk since is named (the runner then writes no record, so the page runs again), and the units read
    from the log leave those lines out. Before, the stamp hashed the disk after the run and named the new code."""
    import hashlib

    src = tmp_path / "mod.py"
    src.write_text("def f():\n    return 1\n")
    log = tmp_path / "trace.log"
    log.write_text(f"{src}\tf\n{src}\t<source>:{hashlib.sha256(src.read_bytes()).hexdigest()}\n")
    assert tracing.read_log(log) == [(str(src), "f")]
    assert tracing.source_shas(log) == {str(src): hashlib.sha256(src.read_bytes()).hexdigest()}
    assert tracing.edited_while_running(log) is None
    src.write_text("def f():\n    return 2\n")
    assert tracing.edited_while_running(log) == str(src)
    assert tracing.edited_while_running(tmp_path / "missing.log") is None


@pytest.mark.slow
def test_a_package_module_run_with_python_dash_m_runs():
    """runpy executes a module's code without the import hook's counters: before, ``python -m ensdiv.book.cli``
    failed at its first call with ``NameError: name '__ensdiv_seen__' is not defined``."""
    import subprocess

    done = subprocess.run([sys.executable, "-m", "ensdiv.book.cli", "data"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "fmnist-c/brightness/1" in done.stdout
