"""Content-addressed cache for checkpoints, predictions and evaluation sets.

Every cached object is keyed by the SHA-256 of its full configuration (canonical JSON), so a change
of any data, model, training or code-version field is a miss. A file holds a one-line header with the
SHA-256 of the payload, then the payload written by :func:`torch.save`. Writes go to a temporary file
in the same folder followed by an atomic rename, so an interrupted write never leaves a file under the
final name. Loads verify the checksum and use ``torch.load(..., weights_only=True)``; a truncated or
corrupt file, or one that is not an entry (its payload is not the ``{"config", "payload"}`` dict that
:meth:`Store.save` writes), is reported (:class:`CorruptEntryWarning`), deleted and recomputed, never used.
A load also checks that the configuration stored inside the entry is the one asked for (the key of
its canonical form equals the file's key): an entry copied, renamed, hard- or sym-linked under another
key's file name is reported (:class:`StaleEntryWarning`, one sentence naming the file), its name under
this key is removed (for a link only the link: the other key's entry is left alone) and the value is
recomputed and written there atomically. :meth:`Store.read_config` returns ``None`` for any file a load
would not serve, and never raises on a file's content.

Entry files get the permissions of any new file (``0o666`` less the umask, so a group-shared cache
stays readable to the group), not ``mkstemp``'s private ``0o600``. :meth:`Store.check_writable` proves
the folder usable (creatable and writable) before any work starts, in one sentence when it is not; only a
computation needs that, so a read-only shared cache serves every entry it holds.

**One computation per entry.** :meth:`Store.computing` holds a lock per key (``fcntl.flock`` on a small
``.<key>.lock`` file beside the entry) from a miss to the save: two processes that need the same missing entry
(two ``ensdiv run`` in two terminals, two workers of a parallel build) do not both compute it. The second says
in one line for whom it waits, and then serves what the first saved. A lock dies with its process, so a killed
writer never leaves one held.

Payloads must be what ``weights_only`` loading accepts: tensors, numbers, strings, and lists, tuples
and dicts of those (state dicts included).

**Keyed by the code that computed it.** The key is the configuration (the inputs); the entry also keeps a
record of how it was computed: every unit of package code its computation ran, hashed as it ran
(:mod:`ensdiv.tracing`; the units of entries it loaded and of memoised answers it was served included, so a
prediction carries its model's training code), and the environment's fingerprint
(:func:`ensdiv.environment.fingerprint`, the lock file's pins). A miss opens a recorder and the save closes it. A
load serves an entry only while every unit in its record hashes as the running code does and the environment is
the same; otherwise the load is a miss that says why in one line (``model 3fa2…: recomputed,
ensdiv/train/loop.py::fit changed``), and the caller's computation overwrites it. An entry recorded by another
recording engine is never served; an entry computed while a package function was patched at run time is not
saved. A plain ``save`` outside any computation (a user's own put) records no code: it is keyed by its
configuration and the environment only. ``$ENSDIV_RECOMPUTE=1`` (``ensdiv run --recompute``) makes every load a
miss. What the guarantee covers, and its conditions, is stated once in ``book/guide/cache.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from ensdiv import environment, tracing
from ensdiv.errors import CacheError
from ensdiv.paths import project_root, unwritable_reason
from ensdiv.progress import line
from ensdiv.seeding import seed_base

__all__ = ["Store", "default_store", "config_key", "cached", "CorruptEntryWarning", "StaleEntryWarning",
           "RECOMPUTE_ENV"]

#: Set to ``1``: every load is a miss, so what a run needs is computed again and overwritten (``--recompute``).
RECOMPUTE_ENV = "ENSDIV_RECOMPUTE"

_MAGIC = b"ensdiv-store-v1 "
_UMASK: int | None = None


def _umask() -> int:
    """The process umask, read once (``/proc`` where available, so no other thread sees it changed)."""
    global _UMASK
    if _UMASK is None:
        try:
            line = next(ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("Umask:"))
            _UMASK = int(line.split()[1], 8)
        except (OSError, StopIteration, ValueError):
            _UMASK = os.umask(0o022)
            os.umask(_UMASK)
    return _UMASK


def _unusable(root: Path, exc: OSError) -> CacheError:
    return CacheError(f"The cache folder {root} is not writable ({unwritable_reason(exc)}); set ENSDIV_CACHE to a "
                      "folder you can write to.")


_CHECKED: set[Path] = set()  # folders check_writable proved usable in this process
_HELD: set[Path] = set()  # entry locks this process holds (a nested computation of the same key does not wait)
_FRESH: set[tuple[str, str]] = set()  # entries this process saved (served under $ENSDIV_RECOMPUTE)


#: Set by ``ensdiv run``/``ensdiv book``: a file every entry a page's run loaded or saved is appended to (its
#: path below the store), so a scale's build can be exported as a bundle (:mod:`ensdiv.bundles`).
ACCESS_LOG_ENV = "ENSDIV_STORE_LOG"
_NOTED: set[tuple[str, str]] = set()


def _note_access(store: Store, path: Path) -> None:
    log = os.environ.get(ACCESS_LOG_ENV)
    if not log:
        return
    try:
        rel = path.relative_to(store.root).as_posix()
    except ValueError:
        return
    if (log, rel) in _NOTED:
        return
    _NOTED.add((log, rel))
    try:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(rel + "\n")
    except OSError:
        pass  # a missing log only makes a bundle smaller, never a page wrong


class CorruptEntryWarning(UserWarning):
    """A cache entry failed its checksum or is not an entry, and was discarded."""


class StaleEntryWarning(CorruptEntryWarning):
    """A sound cache entry stored under another configuration's key (copied, renamed or linked there);
    its name under the key asked for was removed and the value is recomputed."""


def _canonical(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, list | tuple):
        return [_canonical(v) for v in obj]
    if isinstance(obj, float | int | str | bool) or obj is None:
        return obj
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return _canonical(asdict(obj))
    raise TypeError(f"Cannot use a {type(obj).__name__} in a cache key; use numbers, strings, lists or dicts.")


def config_key(config: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON of ``config`` (order of keys does not matter); under a seed base
    above 0 (:mod:`ensdiv.seeding`) the base is part of it, so two seed bases' entries never mix."""
    text = json.dumps(_canonical(config), sort_keys=True, separators=(",", ":"))
    base = seed_base()
    if base:
        text += f"|seed-base={base}"
    return hashlib.sha256(text.encode()).hexdigest()


