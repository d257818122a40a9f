"""Execute notebooks with papermill and build the book from the executed copies.

``ensdiv run`` and ``ensdiv book`` come here. Notebooks are executed into
``_build/executed/<scale>/<same relative path>``. Each executed copy carries, in its own metadata
(``metadata.ensdiv``), the stamp of what it was run from: the hash of the source notebook, the
parameters, the ensdiv package source, the data shipped in ``book/data`` and ``$ENSDIV_DATA`` (its
path and a listing of its top two levels: names, sizes, times). Stamp and notebook are one file,
replaced atomically, so a finished notebook whose inputs did not change is not run again
(``force=True`` re-runs) and a failed copy never passes for a finished one. A lock file per executed
notebook (``<name>.lock``) serialises two runs of the same notebook. One failing notebook is reported
with its error cell; the others still run.

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

import yaml

from ensdiv import chapters
from ensdiv.chapters import zoo
from ensdiv.config import check_scale
from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.paths import build_dir, project_root
from ensdiv.report import chapter_summary, claims_page
from ensdiv.store import default_store

__all__ = ["KEY_FIGURES", "NotebookResult", "run_notebooks", "toc_notebooks", "build_book", "notebook_parameters",
           "check_parameters", "mathjax_source"]

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


def _package_hash() -> str:
    root = Path(__file__).resolve().parents[1]  # the whole ensdiv package, not only the chapters
    h = hashlib.sha256()
    for py in sorted(root.rglob("*.py")):
        h.update(str(py.relative_to(root)).encode())
        h.update(py.read_bytes())
    return h.hexdigest()


def notebook_parameters(path: Path) -> dict[str, Any]:
    """The parameters a notebook declares: the names assigned in its cell tagged ``parameters``.

    Parsed with :mod:`ast` rather than papermill's line parser, which gives up on a line whose comment
    contains ``=`` (and then silently accepts any parameter name).

    Returns:
        ``{name: default value}`` (the literal, or the source text when it is not a literal).
    """
    import ast

    import nbformat

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


def _stamp_of(path: Path) -> dict | None:
    """The ``ok`` stamp an executed copy carries, or ``None`` (no copy, a failed run, an unreadable file)."""
    try:
        meta = json.loads(path.read_text()).get("metadata", {}).get("ensdiv", {})
    except (OSError, ValueError, AttributeError):
        return None
    return meta.get("stamp") if meta.get("status") == "ok" else None


def _finish(tmp: Path, out: Path, status: str, stamp: dict) -> None:
    """Write the run's status (and, when ``ok``, its stamp) into the executed copy, then move it into
    place atomically: the notebook and its stamp are one file."""
    nb = json.loads(tmp.read_text())
    nb.setdefault("metadata", {})["ensdiv"] = {"status": status, "stamp": stamp if status == "ok" else None}
    tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(out)


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
    base = {"package": _package_hash(), "book_data": _tree_hash(project_root() / "book" / "data"),
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
            if not force and _stamp_of(out) == stamp:
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
            t0 = time.perf_counter()
            tmp = out.with_suffix(f".partial-{os.getpid()}.ipynb")
            # the kernel inherits this process's environment: rendered pages get one line per finished
            # unit of work instead of progress bars (ensdiv.progress), unless the caller chose otherwise
            chosen = os.environ.get("ENSDIV_PROGRESS")
            os.environ["ENSDIV_PROGRESS"] = chosen or "lines"
            os.environ["ENSDIV_NOTEBOOK"] = rel.as_posix() if isinstance(rel, Path) else str(rel)  # claim records
            try:
                pm.execute_notebook(
                    str(nb), str(tmp), parameters=all_params, kernel_name=kernel, cwd=str(nb.parent),
                    progress_bar=False, log_output=False,
                )
                _finish(tmp, out, "ok", stamp)
                res = NotebookResult(nb, out, "ok", time.perf_counter() - t0, params=all_params)
            except Exception as exc:  # noqa: BLE001 - report every failure by name and go on
                if tmp.exists():
                    _finish(tmp, out, "failed", stamp)  # keep the executed copy with the error for inspection
                else:  # nothing executed: an older copy must not pass for this run's
                    out.unlink(missing_ok=True)
                res = NotebookResult(nb, out, "failed", time.perf_counter() - t0, _error_of(exc), all_params)
            finally:
                os.environ.pop("ENSDIV_NOTEBOOK", None)
                if chosen is None:
                    os.environ.pop("ENSDIV_PROGRESS", None)
        if progress:
            tag = "ok" if res.status == "ok" else "FAILED"
            print(f"  [{tag:<6}] {rel} in {res.seconds:.1f} s" + (f": {res.error}" if res.error else ""), flush=True)
        results.append(res)
    return results


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


def _chapter_pages(files: dict[Path, Path], notebooks: list[str], failed: dict[str, str], scale: str,
                   executed: Path) -> dict[Path, Path]:
    """The generated part of every chapter landing page that asks for it: ``book/<chapter>.md`` including
    ``_generated/<chapter>.md`` gets that file (the chapter's verdicts, :func:`ensdiv.report.chapter_summary`)
    and ``_generated/<chapter>-key.<ext>``, the first image of its key page (:data:`KEY_FIGURES`)."""
    out = build_dir() / "generated"
    staged: dict[Path, Path] = {}
    for rel in sorted(files):
        chapter = rel.stem
        if rel.parent != Path("book") or rel.suffix != ".md":
            continue
        if f"_generated/{chapter}.md" not in files[rel].read_text(encoding="utf-8"):
            continue
        out.mkdir(parents=True, exist_ok=True)
        key = KEY_FIGURES.get(chapter)
        key = key if key in notebooks else None
        image = first_image(executed / key) if key and key not in failed else None
        thumbnail = None
        if image:
            name = f"{chapter}-key{image[1]}"
            (out / name).write_bytes(image[0])
            staged[Path("book") / "_generated" / name] = out / name
            thumbnail = f"/book/_generated/{name}"
        page = out / f"{chapter}.md"
        page.write_text(chapter_summary(scale, chapter=chapter, notebooks=notebooks, failed=failed, key_page=key,
                                        thumbnail=thumbnail,
                                        claims_doc="book/claims" if Path("book/claims.md") in files else None))
        staged[Path("book") / "_generated" / f"{chapter}.md"] = page
    return staged


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
    for nb in notebooks:
        rel = nb.relative_to(root)
        src = executed / rel
        files[rel] = src if src.exists() else nb
    files.update(_tree(root / "benchmarks" / "results", Path("benchmarks") / "results"))
    if mathjax is not None:
        files.update(_tree(mathjax, Path(_STATIC) / "mathjax"))
    failed = {r.path.relative_to(root).as_posix(): r.error or "" for r in results if r.status == "failed"}
    names = [nb.relative_to(root).as_posix() for nb in notebooks]
    if Path("book/claims.md") in files:  # the claims page is generated from this build's claim records
        page = build_dir() / "claims.md"
        page.write_text(claims_page(scale, notebooks=names, failed=failed))
        files[Path("book/claims.md")] = page
    files.update(_chapter_pages(files, names, failed, scale, executed))
    site = build_dir() / "site"
    other_scale = _stage(site, files, scale)
    out_parent = build_dir().parent if build_dir().name == "_build" else build_dir()
    html = build_dir() / "html" if build_dir().name == "_build" else build_dir() / "_build" / "html"
    if other_scale:  # nothing of the previous scale's environment or pages may survive
        for stale in (html, html.parent / ".doctrees"):
            if stale.is_dir():
                shutil.rmtree(stale)
    jb = Path(sys.executable).parent / "jupyter-book"
    if not jb.exists():
        jb = Path(shutil.which("jupyter-book") or "jupyter-book")
    cmd = [str(jb), "build", str(site), "--path-output", str(out_parent), "--builder", "html",
           "-W", "-n", "--keep-going"]  # warnings fail the build: a broken page is loud
    env = {**os.environ, "NO_COLOR": "1"}
    t_render = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if results:
        timings["render_s"] = round(time.perf_counter() - t_render, 1)
        (build_dir() / f"timings-{scale}.json").write_text(json.dumps(timings, indent=1))
    log = build_dir() / "jupyter-book.log"
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise EnsdivError(f"Jupyter Book failed to render the book (full log: {log}):\n{tail}")
    return results, html / "index.html"
