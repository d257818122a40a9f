"""The environment a result was computed in: the lock file's pins and how the installed packages differ.

``requirements.lock`` (made by ``make lock`` with ``uv pip compile``: every package of the environment at an
exact version with its hashes, for CPython 3.11 on Linux x86-64) is what ``make setup`` installs. Its
:func:`fingerprint` keys what the environment decides: every cache entry (:mod:`ensdiv.store`), every page's
stamp and every dry-run ledger entry (:mod:`ensdiv.book`). It is a hash of the lock's pins, the Python version
(major.minor) and, only where the installed environment departs from the lock, the departures; so a fresh clone
installed with ``make setup`` finds every entry made under the same lock current, and an environment that
differs from the lock (an upgraded torch) keys its results apart and says which packages differ
(:func:`differences`). Without a lock (the package installed on its own) the fingerprint is that of the
installed distributions.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import sys
from pathlib import Path

__all__ = ["LOCK", "lock_file", "locked_versions", "installed_versions", "differences", "fingerprint", "versions",
           "changes", "describe", "conda_environment"]

#: The lock file, in the folder above the package (the repository root of a checkout).
LOCK = "requirements.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
_MEMO: dict[str, object] = {}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_file() -> Path | None:
    """The lock file of the checkout the package is imported from (``None`` when there is none)."""
    path = Path(__file__).resolve().parent.parent / LOCK
    return path if path.is_file() else None


def locked_versions(path: Path | None = None) -> dict[str, str]:
    """``{normalised name: version}`` of every ``name==version`` pin in a lock file (``{}`` without one)."""
    path = path or lock_file()
    if path is None:
        return {}
    out = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        m = _PIN.match(line)
        if m:
            out[_norm(m.group(1))] = m.group(2)
    return out


def installed_versions() -> dict[str, str]:
    """``{normalised name: version}`` of every installed distribution (the editable ``ensdiv`` left out)."""
    out = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and _norm(name) != "ensdiv":
            out[_norm(name)] = dist.version
    return out


def differences(path: Path | None = None) -> dict[str, tuple[str | None, str | None]]:
    """``{name: (locked, installed)}`` for every locked package installed at another version or missing
    (installed packages the lock does not name are left out: tools such as ``uv`` change no result). The
    installed versions are read once per process."""
    locked = locked_versions(path)
    if "installed" not in _MEMO:
        _MEMO["installed"] = installed_versions()
    installed = _MEMO["installed"]
    return {n: (v, installed.get(n)) for n, v in sorted(locked.items()) if installed.get(n) != v}


def fingerprint() -> str:
    """One hash of the environment results depend on (computed once per process)."""
    if "fingerprint" not in _MEMO:
        h = hashlib.sha256(f"python {sys.version_info.major}.{sys.version_info.minor}\n".encode())
        locked = locked_versions()
        if locked:
            for name, version in sorted(locked.items()):
                h.update(f"{name}=={version}\n".encode())
            for name, (want, have) in differences().items():
                h.update(f"differs {name}: {want} -> {have}\n".encode())
        else:
            for name, version in sorted(installed_versions().items()):
                h.update(f"installed {name}=={version}\n".encode())
        _MEMO["fingerprint"] = h.hexdigest()
    return str(_MEMO["fingerprint"])


def versions() -> dict[str, str]:
    """``{name: version}`` of the environment :func:`fingerprint` hashes: the lock's pins with the installed
    departures applied (``"missing"`` for a locked package not installed), or the installed distributions without a
    lock; with ``python`` (major.minor). Stored with every cache entry and page, so that a later miss can say which
    packages moved (:func:`changes`). Read once per process."""
    if "versions" not in _MEMO:
        locked = locked_versions()
        out = dict(locked) if locked else installed_versions()
        for name, (_, have) in (differences().items() if locked else ()):
            out[name] = have or "missing"
        out["python"] = f"{sys.version_info.major}.{sys.version_info.minor}"
        _MEMO["versions"] = dict(sorted(out.items()))
    return dict(_MEMO["versions"])  # type: ignore[call-overload]


def changes(was: object, *, shown: int = 5) -> str:
    """What moved from the versions ``was`` (a :func:`versions` of another time, or of some packages) to this
    environment's, in a few words (``"torch 2.4.1 -> 2.5.0"``, at most ``shown`` of the packages ``was`` names);
    ``describe()`` when ``was`` is no such record, or names no difference (the fingerprint then moved for another
    reason).

    >>> changes({**versions(), "python": "2.7"}).startswith("python 2.7 -> 3.")
    True
    """
    if not isinstance(was, dict) or not was:
        return describe()
    now = versions()
    moved = [f"{n} {was[n] or 'absent'} -> {now.get(n) or 'absent'}" for n in sorted(was) if was[n] != now.get(n)]
    if not moved:
        return describe()
    more = f" and {len(moved) - shown} more" if len(moved) > shown else ""
    return ", ".join(moved[:shown]) + more


def describe() -> str:
    """One line: which lock the environment follows and, when it departs from it, how."""
    lock = lock_file()
    if lock is None:
        return "no lock file: results are keyed by the installed packages' versions"
    diff = differences(lock)
    if not diff:
        return f"the locked environment ({len(locked_versions(lock))} packages, {LOCK})"
    shown = ", ".join(f"{n} {a} -> {b or 'missing'}" for n, (a, b) in list(diff.items())[:5])
    more = f" and {len(diff) - 5} more" if len(diff) > 5 else ""
    return f"departs from {LOCK}: {shown}{more}"


def conda_environment(path: Path | None = None) -> str:
    """``environment.yml`` for conda users, made from the lock: Python 3.11, Node.js (MathJax for offline math)
    and every locked package at its exact version through pip (``make lock`` writes it; a test checks it)."""
    pins = locked_versions(path)
    lines = [
        f"# Made from {LOCK} by `make lock` (python -m ensdiv.environment --conda environment.yml); do not edit.",
        "# conda env create -f environment.yml, then: pip install --no-deps -e .",
        "# The exact versions of the locked environment, without the lock's hashes (conda passes these to pip).",
        "name: ensdiv",
        "channels:",
        "  - conda-forge",
        "dependencies:",
        "  - python=3.11",
        "  - nodejs  # npm fetches MathJax for offline math (make mathjax)",
        "  - pip:",
        *(f"      - {name}=={version}" for name, version in sorted(pins.items()) if name != "pip"),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ensdiv.environment", description=describe.__doc__)
    parser.add_argument("--conda", metavar="FILE", help="write environment.yml made from the lock to FILE")
    args = parser.parse_args(argv)
    if args.conda:
        Path(args.conda).write_text(conda_environment(), encoding="utf-8")
        print(f"wrote {args.conda} from {LOCK}")
    print(describe())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
