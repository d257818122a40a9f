"""What the book knows about a page's last run, kept inside its executed copy.

Each executed copy (``_build/executed/<scale>/<notebook>``) carries, in its own metadata
(``metadata.ensdiv``), one record of its last run, written with the notebook in one atomic replace
(:func:`finish`):

- ``status`` (``ok`` or ``failed``) and ``error``;
- ``stamp``: what it was run from: the hash of the source notebook, the parameters, the environment's
  fingerprint (:func:`ensdiv.environment.fingerprint`: the lock file's pins and any departure of the installed
  packages from them), the data shipped in ``book/data`` and ``$ENSDIV_DATA`` (its path and a listing
  of its top two levels: names, sizes, times);
- ``reads``: the data files the run opened and the folders it listed (:mod:`ensdiv.reads`) and a hash of
  their sizes, times and entries, so a file it read changed at any depth, or one added to a folder it listed,
  re-runs the page;
- ``code``: every unit of package code the run executed (:mod:`ensdiv.tracing`) and a hash of each one's
  source without docstrings and comments, so a page re-runs when code it ran changed, and only then;
- ``claims``: the claim records the run wrote, checked and promoted only when it finished;
- ``cache``: the store entries it loaded or saved (what ``ensdiv cache export`` bundles).

A finished copy is reused when its stamp is equal and its reads and code hash as they did
(:func:`stamp_of`, :func:`reads_unchanged`, :func:`code_unchanged`); a failed or unreadable copy never is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from ensdiv import environment, reads, tracing
from ensdiv.book.reference import processor
from ensdiv.errors import EnsdivError
from ensdiv.paths import build_dir, project_root
from ensdiv.report import PageRun, check_record

__all__ = ["DEPENDENCIES", "environment_stamp", "versions", "tree_hash", "data_signature", "meta_of", "stamp_of",
           "reads_unchanged", "code_unchanged", "changed_code", "rerun_reason", "unfinished", "finish", "page_run",
           "cache_entries", "sha"]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

#: The installed packages whose versions a page's record shows (what re-runs it is the whole environment's
#: fingerprint, :func:`environment_stamp`).
DEPENDENCIES = ("torch", "torchvision", "timm", "numpy", "scipy", "pandas", "scikit-learn", "statsmodels",
                "captum", "torchmetrics", "lightning", "torchattacks", "matplotlib", "seaborn", "papermill", "pyyaml")

def environment_stamp() -> str:
    """The part of a page's stamp the environment decides: :func:`ensdiv.environment.fingerprint`."""
    return environment.fingerprint()

def versions() -> dict[str, str | None]:
    import importlib.metadata

    out = {}
    for name in DEPENDENCIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out

def tree_hash(folder: Path) -> str:
    """Hash of every file below ``folder`` (relative paths and contents); ``""`` when it does not exist."""
    if not folder.is_dir():
        return ""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(folder)).encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()

def data_signature(limit: int = 5000) -> dict[str, str]:
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

