"""The dry-run ledger: which page passed its paper dry run, and what that run executed (issues #33 and #34).

Dry-running all 56 pages at their paper presets takes about 40 minutes on two cores, more than ``make test`` can
add beside the smoke runs. The dry runs share with the book what the book already knows about a page's run: the
package code it executed (:mod:`ensdiv.tracing`). ``make dry-run`` writes, for every page whose dry run passes,
one entry of a ledger committed with the code (``tests/dry_runs.json``):

- ``source``: the notebook's hash; ``environment``: the environment's fingerprint
  (:func:`ensdiv.environment.fingerprint`: the lock file's pins, so a fresh clone installed from the lock finds
  every entry current); ``versions``: the installed versions of :data:`~ensdiv.book.stamps.DEPENDENCIES`, only to
  name the package that changed; ``book_data``: the hash of ``book/data``; ``harness``: the hash of the
  fake-data generator (:mod:`ensdiv.data.paper.fake`, run outside the page, so not traced);
- ``ran``: every unit of package code the dry run executed outside the build layer (:data:`ensdiv.tracing.NEUTRAL`:
  every smoke page of ``make test`` runs that code; entries recorded before 2026-12 list it, and it keeps its
  recorded hash), by file relative to the project root, and ``code``: one
  hash over their sources without docstrings and comments (:func:`ensdiv.tracing.code_hashes`). The ledger's
  top-level ``units`` holds each unit's hash as last recorded, only to name the unit that changed;
- ``cache``: the dry cache entries it loaded or saved (what it shows; ``ran`` already holds the units of every
  entry it loaded, so a page answered by an entry another page's dry run trained re-runs when the training code
  changes, by its own record).

``make test`` then dry-runs a page only when its entry is missing or stale (:func:`stale_reason`), and otherwise
reports it skipped with the date its dry run passed: what pytest-testmon does for tests, for dry runs. A page
changes nothing in the ledger by being skipped; only a passing run records (``ENSDIV_DRY_RECORD=1``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from ensdiv import tracing
from ensdiv.book.stamps import environment_stamp, meta_of, sha, tree_hash, versions
from ensdiv.data.paper.fake import generator_hash
from ensdiv.errors import EnsdivError
from ensdiv.paths import project_root

__all__ = ["LEDGER", "RECORD_ENV", "read_ledger", "dry_entry", "stale_reason", "record_dry_run", "harness_hash"]

#: The committed ledger of the book's dry runs.
LEDGER = Path("tests") / "dry_runs.json"
#: Set to ``1`` to record each passing dry run in the ledger (``make dry-run`` does).
RECORD_ENV = "ENSDIV_DRY_RECORD"


def harness_hash(root: Path | None = None) -> str:
    """Hash of what prepares a dry run outside the page: the whole fake-data generator module (every definition,
    methods included), docstrings and comments left out (:func:`ensdiv.data.paper.fake.generator_hash`); ``""``
    when it cannot be read."""
    return generator_hash(Path(root or project_root()) / "ensdiv/data/paper/fake.py")


def _key(notebook: Path, root: Path) -> str:
    return Path(notebook).resolve().relative_to(root.resolve()).as_posix()


def read_ledger(path: Path) -> dict[str, Any]:
    """The ledger: ``{"pages": {notebook: entry}, "units": {unit: hash}}`` (empty when the file is missing,
    unreadable or malformed: every page then runs)."""
    try:
        book = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {"pages": {}, "units": {}}
    if not isinstance(book, dict) or not isinstance(book.get("pages"), dict):
        return {"pages": {}, "units": {}}
    return {"pages": book["pages"], "units": book.get("units") if isinstance(book.get("units"), dict) else {}}


def _environment(root: Path) -> dict[str, Any]:
    return {"environment": environment_stamp(), "book_data": tree_hash(root / "book" / "data"),
            "harness": harness_hash(root)}


def dry_entry(executed: Path, notebook: Path, *, seconds: float, root: Path | None = None) -> dict[str, Any]:
    """The ledger entry of a passing dry run, from its executed copy's record (:mod:`ensdiv.book.stamps`).

    Raises:
        EnsdivError: the copy is not of a finished run, or it has no record of the code it executed.
    """
    root = Path(root or project_root()).resolve()
    meta = meta_of(Path(executed))
    code = meta.get("code") if meta.get("status") == "ok" else None
    if not isinstance(code, dict) or not isinstance(code.get("units"), list):
        raise EnsdivError(f"{executed} is not a finished run with a record of its code; it cannot enter the ledger.")
    units = [tuple(u) for u in code["units"] if isinstance(u, list | tuple) and len(u) == 2]
    ran: dict[str, list[str]] = {}
    for file, qualname in units:
        path = Path(file).resolve()
        if path.is_relative_to(root):
            ran.setdefault(path.relative_to(root).as_posix(), []).append(qualname)
    ran = {f: sorted(set(q)) for f, q in sorted(ran.items()) if not f.startswith(tracing.NEUTRAL)}
    return {"when": _dt.date.today().isoformat(), "seconds": round(float(seconds), 1),
            "source": sha(Path(notebook).read_bytes()), **_environment(root), "versions": versions(),
            "code": _code_hash(ran, root),
            "units": _unit_hashes(ran, root), "ran": ran, "cache": sorted(str(c) for c in meta.get("cache") or [])}


def _pairs(ran: dict[str, list[str]], root: Path) -> dict[str, tuple[str, str]]:
    """``{"<file>::<qualname>": (absolute file, qualname)}`` of a ``ran`` mapping."""
    return {f"{file}::{q}": (str(root / file), q) for file, names in ran.items() for q in names}


def _unit_hashes(ran: dict[str, list[str]], root: Path, recorded: dict[str, str] | None = None) -> dict[str, str]:
    """Each unit's hash now, by its relative key; a unit of the build layer (:data:`ensdiv.tracing.NEUTRAL`: the
    store, the recorder, the book's runner) keeps its ``recorded`` hash: every smoke page of ``make test`` runs that
    code, and a dry run checks the paper path, so an edit there makes no dry run stale."""
    recorded = recorded or {}
    pairs = _pairs(ran, root)
    now = tracing.current_hashes([p for k, p in pairs.items() if not (k.startswith(tracing.NEUTRAL) and k in recorded)])
    return {key: recorded[key] if key.startswith(tracing.NEUTRAL) and key in recorded else now[pair]
            for key, pair in pairs.items()}


def _code_hash(ran: dict[str, list[str]], root: Path) -> str:
    return tracing.combined(_unit_hashes(ran, root))


def _own_change(entry: dict[str, Any], notebook: Path | None, root: Path, env: dict[str, Any],
                recorded: dict[str, str]) -> str | None:
    """What changed since ``entry`` was recorded, in the page itself (None: nothing)."""
    if notebook is not None:
        try:
            if sha(Path(notebook).read_bytes()) != entry.get("source"):
                return "the notebook changed"
        except OSError:
            return "the notebook is gone"
    if entry.get("environment") != env["environment"]:
        was = entry.get("versions") if isinstance(entry.get("versions"), dict) else {}
        now = versions()
        moved = [f"{n} {was.get(n)} -> {now.get(n)}" for n in sorted(now) if was and was.get(n) != now.get(n)]
        return "the environment changed" + (f" ({', '.join(moved)})" if moved else " (requirements.lock)")
    for field in ("book_data", "harness"):
        if entry.get(field) != env[field]:
            what = {"book_data": "book/data", "harness": "the fake-data generator"}[field]
            return f"{what} changed"
    ran = entry.get("ran")
    if not isinstance(ran, dict) or not ran or not all(isinstance(v, list) for v in ran.values()):
        return "its record lists no code"
    now = _unit_hashes(ran, root, recorded)
    if tracing.combined(now) == entry.get("code"):
        return None
    for key, value in sorted(now.items()):  # name a unit that differs from its last recorded hash, if one does
        if recorded.get(key) not in (None, value):
            file, qualname = key.split("::", 1)
            return f"code it ran changed ({file}: {qualname})"
    return f"code it ran changed since {entry.get('when', 'its dry run')}"


def stale_reason(ledger: dict[str, Any], notebook: Path, *, root: Path | None = None) -> str | None:
    """Why ``notebook``'s dry run must run again, or None when its ledger entry is current.

    Stale: no entry; the notebook, the environment (the lock's pins, the Python version, a departure from the
    lock), ``book/data`` or the fake-data generator changed; a unit of code the dry run executed changed (its
    source without docstrings and comments, with the module-level bindings it names) or is gone. A page that
    loaded a dry cache entry another page computed holds that entry's units in its own record
    (:func:`ensdiv.tracing.note_units`), so no page is stale for another's sake.
    """
    root = Path(root or project_root()).resolve()
    units = ledger.get("units") if isinstance(ledger.get("units"), dict) else {}
    ledger = ledger.get("pages") if isinstance(ledger.get("pages"), dict) else {}
    key = _key(notebook, root)
    entry = ledger.get(key)
    if not isinstance(entry, dict):
        return "it has no entry in the ledger"
    env = _environment(root)
    return _own_change(entry, notebook, root, env, units)


def record_dry_run(path: Path, notebook: Path, entry: dict[str, Any], *, root: Path | None = None) -> None:
    """Put ``entry`` (:func:`dry_entry`) into the ledger at ``path`` under ``notebook``; its unit hashes update the
    ledger's table. The file is written whole, one page per line, then moved into place."""
    root = Path(root or project_root()).resolve()
    path = Path(path)
    book = read_ledger(path)
    entry = dict(entry)
    book["units"].update(entry.pop("units", {}))
    book["pages"][_key(notebook, root)] = entry
    lines = [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(book["pages"].items())]
    units = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(book["units"].items())]
    text = ('{\n "about": "ensdiv.book.ledger: the last passing dry run of each page (make dry-run)",\n'
            ' "pages": {\n' + ",\n".join(lines) + '\n },\n "units": {\n' + ",\n".join(units) + "\n }\n}\n")
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)
