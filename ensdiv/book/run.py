"""Execute notebooks with papermill: ``ensdiv run``, and the first half of ``ensdiv book``.

Notebooks are executed into ``_build/executed/<scale>/<same relative path>``; each executed copy carries
the record of its last run (:mod:`ensdiv.book.stamps`). A finished notebook whose record says nothing it
depends on changed is not run again (``force=True`` re-runs); a failed or interrupted run never passes for
a finished one, and an interrupted run leaves the previous copy (and its claim records) as they were. A
lock file per executed notebook (``<name>.lock``) serialises two runs of the same notebook. One failing
notebook is reported with its error cell; the others still run.

Before anything runs: the scale, the notebooks, every parameter's name, type and range (against the
notebook's preset, :mod:`ensdiv.config`; the values themselves plain data, :mod:`ensdiv.book.parameters`),
and the cache folder are checked, each failure one sentence.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import shutil
import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import yaml
from nbformat.warnings import MissingIDFieldWarning

from ensdiv import chapters, reads, tracing
from ensdiv.book import schedule
from ensdiv.book.parameters import inject, render
from ensdiv.book.reference import REFERENCE_IMG_S
from ensdiv.book.stamps import (
    data_signature,
    environment_stamp,
    finish,
    meta_of,
    rerun_reason,
    sha,
    tree_hash,
    unfinished,
)
from ensdiv.chapters import zoo
from ensdiv.config import check_scale
from ensdiv.errors import CacheError, EnsdivError, unknown_name
from ensdiv.paths import build_dir, project_root, prove_writable, unwritable_reason
from ensdiv.report import STAGING_ENV, read_records
from ensdiv.seeding import seed_base
from ensdiv.store import ACCESS_LOG_ENV, default_store

__all__ = ["NotebookResult", "run_notebooks", "toc_notebooks", "notebook_parameters", "check_parameters",
           "summary", "NO_CLAIM_PAGES", "page_stamp", "resolve_notebook"]

#: The book's pages that report measurements or a worked example and record no claim. Every other page of
#: ``notebooks/`` is ``ok`` only when its run wrote at least one claim record.
NO_CLAIM_PAGES = frozenset({"notebooks/foundations/benchmarks.ipynb", "notebooks/foundations/calibration.ipynb",
                            "notebooks/synthesis/measure_redundancy.ipynb",
                            "notebooks/synthesis/one_ensemble_every_measure.ipynb"})


@dataclass
class NotebookResult:
    """What happened to one notebook."""

    path: Path
    output: Path
    status: str  # "ok", "cached" or "failed"
    seconds: float = 0.0
    error: str = ""
    params: dict[str, Any] = field(default_factory=dict)

def read_notebook(path: Path, *, params: dict[str, Any] | None = None) -> nbformat.NotebookNode:
    """A notebook as a run executes it: read as nbformat 4, every cell given an id (a notebook saved by an
    older Jupyter has none: nbformat would warn on every read, in the terminal of ``make book``), and, with
    ``params``, the run's parameters injected as Python literals (:func:`ensdiv.book.parameters.inject`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingIDFieldWarning)
        nb = nbformat.read(str(path), as_version=4)
    nb = nbformat.from_dict(nbformat.validator.normalize(nb)[1])
    return inject(nb, params) if params is not None else nb


def notebook_parameters(path: Path) -> dict[str, Any]:
    """The parameters a notebook declares: the names assigned in its cell tagged ``parameters``.

    Parsed with ``ast`` rather than papermill's line parser, which gives up on a line whose comment
    contains ``=`` (and then silently accepts any parameter name).

    Returns:
        ``{name: default value}`` (the literal, or the source text when it is not a literal).
    """
    import ast

    nb = read_notebook(path)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            declared: dict[str, Any] = {}
            for node in ast.parse(cell.source).body:
                targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
                for target in targets:
                    if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
                        try:
                            declared[target.id] = ast.literal_eval(node.value)
                        except ValueError:
                            declared[target.id] = ast.get_source_segment(cell.source, node.value)
            return declared
    return {}

