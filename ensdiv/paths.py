"""Where things go: the project root, the build folder, the results folder."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ensdiv.seeding import seed_base

__all__ = ["project_root", "build_dir", "results_dir"]


def project_root() -> Path:
    """The repository root when running from a checkout, else the current folder."""
    here = Path(__file__).resolve().parent.parent
    if (here / "pyproject.toml").exists() and (here / "_toc.yml").exists():
        return here
    return Path.cwd()


def build_dir() -> Path:
    """``$ENSDIV_BUILD``, or ``_build`` in the project root (``_build/seed-base-K`` under a seed base ``K`` above 0,
    :mod:`ensdiv.seeding`, so that a second, independent run keeps its pages apart)."""
    if os.environ.get("ENSDIV_BUILD"):
        return Path(os.environ["ENSDIV_BUILD"])
    base = seed_base()
    return project_root() / "_build" / (f"seed-base-{base}" if base else "")


def results_dir(slug: str) -> Path:
    """Folder for a chapter's saved figures and tables (``_build/results/<slug>``), created if missing."""
    path = build_dir() / "results" / slug
    path.mkdir(parents=True, exist_ok=True)
    return path


def prove_writable(folder: Path) -> Path:
    """Create ``folder`` if needed and write and remove a probe file in it; the ``OSError`` of a file in the way,
    a read-only or full file system propagates (the build folder says it in one sentence, :func:`unwritable_reason`).
    ``Store.check_writable`` keeps its own copy of these lines: every page's dry run executed it, so changing it
    would make all of their ledger entries stale."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-check-", suffix=".tmp")
    try:  # an empty file is made even on a full disk: the probe writes a block, as any page's output would
        os.write(fd, bytes(4096))
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(probe)
    return folder


def unwritable_reason(exc: OSError) -> str:
    """Why :func:`prove_writable` failed, in a few words ("a file is in the way of the folder", "Read-only file
    system")."""
    if isinstance(exc, NotADirectoryError | FileExistsError):
        return "a file is in the way of the folder"
    return exc.strerror or type(exc).__name__
