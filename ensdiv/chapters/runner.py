"""Execute notebooks with papermill and build the book from the executed copies.

``ensdiv run`` and ``ensdiv book`` come here. Notebooks are executed into
``_build/executed/<scale>/<same relative path>``. Each executed copy carries, in its own metadata
(``metadata.ensdiv``), everything the book knows about that page's last run, in one file replaced
atomically when the run ends:

- ``status`` (``ok`` or ``failed``) and ``error``;
- ``stamp``: what it was run from: the hash of the source notebook, the parameters, the ensdiv package
  source, the data shipped in ``book/data`` and ``$ENSDIV_DATA`` (its path and a listing of its top two
  levels: names, sizes, times);
- ``reads``: the data folders the run opened files in or listed (below ``$ENSDIV_DATA``, Debian's
  Fashion-MNIST folder and any folder a parameter names; :mod:`ensdiv.reads`) and a hash of their
  entries, so a file changed at any depth re-runs the page;
- ``claims``: the claim records the run wrote, checked and promoted only when it finished.

A finished notebook whose stamp and reads did not change is not run again (``force=True`` re-runs); a
failed or interrupted run never passes for a finished one, and an interrupted run leaves the previous
copy (and its records) as they were. A lock file per executed notebook (``<name>.lock``) serialises two
runs of the same notebook, and a lock per build folder two ``ensdiv book`` builds. One failing notebook
is reported with its error cell; the others still run. The claims page and the chapter pages are built
from the executed copies, so they show what the pages show, in every build mode.

Before anything runs: the scale, the notebooks, every parameter's name, type and range (against the
notebook's preset, :mod:`ensdiv.config`), and the cache folder are checked, each failure one sentence.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import yaml

from ensdiv import chapters, reads, tracing
from ensdiv.chapters import zoo
from ensdiv.chapters.parameters import inject, render
from ensdiv.config import check_scale
from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.paths import build_dir, project_root
from ensdiv.report import (
    STAGING_ENV,
    PageRun,
    chapter_summary,
    check_record,
    claims_page,
    read_records,
    slug,
    verdict_box,
)
from ensdiv.store import ACCESS_LOG_ENV, default_store

__all__ = ["KEY_FIGURES", "NotebookResult", "run_notebooks", "toc_notebooks", "build_book", "notebook_parameters",
           "check_parameters", "mathjax_source", "page_run", "end_process_group", "signals_as_interrupts",
           "cache_entries"]

#: The page whose figure stands for each chapter on its landing page (``book/<chapter>.md``): the first
#: image its executed copy shows becomes the landing page's thumbnail.
KEY_FIGURES = {
    "design-diversity": "notebooks/design-diversity/fig07_trend_lines.ipynb",
    "training-methods": "notebooks/training-methods/fig02_ensemble_accuracy.ipynb",
    "attack-similarity": "notebooks/attack-similarity/fig02_similarity_vs_err.ipynb",
    "packed-ensembles": "notebooks/packed-ensembles/fig01_accuracy_vs_speed.ipynb",
    "sed": "notebooks/sed/fig03_lambda_sweep.ipynb",
    "synthesis": "notebooks/synthesis/measures_vs_outcomes.ipynb",
}


@dataclass
class NotebookResult:
    """What happened to one notebook."""

    path: Path
    output: Path
    status: str  # "ok", "cached" or "failed"
    seconds: float = 0.0
    error: str = ""
    params: dict[str, Any] = field(default_factory=dict)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: The installed packages whose version is part of a page's stamp (a new torch or timm re-runs every page).
DEPENDENCIES = ("torch", "torchvision", "timm", "numpy", "scipy", "pandas", "scikit-learn", "statsmodels",
                "captum", "torchmetrics", "lightning", "torchattacks", "matplotlib", "seaborn", "papermill", "pyyaml")


def _versions() -> dict[str, str | None]:
    import importlib.metadata

    out = {}
    for name in DEPENDENCIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _code_unchanged(path: Path) -> bool:
    """Whether every unit of package code the last run of ``path`` executed still hashes as it did (a copy
    without a code record, from before code tracing or from a failed run, is never reused)."""
    recorded = _meta_of(path).get("code")
    if not isinstance(recorded, dict) or not isinstance(recorded.get("units"), list):
        return False
    units = [tuple(u) for u in recorded["units"] if isinstance(u, list | tuple) and len(u) == 2]
    return tracing.combined(tracing.code_hashes(units)) == recorded.get("hash")


def notebook_parameters(path: Path) -> dict[str, Any]:
    """The parameters a notebook declares: the names assigned in its cell tagged ``parameters``.

    Parsed with :mod:`ast` rather than papermill's line parser, which gives up on a line whose comment
    contains ``=`` (and then silently accepts any parameter name).

    Returns:
        ``{name: default value}`` (the literal, or the source text when it is not a literal).
    """
    import ast

    nb = nbformat.read(str(path), as_version=4)
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


def _resolve(path: str | Path) -> Path:
    p = Path(path)
    if not p.is_absolute() and not p.exists():
        p = project_root() / p
    if p.suffix != ".ipynb":
        p = p.with_suffix(".ipynb")
    if not p.exists():
        raise EnsdivError(f"Notebook {path} does not exist; list them with `ensdiv run --list`.")
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


def _tree_hash(folder: Path) -> str:
    """Hash of every file below ``folder`` (relative paths and contents); ``""`` when it does not exist."""
    if not folder.is_dir():
        return ""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(folder)).encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


def _data_signature(limit: int = 5000) -> dict[str, str]:
    """``$ENSDIV_DATA`` and a cheap listing of it: the names, sizes and modification times of its top
    two levels (at most ``limit`` entries), so data put there, replaced or removed means a re-run."""
    env = os.environ.get("ENSDIV_DATA", "")
    if not env or not Path(env).is_dir():
        return {"ENSDIV_DATA": env, "listing": ""}
    h = hashlib.sha256()
    count = 0
    for entry in sorted(Path(env).iterdir()):
        for p in [entry, *(sorted(entry.iterdir()) if entry.is_dir() else [])]:
            with contextlib.suppress(OSError):
                st = p.stat()
                h.update(f"{p.relative_to(env)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
            count += 1
            if count >= limit:
                break
        if count >= limit:
            break
    return {"ENSDIV_DATA": env, "listing": h.hexdigest()}


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
    """Hold an exclusive lock on ``<out>.lock`` (waits while another run of this notebook holds it)."""
    with open(out.with_suffix(".lock"), "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _meta_of(path: Path) -> dict:
    """The ``metadata.ensdiv`` block of an executed copy (``{}``: no copy or an unreadable file)."""
    try:
        meta = json.loads(path.read_text()).get("metadata", {}).get("ensdiv", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _stamp_of(path: Path) -> dict | None:
    """The ``ok`` stamp an executed copy carries, or ``None`` (no copy, a failed run, an unreadable file)."""
    meta = _meta_of(path)
    return meta.get("stamp") if meta.get("status") == "ok" else None


def _reads_unchanged(path: Path) -> bool:
    """Whether the data folders the last run of ``path`` read still hash as they did (True when it read none)."""
    recorded = _meta_of(path).get("reads")
    if not isinstance(recorded, dict) or not isinstance(recorded.get("folders"), list):
        return False
    return reads.signature(recorded["folders"]) == recorded.get("hash")


def _finish(tmp: Path, out: Path, status: str, stamp: dict, *, error: str = "", claims: list | None = None,
            read: list[str] | None = None, source: Path | None = None,
            code: list[tuple[str, str]] | None = None, cache: list[str] | None = None) -> None:
    """Write the run's status, error, stamp, data reads and claim records into the executed copy, then move
    it into place atomically: the notebook, its stamp and its records are one file."""
    nb = json.loads(tmp.read_text())
    if source is not None:  # papermill records the notebook it was given, here the injected copy itself
        nb.setdefault("metadata", {}).setdefault("papermill", {})["input_path"] = str(source)
    ok = status == "ok"
    nb.setdefault("metadata", {})["ensdiv"] = {
        "status": status, "error": error, "stamp": stamp if ok else None, "claims": list(claims or []) if ok else [],
        "reads": {"folders": read, "hash": reads.signature(read)} if ok and read is not None else None,
        "code": ({"units": [list(u) for u in code], "hash": tracing.combined(tracing.code_hashes(code))}
                 if ok and code is not None else None),
        "cache": list(cache or []) if ok else [],  # the store entries the run loaded or saved (ensdiv cache export)
    }
    tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(out)


def page_run(executed: Path, notebook: str) -> PageRun:
    """The state of one page as its executed copy shows it: its status and the claim records its last
    finished run promoted (:class:`ensdiv.report.PageRun`).

    Raises:
        EnsdivError: a claim record in the copy is malformed (one sentence naming the file).
    """
    if not executed.exists():
        return PageRun(notebook, "not run")
    meta = _meta_of(executed)
    if meta.get("status") != "ok":
        return PageRun(notebook, "failed", str(meta.get("error") or "the run did not finish"))
    records = meta.get("claims") or []
    if not isinstance(records, list):
        raise EnsdivError(f"The claim records in {executed} are malformed (not a list); re-run its notebook.")
    return PageRun(notebook, "ok", records=tuple(check_record(r, str(executed)) for r in records))


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
    """The folders whose reads a page's rerun check follows: ``$ENSDIV_DATA``, Debian's Fashion-MNIST and
    every existing folder a string parameter names (``data_root``)."""
    roots = [os.environ.get("ENSDIV_DATA", ""), "/usr/share/datasets/fashion-mnist"]
    roots += [v for v in params.values() if isinstance(v, str) and v and os.path.isabs(v)]
    return [r for r in dict.fromkeys(roots) if r and os.path.isdir(r)]


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
) -> list[NotebookResult]:
    """Execute notebooks at ``scale`` with extra parameters into ``out_root`` (``_build/executed/<scale>``).

    Args:
        root: the folder executed copies mirror (default the project root); a notebook outside it is
            executed to ``out_root/<its name>``.

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
    notebooks = [_resolve(p) for p in paths]
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
    out_root = Path(out_root or build_dir() / "executed" / scale)
    base = {"dependencies": _versions(), "book_data": _tree_hash(project_root() / "book" / "data"),
            "data": _data_signature()}
    results = []
    root = Path(root or project_root()).resolve()
    cache_checked = False
    for nb in notebooks:
        rel = nb.relative_to(root) if nb.is_relative_to(root) else Path(nb.name)
        out = out_root / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        all_params = {"scale": scale, **params}
        stamp = {"source": _sha(nb.read_bytes()), "params": all_params, **base}
        with _notebook_lock(out):
            _remove_stale_partials(out)
            if not force and _stamp_of(out) == stamp and _reads_unchanged(out) and _code_unchanged(out):
                results.append(NotebookResult(nb, out, "cached", 0.0, params=all_params))
                if progress:
                    print(f"  [cached] {rel}", flush=True)
                continue
            if not cache_checked:
                default_store().check_writable()  # one sentence before the first run, not after it
                cache_checked = True
            out.with_suffix(".stamp.json").unlink(missing_ok=True)  # the separate stamp of older versions
            if progress:
                print(f"  [run]    {rel} (scale={scale}) ...", flush=True)
            res = _execute(pm, nb, out, rel.as_posix(), all_params, stamp, kernel=kernel, scale=scale)
        if progress:
            tag = "ok" if res.status == "ok" else "FAILED"
            print(f"  [{tag:<6}] {rel} in {res.seconds:.1f} s" + (f": {res.error}" if res.error else ""), flush=True)
        results.append(res)
    return results


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