def resolve_notebook(path: str | Path) -> Path:
    """A notebook the runner can execute: an existing ``.ipynb`` file that is a JSON notebook (one sentence for a
    folder, another kind of file, a file that is not JSON)."""
    p = Path(path)
    if not p.is_absolute() and not p.exists():
        p = project_root() / p
    if p.is_dir():
        raise EnsdivError(f"{path} is a folder, not a notebook; give a notebook's path (list them with "
                          "`ensdiv run --list`).")
    if p.suffix != ".ipynb":
        if p.exists():
            raise EnsdivError(f"{path} is not a notebook (a notebook's name ends in .ipynb); list them with "
                              "`ensdiv run --list`.")
        p = p.with_suffix(".ipynb")
    if not p.exists():
        raise EnsdivError(f"Notebook {path} does not exist; list them with `ensdiv run --list`.")
    try:
        ok = isinstance(json.loads(p.read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        ok = False
    if not ok:
        raise EnsdivError(f"{path} is not a readable notebook (not JSON); open it in Jupyter or restore it.")
    return p.resolve()

def toc_notebooks(toc: Path | None = None, *, root: Path | None = None) -> list[Path]:
    """Every notebook listed in ``_toc.yml`` (of the book in ``root``, default the project), in book order."""
    root = Path(root or project_root())
    toc = toc or root / "_toc.yml"
    spec = yaml.safe_load(toc.read_text())
    found: list[Path] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for f in (node.get("root"), node.get("file")):
                if isinstance(f, str) and (root / f"{f}.ipynb").exists():
                    found.append((root / f"{f}.ipynb").resolve())
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return found

def _error_of(exc: Exception) -> str:
    """One readable paragraph: the failing cell's number, the exception name and message."""
    ename = getattr(exc, "ename", type(exc).__name__)
    evalue = getattr(exc, "evalue", str(exc))
    cell = getattr(exc, "exec_count", None)
    where = f"cell [{cell}]" if cell is not None else "a cell"
    return f"{where} raised {ename}: {evalue}"

def _preset_name(nb: Path) -> str:
    """The preset of a book notebook: ``notebooks/<paper-slug>/<stem>.ipynb`` -> ``"<paper-slug>/<stem>"``."""
    return f"{nb.parent.name}/{nb.stem}"

def check_parameters(nb: Path, scale: str, params: dict[str, Any]) -> None:
    """Check ``params`` against the preset of notebook ``nb`` (when it has one) before it runs.

    Every field of the preset is resolved at ``scale`` with the parameters that name it, so a value of
    the wrong type or outside its range (:mod:`ensdiv.config`), and a ``zoo_entry`` the zoo lacks at
    that scale, are one sentence now rather than a traceback in a cell minutes later.
    """
    name = _preset_name(nb)
    if name not in chapters.list_presets():
        return
    fields = chapters.preset(name, scale, verbose=False)
    chapters.preset(name, scale, verbose=False, **{k: v for k, v in params.items() if k in fields})
    entry = params.get("zoo_entry")
    if isinstance(entry, str) and "zoo_entry" in fields:
        entries = zoo.zoo_recipes(scale)
        if entry not in entries:
            raise unknown_name("zoo entry", entry, entries)

@contextlib.contextmanager
def _notebook_lock(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``<out>.lock``; while another run of this notebook holds it, say so (naming its
    process) and wait."""
    with open(out.with_suffix(".lock"), "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            print(f"  [wait]   {out.name}: another run (process {holder}) is executing this page; waiting for it",
                  file=sys.stderr, flush=True)
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

def _page_lock(nb: Path, out: Path, params: dict[str, Any]) -> contextlib.ExitStack | NotebookResult:
    """The page's folder made and its lock held (an exit stack that releases it), or, where the folder cannot be
    written (a full or read-only disk), the page's failed result in one sentence naming the folder: the run goes
    on to the next page, and no empty lock file is left behind."""
    stack = contextlib.ExitStack()
    lock_file = out.with_suffix(".lock")
    existed = lock_file.exists()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        stack.enter_context(_notebook_lock(out))
    except OSError as exc:
        stack.close()
        if not existed:
            with contextlib.suppress(OSError):
                lock_file.unlink(missing_ok=True)
        return NotebookResult(nb, out, "failed", 0.0, params=params,
                              error=f"Could not write into the build folder {out.parent} ({unwritable_reason(exc)}); "
                                    "the page did not run, the next pages do.")
    return stack


def _remove_stale_partials(out: Path) -> None:
    """Remove ``<name>.partial-<pid>.ipynb`` files (and claim staging folders, read logs) of runs whose
    process is gone: an interrupted run left them."""
    for leftover in [*out.parent.glob(f"{out.stem}.partial-*.ipynb"), *out.parent.glob(f".{out.stem}.run-*")]:
        pid = leftover.name.rsplit("-", 1)[-1].split(".")[0]
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)

def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

def _read_roots(params: dict[str, Any]) -> list[str]:
    """The folders whose reads a page's rerun check follows: ``$ENSDIV_DATA``, Debian's Fashion-MNIST, the
    benchmarks' results (the benchmarks page shows them: ``make bench`` re-runs it) and every existing folder a
    string parameter names (``data_root``)."""
    roots = [os.environ.get("ENSDIV_DATA", ""), "/usr/share/datasets/fashion-mnist",
             str(project_root() / "benchmarks" / "results")]
    roots += [v for v in params.values() if isinstance(v, str) and v and os.path.isabs(v)]
    return [r for r in dict.fromkeys(roots) if r and os.path.isdir(r)]

def _check_cache(progress: bool) -> None:
    """Refuse a cache folder that cannot be used at all, in one sentence; a read-only one that exists is used
    for what it holds (a shared cache others filled), and only a page that needs an entry it lacks fails."""
    store = default_store()
    try:
        store.check_writable()
    except CacheError:
        if not (store.root.is_dir() and os.access(store.root, os.R_OK | os.X_OK)):
            raise
        if progress:
            print(f"  [note]   the cache {store.root} is read-only: pages are served from its entries, and a page "
                  "that needs one it lacks fails saying so", flush=True)


def run_notebooks(
    paths: list[str | Path],
    *,
    scale: str = "cpu",
    params: dict[str, Any] | None = None,
    out_root: Path | None = None,
    force: bool = False,
    kernel: str = "python3",
    progress: bool = True,
    root: Path | None = None,
    trace: bool = True,
    jobs: int = 1,
    img_s: float | None = None,
) -> list[NotebookResult]:
    """Execute notebooks at ``scale`` with extra parameters into ``out_root`` (``_build/executed/<scale>``).

    Args:
        jobs: pages run at once, each in a process of its own whose kernel gets ``cores // jobs`` threads
            (``OMP_NUM_THREADS``, unless set); two pages that need the same model or entry never both compute it
            (:meth:`ensdiv.store.Store.computing`: one waits, then loads it).
        root: the folder executed copies mirror (default the project root); a notebook outside it is
            executed to ``out_root/<its name>``.
        img_s: this machine's speed on the reference workload (:mod:`ensdiv.book.reference`; ``ensdiv book``
            measures it), so that the estimate carries other machines' recorded page times to this one.
        trace: record the package code each page runs (:mod:`ensdiv.tracing`), so a later run can reuse the
            copy; ``False`` (tests that discard the copies) writes no page log, and the copy is then never
            reused.

    Raises:
        EnsdivError: unknown scale, missing notebook, a ``scale`` among ``params``, a parameter no
            notebook declares or outside its preset's type and range, or an unusable cache folder —
            checked for every notebook before any runs.
    """
    import papermill as pm

    check_scale(scale)
    params = dict(params or {})
    if "scale" in params:
        raise EnsdivError(f"Set the scale with the scale argument (ensdiv run --scale {params['scale']}), "
                          "not as a parameter.")
    render({"scale": scale, **params})  # every name an identifier, every value plain data, before any run
    params = {k: _absolute(k, v) for k, v in params.items()}
    notebooks = [resolve_notebook(p) for p in paths]
    for nb in notebooks:
        declared = notebook_parameters(nb)
        if "scale" not in declared:
            raise EnsdivError(f"Notebook {nb.name} has no `scale` in its parameters cell; it cannot be run at a scale.")
        unknown = sorted(set(params) - set(declared))
        if unknown:
            raise EnsdivError(
                f"Notebook {nb.name} does not declare the parameter(s) {', '.join(unknown)}; "
                f"it declares: {', '.join(sorted(declared))}."
            )
        check_parameters(nb, scale, params)
    out_root = usable_build_folder(Path(out_root or build_dir() / "executed" / scale))
    base = _base_stamp()
    results = []
    root = Path(root or project_root()).resolve()
    cache_checked = False
    since = time.time()  # a page that loads a store entry older than this did not run cold (the pace skips it)
    copies = tuple(out_root / _name(nb, root) for nb in notebooks)  # in book order: whose store entry is whose
    estimates = _plan(notebooks, root, out_root, scale, params, base, force, img_s) if progress else {}
    if jobs < 1:
        raise EnsdivError(f"--jobs must be 1 or more, got {jobs}.")
    if jobs > 1 and len(notebooks) > 1:
        order = _parallel_order(notebooks, root, out_root, scale, estimates)
        return _run_in_parallel(notebooks, jobs, dict(scale=scale, params=params, out_root=out_root, force=force,
                                                      kernel=kernel, progress=progress, root=root, trace=trace),
                                order, estimates, since=since, copies=copies)
    for nb in notebooks:
        rel = nb.relative_to(root) if nb.is_relative_to(root) else Path(nb.name)
        out = out_root / rel
        all_params = {"scale": scale, **params}
        stamp = page_stamp(nb, all_params, base)
        lock = _page_lock(nb, out, all_params)
        if isinstance(lock, NotebookResult):  # its folder cannot be written (a full or read-only disk)
            results.append(lock)
            if progress:
                print(f"  [FAILED] {rel}: {lock.error}", flush=True)
            continue
        with lock:
            _remove_stale_partials(out)
            why = "--force" if force else rerun_reason(out, stamp)
            if why is None:
                results.append(NotebookResult(nb, out, "cached", 0.0, params=all_params))
                if progress:
                    print(f"  [cached] {rel}", flush=True)
                continue
            if not cache_checked:
                _check_cache(progress)  # one sentence before the first run, not after it
                cache_checked = True
            out.with_suffix(".stamp.json").unlink(missing_ok=True)  # the separate stamp of older versions
            est = estimates.get(nb)
            if progress:
                guess = f" (estimate {_minutes(est)})" if est else ""
                print(f"  [run]    {rel} (scale={scale}): {why}{guess} ...", flush=True)
            res = _execute(pm, nb, out, rel.as_posix(), all_params, stamp, kernel=kernel, scale=scale, trace=trace)
        if progress:
            tag = "ok" if res.status == "ok" else "FAILED"
            against = f" (estimate {_minutes(est)})" if est else ""
            print(f"  [{tag:<6}] {rel} in {res.seconds:.1f} s{against}" + (f": {res.error}" if res.error else ""),
                  flush=True)
        results.append(res)
        if progress:
            _print_pace(results, estimates, left=notebooks[len(results):], since=since,  # one result per page
                        book=copies)
    return results


@functools.lru_cache(maxsize=1024)
def _served_from_store(copy: Path, since: float, *, book: tuple[Path, ...] = ()) -> bool:
    """Whether the run that wrote the executed copy ``copy`` loaded one of its own store entries saved before
    ``since`` (the build's start): its time is then not a cold page's, which the recorded times are. Its own: no
    executed copy before it in ``book`` (the run's copies in book order) used the entry, datasets aside
    (:func:`ensdiv.book.schedule.first_users`): a page resumed on a stopped build loads the zoo's models and the
    datasets the first leg made, and still ran its own work cold; a resumed zoo, or a page stopped halfway, did
    not."""
    root = default_store().root
    used = meta_of(copy).get("cache") or []
    if book and copy in book:
        names = [str(c) for c in book]
        first = schedule.first_users(names, {str(c): meta_of(c).get("cache") or [] for c in book})
        used = [e for e in used if first.get(e) == str(copy)]
    for rel in used:
        try:
            if (root / rel).stat().st_mtime < since:
                return True
        except (OSError, TypeError):
            continue
    return False


def _print_pace(results: Iterable[NotebookResult], estimates: dict[Path, float], *, left: list[Path],
                since: float, book: tuple[Path, ...] = ()) -> None:
    """After a page: this run's pace against the recorded times over the pages that ran ok and cold (none of the
    store entries they loaded predates the build, ``since``: a resumed zoo served from the store in 2.5 minutes
    against 80 recorded made the pace 0.03x), and the page time left at it
    (:func:`ensdiv.book.schedule.pace`), once such a page with an estimate has finished and while one is left."""
    cold = [r for r in results if r.status == "ok" and not _served_from_store(r.output, since, book=book)]
    now = schedule.pace([(r.seconds, estimates.get(r.path)) for r in cold], [estimates.get(nb) for nb in left])
    if now is None or not now[1]:
        return
    ratio, seconds = now
    print(f"  [pace]   {ratio:.2f}x the recorded times so far: about {_minutes(seconds)} of page time left "
          f"at that pace", flush=True)


#: whether this page process is running a page (the signal handler of :func:`_job_start` reads it)
_IN_JOB = [False]


def _job_start() -> None:
    """In each page process of a parallel run: SIGTERM and SIGHUP end the page as Ctrl-C does (its kernel ended,
    its partial copy removed), and Ctrl-C in the terminal is left to the parent, which ends the workers. The
    process then ends with status 130 and no traceback (:func:`_one_job`); an idle one ends at once."""
    import signal

    def interrupt(signum: int, frame: Any) -> None:
        if not _IN_JOB[0]:
            raise SystemExit(130)  # multiprocessing ends a process on SystemExit without a traceback
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _one_job(args: tuple[Path, dict[str, Any], dict[str, str]]) -> NotebookResult:
    nb, options, limits = args
    _IN_JOB[0] = True
    try:
        with _environ(**limits):  # the page's kernel inherits its thread limits
            (res,) = run_notebooks([nb], **options)
    except KeyboardInterrupt:  # the page cleaned up on its way out; the parent says "interrupted" once
        logging.getLogger("asyncio").disabled = True  # the interrupted cell's late answer (see cli.main)
        raise SystemExit(130) from None
    finally:
        _IN_JOB[0] = False
    return res


def thread_limits(jobs: int, *, alone: bool, cores: int | None = None,
                  environ: dict[str, str] | None = None) -> dict[str, str]:
    """``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` for one page of a run of ``jobs`` pages at a time: the
    ``cores`` shared out (``cores // jobs``, at least one), all of them for a page that runs ``alone`` (a page
    that times itself: its seconds are then those of the whole machine, as its record's are); a value the
    caller set in ``environ`` wins.

    >>> thread_limits(2, alone=False, cores=2, environ={})
    {'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}
    >>> thread_limits(2, alone=True, cores=2, environ={"MKL_NUM_THREADS": "3"})
    {'OMP_NUM_THREADS': '2', 'MKL_NUM_THREADS': '3'}
    """
    cores = cores or os.cpu_count() or 1
    env = os.environ if environ is None else environ
    threads = str(cores if alone else max(1, cores // jobs))
    return {k: env.get(k) or threads for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}


def _parallel_order(notebooks: list[Path], root: Path, out_root: Path, scale: str,
                    estimates: dict[Path, float]) -> tuple[dict[Path, list[Path]], dict[Path, float]]:
    """What each page waits for in a parallel run and its priority (:mod:`ensdiv.book.schedule`): the needs
    recorded with the last one-run build, joined with those the executed copies here record."""
    by_name = {_name(nb, root): nb for nb in notebooks}
    toc = [_name(nb, root) for nb in toc_notebooks(root=root)] if (root / "_toc.yml").exists() else []
    pages = toc + [p for p in by_name if p not in toc]
    local = schedule.needs_from_entries(pages, {p: meta_of(out_root / p).get("cache") or [] for p in pages})
    recorded = schedule.recorded_needs(scale)
    needs = {p: sorted((set(local.get(p, [])) | set(recorded.get(p, []))) & set(by_name)) for p in by_name}
    seconds = {p: estimates.get(nb) or recorded_seconds(scale).get(p) for p, nb in by_name.items()}
    priority = schedule.first_first(schedule.critical_path(list(by_name), needs, seconds))
    return ({by_name[p]: [by_name[q] for q in before] for p, before in needs.items()},
            {by_name[p]: v for p, v in priority.items()})


def _name(nb: Path, root: Path) -> str:
    """A page's name as book.json and the scheduler write it (``notebooks/<chapter>/<page>.ipynb``)."""
    return (nb.relative_to(root) if nb.is_relative_to(root) else Path(nb.name)).as_posix()


def _run_in_parallel(notebooks: list[Path], jobs: int, options: dict[str, Any],
                     order: tuple[dict[Path, list[Path]], dict[Path, float]],
                     estimates: dict[Path, float] | None = None, *, since: float = 0.0,
                     copies: tuple[Path, ...] = ()) -> list[NotebookResult]:
    """Run the pages ``jobs`` at a time, each in a process of its own (results in book order): a page starts once
    the earlier pages it shares cached work with have finished, the one with the longest chain behind it first; a
    page that times itself or trains with a worker pool of its own (:data:`ensdiv.book.schedule.ALONE_PAGES`)
    runs alone, and the zoo page (:data:`ensdiv.book.schedule.SELF_PARALLEL_PAGES`) before any other."""
    import multiprocessing
    import queue

    needs, priority = order
    estimates = estimates or {}
    root = options["root"]
    # both read before the shared limits are set below (a value set by the caller wins, not one set here)
    limits, solo = thread_limits(jobs, alone=False), thread_limits(jobs, alone=True)
    if options["progress"]:
        print(f"{jobs} pages at a time, {limits['OMP_NUM_THREADS']} thread(s) each "
              f"({solo['OMP_NUM_THREADS']} for a page that times itself or trains with workers of its own, alone).",
              flush=True)
    waiting, done, running = list(notebooks), {}, set()
    alone = {nb for nb in notebooks if _name(nb, root) in schedule.ALONE_PAGES}
    finished: queue.Queue = queue.Queue()
    with _environ(**limits):  # the page processes and their kernels inherit them
        pool = multiprocessing.get_context("spawn").Pool(jobs, initializer=_job_start)
        try:
            while waiting or running:
                while len(running) < jobs and waiting:
                    nb = schedule.next_page(waiting, needs, set(waiting) | running, priority, running=running,
                                            alone=alone)
                    if nb is None:
                        break
                    waiting.remove(nb)
                    running.add(nb)
                    job = (nb, options, solo if nb in alone else limits)
                    pool.apply_async(_one_job, (job,), callback=lambda r, nb=nb: finished.put((nb, r)),
                                     error_callback=lambda e, nb=nb: finished.put((nb, e)))
                nb, res = finished.get()
                running.discard(nb)
                if isinstance(res, BaseException):
                    raise res
                done[nb] = res
                if options["progress"]:
                    _print_pace(done.values(), estimates, left=[*waiting, *running], since=since, book=copies)
        except BaseException:
            pool.terminate()  # SIGTERM: each page process ends its kernel and removes its partial copy
            raise
        finally:
            pool.close()
            pool.join()
    return [done[nb] for nb in notebooks]


#: Parameter names that hold a path: a relative value is resolved against the caller's working folder (a kernel
#: runs in the notebook's own folder, where ``-p data_root book/data/sat`` would name another place).
PATH_PARAMETERS = ("_root", "_path", "_folder", "_dir")


def _absolute(name: str, value: Any) -> Any:
    if isinstance(value, str) and value and name.endswith(PATH_PARAMETERS) and not os.path.isabs(value):
        return os.path.abspath(value)
    return value


def usable_build_folder(folder: Path) -> Path:
    """Create ``folder`` (the build folder, or the part of it a run writes) and prove it writable before
    anything runs.

    Raises:
        EnsdivError: a file is in the way, the folder is read-only or cannot be created (one sentence naming
            ``ENSDIV_BUILD``), as an unusable ``ENSDIV_CACHE`` gets.
    """
    try:
        return prove_writable(folder)
    except OSError as exc:
        raise EnsdivError(f"The build folder {folder} is not writable ({unwritable_reason(exc)}); set ENSDIV_BUILD "
                          "to a folder you can write to.") from None


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


@functools.lru_cache(maxsize=4)
def recorded_seconds(scale: str, *, img_s: float | None = None) -> dict[str, float]:
    """Each page's cold time at ``scale`` as ``benchmarks/results/book.json`` records it (``{}``: none): the
    latest run of the whole book in one go (``cold_one_run``, also a partial one for the pages it reached), else
    a chapter re-measured cold after a change to its budget (``remeasured_<chapter>``), else the pages a stopped
    one-run build did not reach, run afterwards on its cache (``cold_continuation``), else the older per-page
    record (``cold``). With ``img_s`` (this machine's speed on the reference workload, :mod:`ensdiv.book.reference`)
    each record's times are carried to this machine: times the record's speed over this one's (a record without a
    speed is taken as the reference processor's)."""
    try:
        book = json.loads((project_root() / "benchmarks" / "results" / "book.json").read_text())
        row = book["scales"][scale]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    out: dict[str, float] = {}
    remeasured = sorted(k for k in row if k.startswith("remeasured_")) if isinstance(row, dict) else []
    for key, pages, prefix in (("cold", "notebooks", ""), ("cold_continuation", "pages", "notebooks/"),
                               *((k, "pages", "notebooks/") for k in remeasured),
                               ("cold_one_run", "pages", "notebooks/")):
        try:  # the one run's pages override the older records'; a continuation on its cache, the oldest
            record = row[key]
            factor = (record_speed(record) / img_s) if img_s else 1.0
            out.update({prefix + r["notebook"]: factor * float(r["seconds"]) for r in record[pages]
                        if r.get("seconds")})
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            continue
    return out


def record_speed(record: dict) -> float:
    """The reference-workload speed of the machine a ``book.json`` record was made on: its own measurement, else
    the reference processor's (:data:`ensdiv.book.reference.REFERENCE_IMG_S`)."""
    measured = (record.get("reference") or {}).get("img_s") if isinstance(record, dict) else None
    return float(measured or REFERENCE_IMG_S)


def _plan(notebooks: list[Path], root: Path, out_root: Path, scale: str, params: dict[str, Any],
          base: dict[str, Any], force: bool, img_s: float | None = None) -> dict[Path, float]:
    """Print, before anything runs, how many pages are cached and an estimate of the time the rest will take
    (each page's last run at this scale, else its recorded cold time), and return the per-page estimates."""
    estimates: dict[Path, float] = {}
    cached = unknown = 0
    for nb in notebooks:
        rel = nb.relative_to(root) if nb.is_relative_to(root) else Path(nb.name)
        out = out_root / rel
        if not force and rerun_reason(out, page_stamp(nb, {"scale": scale, **params}, base)) is None:
            cached += 1
            continue
        last = meta_of(out).get("seconds") if out.exists() else None
        est = last or recorded_seconds(scale, img_s=img_s).get(rel.as_posix())
        if est:
            estimates[nb] = float(est)
        else:
            unknown += 1
    if len(notebooks) > 1:
        left = len(notebooks) - cached
        text = f"{len(notebooks)} pages: {cached} cached, {left} to run"
        if left:
            text += f", estimated {_minutes(sum(estimates.values()))}"
            text += f" ({unknown} without a recorded time)" if unknown else ""
            text += " from the recorded per-page times"
        print(text + ".", flush=True)
    return estimates


def _base_stamp() -> dict[str, Any]:
    """The parts of every page's stamp that do not depend on the page."""
    base = seed_base()  # a page run under another seed base is another run (ensdiv.seeding)
    return {"environment": environment_stamp(), "book_data": tree_hash(project_root() / "book" / "data"),
            "data": data_signature(), **({"seed_base": base} if base else {})}


def page_stamp(nb: Path, params: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a run of notebook ``nb`` with ``params`` (the scale among them) is stamped with."""
    return {"source": sha(Path(nb).read_bytes()), "params": params, **(base or _base_stamp())}


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    """Set environment variables for the duration of the block (the kernel inherits them), then restore them."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

#: how often a kernel that dies before it answers is started again (no cell has run, so nothing is repeated)
KERNEL_STARTS = 3


def _kernel_died(exc: BaseException) -> bool:
    """Whether ``exc`` says the page's kernel died (it started and was lost, or never answered)."""
    return type(exc).__name__ == "DeadKernelError" or "Kernel died" in str(exc)


def _kernel_did_not_start(exc: BaseException) -> bool:
    """Whether ``exc`` says the kernel never came up: jupyter_client picks free TCP ports and the kernel binds
    them a moment later, so a kernel started at the same moment elsewhere (pytest-xdist, ``--jobs``) can take
    one first and this kernel dies before it replies (seen in CI: ``ZMQError: Address already in use``)."""
    return isinstance(exc, RuntimeError) and "Kernel died before replying to kernel_info" in str(exc)


def _kernel_manager(log: Path) -> type:
    """A kernel manager whose kernels write their stderr to ``log``, not to the terminal: a kernel ended by an
    interrupt prints ZMQ tracebacks there (one per socket), and the reader's terminal shows one line instead.
    A kernel that dies says why in the page's error (:func:`_last_words`)."""
    from jupyter_client.manager import AsyncKernelManager

    class _LoggedKernel(AsyncKernelManager):
        async def start_kernel(self, **kw: Any) -> None:
            with open(log, "ab") as sink:  # the kernel holds its own copy of the descriptor
                kw.setdefault("stderr", sink)
                await AsyncKernelManager.start_kernel(self, **kw)

    return _LoggedKernel


def _last_words(log: Path) -> str:
    """The last line a kernel wrote to its stderr log, or ``""``."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _start_and_run(pm: Any, source: nbformat.NotebookNode, tmp: Path, *, kernel: str, cwd: Path,
                   kernel_log: Path | None = None) -> None:
    """``papermill.execute_notebook`` into ``tmp``, starting the kernel again (up to :data:`KERNEL_STARTS`
    times) when it dies before running anything; any other failure, or a kernel that died once it had
    started, is raised as it is. The kernel's stderr goes to ``kernel_log`` (else to this process's)."""
    for attempt in range(1, KERNEL_STARTS + 1):
        try:
            pm.execute_notebook(
                source, str(tmp), parameters=None, kernel_name=kernel, cwd=str(cwd),
                progress_bar=False, log_output=False,
                **({"kernel_manager_class": _kernel_manager(kernel_log)} if kernel_log else {}),
                # a clean terminal: the kernel's "running over TCP without encryption" notice is not
                # the reader's business (its errors still show)
                extra_arguments=["--IPKernelApp.log_level=ERROR"],
            )
            return
        except Exception as exc:  # noqa: BLE001 - only a kernel that never started is tried again
            if attempt == KERNEL_STARTS or not _kernel_did_not_start(exc):
                raise
            time.sleep(0.5 * attempt)


def _execute(pm: Any, nb: Path, out: Path, rel: str, params: dict[str, Any], stamp: dict, *, kernel: str,
             scale: str, trace: bool = True) -> NotebookResult:
    """Run one notebook into ``out``: papermill writes a partial copy, the claim records go to a staging folder
    of this run and the data reads to a log of this run; when the run finishes, the records are checked and
    promoted with the notebook in one atomic replace. An interrupt (or a signal turned into one by the
    command) leaves the previous executed copy untouched and removes the partial copy, staging and log."""
    t0 = time.perf_counter()
    tmp = out.with_suffix(f".partial-{os.getpid()}.ipynb")
    work = out.parent / f".{out.stem}.run-{os.getpid()}"
    staging, log, trace_log, store_log = work / "claims", work / "reads.log", work / "trace.log", work / "store.log"
    shutil.rmtree(work, ignore_errors=True)
    staging.mkdir(parents=True)
    # rendered pages get one line per finished unit of work instead of progress bars (ensdiv.progress),
    # unless the caller chose otherwise
    env = {"ENSDIV_PROGRESS": os.environ.get("ENSDIV_PROGRESS") or "lines", "ENSDIV_NOTEBOOK": rel,
           STAGING_ENV: str(staging), reads.LOG_ENV: str(log), tracing.LOG_ENV: str(trace_log) if trace else "",
           ACCESS_LOG_ENV: str(store_log),
           reads.ROOTS_ENV: os.pathsep.join(_read_roots(params))}
    try:
        with _environ(**env):
            try:
                # the parameters are written by us as Python literals; papermill translates none of them
                source = read_notebook(nb, params=params)
                _start_and_run(pm, source, tmp, kernel=kernel, cwd=nb.parent, kernel_log=work / "kernel.log")
                why = unfinished(json.loads(tmp.read_text()))
                if why:
                    raise EnsdivError(f"The run did not finish: {why}")
                records = read_records(staging, scale=scale)
                if not records and rel.startswith("notebooks/") and rel not in NO_CLAIM_PAGES:
                    raise EnsdivError("The run wrote no claim record: a page calls ed.report.claim (a page of "
                                      "measurements only is listed in ensdiv.book.run.NO_CLAIM_PAGES).")
                for record in records:
                    record["notebook"] = rel  # the page it belongs to, whatever the kernel's environment said
                edited = tracing.edited_while_running(trace_log) if trace else None
                if edited:  # its record would name code it did not run: no record, so the next run runs it again
                    print(f"  [note]   {rel}: {edited} was edited while the page ran; it will run again", flush=True)
                code = page_units(tracing.read_log(trace_log), source) if trace and not edited else None
                finish(tmp, out, "ok", stamp, claims=records, read=reads.compact(reads.read_log(log)), source=nb,
                        code=code, cache=reads.read_log(store_log), seconds=time.perf_counter() - t0)
                return NotebookResult(nb, out, "ok", time.perf_counter() - t0, params=params)
            except Exception as exc:  # noqa: BLE001 - report every failure by name and go on
                error = str(exc) if isinstance(exc, EnsdivError) else _error_of(exc)
                said = _last_words(work / "kernel.log") if _kernel_died(exc) else ""
                if said:
                    error = f"{error} The kernel's last words: {said}"
                if isinstance(exc, OSError) and exc.strerror:
                    error = f"Could not write in {out.parent} ({exc.strerror})."
                try:
                    if not _readable(tmp):  # nothing (or a truncated copy) written: the source stands for it
                        shutil.copyfile(nb, tmp)
                    finish(tmp, out, "failed", stamp, error=error, source=nb)  # the executed copy keeps the error
                except (OSError, ValueError) as again:  # a full or read-only build folder: say so, go on
                    why = getattr(again, "strerror", None) or str(again)
                    error = f"{error} Its executed copy could not be written in {out.parent} ({why})."
                return NotebookResult(nb, out, "failed", time.perf_counter() - t0, error, params)
    finally:
        tmp.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)

def page_units(units: list[tuple[str, str]], notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """The units a page used: the code its kernel ran (and the code of the cache entries it loaded), plus each
    module-level constant its own cells name in a module it imported (``ch.LEVEL``), as a ``<bind>:NAME`` unit
    (:mod:`ensdiv.tracing`), so a page that reads a constant re-runs when it changes."""
    import ast

    names: set[str] = set()
    for cell in notebook.cells:
        if cell.get("cell_type") != "code":
            continue
        text = "\n".join(ln for ln in str(cell.source).splitlines() if not ln.lstrip().startswith(("%", "!")))
        try:
            names |= tracing.names_in(ast.parse(text))
        except SyntaxError:
            continue
    modules = sorted({f for f, q in units if q == "<module>"})
    return sorted(set(units) | set(tracing.binding_units(modules, names)))


def _readable(path: Path) -> bool:
    """Whether ``path`` holds a whole notebook (a partial copy cut short by a full disk does not)."""
    try:
        return isinstance(json.loads(path.read_text()), dict)
    except (OSError, ValueError):
        return False


def summary(results: list[NotebookResult]) -> str:
    """A per-notebook timing table and the total, for the terminal."""
    root = project_root()
    lines = [f"{'notebook':<60} {'status':<7} {'seconds':>8}"]
    for r in results:
        rel = r.path.relative_to(root) if r.path.is_relative_to(root) else r.path
        lines.append(f"{str(rel):<60} {r.status:<7} {r.seconds:>8.1f}")
    total = sum(r.seconds for r in results)
    failed = [r for r in results if r.status == "failed"]
    lines.append(f"{'total':<60} {'':<7} {total:>8.1f}")
    for r in failed:
        lines.append(f"FAILED {r.path.name}: {r.error} (executed copy: {r.output})")
    return "\n".join(lines)
