"""The processes a build starts, and how they end: SIGTERM and SIGHUP turned into Ctrl-C, the kernels and
workers a run started ended with it, jupyter-book run in (and ended with) a process group of its own."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from typing import Any

__all__ = ["signals_as_interrupts", "end_process_group", "run_group"]


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`KeyboardInterrupt` as Ctrl-C does, so every
    ``finally`` runs (partial notebooks and staging removed, locks released, jupyter-book's process group
    ended); when the block ends on an interrupt, the processes this one started (notebook kernels, the
    zoo's training workers) are ended too. The ``ensdiv`` command wraps ``run`` and ``book`` in it."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    except KeyboardInterrupt:
        _end_children()
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

def _end_children(grace: float = 5.0) -> None:
    """SIGTERM every live descendant of this process, then SIGKILL those still alive after ``grace`` s.

    multiprocessing's resource tracker is left alone: it ignores SIGTERM (so ending it cost the whole grace) and
    ends by itself once the processes it serves have, after releasing what they left; killed, it was started
    again and printed a ``KeyError`` traceback for every semaphore it had lost."""
    import psutil

    children = [c for c in psutil.Process().children(recursive=True) if not _resource_tracker(c)]
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=grace)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()

def _resource_tracker(process: Any) -> bool:
    import psutil

    try:
        return any("resource_tracker" in part for part in process.cmdline())
    except psutil.Error:
        return False

def end_process_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session``), SIGKILL it after ``grace``
    seconds."""
    import signal

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue

def run_group(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a process group of its own and, if this process is interrupted (Ctrl-C, or a SIGTERM the
    ``ensdiv`` command turns into one), end that whole group before going on: no orphan keeps writing."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate()
    except BaseException:
        end_process_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
