"""Reliability of the book's pages (the reliability issue of the evidence wave, items 1, 4, 5 and 7): a page is
``ok`` only when it ran to its end and wrote its claims, one bad copy or a full build folder fails one page in
one sentence and the rest goes on, records of another scale never pass, ``--html-only`` names what is not
current, and every re-run says why. Each test is named after its item and fails on the code before it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from test_reliability_book import _notebook

import ensdiv.paths
from ensdiv import reads, tracing
from ensdiv.book import cli, site, stamps
from ensdiv.book import run as runner
from ensdiv.errors import EnsdivError

CLAIM = ('import ensdiv as ed\n'
         'ed.report.claim(paper="foundations", item="Fig. Z", claim="x is below y.", '
         'checks=[ed.report.less("x", "y", null=ed.report.Null("x = y", [{"x": 2}] * 39))], ours={"x": 1, "y": 2}, '
         'unit="released artefact", scale=scale)')


def _run(nbs: list[Path], root: Path, **kw) -> list[runner.NotebookResult]:
    return runner.run_notebooks(nbs, scale="cpu", out_root=root / "out", progress=False, root=root, **kw)


# --- item 1: ok only when the page finished and wrote its claims ---------------------------------------------

def test_unfinished_reads_a_systemexit_and_a_cell_that_never_ran():
    ok = {"cells": [{"cell_type": "code", "source": "x = 1", "execution_count": 1, "outputs": []},
                    {"cell_type": "code", "source": "", "execution_count": None, "outputs": []},
                    {"cell_type": "markdown", "source": "text"}]}
    assert stamps.unfinished(ok) is None
    exited = {"cells": [{"cell_type": "code", "source": "import sys; sys.exit(0)", "execution_count": 1,
                         "outputs": [{"output_type": "error", "ename": "SystemExit", "evalue": "0"}]}]}
    assert stamps.unfinished(exited) == "cell 1 ended the run early (SystemExit); a page must run to its last cell."
    said = {"cells": [{"cell_type": "code", "source": "print(x)", "execution_count": 1, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "a page fails on SystemExit, not on this sentence\n"}]}]}
    assert stamps.unfinished(said) is None  # the word in a page's own output (before: a failed page)
    printed = {"cells": [{"cell_type": "code", "source": "import sys; sys.exit(0)", "execution_count": 1,
                          "outputs": [{"output_type": "stream", "name": "stderr",
                                       "text": "An exception has occurred.\n\nSystemExit: 0\n"}]}]}
    assert stamps.unfinished(printed).startswith("cell 1 ended the run early (SystemExit)")
    stopped = {"cells": [ok["cells"][0], {"cell_type": "code", "source": ["print(", "2)"], "execution_count": None}]}
    assert stamps.unfinished(stopped) == "cell 2 never ran: the run stopped before it."


@pytest.mark.kernel
@pytest.mark.parametrize("stop", ["raise SystemExit(0)", "import sys\nsys.exit(0)"])
def test_a_page_that_exits_early_is_failed(env, stop):
    nb = _notebook(env / "a.ipynb", stop, CLAIM)
    (res,) = _run([nb], env)
    assert res.status == "failed" and res.error.startswith("The run did not finish: cell ")
    assert stamps.page_run(res.output, "a.ipynb").status == "failed"


@pytest.mark.kernel
def test_a_book_page_without_a_claim_is_failed_unless_declared(env):
    silent = _notebook(env / "notebooks" / "x" / "silent.ipynb", "print(1)")
    declared = _notebook(env / "notebooks" / "foundations" / "benchmarks.ipynb", "print(1)")
    outside = _notebook(env / "elsewhere" / "scratch.ipynb", "print(1)")  # not a page of the book
    results = {r.path.name: r for r in _run([silent, declared, outside], env)}
    assert results["silent.ipynb"].status == "failed"
    assert results["silent.ipynb"].error.startswith("The run wrote no claim record")
    assert results["benchmarks.ipynb"].status == "ok" and results["scratch.ipynb"].status == "ok"
    assert "notebooks/foundations/benchmarks.ipynb" in runner.NO_CLAIM_PAGES


# --- item 4: one bad page or a full disk never takes the book down ---------------------------------------------

def test_an_unreadable_executed_copy_is_a_failed_page_named_in_one_sentence(env):
    copy = env / "build" / "executed" / "cpu" / "p.ipynb"
    copy.parent.mkdir(parents=True)
    for garbage in ("{not json", "[1, 2]", '{"metadata": "x"}'):
        copy.write_text(garbage)
        page = site._page(copy, "p.ipynb", "cpu")
        assert page.status == "failed" and str(copy) in page.error and "\n" not in page.error


@pytest.mark.kernel
def test_a_full_build_folder_fails_the_page_and_the_next_page_still_runs(env, monkeypatch):
    """Writing the executed copy fails with ENOSPC, every time (the failure handler's write too): each page is
    failed in one sentence naming the folder, and the run goes on to the next page."""
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner, "finish", full)
    a, b = _notebook(env / "a.ipynb", CLAIM), _notebook(env / "b.ipynb", CLAIM)
    results = _run([a, b], env)
    assert [r.status for r in results] == ["failed", "failed"]
    for r in results:
        assert "No space left on device" in r.error and str(env / "out") in r.error and "\n" not in r.error


# --- item 5: records checked against the build's scale; --html-only names what is not current ---------------

def _copy(path: Path, *, status: str = "ok", scale: str = "cpu", stamp: dict | None = None, code=None) -> Path:
    record = {"paper": "foundations", "item": "Fig. Z", "claim": "x.", "verdict": "holds", "scale": scale,
              "checks": [], "values": []}
    meta = {"status": status, "error": "" if status == "ok" else "boom", "stamp": stamp, "claims": [record],
            "reads": {"folders": [], "hash": reads.signature([])}, "code": code, "cache": []}
    nb = nbformat.v4.new_notebook()
    nb.metadata["ensdiv"] = meta
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))
    return path


def test_a_copy_with_records_of_another_scale_is_a_failed_page(env):
    copy = _copy(env / "build" / "executed" / "cpu" / "p.ipynb", scale="smoke")
    page = stamps.page_run(copy, "p.ipynb", scale="cpu")
    assert page.status == "failed" and "another scale than cpu" in page.error


def test_html_only_names_failed_and_stale_pages_and_exits_1(env, monkeypatch, capsys):
    (env / "notebooks").mkdir()
    good, old = _notebook(env / "notebooks" / "good.ipynb", CLAIM), _notebook(env / "notebooks" / "old.ipynb", CLAIM)
    _notebook(env / "notebooks" / "bad.ipynb", CLAIM)
    (env / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n- file: notebooks/good\n"
                                  "- file: notebooks/old\n- file: notebooks/bad\n")
    executed = env / "build" / "executed" / "cpu" / "notebooks"
    code = {"units": [], "hash": tracing.combined({}), "hashes": {}}
    _copy(executed / "good.ipynb", stamp=runner.page_stamp(good, {"scale": "cpu"}), code=code)
    _copy(executed / "old.ipynb", stamp={**runner.page_stamp(old, {"scale": "cpu"}), "source": "before"}, code=code)
    _copy(executed / "bad.ipynb", status="failed")
    states = site.page_states("cpu", root=env)
    assert states == [("notebooks/old.ipynb", "stale", "the notebook changed"),
                      ("notebooks/bad.ipynb", "failed", "boom")]
    monkeypatch.setattr(cli, "build_book", lambda **kw: ([], env / "index.html"))
    monkeypatch.setattr(cli, "page_states", lambda scale: site.page_states(scale, root=env))
    assert cli.main(["book", "--scale", "cpu", "--html-only"]) == 1
    err = capsys.readouterr().err
    assert "[stale] notebooks/old.ipynb: the notebook changed" in err and "[failed] notebooks/bad.ipynb: boom" in err


# --- item 7: every re-run says why ---------------------------------------------------------------------------

def test_a_rerun_names_what_changed(env, monkeypatch):
    """The notebook, the parameters, the environment (naming the package that moved) and one unit of code, each
    in a few words; a current copy has no reason."""
    pkg = env / "src" / "rpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    monkeypatch.setenv("ENSDIV_TRACE_ROOTS", str(pkg))
    nb = _notebook(env / "p.ipynb", "print(1)")
    stamp = runner.page_stamp(nb, {"scale": "cpu"})
    units = [(str(pkg / "__init__.py"), "f")]
    hashes = tracing.hashes_now(units)
    code = {"units": [list(u) for u in units], "hash": tracing.combined(hashes), "hashes": hashes}
    copy = _copy(env / "out" / "p.ipynb", stamp=stamp, code=code)
    meta = json.loads(copy.read_text())
    meta["metadata"]["ensdiv"]["versions"] = {**stamps.versions(), "torch": "0.0.1"}
    copy.write_text(json.dumps(meta))
    assert stamps.rerun_reason(copy, stamp) is None
    assert stamps.rerun_reason(copy, {**stamp, "params": {"scale": "smoke"}}) == "its parameters changed"
    assert stamps.rerun_reason(copy, {**stamp, "source": "x"}) == "the notebook changed"
    moved = stamps.rerun_reason(copy, {**stamp, "environment": "another lock"})
    assert moved == f"the environment changed (torch 0.0.1 -> {stamps.versions()['torch']})"
    (pkg / "__init__.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 3\n")  # a unit it did not use
    os.utime(pkg / "__init__.py", (1, 1))
    assert stamps.rerun_reason(copy, stamp) is None
    (pkg / "__init__.py").write_text("def f():\n    return 5\n\n\ndef g():\n    return 3\n")
    assert stamps.rerun_reason(copy, stamp) == f"{pkg / '__init__.py'}:f changed"
    assert stamps.rerun_reason(env / "none.ipynb", stamp) == "no executed copy yet"


@pytest.mark.kernel
def test_the_run_line_says_why(env, capsys):
    nb = _notebook(env / "p.ipynb", "print(1)")
    runner.run_notebooks([nb], scale="cpu", out_root=env / "out", root=env)
    assert "[run]    p.ipynb (scale=cpu): no executed copy yet ..." in capsys.readouterr().out
    runner.run_notebooks([nb], scale="cpu", out_root=env / "out", root=env, force=True)
    # the second run knows the first one's time: the line gives it as an estimate
    assert "[run]    p.ipynb (scale=cpu): --force (estimate " in capsys.readouterr().out


def test_reads_compact_drops_files_a_listed_folder_covers_and_crowded_folders_stand_in(tmp_path):
    """Hand-made layout: a listed folder covers the file opened in it; three files opened in one folder are kept
    as files under ``per_folder=3`` and become their folder over it; a file gone since is kept (it hashes as
    gone); an empty read is an empty list."""
    listed, opened = tmp_path / "listed", tmp_path / "opened"
    listed.mkdir()
    opened.mkdir()
    files = [str(opened / f"{i}.png") for i in range(3)]
    gone = str(tmp_path / "deleted.tmp")
    read = [str(listed / "a.png"), str(listed), *files, gone, files[0]]
    assert reads.compact(read, per_folder=3) == sorted([str(listed), *files, gone])
    assert reads.compact(read, per_folder=2) == sorted([str(listed), str(opened), gone])
    assert reads.compact([]) == []


def test_reads_signature_of_a_file_follows_the_file_and_not_its_neighbours(tmp_path):
    """A file's signature moves when its size or time moves, not when a file beside it is added or edited; a
    folder's moves when an entry is added; a missing path hashes stably as gone, differently from a present
    one; a record written before files were told apart (``"folders"``) is still checked."""
    one, other = tmp_path / "one.json", tmp_path / "other.json"
    one.write_text("{}")
    before = reads.signature([str(one)])
    folder_before = reads.signature([str(tmp_path)])
    other.write_text("{}")
    assert reads.signature([str(one)]) == before
    assert reads.signature([str(tmp_path)]) != folder_before
    one.write_text("{1}")
    assert reads.signature([str(one)]) != before
    missing = str(tmp_path / "missing.json")
    assert reads.signature([missing]) == reads.signature([missing]) != reads.signature([str(one)])
    data, nb = tmp_path / "data", tmp_path / "page.ipynb"
    data.mkdir()
    nb.write_text(json.dumps({"metadata": {"ensdiv": {"reads": {"folders": [str(data)],
                                                                "hash": reads.signature([str(data)])}}}}))
    assert stamps.reads_unchanged(nb)
    (data / "added.json").write_text("{}")
    assert not stamps.reads_unchanged(nb)


def test_the_benchmarks_results_are_a_followed_read_root():
    """The benchmarks page reads benchmarks/results/*.json: that folder is among the roots whose reads re-run a
    page, so `make bench && make book` shows the new numbers."""
    from ensdiv.paths import project_root

    assert str(project_root() / "benchmarks" / "results") in runner._read_roots({})


# --- items 6 and 8: the command's edges, one sentence each -----------------------------------------------------

def _cli(args: list[str], capsys) -> tuple[int, str]:
    code = cli.main(args)
    return code, capsys.readouterr().err.strip()


def test_run_refuses_a_folder_another_file_and_a_broken_notebook_in_one_sentence(env, capsys):
    (env / "chapter").mkdir()
    readme = env / "README.md"
    readme.write_text("# not a notebook")
    broken = env / "broken.ipynb"
    broken.write_text("{ this is not json")
    for target, said in ((env / "chapter", "is a folder, not a notebook"), (readme, "is not a notebook"),
                         (broken, "is not a readable notebook (not JSON)")):
        code, err = _cli(["run", str(target)], capsys)
        assert code == 2 and said in err and "\n" not in err


def test_a_dry_run_checks_its_paths_before_writing_fake_data(env, capsys, monkeypatch):
    def no_fake_data(*args, **kwargs):
        raise AssertionError("fake data written before the paths were checked")

    monkeypatch.setattr(cli, "dry_environment", no_fake_data)
    code, err = _cli(["run", "--dry-run", "/etc/passwd"], capsys)
    assert code == 2 and "is not a notebook" in err


def test_cache_export_to_a_folder_a_tgz_or_an_unknown_scale_is_one_sentence(env, capsys):
    (env / "folder").mkdir()
    for args, said in ((["--scale", "cpu", str(env / "folder")], "is a folder"),
                       (["--scale", "cpu", str(env / "b.tgz")], "Name the bundle b.tar.gz"),
                       (["--scale", "bogus", str(env / "b.tar")], "bogus")):
        code, err = _cli(["cache", "export", *args], capsys)
        assert code == 2 and said in err and "\n" not in err
    assert not (env / "b.tgz").exists()


def test_zoo_only_without_names_is_refused(env, capsys, monkeypatch):
    from ensdiv.chapters import zoo

    monkeypatch.setattr(zoo, "zoo_build", lambda *a, **k: pytest.fail("the whole zoo would have trained"))
    code, err = _cli(["zoo", "build", "--scale", "smoke", "--only"], capsys)
    assert code == 2 and "--only needs at least one recipe name" in err


def test_zoo_build_runs_under_the_signal_guard(env, capsys, monkeypatch):
    """SIGTERM/SIGHUP to `ensdiv zoo build` end its training workers (the guard `run` and `book` have)."""
    import contextlib

    import pandas as pd

    from ensdiv.chapters import zoo

    entered = []

    @contextlib.contextmanager
    def guard():
        entered.append(True)
        yield

    monkeypatch.setattr(cli, "signals_as_interrupts", guard)
    monkeypatch.setattr(zoo, "zoo_build", lambda *a, **k: pd.DataFrame({"key": ["x"]}))
    assert cli.main(["zoo", "build", "--scale", "smoke", "--only", "arch/mlp"]) == 0
    assert entered == [True]


def test_a_wait_on_another_runs_notebook_lock_is_said(env, capsys):
    import fcntl
    import threading

    out = env / "p.ipynb"
    with open(out.with_suffix(".lock"), "a+") as held:
        held.write("4242")
        held.flush()
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        timer = threading.Timer(0.5, lambda: fcntl.flock(held.fileno(), fcntl.LOCK_UN))
        timer.start()
        with runner._notebook_lock(out):
            pass
        timer.join()
    assert "another run (process 4242) is executing this page; waiting for it" in capsys.readouterr().err


def test_a_page_run_with_p_is_marked_in_its_verdict_box():
    assert site._exploration({"params": {"scale": "cpu"}}) == ""
    assert site._exploration(None) == ""
    note = site._exploration({"params": {"scale": "cpu", "epochs": 9}})
    assert note.startswith("**Exploration.** This page was last run with `-p epochs 9`, not with the book's preset")


def test_stale_temporary_files_and_ended_locks_are_collected(env, capsys):
    """Old ``.tmp`` files and entry locks nobody has open go; recent ones and an old one a live process holds
    stay. Before, the per-key ``.lock`` files accumulated for ever."""
    from ensdiv.store import Store, collect_temporary

    store = Store(env / "cache")
    folder = store.root / "model" / "ab"
    folder.mkdir(parents=True)
    dead, recent, held = folder / ".abcd-1.tmp", folder / ".abcd-2.tmp", folder / ".abcd-3.tmp"
    ended, locked = folder / ".abcd.lock", folder / ".abce.lock"
    for p in (dead, recent, held, ended, locked):
        p.write_bytes(b"x" * 100)
    for p in (dead, held, ended, locked):
        os.utime(p, (1, 1))
    with open(held, "rb"), open(locked, "a+"):
        assert sorted(collect_temporary(store)) == sorted([dead.resolve(), ended.resolve()])
    assert not dead.exists() and not ended.exists() and recent.exists() and held.exists() and locked.exists()
    assert cli.main(["cache", "gc", "--min-age", "0"]) == 0  # $ENSDIV_CACHE is env/cache: recent, held, locked go
    assert "3 temporary file(s) of killed writers and lock(s) of ended computations removed" in capsys.readouterr().out


@pytest.mark.kernel
def test_a_build_says_before_it_starts_what_is_cached_and_how_long_the_rest_will_take(env, capsys):
    """The plan line counts cached pages and sums the estimates (each page's last run at this scale); each page
    that runs shows its time against its estimate, and the run's pace so far with the page time left at it."""
    a = _notebook(env / "a.ipynb", CLAIM)
    b = _notebook(env / "b.ipynb", CLAIM)
    runner.run_notebooks([a, b], scale="cpu", out_root=env / "out", root=env)
    first = capsys.readouterr().out
    assert "2 pages: 0 cached, 2 to run, estimated 0 s (2 without a recorded time)" in first
    seconds = stamps.meta_of(env / "out" / "a.ipynb")["seconds"]
    assert seconds > 0
    _notebook(env / "a.ipynb", CLAIM + "\nprint('changed')")
    runner.run_notebooks([a, b], scale="cpu", out_root=env / "out", root=env)
    second = capsys.readouterr().out
    assert f"2 pages: 1 cached, 1 to run, estimated {seconds:.0f} s from the recorded per-page times." in second
    assert "a.ipynb in " in second and f"(estimate {seconds:.0f} s)" in second
    assert "[pace]" not in second  # no page left after the one that ran
    # both changed: after a, its time against its estimate is the run's pace, applied to b's estimate; after b,
    # the last page, nothing is left to pace
    _notebook(env / "a.ipynb", CLAIM + "\nprint('changed again')")
    _notebook(env / "b.ipynb", CLAIM + "\nprint('changed')")
    runner.run_notebooks([a, b], scale="cpu", out_root=env / "out", root=env)
    third = capsys.readouterr().out
    assert third.count("[pace]") == 1 and "x the recorded times so far: about " in third
    assert third.index("a.ipynb in ") < third.index("[pace]") < third.index("[run]    b.ipynb")


def test_the_pace_leaves_out_a_page_served_from_entries_older_than_the_build(env, capsys):
    """Hand-made copies: ``a`` loaded a store entry saved before the build started (a resumed zoo: 150 s against
    4,800 recorded), ``b`` only entries saved during the build (200 s against 100). The pace is b's alone, 2.00x,
    and the 600 s left take 20.0 min at it; with only ``a`` finished there is no pace line. A copy without
    metadata and an entry gone from the store count as cold (nothing shows they were served)."""
    since = 1_000_000.0
    store = env / "cache"
    old, new = store / "model" / "aa" / "x.pt", store / "model" / "bb" / "y.pt"
    for entry, when in ((old, since - 100), (new, since + 1)):
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_bytes(b"x")
        os.utime(entry, (when, when))
    pages = {}
    for name, cache in (("a", ["model/aa/x.pt"]), ("b", ["model/bb/y.pt", "model/cc/gone.pt"]), ("c", None)):
        copy = env / "out" / f"{name}.ipynb"
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(json.dumps({"metadata": {"ensdiv": {"cache": cache}} if cache else {}}))
        pages[name] = copy
    a = runner.NotebookResult(env / "a.ipynb", pages["a"], "ok", 150.0)
    b = runner.NotebookResult(env / "b.ipynb", pages["b"], "ok", 200.0)
    estimates = {env / "a.ipynb": 4800.0, env / "b.ipynb": 100.0, env / "c.ipynb": 600.0}
    assert runner._served_from_store(pages["a"], since)
    assert not runner._served_from_store(pages["b"], since) and not runner._served_from_store(pages["c"], since)
    runner._print_pace([a], estimates, left=[env / "c.ipynb"], since=since)
    assert "[pace]" not in capsys.readouterr().out
    runner._print_pace([a, b], estimates, left=[env / "c.ipynb"], since=since)
    assert "[pace]   2.00x the recorded times so far: about 20.0 min of page time left" in capsys.readouterr().out


def test_a_resumed_page_that_loads_only_earlier_pages_entries_counts_as_cold(env):
    """A build resumed after a stop: every entry the first leg saved predates the second leg's start. The zoo
    (first in book order) loaded its own models from it: served. A later page loaded the zoo's model and a dataset
    from the first leg and saved its own entry now: cold. A page stopped halfway in the first leg loaded its own
    half: served. Without the book order every old entry counts (the page is taken to be served)."""
    since = 1_000_000.0
    store = env / "cache"
    when = {"model/aa/zoo.pt": since - 100, "datasets/dd/fm.pt": since - 100, "model/bb/own.pt": since + 1,
            "model/cc/half.pt": since - 50}
    for rel, t in when.items():
        (store / rel).parent.mkdir(parents=True, exist_ok=True)
        (store / rel).write_bytes(b"x")
        os.utime(store / rel, (t, t))
    used = {"zoo": ["model/aa/zoo.pt", "datasets/dd/fm.pt"],
            "later": ["model/aa/zoo.pt", "datasets/dd/fm.pt", "model/bb/own.pt"],
            "halfway": ["model/aa/zoo.pt", "model/cc/half.pt"]}
    book = []
    for name, cache in used.items():
        copy = env / "out" / f"{name}.ipynb"
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(json.dumps({"metadata": {"ensdiv": {"cache": cache}}}))
        book.append(copy)
    zoo, later, halfway = book = tuple(book)
    assert runner._served_from_store(zoo, since, book=book)
    assert not runner._served_from_store(later, since, book=book)
    assert runner._served_from_store(halfway, since, book=book)
    assert runner._served_from_store(later, since)


def test_a_build_folder_that_is_a_file_or_read_only_is_one_sentence(env, capsys, monkeypatch):
    """``ENSDIV_BUILD`` naming a file, a folder below a file, or a read-only folder: ``ensdiv run`` and
    ``ensdiv book --html-only`` say so in one sentence (exit 2) before anything runs, as ``ENSDIV_CACHE`` does."""
    nb = _notebook(env / "a.ipynb", CLAIM)
    afile = env / "afile"
    afile.write_text("not a folder")
    for build in (afile, afile / "below"):
        monkeypatch.setenv("ENSDIV_BUILD", str(build))
        for args in (["run", str(nb)], ["book", "--html-only"]):
            code, err = _cli(args, capsys)
            assert code == 2 and "(a file is in the way of the folder); set ENSDIV_BUILD" in err and "\n" not in err
    monkeypatch.setenv("ENSDIV_BUILD", str(env / "ro"))

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(ensdiv.paths.tempfile, "mkstemp", read_only)
    code, err = _cli(["run", str(nb)], capsys)
    assert code == 2 and err.endswith("is not writable (Read-only file system); set ENSDIV_BUILD to a folder you "
                                      "can write to.")


@pytest.mark.kernel
def test_a_read_only_shared_cache_is_used_for_what_it_holds(env, capsys, monkeypatch):
    """A cache folder that exists and cannot be written (a shared, read-only one others filled) is not refused
    before the run: the pages run from its entries, with one line saying so; a folder that cannot be used at all
    is still one sentence (the build-folder test above)."""
    import ensdiv.store

    nb = _notebook(env / "a.ipynb", CLAIM)
    shared = env / "cache"
    shared.mkdir()
    real = ensdiv.store.tempfile.mkstemp

    def read_only(*args, dir=None, **kwargs):
        if dir is not None and Path(dir).is_relative_to(shared):
            raise OSError(30, "Read-only file system")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(ensdiv.store.tempfile, "mkstemp", read_only)
    ensdiv.store._CHECKED.clear()
    (res,) = runner.run_notebooks([nb], scale="cpu", out_root=env / "out", root=env)
    assert res.status == "ok", res.error
    assert f"the cache {shared} is read-only: pages are served from its entries" in capsys.readouterr().out


@pytest.mark.kernel
def test_a_relative_data_root_is_resolved_against_the_callers_folder(env, monkeypatch):
    """``-p data_root book/data/sat`` from the project root names the project's folder, not one below the
    notebook's own folder (where the kernel runs); the folder is then a read root of the page."""
    (env / "rel" / "data").mkdir(parents=True)
    nb = _notebook(env / "pages" / "a.ipynb", "import os\nassert os.path.isdir(data_root), data_root", CLAIM,
                   params='scale = "cpu"\ndata_root = None')
    monkeypatch.chdir(env)
    (res,) = runner.run_notebooks([nb], scale="cpu", params={"data_root": "rel/data"}, out_root=env / "out",
                                  progress=False, root=env)
    assert res.status == "ok", res.error
    assert res.params["data_root"] == str(env / "rel" / "data")


def test_and_5_every_page_has_a_row_and_a_p_run_is_marked_on_the_claims_page():
    """A page of measurements (no claim) gets a row without a badge; a page last run with ``-p`` says so in its
    rows, as its verdict box does."""
    from ensdiv.report import PageRun, claims_page

    record = {"paper": "foundations", "item": "Fig. Z", "claim": "x is below y.", "verdict": "holds", "checks": [],
              "values": [{"quantity": "x", "ours": 1.0, "paper": None, "interval": [0.5, 1.5]}]}
    page = claims_page("cpu", [PageRun("notebooks/foundations/benchmarks.ipynb", "ok"),
                               PageRun("notebooks/foundations/z.ipynb", "ok", records=[record],
                                       note="run with `-p epochs 20`")])
    rows = [line for line in page.splitlines() if line.startswith("| ") and not line.startswith("| page |")]
    quiet = next(r for r in rows if "benchmarks" in r)
    assert "<em>no claim</em>" in quiet and "ensdiv-badge" not in quiet and "tests no claim" in quiet
    marked = next(r for r in rows if "Fig. Z" in r)
    assert "ensdiv-badge holds" in marked and "(run with `-p epochs 20`)" in marked
    assert "1 claims: 1 holds, 1 no claim." in page


def test_an_undecided_claim_says_why_on_its_claims_page_row():
    """A claim the scale cannot test (a premise it fails) or that cannot decide names its reason on its row of the
    claims page, not only in its page's notes; a decided claim's row has no such text."""
    from ensdiv.report import PageRun, claims_page

    why = "premise not testable at this scale: capacity (PE's narrowest group 4 channels, the reference's 8)"
    base = {"paper": "packed-ensembles", "claim": "PE matches DE.", "checks": [], "values": []}
    page = claims_page("cpu", [PageRun("notebooks/packed-ensembles/t.ipynb", "ok", records=[
        {**base, "item": "Table 1", "verdict": "not testable at this scale", "undecided": why},
        {**base, "item": "Table 2", "verdict": "holds", "undecided": ""}])])
    rows = [line for line in page.splitlines() if line.startswith("| ") and not line.startswith("| page |")]
    assert f"why: {why}" in next(r for r in rows if "Table 1" in r)
    assert "why:" not in next(r for r in rows if "Table 2" in r)


# Issue #53, item 3: pages in parallel (each in a process of its own, cores/N threads each).
@pytest.mark.kernel
def test_jobs_run_pages_at_once_each_with_its_share_of_the_threads(env, capsys, monkeypatch):
    """``--jobs 2``: both pages run (in book order in the results), each kernel given ``cores // 2`` threads
    through ``OMP_NUM_THREADS``, and the run's pace is printed while a page is left; ``--jobs 0`` is one
    sentence."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 4)
    body = ("import os, time\nt0 = time.time()\ntime.sleep(3)\n"
            "open(f'{value}.txt', 'w').write(f\"{os.environ['OMP_NUM_THREADS']} {os.getppid()} {t0} {time.time()}\")")
    pages = [_notebook(env / f"p{i}.ipynb", body, params=f'scale = "cpu"\nvalue = {i}') for i in (1, 2)]
    results = runner.run_notebooks(pages, scale="cpu", out_root=env / "out", root=env, jobs=2)
    assert [r.path.name for r in results] == ["p1.ipynb", "p2.ipynb"] and {r.status for r in results} == {"ok"}
    runs = [(env / f"{i}.txt").read_text().split() for i in (1, 2)]
    assert [r[0] for r in runs] == ["2", "2"]  # 4 cores // 2 jobs
    (_, a0, a1), (_, b0, b1) = ([float(x) for x in r[1:]] for r in runs)
    assert a0 < b1 and b0 < a1  # the two 3-second pages overlapped in time
    assert ("2 pages at a time, 2 thread(s) each (4 for a page that times itself or trains with workers of its own, "
            "alone).") in capsys.readouterr().out
    # again, with their last times as estimates: the pace once the first has finished (the other still running),
    # none after the last
    runner.run_notebooks(pages, scale="cpu", out_root=env / "out", root=env, jobs=2, force=True)
    assert capsys.readouterr().out.count("x the recorded times so far") == 1
    with pytest.raises(EnsdivError, match="--jobs must be 1 or more, got 0"):
        runner.run_notebooks(pages, scale="cpu", out_root=env / "out", root=env, jobs=0)


@pytest.mark.kernel
def test_jobs_start_a_page_only_after_the_earlier_page_it_shares_cached_work_with(env, monkeypatch):
    """``--jobs 2`` with three pages where p2 needs p1 (the relation recorded with a one-run build): p2 starts
    after p1 has finished, while p3, which needs nothing, runs beside p1 in p2's place; results stay in book
    order."""
    from ensdiv.book import schedule

    monkeypatch.setattr(schedule, "recorded_needs", lambda scale: {"p2.ipynb": ["p1.ipynb"]})
    body = ("import time\nt0 = time.time()\ntime.sleep(2)\n"
            "open(f'{value}.txt', 'w').write(f'{t0} {time.time()}')")
    pages = [_notebook(env / f"p{i}.ipynb", body, params=f'scale = "cpu"\nvalue = {i}') for i in (1, 2, 3)]
    results = runner.run_notebooks(pages, scale="cpu", out_root=env / "out", root=env, jobs=2, progress=False)
    assert [r.path.name for r in results] == ["p1.ipynb", "p2.ipynb", "p3.ipynb"]
    assert {r.status for r in results} == {"ok"}
    (a0, a1), (b0, b1), (c0, c1) = ([float(x) for x in (env / f"{i}.txt").read_text().split()] for i in (1, 2, 3))
    assert b0 >= a1  # p2 waited for p1
    assert c0 < a1 and a0 < c1  # p3 ran beside p1


def test_the_estimate_prefers_the_one_run_record_of_a_page_over_the_older_one(tmp_path, monkeypatch):
    """``recorded_seconds`` reads ``book.json``: a page the latest one-run build reached takes that run's time, a
    page it did not reach keeps the older per-page record; a missing or unreadable file gives no estimate."""
    from ensdiv.book import run as book_run

    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    monkeypatch.setattr(book_run, "project_root", lambda: tmp_path)
    book_run.recorded_seconds.cache_clear()
    assert book_run.recorded_seconds("cpu") == {}  # no file
    (results / "book.json").write_text("{not json")
    book_run.recorded_seconds.cache_clear()
    assert book_run.recorded_seconds("cpu") == {}
    (results / "book.json").write_text(json.dumps({"scales": {"cpu": {
        "cold": {"notebooks": [{"notebook": "notebooks/a/x.ipynb", "seconds": 10.0},
                               {"notebook": "notebooks/a/y.ipynb", "seconds": 20.0}]},
        "cold_one_run": {"pages": [{"notebook": "a/x.ipynb", "seconds": 70.5},
                                   {"notebook": "a/z.ipynb", "seconds": None}]},
        # the pages the one run did not reach, run afterwards on its cache: over the oldest record only
        "cold_continuation": {"pages": [{"notebook": "a/x.ipynb", "seconds": 5.0},
                                        {"notebook": "a/w.ipynb", "seconds": 33.0},
                                        {"notebook": "a/v.ipynb", "seconds": 40.0}]},
        # a chapter re-measured after its budget changed: over the continuation, under the one run
        "remeasured_a": {"pages": [{"notebook": "a/v.ipynb", "seconds": 12.0},
                                   {"notebook": "a/x.ipynb", "seconds": 1.0}]}}}}))
    book_run.recorded_seconds.cache_clear()
    try:
        assert book_run.recorded_seconds("cpu") == {"notebooks/a/x.ipynb": 70.5, "notebooks/a/y.ipynb": 20.0,
                                                    "notebooks/a/w.ipynb": 33.0, "notebooks/a/v.ipynb": 12.0}
        assert book_run.recorded_seconds("smoke") == {}
    finally:
        book_run.recorded_seconds.cache_clear()


@pytest.mark.slow
def test_a_build_folder_probe_writes_bytes_so_a_disk_that_takes_no_more_fails_it(tmp_path):
    """An empty probe file is made even where no byte fits (a full disk); the probe writes a block, so the
    build folder's check fails there. Simulated with a file-size limit of 0 bytes in a child process."""
    import subprocess
    import sys

    code = ("import resource, signal, sys\nfrom pathlib import Path\nfrom ensdiv.paths import prove_writable\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
            "try:\n    prove_writable(Path(sys.argv[1]))\n    print('writable')\n"
            "except OSError as exc:\n    print('refused', exc.errno)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "full")], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(Path(ensdiv.paths.__file__).parents[1])})
    assert out.stdout.startswith("refused"), out.stdout + out.stderr
    assert not [p for p in (tmp_path / "full").iterdir()]  # the probe is removed all the same


@pytest.mark.kernel
def test_a_page_whose_folder_cannot_be_written_fails_in_one_sentence_and_the_next_page_runs(env, monkeypatch):
    """A full disk under one page's folder (its lock cannot be written): that page fails in one sentence naming
    the folder, leaves no lock file, and the run goes on to the next page."""
    import errno

    first = _notebook(env / "pages" / "full" / "a.ipynb", "x = 1")
    second = _notebook(env / "pages" / "ok" / "b.ipynb", "x = 2")
    real_lock = runner._notebook_lock

    def lock(out):
        if out.parent.name == "full":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_lock(out)

    monkeypatch.setattr(runner, "_notebook_lock", lock)
    a, b = runner.run_notebooks([first, second], scale="cpu", out_root=env / "out", progress=False,
                                root=env / "pages")
    assert a.status == "failed" and "\n" not in a.error
    assert a.error.startswith(f"Could not write into the build folder {env / 'out' / 'full'} (No space left on device)")
    assert not (env / "out" / "full" / "a.lock").exists()
    assert b.status == "ok", b.error