def _execute(pm: Any, nb: Path, out: Path, rel: str, params: dict[str, Any], stamp: dict, *, kernel: str,
             scale: str) -> NotebookResult:
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
           STAGING_ENV: str(staging), reads.LOG_ENV: str(log), tracing.LOG_ENV: str(trace_log),
           ACCESS_LOG_ENV: str(store_log),
           reads.ROOTS_ENV: os.pathsep.join(_read_roots(params))}
    try:
        with _environ(**env):
            try:
                # the parameters are written by us as Python literals; papermill translates none of them
                source = inject(nbformat.read(str(nb), as_version=4), params)
                source = nbformat.from_dict(nbformat.validator.normalize(source)[1])  # cell ids: no warning
                pm.execute_notebook(
                    source, str(tmp), parameters=None, kernel_name=kernel, cwd=str(nb.parent),
                    progress_bar=False, log_output=False,
                    # a clean terminal: the kernel's "running over TCP without encryption" notice is not
                    # the reader's business (its errors still show)
                    extra_arguments=["--IPKernelApp.log_level=ERROR"],
                )
                records = read_records(staging, scale=scale)
                for record in records:
                    record["notebook"] = rel  # the page it belongs to, whatever the kernel's environment said
                _finish(tmp, out, "ok", stamp, claims=records, read=reads.read_log(log), source=nb,
                        code=tracing.read_log(trace_log), cache=reads.read_log(store_log))
                return NotebookResult(nb, out, "ok", time.perf_counter() - t0, params=params)
            except Exception as exc:  # noqa: BLE001 - report every failure by name and go on
                error = str(exc) if isinstance(exc, EnsdivError) else _error_of(exc)
                if not tmp.exists():  # nothing executed: the copy says so; an older one must not pass for it
                    shutil.copyfile(nb, tmp)
                _finish(tmp, out, "failed", stamp, error=error, source=nb)  # the executed copy keeps the error
                return NotebookResult(nb, out, "failed", time.perf_counter() - t0, error, params)
    finally:
        tmp.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)