_PLAIN = (int, float, str, bool, bytes, type(None), torch.Tensor, torch.dtype, torch.Size)


def _check_payload(obj: Any, where: str = "payload") -> None:
    """Refuse, before writing, what ``torch.load(weights_only=True)`` would refuse when reading."""
    if isinstance(obj, _PLAIN):
        return
    if isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            _check_payload(v, f"{where}[{i}]")
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            _check_payload(k, f"{where} key")
            _check_payload(v, f"{where}[{k!r}]")
        return
    raise TypeError(
        f"Cannot cache {where} of type {type(obj).__name__}: store tensors, numbers, strings and "
        "lists/dicts of those (a model's state_dict, not the model)."
    )


class Store:
    """A folder of checksummed, atomically written cache entries.

    Args:
        root: folder of the cache; created on first write.
    """

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def path(self, kind: str, key: str) -> Path:
        """Where the entry ``key`` of the given kind lives."""
        return self.root / kind / key[:2] / f"{key}.pt"

    def exists(self, kind: str, config: Mapping[str, Any]) -> bool:
        return self.path(kind, config_key(config)).exists()

    def check_writable(self) -> Path:
        """Create the cache folder if needed and prove it writable, before any work is done.

        Raises:
            CacheError: the folder cannot be created or written (one sentence saying why and naming
                ``ENSDIV_CACHE``).
        """
        root = self.root
        if root in _CHECKED:
            return root
        try:
            root.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=root, prefix=".write-check-", suffix=".tmp")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise _unusable(root, exc) from None
        _CHECKED.add(root)
        return root

    def begin(self, kind: str, config: Mapping[str, Any]) -> None:
        """Start recording the computation of an entry that is computed without a :meth:`load` first (a
        forced retraining); a miss of :meth:`load` does this itself."""
        tracing.begin(f"{kind}/{config_key(config)}")

    def save(self, kind: str, config: Mapping[str, Any], payload: Any) -> Path:
        """Write ``payload`` under the key of ``config`` atomically, with the record of the code that computed
        it (the recorder its miss, or :meth:`begin`, opened; without one, the units of the computations open
        now, none for a value computed outside the package); returns the final path."""
        key = config_key(config)
        final = self.path(kind, key)
        _check_payload(payload)
        units = tracing.end(f"{kind}/{key}")
        if units is None:  # saved without a miss first: what an open computation ran so far, else a value
            units = tracing.open_units()  # computed outside the package (a user's own put): keyed by its config
        why = tracing.patched()
        if why is not None:
            print(f"{kind} {key[:10]}: not saved, {why} was replaced at run time (patched)", flush=True)
            return final
        code = {"units": tracing.entry_record(units), "environment": environment.fingerprint(),
                "versions": environment.versions(), "engine": tracing.ENGINE}
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            buf = io.BytesIO()
            torch.save({"config": _canonical(config), "payload": payload, "code": code}, buf)
            data = buf.getvalue()
            digest = hashlib.sha256(data).hexdigest().encode()
            fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{key[:8]}-", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(_MAGIC + digest + b"\n")
                    fh.write(data)
                    fh.flush()
                    os.fchmod(fh.fileno(), 0o666 & ~_umask())
                    os.fsync(fh.fileno())
                os.replace(tmp, final)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:  # not writable, a file in the way, the folder removed, the disk full, ...
            _CHECKED.discard(self.root)
            raise _unusable(self.root, exc) from None
        _note_access(self, final)
        _FRESH.add((kind, key))
        return final

    def load(self, kind: str, config: Mapping[str, Any], *, compute: bool = True) -> Any | None:
        """Return the cached payload, or ``None`` on a miss.

        A corrupt entry, or one whose stored configuration is not ``config`` (an entry of another key
        copied or linked under this key's name), is a miss with a warning, and its file name under this
        key is removed (a symbolic or hard link goes, not the other key's entry it points to). An entry
        computed by code that has changed since, or in another environment, is a miss that says why in one
        line (it is overwritten when the caller saves the recomputed value). A miss starts recording the code
        the caller's computation runs, for the entry :meth:`save` writes; ``compute=False`` (a caller that
        only looks) records nothing.
        """
        key = config_key(config)
        final = self.path(kind, key)
        if os.environ.get(RECOMPUTE_ENV) == "1" and (kind, key) not in _FRESH:
            if compute:
                tracing.begin(f"{kind}/{key}")
            return None
        try:
            raw = final.read_bytes()  # no exists() first: an entry removed meanwhile is a plain miss
        except (FileNotFoundError, NotADirectoryError):
            if compute:
                tracing.begin(f"{kind}/{key}")
            return None
        except OSError as exc:  # there but unreadable: a permission, an I/O error; say so, do not overwrite it
            raise CacheError(f"The cache entry {final} cannot be read ({exc.strerror or type(exc).__name__}); give "
                             "yourself read access to it, remove it, or set ENSDIV_CACHE to another folder.") from None
        obj = _decode(raw)
        if obj is not None and _stored_key(obj) == key:
            why = _code_changed(obj)
            if why is None:
                tracing.note_units(tracing.record_units(obj["code"]["units"]))
                _note_access(self, final)
                return obj["payload"]
            if compute:  # said once: the look after the lock is taken (compute=False) says nothing again
                line(f"{kind} {key[:10]}: recomputed, {why}")
                tracing.begin(f"{kind}/{key}")
            return None
        if obj is None:
            msg = f"Cache entry {final} is corrupt (checksum or format mismatch); it is discarded and recomputed."
            category = CorruptEntryWarning
        else:
            msg = (f"Cache entry {final} holds the entry of another configuration (copied or linked under "
                   "this key's name); it is removed from this name and recomputed.")
            category = StaleEntryWarning
        warnings.warn(msg, category, stacklevel=2)
        final.unlink(missing_ok=True)
        if compute:
            tracing.begin(f"{kind}/{key}")
        return None

    def stale_reason(self, kind: str, config: Mapping[str, Any]) -> str | None:
        """Why the entry of ``config`` would not be served (``"missing"``, ``"corrupt"``, or what changed in
        its code or environment), or ``None`` when a load would serve it."""
        key = config_key(config)
        try:
            raw = self.path(kind, key).read_bytes()
        except OSError:
            return "missing"
        obj = _decode(raw)
        if obj is None or _stored_key(obj) != key:
            return "corrupt"
        return _code_changed(obj)

    @contextlib.contextmanager
    def computing(self, kind: str, config: Mapping[str, Any], *, reload: bool = True) -> Iterator[Any | None]:
        """Hold the entry's lock while it is computed and saved (after a miss of :meth:`load`).

        Proves the folder writable first (one sentence when it is not). When another process holds the lock,
        says in one line for whom it waits and waits. Yields the payload another process saved meanwhile (the
        caller then computes nothing), or ``None``: compute, :meth:`save`, and leave the block. With
        ``reload=False`` (a forced recomputation) it yields ``None`` always. Under ``torchrun`` (``WORLD_SIZE``
        above 1) the ranks compute together, and no lock is taken.
        """
        import fcntl  # POSIX only, like the rest of the book's process handling

        key = config_key(config)
        final = self.path(kind, key)
        self.check_writable()  # before the work, not after it
        lock = final.parent / f".{key}.lock"
        if lock in _HELD or int(os.environ.get("WORLD_SIZE", "1")) > 1:
            yield None
            return
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            fh = open(lock, "a+", encoding="utf-8")
        except OSError as exc:
            _CHECKED.discard(self.root)
            raise _unusable(self.root, exc) from None
        try:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "another process"
                print(f"  [wait]   {kind} {key[:10]}: {holder} is computing this entry; waiting for it", flush=True)
                fcntl.flock(fh, fcntl.LOCK_EX)
            fh.seek(0)
            fh.truncate()
            fh.write(f"process {os.getpid()} (since {time.strftime('%H:%M:%S')})")
            fh.flush()
            _HELD.add(lock)
            done = self.load(kind, config, compute=False) if reload and final.exists() else None
            if done is not None:
                tracing.end(f"{kind}/{key}")  # nothing computed here: the miss's recorder closes empty
            yield done
        finally:
            tracing.end(f"{kind}/{key}")  # a computation that raised: its recorder closes (nothing was saved)
            _HELD.discard(lock)
            with contextlib.suppress(OSError):
                fh.truncate(0)
            fh.close()  # releases the lock

    def get_or_compute(self, kind: str, config: Mapping[str, Any], compute: Callable[[], Any]) -> Any:
        """Load the entry for ``config``, or (holding its lock, :meth:`computing`) call ``compute()``, save its
        result and return it; a process that waited for another's computation returns what that one saved."""
        payload = self.load(kind, config)
        if payload is None:
            with self.computing(kind, config) as done:
                if done is not None:
                    return done
                payload = compute()
                self.save(kind, config, payload)
        return payload

    def entries(self, kind: str) -> list[Path]:
        """All finished entries of one kind."""
        return sorted((self.root / kind).glob("*/*.pt"))

    def read_config(self, path: Path) -> dict | None:
        """The config stored with the entry file ``path``.

        ``None`` when the file is missing or unreadable, is not an entry (garbage, another format, a
        pickle naming code), is truncated or corrupt, or holds another key's entry than its name says:
        exactly the files :meth:`load` would not serve. It never raises on a file's content.
        """
        try:
            raw = Path(path).read_bytes()
        except OSError:
            return None
        obj = _decode(raw)
        if obj is None or _stored_key(obj) != Path(path).stem:
            return None
        return obj["config"]


