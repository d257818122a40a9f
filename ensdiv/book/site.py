"""The rendered book: a staging folder of the configuration, the prose and the *executed* notebooks as the
reader sees them (the verdict box first, the claim cell folded, papermill's cell removed), the generated
claims page and chapter summaries, and Jupyter Book run over it with notebook execution off.

Every page comes from the scale of the build: staged files that changed get a fresh modification time
(Sphinx re-renders them) and a build at another scale than the previous one starts Sphinx from scratch.
One ``ensdiv book`` at a time builds into a build folder (a lock naming its process).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from ensdiv.book.processes import run_group
from ensdiv.book.reference import reference_speed
from ensdiv.book.run import NotebookResult, page_stamp, run_notebooks, toc_notebooks, usable_build_folder
from ensdiv.book.stamps import meta_of, page_run, rerun_reason
from ensdiv.bundles import imported_entries
from ensdiv.config import check_scale
from ensdiv.errors import EnsdivError
from ensdiv.paths import build_dir, project_root
from ensdiv.report import PageRun, chapter_summary, claims_page, evidence_clashes, slug, verdict_box
from ensdiv.store import default_store

__all__ = ["KEY_FIGURES", "build_book", "book_config", "mathjax_source", "first_image"]

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

_SITE_MARKER = ".ensdiv-site.json"

def book_config(src: Path, out_dir: Path, *, local_mathjax: bool = False) -> Path:
    """The book's ``_config.yml`` as it is rendered: with the repository and launch buttons when
    ``$ENSDIV_REPOSITORY_URL`` names the book's repository, without them otherwise, and with MathJax
    served from the site itself (``_ensdiv_static/mathjax``, see :func:`mathjax_source`) when
    ``local_mathjax`` (written to ``out_dir/_config.rendered.yml``, only when its content changes)."""
    cfg = yaml.safe_load(src.read_text()) or {}
    # the book's own static files (its CSS; MathJax below) are served from _ensdiv_static and named one by one:
    # a `_static` folder in the site would make Jupyter Book add every .js and .css file of every static
    # folder to every page — MathJax's dozens of bundles included, which then fight each other
    sphinx = dict(cfg.get("sphinx") or {})
    config = dict(sphinx.get("config") or {})
    config["html_static_path"] = [*config.get("html_static_path", []), _STATIC]
    # only the style sheets the site stages (a book without ``book/_static`` would ask for a missing file)
    styles = [name for name in BOOK_CSS if (src.parent / "book" / "_static" / name).is_file()]
    config["html_css_files"] = [*config.get("html_css_files", []), *styles]
    if local_mathjax:  # a relative mathjax_path is read below the static folders
        config["mathjax_path"] = f"mathjax/{_MATHJAX_ENTRY}"
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
#: the book's style sheets (``book/_static``), staged into :data:`_STATIC` and added to every page by name
BOOK_CSS = ("ensdiv.css",)

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

def _present(executed: Path, page: PageRun, out: Path, *, provenance: str = "") -> Path:
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
    if provenance:  # a page without claims shows where its numbers came from too
        box = f"{box}\n\n{provenance}" if box else provenance
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

def _explored(stamp: object) -> str:
    """The ``-p`` parameters a page was last run with ("" for a page run as the book runs it)."""
    params = stamp.get("params") if isinstance(stamp, dict) else None
    extra = {k: v for k, v in (params or {}).items() if k != "scale"} if isinstance(params, dict) else {}
    return ", ".join(f"`-p {k} {v!r}`" for k, v in sorted(extra.items()))


def _exploration(stamp: object) -> str:
    """The verdict box's line for a page last run with ``-p`` parameters (an exploration, not the book's preset);
    "" for a page run as the book runs it."""
    shown = _explored(stamp)
    if not shown:
        return ""
    return (f"**Exploration.** This page was last run with {shown}, not with the book's preset; "
            "`ensdiv book` runs it again as the book does.")


def _provenance(used: object, imported: dict[str, dict]) -> str:
    """The verdict box's line for a page that used cache entries imported from a bundle ("" when it used none):
    how many, from which bundles (SHA-256, scale, date). A bundle is trusted input, like code."""
    count, shown = _imports(used, imported)
    if not count:
        return ""
    return (f"**Provenance.** {count} of the cache entries this page used were imported, not computed "
            f"here: {shown}. Their numbers are the exporting build's.")


def _imports(used: object, imported: dict[str, dict]) -> tuple[int, str]:
    """How many of the entries a page ``used`` were imported, and from which bundles (SHA-256, scale, date)."""
    hits = [imported[p] for p in (used if isinstance(used, list) else []) if p in imported]
    bundles = sorted({(str(h.get("bundle") or "")[:12], str(h.get("scale")), str(h.get("imported"))[:10])
                      for h in hits})
    return len(hits), "; ".join(f"bundle {b} ({s} scale, imported {d})" for b, s, d in bundles)


def _row_note(stamp: object, used: object, imported: dict[str, dict]) -> str:
    """What the claims page adds to each row of a page: the ``-p`` parameters it was run with and the bundles
    whose entries it used ("" for a page run as the book runs it, on entries computed here)."""
    count, shown = _imports(used, imported)
    explored = f"run with {_explored(stamp)}" if _explored(stamp) else ""
    entries = f"{count} cache {'entry' if count == 1 else 'entries'} imported from {shown}" if count else ""
    return "; ".join(x for x in (explored, entries) if x)


#: where ``benchmarks/bench_book.py --compare`` records two independent runs' verdicts, claim by claim
STABILITY = Path("benchmarks/results/book.json")


def moved_claims(scale: str, root: Path | None = None) -> dict[tuple[str, str, str], str]:
    """The claims whose verdict moved between two independent runs of the book at ``scale`` (the comparison
    ``benchmarks/bench_book.py --compare`` recorded under ``verdict_stability``), by ``(paper, item, claim_id)``,
    each with the phrase its page and the claims page show: *fragile* when a check sat near its bound in one of the
    runs, the reason otherwise. ``{}`` when no comparison at ``scale`` is recorded or the record cannot be read.

    >>> moved_claims("smoke", root=Path("/nonexistent"))
    {}
    """
    try:
        record = json.loads((Path(root or project_root()) / STABILITY).read_text()).get("verdict_stability") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    if not isinstance(record, dict) or record.get("scale") != scale:
        return {}
    out = {}
    for row in record.get("moved") or []:
        if not isinstance(row, dict) or not row.get("paper") or row.get("why") == "only in one run":
            continue
        why = str(row.get("why") or "")
        head = "fragile: moved in an independent run" if why.startswith("near its boundary") else \
            "moved in an independent run"
        out[(row["paper"], row.get("item") or "", row.get("claim_id") or "")] = \
            f"{head} ({row.get('a')} → {row.get('b')}; {why})"
    return out


def _mark_moved(page: PageRun, moved: dict[tuple[str, str, str], str]) -> PageRun:
    """``page`` with each claim record that moved in the recorded independent run carrying its ``moved`` phrase."""
    if not moved or not page.records:
        return page
    records = [{**r, "moved": moved[k]} if (k := (r["paper"], r["item"], r.get("claim_id") or "")) in moved else r
               for r in page.records]
    return dataclasses.replace(page, records=records)


def _page(executed: Path, notebook: str, scale: str) -> PageRun:
    """:func:`ensdiv.book.stamps.page_run`, with a malformed record a failed page rather than the book's end."""
    try:
        return page_run(executed, notebook, scale=scale)
    except EnsdivError as exc:
        return PageRun(notebook, "failed", str(exc))


