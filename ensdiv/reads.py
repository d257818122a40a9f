"""What a run read: the files a page's code opened and the folders it listed, so a change to any of them,
however deep in the data it lies, re-runs it.

``ensdiv run`` / ``ensdiv book`` set two variables for the kernel of each page they execute (and, through the
environment, for its worker processes):

- ``ENSDIV_READS_ROOTS``: the folders whose reads matter (``$ENSDIV_DATA``, Debian's Fashion-MNIST folder,
  the benchmarks' results, the folders a page's parameters name), separated by ``os.pathsep``;
- ``ENSDIV_READS_LOG``: a file the process appends to.

``import ensdiv`` then installs an audit hook (:func:`sys.addaudithook`, the interpreter's own events
``open``, ``os.listdir`` and ``os.scandir``) that appends, once per process, every file below a root that was
opened and every folder below a root that was listed. After the run, :func:`compact` drops the files a listed
folder already covers (and stands a folder in for its files when a run opened many of them), and
:func:`signature` hashes each file's size and modification time and each folder's *direct entries* (names,
kinds, sizes, modification times). So an image overwritten anywhere below ``$ENSDIV_DATA`` re-runs the pages that
opened it, an image added re-runs the pages that listed its folder, and a page that opened one file of a folder
(the zoo's ``benchmarks/results/zoo_recipes.json``) does not re-run when another file there changes (recording a
build in ``book.json``), at the cost of one ``stat`` per file and one ``scandir`` per folder the page touched.

The hook is only installed when ``ENSDIV_READS_LOG`` is set; it cannot be removed (audit hooks are
permanent), so it does the least it can: a prefix test per event and one line per new path.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LOG_ENV", "ROOTS_ENV", "compact", "install_from_env", "read_log", "signature"]

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

    def note(path: str) -> None:
        if path in seen:
            return
        seen.add(path)
        busy[0] = True  # our own open() below raises an audit event too
        try:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(path + "\n")
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
        note(path)  # the file opened, or the folder listed

    sys.addaudithook(hook)
    _INSTALLED = True
    return True


def read_log(log: Path) -> list[str]:
    """The paths a log names (sorted, each once); ``[]`` for a missing log."""
    try:
        return sorted(set(filter(None, log.read_text(encoding="utf-8").splitlines())))
    except OSError:
        return []


def compact(paths: Iterable[str], *, per_folder: int = 16) -> list[str]:
    """The paths whose signature decides a rerun, from the files and folders a run read (sorted, each once).

    A file inside a folder the run listed is dropped (the folder's entries already cover it), and a folder
    stands in for its files when the run opened more than ``per_folder`` of them (an image folder read one
    file at a time: one ``scandir`` at check time instead of thousands of ``stat`` calls and lines in the
    executed copy). A path that no longer exists is kept as a file: it hashes as gone.

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> listed, opened = os.path.join(root, "listed"), os.path.join(root, "opened")
    >>> os.makedirs(listed), os.makedirs(opened)
    (None, None)
    >>> names = [os.path.join(listed, "a.png"), listed] + [os.path.join(opened, f"{i}.png") for i in range(3)]
    >>> [os.path.relpath(p, root) for p in compact(names, per_folder=2)]
    ['listed', 'opened']
    >>> [os.path.relpath(p, root) for p in compact(names[2:], per_folder=3)]
    ['opened/0.png', 'opened/1.png', 'opened/2.png']
    """
    paths = set(paths)
    folders = {p for p in paths if os.path.isdir(p)}
    files = [p for p in paths - folders if os.path.dirname(p) not in folders]
    counts = Counter(os.path.dirname(f) for f in files)
    crowded = {folder for folder, n in counts.items() if n > per_folder}
    return sorted(folders | crowded | {f for f in files if os.path.dirname(f) not in crowded})


def signature(paths: Iterable[str]) -> str:
    """SHA-256 over every path in sorted order: a folder's direct entries (name, kind, size, modification
    time), a file's own size and modification time; a path that is gone or unreadable hashes as such."""
    h = hashlib.sha256()
    for path in sorted(set(paths)):
        h.update(path.encode() + b"\0")
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except NotADirectoryError:
            try:
                st = os.stat(path)
                h.update(f"file|{st.st_size}|{st.st_mtime_ns}\n".encode())
            except OSError as exc:
                h.update(f"unreadable:{type(exc).__name__}\n".encode())
            continue
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
