"""Cache bundles: the entries a build used, in one file another machine imports instead of recomputing them
(as showyourwork shares an article's intermediate results).

A bundle is a tar file (gzip-compressed when its name ends in ``.gz``) holding ``manifest.json`` —
``{"format": FORMAT, "scale", "created", "entries": [{"path", "sha256", "bytes"}]}`` — and each entry file
under its path in the store (``<kind>/<xx>/<key>.pt``). :func:`import_bundle` trusts nothing in it:

- a member that is not ``manifest.json`` or a regular file at a store path named in the manifest (a link, a
  device, an absolute or ``..`` path, a file the manifest does not list) is refused;
- every entry's SHA-256 must equal the manifest's, its own header checksum must hold, it must load with
  ``torch.load(weights_only=True)`` (the store's decoder: nothing is ever unpickled with code) and the key of
  the configuration stored inside must be the key its name says;

- each member's size must be the manifest's, at most ``max_entry_bytes`` (:data:`MAX_ENTRY_BYTES` unless raised:
  ``ensdiv cache import --max-entry-size``) and within the store folder's free space, before it is read; it is
  streamed to a temporary file in its store folder, its entry header (the store's magic and checksum line) checked
  on the first bytes and its checksum while it streams, so a member that is not an entry is refused after one
  chunk, whatever its size; the temporary file is removed whatever happens;
- a truncated or corrupt archive, a failed download (60 s without data is a failure) or a full disk is one
  sentence;

any failure is one sentence naming the member, and nothing of that bundle enters the store (entries are
checked before the first is moved into place, then moved atomically, with the permissions of any new file).
Entries already present are left as they are. What was added is recorded with the bundle's SHA-256, scale and
date in the store's ``imports.jsonl``: a bundle is trusted input, like code, and the book names the pages that
used its entries.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from ensdiv.errors import EnsdivError
from ensdiv.store import _MAGIC, Store, _decode, _stored_key, _umask

__all__ = ["FORMAT", "IMPORTS", "DOWNLOAD_TIMEOUT", "MAX_ENTRY_BYTES", "export_bundle", "import_bundle",
           "imported_entries"]

FORMAT = "ensdiv-cache-bundle-1"
_ENTRY = re.compile(r"^[a-z0-9_-]+/[0-9a-f]{2}/([0-9a-f]{64})\.pt$")
_MAX_MANIFEST = 64 * 2**20
#: The largest entry an import accepts by default (4 GiB: the book's largest entries, ImageNet-scale models and
#: feature sets, are far below it); ``import_bundle(max_entry_bytes=...)`` / ``--max-entry-size`` raise it.
MAX_ENTRY_BYTES = 4 * 2**30
_HEADER = len(_MAGIC) + 64 + 1  # the store's entry header: magic, hex SHA-256 of the rest, newline
_HEX = re.compile(rb"^[0-9a-f]{64}\n$")


def export_bundle(store: Store, paths: Iterable[str], file: str | Path, *, scale: str) -> dict:
    """Write the store entries ``paths`` (relative to the store, as the access logs name them) into a bundle.

    Entries that are missing or do not decode as sound entries are left out (listed in the returned summary).

    Returns:
        ``{"file", "entries", "bytes", "skipped"}``.
    """
    file = Path(file)
    wanted = sorted({p for p in paths if _ENTRY.match(p)})
    entries, skipped, blobs = [], [], {}
    for rel in wanted:
        try:
            raw = (store.root / rel).read_bytes()
        except OSError:
            skipped.append(rel)
            continue
        obj = _decode(raw)
        if obj is None or _stored_key(obj) != Path(rel).stem:
            skipped.append(rel)
            continue
        entries.append({"path": rel, "sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)})
        blobs[rel] = raw
    manifest = {"format": FORMAT, "scale": scale, "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "entries": entries}
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(file.name + ".partial")
    try:
        with tarfile.open(tmp, "w:gz" if file.name.endswith(".gz") else "w") as tar:
            for name, data in [("manifest.json", json.dumps(manifest, indent=1).encode()), *blobs.items()]:
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
                tar.addfile(info, io.BytesIO(data))
        tmp.replace(file)
    except OSError as exc:  # a full or read-only disk: one sentence, and no partial bundle left behind
        tmp.unlink(missing_ok=True)
        raise EnsdivError(f"Could not write the bundle {file} ({exc.strerror or type(exc).__name__}); nothing was "
                          "written.") from None
    return {"file": str(file), "entries": len(entries), "bytes": sum(e["bytes"] for e in entries),
            "skipped": skipped}


#: A downloaded bundle that sends nothing for this long is abandoned (seconds).
DOWNLOAD_TIMEOUT = 60
#: Where the store keeps the record of what it imported (one JSON line per bundle).
IMPORTS = "imports.jsonl"


def _fetch(source: str) -> tuple[Path, bool]:
    """A local path, or a URL downloaded to a temporary file (the user has internet; runs never download):
    ``(path, temporary)``. A network error, a timeout or an HTTP error is one sentence, and nothing is left."""
    if re.match(r"^https?://", source):
        import http.client
        import urllib.error

        fd, tmp = tempfile.mkstemp(suffix=".ensdiv-bundle")
        try:
            with urllib.request.urlopen(source, timeout=DOWNLOAD_TIMEOUT) as response, \
                    open(fd, "wb") as fh:  # noqa: S310 - a user's URL
                while chunk := response.read(2**20):
                    fh.write(chunk)
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            Path(tmp).unlink(missing_ok=True)
            why = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or type(exc).__name__
            raise EnsdivError(f"Could not download the cache bundle {source} ({why}); check the address and the "
                              "network, or download it and give its path.") from None
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return Path(tmp), True
    path = Path(source)
    if not path.is_file():
        raise EnsdivError(f"The cache bundle {source} does not exist; give a bundle file or an http(s) URL.")
    return path, False


def _entry_digest(path: Path) -> str | None:
    """The SHA-256 an entry file's header states for its body (None when the file has no such header): which
    computation's bytes the file holds, read without reading the body."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEADER)
    except OSError:
        return None
    return head[len(_MAGIC):-1].decode("ascii", "replace") if len(head) == _HEADER and head.startswith(_MAGIC) \
        else None