def cache_entries(scale: str) -> list[str]:
    """The store entries the finished pages of ``scale`` loaded or saved (paths below the store), from their
    executed copies: what ``ensdiv cache export`` bundles."""
    folder = build_dir() / "executed" / scale
    found: set[str] = set()
    for path in folder.rglob("*.ipynb") if folder.is_dir() else []:
        meta = _meta_of(path)
        if meta.get("status") == "ok" and isinstance(meta.get("cache"), list):
            found.update(str(p) for p in meta["cache"])
    return sorted(found)


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


_SITE_MARKER = ".ensdiv-site.json"


def book_config(src: Path, out_dir: Path, *, local_mathjax: bool = False) -> Path:
    """The book's ``_config.yml`` as it is rendered: with the repository and launch buttons when
    ``$ENSDIV_REPOSITORY_URL`` names the book's repository, without them otherwise, and with MathJax
    served from the site itself (``_ensdiv_static/mathjax``, see :func:`mathjax_source`) when
    ``local_mathjax`` (written to ``out_dir/_config.rendered.yml``, only when its content changes)."""
    cfg = yaml.safe_load(src.read_text()) or {}
    if local_mathjax:  # a relative mathjax_path is read below the static folders (_static of the site)
        sphinx = dict(cfg.get("sphinx") or {})
        config = dict(sphinx.get("config") or {})
        config["mathjax_path"] = f"mathjax/{_MATHJAX_ENTRY}"
        config["html_static_path"] = [*config.get("html_static_path", []), _STATIC]
        sphinx["config"] = config
        cfg["sphinx"] = sphinx
    url = os.environ.get("ENSDIV_REPOSITORY_URL", "").strip()
    html = dict(cfg.get("html") or {})
    if url:
        cfg["repository"] = {"url": url, "path_to_book": "", "branch": os.environ.get("ENSDIV_REPOSITORY_BRANCH",
                                                                                     "main")}
        cfg["launch_buttons"] = {"notebook_interface": "classic", "binderhub_url": "https://mybinder.org",
                                 "colab_url": "https://colab.research.google.com"}
        html.update(use_repository_button=True, use_issues_button=True)
    else:
        cfg.pop("repository", None)
        cfg.pop("launch_buttons", None)
        html.update(use_repository_button=False, use_issues_button=False)
    cfg["html"] = html
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "_config.rendered.yml"
    text = yaml.safe_dump(cfg, sort_keys=False)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
    return out


