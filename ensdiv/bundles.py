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

any failure is one sentence naming the member, and nothing of that bundle enters the store (entries are
checked before the first is written, then written atomically). Entries already present are left as they are.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from ensdiv.errors import EnsdivError
from ensdiv.store import Store, _decode, _stored_key

__all__ = ["FORMAT", "export_bundle", "import_bundle"]

FORMAT = "ensdiv-cache-bundle-1"
_ENTRY = re.compile(r"^[a-z0-9_-]+/[0-9a-f]{2}/([0-9a-f]{64})\.pt$")
_MAX_MANIFEST = 64 * 2**20


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
    with tarfile.open(tmp, "w:gz" if file.name.endswith(".gz") else "w") as tar:
        for name, data in [("manifest.json", json.dumps(manifest, indent=1).encode()), *blobs.items()]:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(file)
    return {"file": str(file), "entries": len(entries), "bytes": sum(e["bytes"] for e in entries),
            "skipped": skipped}


def _fetch(source: str) -> Path:
    """A local path, or a URL downloaded to a temporary file (the user has internet; runs never download)."""
    if re.match(r"^https?://", source):
        fd, tmp = tempfile.mkstemp(suffix=".ensdiv-bundle")
        with urllib.request.urlopen(source) as response, open(fd, "wb") as fh:  # noqa: S310 - a user's URL
            while chunk := response.read(2**20):
                fh.write(chunk)
        return Path(tmp)
    path = Path(source)
    if not path.is_file():
        raise EnsdivError(f"The cache bundle {source} does not exist; give a bundle file or an http(s) URL.")
    return path


def import_bundle(store: Store, source: str | Path) -> dict:
    """Check every entry of a bundle and add those the store lacks (see the module docstring).

    Returns:
        ``{"entries", "added", "present"}``.

    Raises:
        EnsdivError: not a bundle, a member that is not a listed store entry, a checksum or key mismatch, an
            entry that does not load as weights — one sentence naming the member.
    """
    path = _fetch(str(source))
    try:
        tar = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError):
        raise EnsdivError(f"{source} is not a cache bundle (not a readable tar file); export one with "
                          "`ensdiv cache export`.") from None
    with tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        if "manifest.json" not in names:
            raise EnsdivError(f"{source} has no manifest.json, so it is not a cache bundle of ensdiv.")
        info = members[names.index("manifest.json")]
        if not info.isfile() or info.size > _MAX_MANIFEST:
            raise EnsdivError(f"The manifest of {source} is not a plain file of sensible size.")
        try:
            manifest = json.loads(tar.extractfile(info).read())
            listed = {e["path"]: e["sha256"] for e in manifest["entries"]}
            ok_format = manifest.get("format") == FORMAT
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EnsdivError(f"The manifest of {source} is not valid; export the bundle again.") from None
        if not ok_format:
            raise EnsdivError(f"{source} is a bundle of format {manifest.get('format')!r}, not {FORMAT!r}.")
        blobs: dict[str, bytes] = {}
        for m in members:
            if m.name == "manifest.json":
                continue
            if not m.isfile() or not _ENTRY.match(m.name) or m.name not in listed:
                raise EnsdivError(f"The member {m.name!r} of {source} is not a store entry its manifest lists; "
                                  "nothing was imported.")
            data = tar.extractfile(m).read()
            if hashlib.sha256(data).hexdigest() != listed[m.name]:
                raise EnsdivError(f"The member {m.name!r} of {source} does not match its manifest's SHA-256; "
                                  "nothing was imported.")
            obj = _decode(data)
            if obj is None or _stored_key(obj) != Path(m.name).stem:
                raise EnsdivError(f"The member {m.name!r} of {source} is not a sound entry of its key (checksum, "
                                  "format or configuration); nothing was imported.")
            blobs[m.name] = data
        missing = sorted(set(listed) - set(blobs))
        if missing:
            raise EnsdivError(f"{source} lacks the entry {missing[0]!r} its manifest lists; nothing was imported.")
    added = 0
    for rel, data in blobs.items():
        final = store.root / rel
        if final.exists():
            continue
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=".import-", suffix=".tmp")
        with open(fd, "wb") as fh:
            fh.write(data)
        Path(tmp).replace(final)
        added += 1
    return {"entries": len(blobs), "added": added, "present": len(blobs) - added}
