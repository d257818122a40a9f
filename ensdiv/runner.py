"""Execute notebooks with papermill and build the book from the executed copies.

``ensdiv run`` and ``ensdiv book`` come here. Notebooks are executed into
``_build/executed/<scale>/<same relative path>``; a stamp file next to each executed copy records
the hash of the source notebook, the parameters and the ensdiv package source, so a finished
notebook whose inputs did not change is not run again (``force=True`` re-runs). One failing
notebook is reported with its error cell; the others still run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ensdiv.config import check_scale
from ensdiv.errors import EnsdivError
from ensdiv.paths import build_dir, project_root

__all__ = ["NotebookResult", "run_notebooks", "toc_notebooks", "build_book", "notebook_parameters"]


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
    root = Path(__file__).resolve().parent
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


def toc_notebooks(toc: Path | None = None) -> list[Path]:
    """Every notebook listed in ``_toc.yml``, in book order."""
    toc = toc or project_root() / "_toc.yml"
    spec = yaml.safe_load(toc.read_text())
    found: list[Path] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            f = node.get("file")
            if f and (project_root() / f"{f}.ipynb").exists():
                found.append((project_root() / f"{f}.ipynb").resolve())
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


def run_notebooks(
    paths: list[str | Path],
    *,
    scale: str = "cpu",
    params: dict[str, Any] | None = None,
    out_root: Path | None = None,
    force: bool = False,
    kernel: str = "python3",
    progress: bool = True,
) -> list[NotebookResult]:
    """Execute notebooks at ``scale`` with extra parameters into ``out_root`` (``_build/executed/<scale>``).

    Raises:
        EnsdivError: unknown scale, missing notebook, or a parameter no notebook declares —
            checked for every notebook before any runs.
    """
    import papermill as pm

    check_scale(scale)
    params = dict(params or {})
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
    out_root = Path(out_root or build_dir() / "executed" / scale)
    pkg = _package_hash()
    results = []
    root = project_root()
    for nb in notebooks:
        rel = nb.relative_to(root) if nb.is_relative_to(root) else Path(nb.name)
        out = out_root / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        stamp_file = out.with_suffix(".stamp.json")
        all_params = {"scale": scale, **params}
        stamp = {"source": _sha(nb.read_bytes()), "params": all_params, "package": pkg}
        if not force and out.exists() and stamp_file.exists():
            try:
                if json.loads(stamp_file.read_text()) == stamp:
                    results.append(NotebookResult(nb, out, "cached", 0.0, params=all_params))
                    if progress:
                        print(f"  [cached] {rel}", flush=True)
                    continue
            except json.JSONDecodeError:
                pass
        stamp_file.unlink(missing_ok=True)
        if progress:
            print(f"  [run]    {rel} (scale={scale}) ...", flush=True)
        t0 = time.perf_counter()
        tmp = out.with_suffix(".partial.ipynb")
        try:
            pm.execute_notebook(
                str(nb), str(tmp), parameters=all_params, kernel_name=kernel, cwd=str(nb.parent),
                progress_bar=False, log_output=False,
            )
            tmp.replace(out)
            stamp_file.write_text(json.dumps(stamp))
            res = NotebookResult(nb, out, "ok", time.perf_counter() - t0, params=all_params)
        except Exception as exc:  # noqa: BLE001 - report every failure by name and go on
            if tmp.exists():
                tmp.replace(out)  # keep the executed copy with the error for inspection
            res = NotebookResult(nb, out, "failed", time.perf_counter() - t0, _error_of(exc), all_params)
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


def build_book(
    *, scale: str = "cpu", force: bool = False, html_only: bool = False
) -> tuple[list[NotebookResult], Path]:
    """Run every notebook of ``_toc.yml`` at ``scale``, then render the book into ``_build/html``.

    The book is rendered from a staging folder (``_build/site``) holding the configuration, the
    prose chapters and the *executed* notebooks, with notebook execution off.
    """
    check_scale(scale)
    root = project_root()
    results = [] if html_only else run_notebooks(toc_notebooks(), scale=scale, force=force)
    site = build_dir() / "site"
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(root / name, site / name)
    shutil.copytree(root / "book", site / "book")
    executed = build_dir() / "executed" / scale
    for nb in toc_notebooks():
        rel = nb.relative_to(root)
        src = executed / rel
        dst = site / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src if src.exists() else nb, dst)
    bench = root / "benchmarks" / "results"
    if bench.exists():
        shutil.copytree(bench, site / "benchmarks" / "results")
    jb = Path(sys.executable).parent / "jupyter-book"
    if not jb.exists():
        jb = Path(shutil.which("jupyter-book") or "jupyter-book")
    out_parent = build_dir().parent if build_dir().name == "_build" else build_dir()
    cmd = [str(jb), "build", str(site), "--path-output", str(out_parent), "--builder", "html",
           "-W", "-n", "--keep-going"]  # warnings fail the build: a broken page is loud
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    log = build_dir() / "jupyter-book.log"
    log.write_text(proc.stdout + proc.stderr)
    html = build_dir() / "html" if build_dir().name == "_build" else build_dir() / "_build" / "html"
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise EnsdivError(f"Jupyter Book failed to render the book (full log: {log}):\n{tail}")
    return results, html / "index.html"
