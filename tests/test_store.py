"""The cache: hit, miss, corrupt file, interrupted write, unwritable folder, key semantics."""

from __future__ import annotations

import os

import pytest
import torch

from ensdiv.errors import CacheError
from ensdiv.store import CorruptEntryWarning, Store, cached, config_key


def test_key_ignores_dict_order_but_not_values():
    assert config_key({"a": 1, "b": [1, 2]}) == config_key({"b": [1, 2], "a": 1})
    assert config_key({"a": 1}) != config_key({"a": 2})
    assert config_key({"a": 1}) != config_key({"a": 1.5})
    assert len(config_key({})) == 64


def test_key_rejects_unhashable_objects():
    with pytest.raises(TypeError, match="cache key"):
        config_key({"a": object()})


def test_miss_then_hit_calls_compute_once(tmp_store):
    calls = []

    def compute():
        calls.append(1)
        return {"w": torch.arange(6.0).reshape(2, 3), "acc": 0.5}

    cfg = {"model": "x", "seed": 0}
    first = tmp_store.get_or_compute("ckpt", cfg, compute)
    second = tmp_store.get_or_compute("ckpt", cfg, compute)
    assert calls == [1]
    assert torch.equal(second["w"], torch.arange(6.0).reshape(2, 3))
    assert second["acc"] == 0.5 and first["acc"] == 0.5


def test_cached_uses_env_store(tmp_store):
    assert cached("k", {"a": 1}, lambda: torch.ones(2)).sum().item() == 2.0
    assert tmp_store.exists("k", {"a": 1})


def test_corrupt_entry_is_detected_and_recomputed(tmp_store):
    cfg = {"x": 1}
    path = tmp_store.save("preds", cfg, torch.zeros(100))
    raw = bytearray(path.read_bytes())
    raw[-10] ^= 0xFF  # flip a byte inside the payload
    path.write_bytes(bytes(raw))
    with pytest.warns(CorruptEntryWarning, match="corrupt"):
        assert tmp_store.load("preds", cfg) is None
    assert not path.exists()
    out = tmp_store.get_or_compute("preds", cfg, lambda: torch.ones(3))
    assert out.tolist() == [1.0, 1.0, 1.0]


def test_truncated_entry_is_detected(tmp_store):
    cfg = {"x": 2}
    path = tmp_store.save("preds", cfg, torch.zeros(1000))
    path.write_bytes(path.read_bytes()[:200])
    with pytest.warns(CorruptEntryWarning):
        assert tmp_store.load("preds", cfg) is None


def test_garbage_file_is_detected(tmp_store):
    cfg = {"x": 3}
    path = tmp_store.path("preds", config_key(cfg))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a cache entry")
    with pytest.warns(CorruptEntryWarning):
        assert tmp_store.load("preds", cfg) is None


def test_interrupted_write_leaves_no_entry(tmp_store, monkeypatch):
    cfg = {"x": 4}

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        tmp_store.save("ckpt", cfg, torch.ones(10))
    monkeypatch.undo()
    assert tmp_store.load("ckpt", cfg) is None
    folder = tmp_store.path("ckpt", config_key(cfg)).parent
    assert list(folder.iterdir()) == []  # the temporary file was removed too


def test_unwritable_cache_dir_says_so(tmp_path):
    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(0o500)
    try:
        if os.access(root, os.W_OK):  # running as root: permissions are not enforced
            pytest.skip("permissions are not enforced for this user")
        with pytest.raises(CacheError, match="not writable"):
            Store(root / "sub").save("k", {"a": 1}, torch.ones(1))
    finally:
        root.chmod(0o700)


def test_unwritable_cache_dir_via_file_in_the_way(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CacheError, match="not writable.*ENSDIV_CACHE"):
        Store(blocker).save("k", {"a": 1}, torch.ones(1))


def test_permission_denied_is_one_sentence(tmp_path, monkeypatch):
    from pathlib import Path

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "mkdir", denied)
    with pytest.raises(CacheError, match="is not writable \\(Permission denied\\); set ENSDIV_CACHE"):
        Store(tmp_path / "c").save("k", {"a": 1}, torch.ones(1))


class Custom:  # picklable, but refused by weights_only loading
    pass


def test_payload_must_be_weights_only_loadable(tmp_store):
    with pytest.raises(TypeError, match=r"payload\['obj'\] of type Custom"):
        tmp_store.save("k", {"a": 9}, {"obj": Custom(), "ok": [torch.ones(1), 2.0, "s", None]})
    assert not tmp_store.exists("k", {"a": 9})


def test_read_config_and_entries(tmp_store):
    tmp_store.save("ckpt", {"name": "a"}, 1)
    tmp_store.save("ckpt", {"name": "b"}, 2)
    entries = tmp_store.entries("ckpt")
    assert len(entries) == 2
    assert sorted(tmp_store.read_config(p)["name"] for p in entries) == ["a", "b"]
