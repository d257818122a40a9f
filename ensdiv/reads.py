"""What a run read: the data folders a page's code opened or listed, so a change deep inside them re-runs it.

``ensdiv run`` / ``ensdiv book`` set two variables for the kernel of each page they execute (and, through the
environment, for its worker processes):

- ``ENSDIV_READS_ROOTS``: the folders whose reads matter (``$ENSDIV_DATA``, Debian's Fashion-MNIST folder,
  the folders a page's parameters name), separated by ``os.pathsep``;
- ``ENSDIV_READS_LOG``: a file the process appends to.

``import ensdiv`` then installs an audit hook (:func:`sys.addaudithook`, the interpreter's own events
``open``, ``os.listdir`` and ``os.scandir``) that appends, once per process, every folder below a root in
which a file was opened or which was listed. After the run, :func:`signature` hashes each such folder's
*direct entries* (names, kinds, sizes, modification times), so an image overwritten, added or removed
anywhere below ``$ENSDIV_DATA`` changes the page's signature however deep it lies, at the cost of one
``scandir`` per folder the page touched (not a walk of the whole data tree).

The hook is only installed when ``ENSDIV_READS_LOG`` is set; it cannot be removed (audit hooks are
permanent), so it does the least it can: a prefix test per event and one line per new folder.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LOG_ENV", "ROOTS_ENV", "install_from_env", "read_log", "signature"]

LOG_ENV = "ENSDIV_READS_LOG"
ROOTS_ENV = "ENSDIV_READS_ROOTS"
_INSTALLED = False


def _roots_from_env() -> tuple[str, ...]:
    roots = []
    for part in os.environ.get(ROOTS_ENV, "").split(os.pathsep):
        if part:
            real = os.path.realpath(part)
            roots.append(real.rstrip(os.sep) + os.sep)
    return tuple(roots)


def install_from_env() -> bool:
    """Install the audit hook when ``$ENSDIV_READS_LOG`` is set (once per process); returns whether it is on."""
    global _INSTALLED
    log = os.environ.get(LOG_ENV)
    if _INSTALLED or not log:
        return _INSTALLED
    roots = _roots_from_env()
    if not roots:
        return False
    seen: set[str] = set()
    busy = [False]

    def note(folder: str) -> None:
        if folder in seen:
            return
        seen.add(folder)
        busy[0] = True  # our own open() below raises an audit event too
        try:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(folder + "\n")
        except OSError:
            pass  # a missing log only means a coarser rerun check, never a failed page
        finally:
            busy[0] = False

    def hook(event: str, args: tuple) -> None:
        if busy[0] or event not in ("open", "os.listdir", "os.scandir") or not args:
            return
        path = args[0]
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str | os.PathLike):
            return  # a file descriptor
        path = os.path.abspath(os.fspath(path))
        if not (path + os.sep).startswith(roots) and not path.startswith(roots):
            real = os.path.realpath(path)
            if not (real + os.sep).startswith(roots):
                return
        note(path if event != "open" else os.path.dirname(path))

    sys.addaudithook(hook)
    _INSTALLED = True
    return True


def read_log(log: Path) -> list[str]:
    """The folders a log names (sorted, each once); ``[]`` for a missing log."""
    try:
        return sorted(set(filter(None, log.read_text(encoding="utf-8").splitlines())))
    except OSError:
        return []


def signature(folders: Iterable[str]) -> str:
    """SHA-256 over every folder's direct entries (name, kind, size, modification time), in sorted order; a
    folder that is gone or unreadable hashes as such."""
    h = hashlib.sha256()
    for folder in sorted(set(folders)):
        h.update(folder.encode() + b"\0")
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            h.update(f"unreadable:{type(exc).__name__}\n".encode())
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=True)
                h.update(f"{e.name}|{int(e.is_dir())}|{st.st_size}|{st.st_mtime_ns}\n".encode())
            except OSError:
                h.update(f"{e.name}|gone\n".encode())
    return h.hexdigest()


install_from_env()  # at import: a kernel started by ensdiv run/book records its reads from the start
