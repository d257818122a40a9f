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


@pytest.fixture
def fake_imagenet_train(tmp_path, monkeypatch):
    """A fake ``imagenet/train`` in ``$ENSDIV_DATA``: 3 wnids (a declared class subset) x 4 random JPEGs of
    different sizes, and an empty cache in ``$ENSDIV_CACHE``; the stream sets' memos are cleared around it."""
    from fake_images import write_jpegs

    from ensdiv.data.paper import stream as data_stream
    from ensdiv.data.paper.common import declare_class_subset
    from ensdiv.data.paper.imagenet import _timm_list
    from ensdiv.store import Store

    wnids = _timm_list("imagenet_synsets.txt")[:3]
    root = tmp_path / "data"
    for k, w in enumerate(wnids):
        write_jpegs(root / "imagenet" / "train" / w, 4, k)
    declare_class_subset(root / "imagenet" / "train", wnids)  # 3 of the 1000 classes, on purpose
    monkeypatch.setenv("ENSDIV_DATA", str(root))
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))
    memos = (data_stream._OPENED, data_stream._FILE_KEYS)
    saved = [dict(m) for m in memos]
    for m in memos:
        m.clear()
    yield {"root": root, "store": Store(tmp_path / "cache"), "wnids": wnids}
    for m, old in zip(memos, saved, strict=True):
        m.clear()
        m.update(old)


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A build folder and a cache of this test's own, no notebook or data folder set (the page-run tests)."""
    monkeypatch.setenv("ENSDIV_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ENSDIV_NOTEBOOK", raising=False)
    monkeypatch.delenv("ENSDIV_DATA", raising=False)
    return tmp_path