def _stage(site: Path, files: dict[Path, Path], scale: str) -> bool:
    """Make ``site`` hold exactly ``files`` (``{relative path: source}``) and return whether the
    previous staging was of another scale.

    A file whose bytes changed is written afresh, so its modification time is *now* and Sphinx, which
    re-reads only sources newer than its last build, re-renders it (``copy2`` would keep the executed
    copy's old time, and a page of another scale would survive). An unchanged file keeps its time, so
    an unchanged page is not re-rendered. ``site`` must be empty or a staging folder of ours (it holds
    our marker file); nothing else is deleted.
    """
    marker = site / _SITE_MARKER
    # a staging folder of an ensdiv older than the marker: it holds this book's configuration files
    legacy = site.is_dir() and all(
        (site / n).is_file() and Path(n) in files and (site / n).read_bytes() == files[Path(n)].read_bytes()
        for n in ("_config.yml", "_toc.yml"))
    if site.exists() and not marker.is_file() and not legacy and (not site.is_dir() or any(site.iterdir())):
        raise EnsdivError(
            f"{site} exists but is not a staging folder of `ensdiv book` (it lacks {_SITE_MARKER}), so it is "
            "not overwritten; move it away or set ENSDIV_BUILD to another folder."
        )
    previous = None
    if marker.is_file():
        with contextlib.suppress(OSError, ValueError, AttributeError):
            previous = json.loads(marker.read_text()).get("scale")
    site.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"scale": scale, "staging": "ensdiv book"}))
    wanted = {site / rel for rel in files}
    for path in sorted(site.rglob("*"), reverse=True):  # children before their folders
        if path == marker or path in wanted:
            continue
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()) and not any(w.is_relative_to(path) for w in wanted):
                path.rmdir()
        else:
            path.unlink()
    for rel, src in files.items():
        dst = site / rel
        data = src.read_bytes()
        if dst.is_file() and dst.read_bytes() == data:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(dst.name + ".staging")
        tmp.write_bytes(data)
        tmp.replace(dst)
        now = time.time()
        os.utime(dst, (now, now))
    return previous is not None and previous != scale


