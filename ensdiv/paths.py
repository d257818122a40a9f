"""Where things go: the project root, the build folder, the results folder."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["project_root", "build_dir", "results_dir"]


def project_root() -> Path:
    """The repository root when running from a checkout, else the current folder."""
    here = Path(__file__).resolve().parent.parent
    if (here / "pyproject.toml").exists() and (here / "_toc.yml").exists():
        return here
    return Path.cwd()


def build_dir() -> Path:
    """``$ENSDIV_BUILD`` or ``_build`` in the project root."""
    return Path(os.environ.get("ENSDIV_BUILD") or project_root() / "_build")


def results_dir(slug: str) -> Path:
    """Folder for a chapter's saved figures and tables (``_build/results/<slug>``), created if missing."""
    path = build_dir() / "results" / slug
    path.mkdir(parents=True, exist_ok=True)
    return path