def page_states(scale: str, root: Path | None = None) -> list[tuple[str, str, str]]:
    """``(page, state, why)`` of every page of ``_toc.yml`` at ``scale`` that is not current: ``failed`` (its
    last run failed, or its copy is unreadable or of another scale) or ``stale`` (a run now would re-run it, and
    why); what ``ensdiv book --html-only`` names."""
    root = Path(root or project_root()).resolve()
    executed = build_dir() / "executed" / scale
    out = []
    for nb in toc_notebooks(root=root):
        rel = nb.relative_to(root)
        page = _page(executed / rel, rel.as_posix(), scale)
        if page.status == "failed":
            out.append((rel.as_posix(), "failed", page.error.strip().splitlines()[0] if page.error else ""))
            continue
        why = rerun_reason(executed / rel, page_stamp(nb, {"scale": scale}))
        if why:
            out.append((rel.as_posix(), "stale" if page.status == "ok" else "not run", why))
    return out


def build_book(
    *, scale: str = "cpu", force: bool = False, html_only: bool = False, root: Path | None = None, jobs: int = 1
) -> tuple[list[NotebookResult], Path]:
    """Run every notebook of ``_toc.yml`` at ``scale``, then render the book into ``_build/html``.

    The book is rendered from a staging folder (``$ENSDIV_BUILD/site``) holding the configuration, the
    prose chapters and the *executed* notebooks, with notebook execution off. Every page comes from
    ``scale``: staged files that changed get a fresh modification time (Sphinx re-renders them), and a
    build at another scale than the previous one starts Sphinx from scratch.

    Args:
        root: the book's folder (``_config.yml``, ``_toc.yml``, ``book/``, notebooks); default the project.
        jobs: pages run at once (:func:`ensdiv.book.run.run_notebooks`).
    """
    check_scale(scale)
    with _build_lock(usable_build_folder(build_dir())):
        return _build_book(scale=scale, force=force, html_only=html_only, root=root, jobs=jobs)