def _tree(folder: Path, rel: Path) -> dict[Path, Path]:
    if not folder.is_dir():
        return {}
    return {rel / p.relative_to(folder): p for p in folder.rglob("*") if p.is_file()}


# Offline math: MathJax 3's es5 bundle (``make setup`` fetches the npm package ``mathjax@3``). Its files are
# staged into _ensdiv_static/mathjax, not into _static, where Jupyter Book would add every .js file to
# every page.
_MATHJAX_ENTRY = "tex-mml-chtml.js"
_STATIC = "_ensdiv_static"


def mathjax_source() -> Path | None:
    """The local MathJax 3 ``es5`` folder the book serves math from: ``$ENSDIV_MATHJAX`` if set, else
    ``<project>/.cache/mathjax/es5``; None when it lacks ``tex-mml-chtml.js`` (pages then load MathJax
    from the CDN, Sphinx's default)."""
    folder = Path(os.environ.get("ENSDIV_MATHJAX") or project_root() / ".cache" / "mathjax" / "es5")
    return folder if (folder / _MATHJAX_ENTRY).is_file() else None


_IMAGE_TYPES = {"image/png": ".png", "image/jpeg": ".jpg", "image/svg+xml": ".svg"}


def first_image(notebook: Path) -> tuple[bytes, str] | None:
    """The first image output of an executed notebook that ran to the end (``(bytes, suffix)``), or None:
    no copy, a failed run, or no image."""
    try:
        nb = json.loads(notebook.read_text())
    except (OSError, ValueError):
        return None
    if nb.get("metadata", {}).get("ensdiv", {}).get("status") != "ok":
        return None
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            for mime, suffix in _IMAGE_TYPES.items():
                data = out.get("data", {}).get(mime)
                if data:
                    text = "".join(data) if isinstance(data, list) else data
                    return (text.encode() if mime == "image/svg+xml" else base64.b64decode(text)), suffix
    return None


_PVTR = "## Paper vs this run"