def imported_entries(store: Store) -> dict[str, dict]:
    """``{entry path: {"bundle", "scale", "imported", "source"}}`` of every entry the store took from a bundle
    (its record, :data:`IMPORTS`) and still holds as imported: an entry recomputed here since (stale code, another
    environment) holds other bytes and is no longer the bundle's (imports recorded before the digests were kept are
    judged by path). A line that cannot be read is skipped."""
    out: dict[str, dict] = {}
    try:
        lines = (store.root / IMPORTS).read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            rec = json.loads(line)
            digests = rec.get("digests") or {}
            for rel in rec["entries"]:
                if str(rel) in digests and _entry_digest(store.root / str(rel)) != digests[str(rel)]:
                    out.pop(str(rel), None)  # recomputed here since (or gone): not the bundle's any more
                    continue
                out[str(rel)] = {k: rec.get(k) for k in ("bundle", "scale", "imported", "source")}
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def import_bundle(store: Store, source: str | Path, *, max_entry_bytes: int = MAX_ENTRY_BYTES) -> dict:
    """Check every entry of a bundle and add those the store lacks (see the module docstring); record what was
    added, from which bundle (its SHA-256), at which scale and when, in the store's :data:`IMPORTS` (a bundle is
    trusted input, like code: the book says which pages used its entries).

    Returns:
        ``{"entries", "added", "present", "scale", "bundle"}``.

    Raises:
        EnsdivError: not a bundle, a truncated or corrupt archive, a download that failed, a member that is not
            a listed store entry (or sits under another key's folder, or is larger than the manifest says, than
            ``max_entry_bytes`` or than the free space), a header, checksum or key mismatch, an entry that does not
            load as weights — one sentence naming it.
    """
    if max_entry_bytes < 1:
        raise EnsdivError(f"The largest entry to import must be at least 1 byte, got {max_entry_bytes}.")
    path, temporary = _fetch(str(source))
    try:
        return _import(store, path, str(source), max_entry_bytes)
    finally:
        if temporary:
            path.unlink(missing_ok=True)