def _build_book(*, scale: str, force: bool, html_only: bool, root: Path | None,
                jobs: int = 1) -> tuple[list[NotebookResult], Path]:
    root = Path(root or project_root()).resolve()
    notebooks = toc_notebooks(root=root)
    reference = None if html_only else reference_speed()  # a few seconds: this machine's speed, for the record
    if reference:
        print(f"Reference workload: {reference['img_s']:.0f} img/s on one thread"
              f" ({reference['speed']:.2f}x the reference processor)", flush=True)
    t_run = time.perf_counter()
    results = [] if html_only else run_notebooks(notebooks, scale=scale, force=force, root=root, jobs=jobs,
                                                 img_s=reference["img_s"] if reference else None)
    executed = build_dir() / "executed" / scale
    if results:  # what this build ran and for how long (benchmarks/bench_book.py reads it)
        timings = {"scale": scale, "jobs": jobs, "reference": reference,
                   "run_s": round(time.perf_counter() - t_run, 1),
                   "notebooks": [{"notebook": r.path.relative_to(root).as_posix(), "status": r.status,
                                  "seconds": round(r.seconds, 1)} for r in results]}
        (build_dir() / f"timings-{scale}.json").write_text(json.dumps(timings, indent=1))
    mathjax = mathjax_source()
    files: dict[Path, Path] = {Path(name): root / name for name in ("_config.yml", "_toc.yml")}
    files[Path("_config.yml")] = book_config(root / "_config.yml", build_dir(), local_mathjax=mathjax is not None)
    files.update(_tree(root / "book", Path("book")))
    # every page as its executed copy shows it (status and promoted records), whatever this build ran; a copy
    # that cannot be read or presented fails its page in one sentence, and the book goes on
    moved = moved_claims(scale, root)  # verdicts a recorded second run did not keep: marked on both pages
    pages = [_mark_moved(_page(executed / nb.relative_to(root), nb.relative_to(root).as_posix(), scale), moved)
             for nb in notebooks]
    imported = imported_entries(default_store())
    presented = build_dir() / "presented" / scale
    for i, (nb, page) in enumerate(zip(notebooks, pages, strict=True)):
        rel = nb.relative_to(root)
        src = executed / rel
        try:
            meta = meta_of(src) if src.exists() else {}
            row_note = _row_note(meta.get("stamp"), meta.get("cache"), imported)
            if row_note:  # the claims page marks its rows too
                pages[i] = dataclasses.replace(page, note=row_note)
            note = "\n\n".join(x for x in (_exploration(meta.get("stamp")), _provenance(meta.get("cache"), imported))
                                 if x)
            files[rel] = _present(src, page, presented / rel, provenance=note) if src.exists() else nb
        except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
            pages[i] = PageRun(page.notebook, "failed", f"Its executed copy {src} could not be presented "
                                                        f"({type(exc).__name__}); run the page again.")
            files[rel] = nb
    clashes = evidence_clashes([(p.notebook, p.records) for p in pages if p.status == "ok"])
    if clashes:  # one piece of evidence counted by two claims: the book's verdicts would count it twice
        raise EnsdivError(clashes[0])
    files.update(_tree(root / "benchmarks" / "results", Path("benchmarks") / "results"))
    files.update(_tree(root / "book" / "_static", Path(_STATIC)))  # the book's CSS (verdict box, badges)
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
    proc = run_group(cmd, env)
    if results:
        timings["render_s"] = round(time.perf_counter() - t_render, 1)
        (build_dir() / f"timings-{scale}.json").write_text(json.dumps(timings, indent=1))
    log = build_dir() / "jupyter-book.log"
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise EnsdivError(f"Jupyter Book failed to render the book (full log: {log}):\n{tail}")
    return results, html / "index.html"