def _decode(raw: bytes) -> dict | None:
    """The ``{"config", "payload"}`` dict of an entry file's bytes, or ``None`` when they are not a sound
    entry (no header, checksum mismatch, not loadable with ``weights_only=True``, another shape)."""
    header_len = len(_MAGIC) + 64 + 1
    if not raw.startswith(_MAGIC) or len(raw) <= header_len:
        return None
    data = raw[header_len:]
    if hashlib.sha256(data).hexdigest().encode() != raw[len(_MAGIC) : header_len - 1]:
        return None
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - any unpickling failure means a bad entry
        return None
    if not isinstance(obj, dict) or set(obj) - {"code"} != {"config", "payload"} \
            or not isinstance(obj["config"], dict):
        return None
    return obj


def _code_changed(obj: dict) -> str | None:
    """Why a sound entry's record of its computation no longer holds (``None`` when it does)."""
    code = obj.get("code")
    if not isinstance(code, dict):
        return "it has no record of the code that computed it"
    if code.get("environment") != environment.fingerprint():
        return f"the environment changed ({environment.changes(code.get('versions'))})"
    units = code.get("units")
    if not isinstance(units, dict):
        return "the code that computed it was not recorded"
    if code.get("engine") != tracing.ENGINE:
        return "it was recorded by an older recorder (ensdiv.tracing)"
    changed = tracing.changed_unit(units)
    return None if changed is None else f"{changed} changed"