def meta_of(path: Path) -> dict:
    """The ``metadata.ensdiv`` block of an executed copy (``{}``: no copy or an unreadable file)."""
    try:
        meta = json.loads(path.read_text()).get("metadata", {}).get("ensdiv", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return meta if isinstance(meta, dict) else {}

def stamp_of(path: Path) -> dict | None:
    """The ``ok`` stamp an executed copy carries, or ``None`` (no copy, a failed run, an unreadable file)."""
    meta = meta_of(path)
    return meta.get("stamp") if meta.get("status") == "ok" else None

def reads_unchanged(path: Path) -> bool:
    """Whether the data files and folders the last run of ``path`` read still hash as they did (True when it
    read none); a copy from before files were told apart names only folders (``"folders"``) and is still read."""
    recorded = meta_of(path).get("reads")
    read = recorded.get("paths", recorded.get("folders")) if isinstance(recorded, dict) else None
    if not isinstance(read, list):
        return False
    return reads.signature(read) == recorded.get("hash")

def code_unchanged(path: Path) -> bool:
    """Whether every unit of package code the last run of ``path`` executed still hashes as it did (a copy
    without a code record, from before code tracing or from a failed run, is never reused)."""
    recorded = meta_of(path).get("code")
    if not isinstance(recorded, dict) or not isinstance(recorded.get("units"), list):
        return False
    units = [tuple(u) for u in recorded["units"] if isinstance(u, list | tuple) and len(u) == 2]
    return tracing.combined(tracing.hashes_now(units)) == recorded.get("hash")

def changed_code(path: Path) -> str | None:
    """The first unit of package code the last run of ``path`` used whose source hashes otherwise now
    (``"ensdiv/metrics/diversity.py:disagreement"``), ``"code it used"`` when the copy has no per-unit hashes,
    or ``None`` when every unit hashes as it did."""
    recorded = meta_of(path).get("code")
    if not isinstance(recorded, dict) or not isinstance(recorded.get("units"), list):
        return "code it used (no record of it)"
    units = [tuple(u) for u in recorded["units"] if isinstance(u, list | tuple) and len(u) == 2]
    now = tracing.hashes_now(units)
    if tracing.combined(now) == recorded.get("hash"):
        return None
    before = recorded.get("hashes") if isinstance(recorded.get("hashes"), dict) else {}
    for key in sorted(now):
        if before.get(key) != now[key]:
            file, _, qualname = key.partition("::")
            return f"{tracing.relative(file)}:{qualname}"
    return "code it used"


_STAMP_PARTS = {"source": "the notebook changed", "params": "its parameters changed",
                "seed_base": "the seed base changed", "book_data": "book/data changed", "data": "$ENSDIV_DATA changed"}


def rerun_reason(path: Path, stamp: dict) -> str | None:
    """Why the page whose executed copy is ``path`` must run again under ``stamp``, in a few words (``"torch
    2.4.1 -> 2.5.0"``, ``"ensdiv/metrics/diversity.py:disagreement changed"``), or ``None`` when the copy is
    current (what :func:`stamp_of`, :func:`reads_unchanged` and :func:`code_unchanged` decide together)."""
    if not Path(path).exists():
        return "no executed copy yet"
    meta = meta_of(path)
    if not meta:
        return "its executed copy is unreadable"
    if meta.get("status") != "ok":
        return "its last run failed"
    old = meta.get("stamp") if isinstance(meta.get("stamp"), dict) else {}
    if old.get("environment") != stamp.get("environment"):
        return f"the environment changed ({environment.changes(meta.get('versions'))})"
    for key, why in _STAMP_PARTS.items():
        if old.get(key) != stamp.get(key):
            return why
    if set(old) != set(stamp):
        return "its stamp is of another ensdiv"
    if not reads_unchanged(path):
        return "data it read changed"
    unit = changed_code(path)
    return None if unit is None else f"{unit} changed"


#: How IPython reports ``sys.exit`` in a cell's stream: a line of its own, not the word anywhere in a page's output.
_EXIT_LINE = re.compile(r"^SystemExit(: .*)?$", re.MULTILINE)


def unfinished(nb: dict) -> str | None:
    """Why an executed notebook (its JSON) did not run to its end, in one sentence; ``None`` when every code cell
    with code ran and none ended the run early (a ``SystemExit``: ``sys.exit(0)`` ends papermill's run cleanly)."""
    for i, cell in enumerate(nb.get("cells") or [], 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if not ("".join(source) if isinstance(source, list) else str(source)).strip():
            continue
        for out in cell.get("outputs") or []:
            text = out.get("text", "") if isinstance(out, dict) else ""
            text = "".join(text) if isinstance(text, list) else str(text)
            if isinstance(out, dict) and (out.get("ename") == "SystemExit" or _EXIT_LINE.search(text)):
                return f"cell {i} ended the run early (SystemExit); a page must run to its last cell."
        if cell.get("execution_count") is None:
            return f"cell {i} never ran: the run stopped before it."
    return None


def finish(tmp: Path, out: Path, status: str, stamp: dict, *, error: str = "", claims: list | None = None,
            read: list[str] | None = None, source: Path | None = None,
            code: list[tuple[str, str]] | None = None, cache: list[str] | None = None,
            seconds: float | None = None) -> None:
    """Write the run's status, error, stamp, data reads and claim records into the executed copy, then move
    it into place atomically: the notebook, its stamp and its records are one file."""
    nb = json.loads(tmp.read_text())
    if source is not None:  # papermill records the notebook it was given, here the injected copy itself
        nb.setdefault("metadata", {}).setdefault("papermill", {})["input_path"] = str(source)
    ok = status == "ok"
    nb.setdefault("metadata", {})["ensdiv"] = {
        "status": status, "error": error, "stamp": stamp if ok else None, "claims": list(claims or []) if ok else [],
        "reads": {"paths": read, "hash": reads.signature(read)} if ok and read is not None else None,
        "code": (_code_record(code) if ok and code is not None else None),
        "versions": environment.versions() if ok else None,  # only to name a package that moved (rerun_reason)
        "cache": list(cache or []) if ok else [],  # the store entries the run loaded or saved (ensdiv cache export)
        "seconds": round(seconds, 1) if ok and seconds is not None else None,  # the next build's estimate
        "made": made() if ok else None,  # the commit and processor (a build's record refuses mixed pages)
    }
    tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(out)

#: What a page's run reads from the checkout: an edit elsewhere (the changelog, the guides) changes no result
_RUN_FILES = ("ensdiv", "notebooks", "book/data", "_toc.yml", "pyproject.toml", "requirements.lock")


def made() -> dict[str, Any]:
    """Where a page's run was made: the checkout's commit (None outside a git checkout), whether the files a run
    reads (:data:`_RUN_FILES`) differed from it (``dirty``), and the processor
    (:func:`ensdiv.book.reference.cpu_of`), so that a build's record can refuse pages of two commits or two
    machines (``benchmarks/bench_book.py --record-run``)."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=project_root(), capture_output=True, text=True, timeout=30)

    try:
        head = git("rev-parse", "HEAD")
        commit = head.stdout.strip() if head.returncode == 0 else None
        dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", *_RUN_FILES).stdout.strip()) \
            if commit else None
    except (OSError, subprocess.SubprocessError):
        commit = dirty = None
    return {"commit": commit, "dirty": dirty, "cpu": processor()}


def _code_record(code: list[tuple[str, str]]) -> dict:
    hashes = tracing.hashes_now(code)
    return {"units": [list(u) for u in code], "hash": tracing.combined(hashes), "hashes": hashes}


def page_run(executed: Path, notebook: str, *, scale: str | None = None) -> PageRun:
    """The state of one page as its executed copy shows it: its status and the claim records its last
    finished run promoted (:class:`ensdiv.report.PageRun`). An unreadable copy is a failed page whose error
    names it; with ``scale``, a copy whose records were made at another scale (a copy put there by hand) is a
    failed page too.

    Raises:
        EnsdivError: a claim record in the copy is malformed (one sentence naming the file).
    """
    if not executed.exists():
        return PageRun(notebook, "not run")
    meta = meta_of(executed)
    if not meta:
        return PageRun(notebook, "failed", f"Its executed copy {executed} is unreadable (not a notebook this "
                                           "book wrote); run the page again.")
    if meta.get("status") != "ok":
        return PageRun(notebook, "failed", str(meta.get("error") or "the run did not finish"))
    records = meta.get("claims") or []
    if not isinstance(records, list):
        raise EnsdivError(f"The claim records in {executed} are malformed (not a list); re-run its notebook.")
    if scale is not None and any(isinstance(r, dict) and r.get("scale") != scale for r in records):
        return PageRun(notebook, "failed", f"Its executed copy {executed} holds records of another scale than "
                                           f"{scale}; run the page again at {scale}.")
    return PageRun(notebook, "ok", records=tuple(check_record(r, str(executed)) for r in records))

def cache_entries(scale: str) -> list[str]:
    """The store entries the finished pages of ``scale`` loaded or saved (paths below the store), from their
    executed copies: what ``ensdiv cache export`` bundles."""
    folder = build_dir() / "executed" / scale
    found: set[str] = set()
    for path in folder.rglob("*.ipynb") if folder.is_dir() else []:
        meta = meta_of(path)
        if meta.get("status") == "ok" and isinstance(meta.get("cache"), list):
            found.update(str(p) for p in meta["cache"])
    return sorted(found)