def _sha_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(2**20):
            h.update(chunk)
    return h.hexdigest()


def _import(store: Store, path: Path, source: str, max_entry_bytes: int) -> dict:
    import zlib

    staged: list[tuple[Path, Path]] = []  # (temporary file, final path) of entries checked and not yet present
    try:
        try:
            tar = tarfile.open(path, "r:*")
        except (tarfile.TarError, OSError, EOFError, zlib.error):
            raise EnsdivError(f"{source} is not a cache bundle (not a readable tar file); export one with "
                              "`ensdiv cache export`.") from None
        with tar:
            try:
                manifest, listed, members = _manifest(tar, source)
                entries = _check_members(store, tar, members, listed, source, staged, max_entry_bytes)
            except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
                if isinstance(exc, OSError) and not isinstance(exc, EOFError) and exc.strerror:
                    raise EnsdivError(f"Could not import {source} into {store.root} ({exc.strerror}); nothing was "
                                      "imported.") from None
                raise EnsdivError(f"{source} is truncated or corrupt ({type(exc).__name__}); nothing was "
                                  "imported.") from None
        added, digests = [], {}
        for tmp, final in staged:
            if final.exists():
                continue
            tmp.replace(final)
            rel = final.relative_to(store.root).as_posix()
            added.append(rel)
            digests[rel] = _entry_digest(final)
        if added:
            line = {"bundle": _sha_of(path), "source": source, "scale": manifest.get("scale"),
                    "created": manifest.get("created"), "imported": time.strftime("%Y-%m-%dT%H:%M:%S"),
                    "entries": added, "digests": digests}
            with open(store.root / IMPORTS, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")
        return {"entries": entries, "added": len(added), "present": entries - len(added),
                "scale": manifest.get("scale"), "bundle": _sha_of(path)}
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)


