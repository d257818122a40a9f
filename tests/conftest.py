"""Shared fixtures: every test gets its own empty cache folder unless it asks for the shared one."""

from __future__ import annotations

import pytest


@pytest.fixture
def tmp_store(tmp_path, monkeypatch):
    """A fresh, empty ensdiv store in a temporary folder (also set as $ENSDIV_CACHE)."""
    from ensdiv.store import Store

    root = tmp_path / "cache"
    monkeypatch.setenv("ENSDIV_CACHE", str(root))
    return Store(root)