def _present(executed: Path, page: PageRun, out: Path) -> Path:
    """The copy of an executed notebook the book renders (written to ``out``): the answer first — a verdict box
    from the page's claim records under its title, linked to its "Paper vs this run" heading (given a label) —
    the claim cell's code folded (``hide-input``: its verdict and tables stay shown) and the injected
    parameters cell removed (the page's own ``parameters`` cell says what it declares)."""
    nb = json.loads(executed.read_text())
    cells = nb.get("cells", [])
    target = f"pvtr-{slug(Path(page.notebook).with_suffix('').as_posix())}"
    labelled = False
    for cell in cells:
        text = "".join(cell.get("source", []))
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if cell.get("cell_type") == "markdown" and _PVTR in text and not labelled:
            cell["source"] = text.replace(_PVTR, f"({target})=\n{_PVTR}", 1)
            labelled = True
        elif cell.get("cell_type") == "code" and "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
        elif cell.get("cell_type") == "code" and "report.claim(" in text and "hide-input" not in tags:
            tags.append("hide-input")
    box = verdict_box(page, target=target if labelled else None)
    if box and cells:
        at = 1 if cells[0].get("cell_type") == "markdown" else 0
        cells.insert(at, {"cell_type": "markdown", "id": f"ensdiv-verdict-{target}"[:64],
                          "metadata": {"tags": ["ensdiv-verdict"]}, "source": box})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return out


def _chapter_pages(files: dict[Path, Path], pages: list[PageRun], scale: str, executed: Path) -> dict[Path, Path]:
    """The generated part of every chapter landing page that asks for it: ``book/<chapter>.md`` including
    ``_generated/<chapter>.md`` gets that file (the chapter's verdicts, :func:`ensdiv.report.chapter_summary`)
    and ``_generated/<chapter>-key.<ext>``, the first image of its key page (:data:`KEY_FIGURES`)."""
    out = build_dir() / "generated"
    staged: dict[Path, Path] = {}
    names = {p.notebook for p in pages}
    for rel in sorted(files):
        chapter = rel.stem
        if rel.parent != Path("book") or rel.suffix != ".md":
            continue
        if f"_generated/{chapter}.md" not in files[rel].read_text(encoding="utf-8"):
            continue
        out.mkdir(parents=True, exist_ok=True)
        key = KEY_FIGURES.get(chapter)
        key = key if key in names else None
        image = first_image(executed / key) if key else None
        thumbnail = None
        if image:
            name = f"{chapter}-key{image[1]}"
            (out / name).write_bytes(image[0])
            staged[Path("book") / "_generated" / name] = out / name
            thumbnail = f"/book/_generated/{name}"
        page = out / f"{chapter}.md"
        page.write_text(chapter_summary(scale, chapter=chapter, pages=pages, key_page=key, thumbnail=thumbnail,
                                        claims_doc="book/claims" if Path("book/claims.md") in files else None))
        staged[Path("book") / "_generated" / f"{chapter}.md"] = page
    return staged


@contextlib.contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    """One ``ensdiv book`` at a time per build folder: an exclusive, non-blocking lock on
    ``<folder>/.book.lock``, released when the build ends (or its process dies).

    Raises:
        EnsdivError: another build holds it (one sentence naming the folder and its process).
    """
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".book.lock", "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise EnsdivError(f"Another `ensdiv book` (process {holder}) is building into {folder}; wait for it to "
                              "finish or stop it.") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _jupyter_book() -> list[str]:
    """The ``jupyter-book`` command of this environment."""
    jb = Path(sys.executable).parent / "jupyter-book"
    return [str(jb if jb.exists() else Path(shutil.which("jupyter-book") or "jupyter-book"))]