def _stored_key(obj: dict) -> str | None:
    """The key of the configuration stored in a decoded entry (``None`` if it cannot be a key)."""
    try:
        return config_key(obj["config"])
    except TypeError:
        return None


def default_store() -> Store:
    """The store under ``$ENSDIV_CACHE`` (default ``.cache/ensdiv`` in the working folder's project root)."""
    root = os.environ.get("ENSDIV_CACHE")
    if not root:
        root = str(project_root() / ".cache" / "ensdiv")
    return Store(root)


def cached(kind: str, config: Mapping[str, Any], compute: Callable[[], Any], *, store: Store | None = None) -> Any:
    """Shorthand for ``(store or default_store()).get_or_compute(kind, config, compute)``."""
    return (store or default_store()).get_or_compute(kind, config, compute)


def collect_temporary(store: Store, *, min_age: float = 3600.0) -> list[Path]:
    """Remove the temporary files (``*.tmp``) that killed writers left in the store, and the entry locks
    (``.<key>.lock``, one per computation, :meth:`Store.computing`) of computations that ended: those not written to
    for ``min_age`` seconds that no running process has open (a live writer's file and a held lock are never
    touched; a lock is re-made by the next computation of its key). Returns the removed paths (``ensdiv cache
    gc``)."""
    import psutil  # a dependency of the book's commands, imported only here

    root = store.root.resolve()
    candidates = [p for pattern in ("*.tmp", ".*.lock") for p in root.rglob(pattern) if p.is_file()]
    now = time.time()
    old = [p for p in candidates if now - p.stat().st_mtime >= min_age]
    if not old:
        return []
    held: set[str] = set()
    for proc in psutil.process_iter():
        try:
            held.update(f.path for f in proc.open_files())
        except (psutil.Error, OSError):
            continue
    removed = []
    for p in old:
        if str(p) not in held:
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed
