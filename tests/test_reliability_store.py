"""Issue #26, item 5: the store checks that what it serves is the entry of the configuration asked for,
and ``read_config`` returns ``None`` for any file a load would not serve."""

from __future__ import annotations

import hashlib
import io
import os
import shutil

import pytest
import torch

from ensdiv.store import _MAGIC, CorruptEntryWarning, StaleEntryWarning, Store, config_key

A, B = {"name": "a", "seed": 0}, {"name": "b", "seed": 1}


def _entry_file(body: bytes) -> bytes:
    """``body`` behind a valid store header (its checksum right), as a forger would write it."""
    return _MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def _place(store, config, how: str, source):
    dest = store.path("preds", config_key(config))
    dest.parent.mkdir(parents=True, exist_ok=True)
    if how == "copy":
        shutil.copyfile(source, dest)
    elif how == "symlink":
        dest.symlink_to(source)
    else:
        os.link(source, dest)
    return dest


@pytest.mark.parametrize("how", ["copy", "symlink", "hardlink"])
def test_entry_under_another_keys_name_is_a_miss_warned_and_recomputed(tmp_store, how):
    a_path = tmp_store.save("preds", A, torch.tensor([1.0, 2.0]))
    b_path = _place(tmp_store, B, how, a_path)
    assert tmp_store.read_config(b_path) is None  # A's config under B's name: not served
    with pytest.warns(StaleEntryWarning, match=f"Cache entry {b_path} holds the entry of another configuration"):
        assert tmp_store.load("preds", B) is None
    assert not b_path.exists() and not b_path.is_symlink()  # B's name is gone ...
    assert a_path.read_bytes().startswith(_MAGIC)  # ... A's entry it pointed to is left alone
    assert tmp_store.load("preds", A).tolist() == [1.0, 2.0]
    # recomputed under B's name: a regular file of B's own
    _place(tmp_store, B, how, a_path)
    with pytest.warns(StaleEntryWarning):
        got = tmp_store.get_or_compute("preds", B, lambda: torch.tensor([7.0]))
    assert got.tolist() == [7.0]
    assert not b_path.is_symlink() and b_path.stat().st_nlink == 1
    assert tmp_store.read_config(b_path) == {"name": "b", "seed": 1}
    assert tmp_store.load("preds", B).tolist() == [7.0]  # a hit now, no warning
    assert tmp_store.get_or_compute("preds", A, lambda: pytest.fail("A recomputed")).tolist() == [1.0, 2.0]


def test_stale_warning_is_a_corrupt_entry_warning_with_its_own_message():
    assert issubclass(StaleEntryWarning, CorruptEntryWarning)


def test_int_and_float_configs_are_different_entries(tmp_store):
    one = tmp_store.save("preds", {"lr": 1}, torch.zeros(1))
    other = _place(tmp_store, {"lr": 1.0}, "copy", one)  # equal in Python (1 == 1.0), not the same key
    with pytest.warns(StaleEntryWarning):
        assert tmp_store.load("preds", {"lr": 1.0}) is None
    assert not other.exists() and tmp_store.load("preds", {"lr": 1}).tolist() == [0.0]


@pytest.mark.parametrize("body", [
    pytest.param(lambda: torch.ones(3), id="bare-tensor"),
    pytest.param(lambda: {"payload": 1}, id="no-config"),
    pytest.param(lambda: {"config": "a", "payload": 1}, id="config-not-a-dict"),
    pytest.param(lambda: {"config": A, "payload": 1, "extra": 2}, id="extra-key"),
])
def test_entry_without_the_config_payload_shape_is_corrupt(tmp_store, body):
    buf = io.BytesIO()
    torch.save(body(), buf)
    path = tmp_store.path("preds", config_key(A))
    path.parent.mkdir(parents=True)
    path.write_bytes(_entry_file(buf.getvalue()))
    assert tmp_store.read_config(path) is None
    with pytest.warns(CorruptEntryWarning, match="is corrupt"):
        assert tmp_store.load("preds", A) is None
    assert not path.exists()
    assert tmp_store.get_or_compute("preds", A, lambda: torch.tensor([3.0])).tolist() == [3.0]


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def _code_pickle() -> bytes:
    buf = io.BytesIO()
    torch.save({"config": A, "payload": _Boom()}, buf)
    return buf.getvalue()


@pytest.mark.parametrize("content", [
    pytest.param(lambda good: os.urandom(300), id="garbage"),
    pytest.param(lambda good: b"", id="empty"),
    pytest.param(lambda good: good[: len(good) // 2], id="truncated"),
    pytest.param(lambda good: good[: len(_MAGIC) + 65], id="header-only"),
    pytest.param(lambda good: _entry_file(_code_pickle()), id="torch-file-with-code"),
    pytest.param(lambda good: _code_pickle(), id="torch-file-with-code-no-header"),
])
def test_read_config_returns_none_for_unreadable_files(tmp_store, tmp_path, content, capfd):
    good = tmp_store.save("preds", A, torch.arange(50.0)).read_bytes()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(content(good))
    assert tmp_store.read_config(bad) is None
    assert "pwned" not in capfd.readouterr().out


def test_read_config_of_missing_or_folder_is_none(tmp_store, tmp_path):
    assert tmp_store.read_config(tmp_path / "nowhere.pt") is None
    assert tmp_store.read_config(tmp_path) is None
    path = tmp_store.save("preds", A, 1)
    assert tmp_store.read_config(path) == A


# Issue #47, item 6: one computation per entry (a per-key lock from a miss to the save).
_HOLDER = """
import sys, time
from ensdiv.store import Store
store = Store(sys.argv[1])
with store.computing("preds", {"name": "shared"}) as done:
    assert done is None
    print("holding", flush=True)
    time.sleep(2.0)
    store.save("preds", {"name": "shared"}, {"by": "the other process"})
"""


@pytest.mark.slow
def test_a_second_process_waits_for_the_first_and_serves_what_it_saved(tmp_store, capsys):
    import subprocess
    import sys

    other = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_store.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "holding"
        computed = []
        got = tmp_store.get_or_compute("preds", {"name": "shared"}, lambda: computed.append(1) or {"by": "this one"})
    finally:
        other.wait(timeout=60)
    assert other.returncode == 0
    assert got == {"by": "the other process"} and computed == []  # computed once, by the first
    out = capsys.readouterr().out
    assert f"process {other.pid}" in out and "is computing this entry; waiting for it" in out


def test_the_lock_is_free_after_a_computation_that_raised_and_nested_keys_do_not_wait(tmp_store):
    with pytest.raises(RuntimeError):
        tmp_store.get_or_compute("preds", A, lambda: (_ for _ in ()).throw(RuntimeError("boom")))
    assert tmp_store.get_or_compute("preds", A, lambda: torch.tensor([1.0])).tolist() == [1.0]
    with tmp_store.computing("preds", B) as done:  # the same key again inside its own computation: no deadlock
        assert done is None
        with tmp_store.computing("preds", B) as inner:
            assert inner is None
        tmp_store.save("preds", B, torch.tensor([2.0]))
    assert tmp_store.load("preds", B).tolist() == [2.0]


def test_a_read_only_shared_cache_serves_its_entries_and_refuses_only_a_computation(tmp_store, monkeypatch):
    """A cache every entry of which is present serves them though nothing can be written there; a missing
    entry is one sentence (``CacheError``) before any work."""
    import ensdiv.store
    from ensdiv.errors import CacheError

    tmp_store.save("preds", A, torch.tensor([3.0]))
    ensdiv.store._CHECKED.clear()

    def read_only(*args, **kwargs):
        raise PermissionError(30, "Read-only file system")

    monkeypatch.setattr(ensdiv.store.tempfile, "mkstemp", read_only)
    assert tmp_store.get_or_compute("preds", A, lambda: pytest.fail("recomputed")).tolist() == [3.0]
    with pytest.raises(CacheError, match="not writable .*Read-only file system"):
        tmp_store.get_or_compute("preds", B, lambda: pytest.fail("computed before the check"))


def test_a_stale_entry_says_recomputed_once(tmp_path, monkeypatch, capsys):
    """The stale entry's one line (``recomputed, <why>``) is printed by the miss, not again by the look the
    computation takes once it holds the entry's lock. Before, every such line was printed twice."""
    from ensdiv import environment

    monkeypatch.setenv("ENSDIV_PROGRESS", "lines")
    store = Store(tmp_path)
    store.get_or_compute("k", {"a": 1}, lambda: {"v": 1})
    monkeypatch.setitem(environment._MEMO, "fingerprint", "another environment")
    capsys.readouterr()
    assert store.get_or_compute("k", {"a": 1}, lambda: {"v": 2}) == {"v": 2}
    assert capsys.readouterr().out.count(": recomputed, the environment changed") == 1


def test_an_unknown_name_lists_the_valid_names_in_a_proper_plural():
    from ensdiv.errors import unknown_name

    assert "Valid zoo entries: a, b." in str(unknown_name("zoo entry", "c", ["a", "b"]))
    assert "Valid models: a." in str(unknown_name("model", "c", ["a"]))
    assert "Valid keys: a." in str(unknown_name("key", "c", ["a"]))


def test_an_unreadable_entry_is_one_sentence_not_a_traceback_and_stays(tmp_store, monkeypatch):
    """An entry the process may not read (a permission, an I/O error) is a ``CacheError`` naming the entry and what
    to do; it is not treated as a miss that would overwrite it."""
    from pathlib import Path

    from ensdiv.errors import CacheError

    path = tmp_store.save("preds", A, torch.tensor([1.0]))
    real = Path.read_bytes

    def denied(self):
        if self == path:
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(CacheError, match=r"cache entry .* cannot be read \(Permission denied\); give yourself read"):
        tmp_store.load("preds", A)
    assert path.exists()


def test_a_stale_entry_names_the_package_that_moved_not_the_current_state(tmp_path, monkeypatch, capsys):
    """The entry keeps the versions it was computed with; after an upgrade the miss says ``torch A -> B``. An entry
    of an older ensdiv without versions says the current state (what it could say before)."""
    from ensdiv import environment

    monkeypatch.setenv("ENSDIV_PROGRESS", "lines")
    store = Store(tmp_path)
    store.get_or_compute("k", {"a": 1}, lambda: {"v": 1})
    was = environment.versions()["torch"]
    monkeypatch.setitem(environment._MEMO, "fingerprint", "another environment")
    monkeypatch.setitem(environment._MEMO, "versions", {**environment.versions(), "torch": "99.0"})
    capsys.readouterr()
    store.get_or_compute("k", {"a": 1}, lambda: {"v": 2})
    assert f": recomputed, the environment changed (torch {was} -> 99.0)" in capsys.readouterr().out