def _run_group(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a process group of its own and, if this process is interrupted (Ctrl-C, or a SIGTERM the
    ``ensdiv`` command turns into one), end that whole group before going on: no orphan keeps writing."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate()
    except BaseException:
        end_process_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`KeyboardInterrupt` as Ctrl-C does, so every
    ``finally`` runs (partial notebooks and staging removed, locks released, jupyter-book's process group
    ended); when the block ends on an interrupt, the processes this one started (notebook kernels, the
    zoo's training workers) are ended too. The ``ensdiv`` command wraps ``run`` and ``book`` in it."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    except KeyboardInterrupt:
        _end_children()
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _end_children(grace: float = 5.0) -> None:
    """SIGTERM every live descendant of this process, then SIGKILL those still alive after ``grace`` s."""
    import psutil

    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=grace)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


def end_process_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session``), SIGKILL it after ``grace``
    seconds."""
    import signal

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def build_book(
    *, scale: str = "cpu", force: bool = False, html_only: bool = False, root: Path | None = None
) -> tuple[list[NotebookResult], Path]:
    """Run every notebook of ``_toc.yml`` at ``scale``, then render the book into ``_build/html``.

    The book is rendered from a staging folder (``$ENSDIV_BUILD/site``) holding the configuration, the
    prose chapters and the *executed* notebooks, with notebook execution off. Every page comes from
    ``scale``: staged files that changed get a fresh modification time (Sphinx re-renders them), and a
    build at another scale than the previous one starts Sphinx from scratch.

    Args:
        root: the book's folder (``_config.yml``, ``_toc.yml``, ``book/``, notebooks); default the project.
    """
    check_scale(scale)
    with _build_lock(build_dir()):
        return _build_book(scale=scale, force=force, html_only=html_only, root=root)


def _build_book(*, scale: str, force: bool, html_only: bool, root: Path | None) -> tuple[list[NotebookResult], Path]:
    root = Path(root or project_root()).resolve()
    notebooks = toc_notebooks(root=root)
    t_run = time.perf_counter()
    results = [] if html_only else run_notebooks(notebooks, scale=scale, force=force, root=root)
    executed = build_dir() / "executed" / scale
    if results:  # what this build ran and for how long (benchmarks/bench_book.py reads it)
        timings = {"scale": scale, "run_s": round(time.perf_counter() - t_run, 1),
                   "notebooks": [{"notebook": r.path.relative_to(root).as_posix(), "status": r.status,
                                  "seconds": round(r.seconds, 1)} for r in results]}
        (build_dir() / f"timings-{scale}.json").write_text(json.dumps(timings, indent=1))
    mathjax = mathjax_source()
    files: dict[Path, Path] = {Path(name): root / name for name in ("_config.yml", "_toc.yml")}
    files[Path("_config.yml")] = book_config(root / "_config.yml", build_dir(), local_mathjax=mathjax is not None)
    files.update(_tree(root / "book", Path("book")))
    # every page as its executed copy shows it (status and promoted records), whatever this build ran
    pages = [page_run(executed / nb.relative_to(root), nb.relative_to(root).as_posix()) for nb in notebooks]
    presented = build_dir() / "presented" / scale
    for nb, page in zip(notebooks, pages, strict=True):
        rel = nb.relative_to(root)
        src = executed / rel
        files[rel] = _present(src, page, presented / rel) if src.exists() else nb
    files.update(_tree(root / "benchmarks" / "results", Path("benchmarks") / "results"))
    files.update(_tree(root / "book" / "_static", Path("_static")))  # the book's CSS (verdict box, badges)
    if mathjax is not None:
        files.update(_tree(mathjax, Path(_STATIC) / "mathjax"))
    if Path("book/claims.md") in files:  # the claims page is generated from the pages' claim records
        page = build_dir() / "claims.md"
        page.write_text(claims_page(scale, pages))
        files[Path("book/claims.md")] = page
    files.update(_chapter_pages(files, pages, scale, executed))
    site = build_dir() / "site"
    other_scale = _stage(site, files, scale)
    out_parent = build_dir().parent if build_dir().name == "_build" else build_dir()
    html = build_dir() / "html" if build_dir().name == "_build" else build_dir() / "_build" / "html"
    if other_scale:  # nothing of the previous scale's environment or pages may survive
        for stale in (html, html.parent / ".doctrees"):
            if stale.is_dir():
                shutil.rmtree(stale)
    cmd = [*_jupyter_book(), "build", str(site), "--path-output", str(out_parent), "--builder", "html",
           "-W", "-n", "--keep-going"]  # warnings fail the build: a broken page is loud
    env = {**os.environ, "NO_COLOR": "1"}
    t_render = time.perf_counter()
    proc = _run_group(cmd, env)
    if results:
        timings["render_s"] = round(time.perf_counter() - t_render, 1)
        (build_dir() / f"timings-{scale}.json").write_text(json.dumps(timings, indent=1))
    log = build_dir() / "jupyter-book.log"
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise EnsdivError(f"Jupyter Book failed to render the book (full log: {log}):\n{tail}")
    return results, html / "index.html"