def _load_checked(path: Path) -> dict | None:
    """The ``{"config", "payload"}`` dict of an entry file whose header and checksum were checked while it was
    streamed, loaded from the file after its header (``weights_only``: nothing unpickled with code), not from a
    copy of its bytes in memory; ``None`` when it does not load as an entry."""
    import torch

    try:
        with open(path, "rb") as fh:
            fh.seek(_HEADER)
            obj = torch.load(fh, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - any unpickling failure means a bad entry
        return None
    # the shape test of ensdiv.store._decode, which takes bytes; sharing it would change a function every page
    # runs and stale every dry run
    ok = isinstance(obj, dict) and set(obj) - {"code"} == {"config", "payload"} and isinstance(obj["config"], dict)
    return obj if ok else None


def _manifest(tar: tarfile.TarFile, source: str) -> tuple[dict, dict[str, tuple[str, int]], list]:
    members = tar.getmembers()
    names = [m.name for m in members]
    if "manifest.json" not in names:
        raise EnsdivError(f"{source} has no manifest.json, so it is not a cache bundle of ensdiv.")
    info = members[names.index("manifest.json")]
    if not info.isfile() or info.size > _MAX_MANIFEST:
        raise EnsdivError(f"The manifest of {source} is not a plain file of sensible size.")
    try:
        manifest = json.loads(tar.extractfile(info).read())
        listed = {e["path"]: (e["sha256"], int(e["bytes"])) for e in manifest["entries"]}
        ok_format = manifest.get("format") == FORMAT
    except (ValueError, KeyError, TypeError, AttributeError):
        raise EnsdivError(f"The manifest of {source} is not valid; export the bundle again.") from None
    if not ok_format:
        raise EnsdivError(f"{source} is a bundle of format {manifest.get('format')!r}, not {FORMAT!r}.")
    return manifest, listed, members


def _check_members(store: Store, tar: tarfile.TarFile, members: list, listed: dict, source: str,
                   staged: list[tuple[Path, Path]], max_entry_bytes: int) -> int:
    """Check each member against the manifest (its size before it is read, against the cap and the free space
    too; its entry header on the first chunk; then its SHA-256, checksum, decoding and key), streaming it to a
    temporary file in its store folder; returns the number of entries."""
    seen = set()
    for m in members:
        if m.name == "manifest.json":
            continue
        match = _ENTRY.match(m.name)
        if not match or m.name not in listed:
            raise EnsdivError(f"The member {m.name!r} of {source} is not a store entry its manifest lists; "
                              "nothing was imported.")
        if not m.isfile():  # listed, at a store path, but a link or a special file: an entry is a regular file
            kind = "a symbolic link" if m.issym() else "a hard link" if m.islnk() else "not a regular file"
            raise EnsdivError(f"The member {m.name!r} of {source} is {kind}, and a store entry is a regular file; "
                              "nothing was imported.")
        key = match.group(1)
        if m.name.split("/")[1] != key[:2]:
            raise EnsdivError(f"The member {m.name!r} of {source} is not under its key's folder "
                              f"({key[:2]}/); nothing was imported.")
        digest, size = listed[m.name]
        if m.size != size:
            raise EnsdivError(f"The member {m.name!r} of {source} holds {m.size} bytes where its manifest lists "
                              f"{size}; nothing was imported.")
        if m.size > max_entry_bytes:
            raise EnsdivError(f"The member {m.name!r} of {source} is {m.size} bytes, over the largest entry an import "
                              f"accepts ({max_entry_bytes}; `ensdiv cache import --max-entry-size` raises it); "
                              "nothing was imported.")
        final = store.root / m.name
        final.parent.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(final.parent).free
        if m.size > free:
            raise EnsdivError(f"The member {m.name!r} of {source} needs {m.size} bytes and {final.parent} has {free} "
                              "free; nothing was imported.")
        fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=".import-", suffix=".tmp")
        staged.append((Path(tmp), final))
        h, inner = hashlib.sha256(), hashlib.sha256()
        head = b""
        with open(fd, "wb") as fh, tar.extractfile(m) as src:
            while chunk := src.read(2**20):
                h.update(chunk)
                if len(head) < _HEADER:  # the entry header, checked before anything more is read
                    take = _HEADER - len(head)
                    head, chunk_rest = head + chunk[:take], chunk[take:]
                    if len(head) == _HEADER and not (head.startswith(_MAGIC) and _HEX.match(head[len(_MAGIC):])):
                        raise EnsdivError(f"The member {m.name!r} of {source} is not a sound entry of its key (it "
                                          "does not start with a store entry's header); nothing was imported.")
                    inner.update(chunk_rest)
                else:
                    inner.update(chunk)
                fh.write(chunk)
            os.fchmod(fh.fileno(), 0o666 & ~_umask())  # the permissions of any new file, as the store's own
        if h.hexdigest() != digest:
            raise EnsdivError(f"The member {m.name!r} of {source} does not match its manifest's SHA-256; "
                              "nothing was imported.")
        if len(head) < _HEADER or inner.hexdigest().encode() != head[len(_MAGIC):-1]:
            raise EnsdivError(f"The member {m.name!r} of {source} is not a sound entry of its key (its own header "
                              "checksum does not hold); nothing was imported.")
        obj = _load_checked(Path(tmp))
        if obj is None or _stored_key(obj) != key:
            raise EnsdivError(f"The member {m.name!r} of {source} is not a sound entry of its key (checksum, "
                              "format or configuration); nothing was imported.")
        seen.add(m.name)
    missing = sorted(set(listed) - seen)
    if missing:
        raise EnsdivError(f"{source} lacks the entry {missing[0]!r} its manifest lists; nothing was imported.")
    return len(seen)
