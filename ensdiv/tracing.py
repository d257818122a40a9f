"""What code a computation executed, and a hash of each piece as the source is now.

Two records use it, with one trace function:

- **Pages.** ``ensdiv run`` / ``ensdiv book`` set ``ENSDIV_TRACE_LOG`` (a file to append to) and, optionally,
  ``ENSDIV_TRACE_ROOTS`` (the source folders that count, ``os.pathsep``-separated; the ``ensdiv`` package by
  default) for the kernel of each page. ``import ensdiv`` then calls :func:`install_from_env` before it imports
  anything else, and every unit of the roots' code the page runs is appended to the log once per process. A
  page re-runs when a unit it used changed (:mod:`ensdiv.book.stamps`).
- **Cache entries.** :class:`ensdiv.store.Store` opens a :class:`Recorder` when an entry is missing (it is
  about to be computed) and closes it when the entry is saved: the entry keeps the units its computation ran
  and their hashes (:func:`entry_record`), and a load serves it only while they hash the same
  (:func:`changed_unit`). A computation that loads another entry (a prediction loading its model) takes over
  that entry's units, so a change to the training code makes the model *and* its predictions stale, and a
  page that only loaded them re-runs too (:func:`note_units`). Code run in forked worker processes (a
  ``DataLoader``'s workers) is appended to the recorder's own log file and read back when it closes.

The trace function (:func:`sys.settrace`, also for new threads) sees each new Python frame and returns
``None``, so no line is traced and C calls cost nothing; it is installed at the first recording or at import
under a page log, and then stays (``benchmarks/bench_tracing.py`` measures its cost).

**Units and their hashes** (:func:`code_hashes`): a function's unit is its whole definition (decorators and
default values included); a method's also covers its class's outline (fields, class constants, bases, the
signatures of its methods); a class's unit is that outline; a module's (``<module>``) is the statements that
run for their effect at import (a registration call, an ``if`` block), not its definitions, imports or
assignments. Each unit's hash also covers the module-level **bindings it names**: the assignment of a constant
it reads (and what that assignment names in turn), followed through ``from … import`` into the roots' other
modules. So adding a function, an import or a constant to a module changes no unit, editing a constant
changes exactly the units that name it, and editing a docstring or a comment changes nothing (the hash is of
the AST without docstrings; comments and positions are not in it). Lambdas and comprehensions belong to the
definition around them. A unit that no longer exists hashes as ``"missing"``. A name bound in two modules
under one identifier may pull in both (an over-approximation: more re-runs, never a stale reuse).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LOG_ENV", "ROOTS_ENV", "NEUTRAL", "BIND", "install_from_env", "read_log", "code_hashes", "hashes_now",
           "current_hashes", "combined", "Recorder", "begin", "end", "open_units", "note_units", "entry_record",
           "changed_unit", "record_units", "relative", "absolute", "unit_of", "names_in", "binding_units",
           "strip_docstrings"]

LOG_ENV = "ENSDIV_TRACE_LOG"
ROOTS_ENV = "ENSDIV_TRACE_ROOTS"
_PACKAGE = str(Path(__file__).resolve().parent)
#: the folder above the package: entry records name files relative to it (a cache moved between clones stays valid)
BASE = Path(_PACKAGE).parent


def roots_from_env() -> list[str]:
    """The traced source folders: ``$ENSDIV_TRACE_ROOTS``, else the ``ensdiv`` package."""
    found = [os.path.realpath(p) for p in os.environ.get(ROOTS_ENV, "").split(os.pathsep) if p]
    return found or [_PACKAGE]


#: Third-party packages ``import ensdiv`` or nearly every page imports anyway (the training engine, the plots),
#: imported before a page's tracer starts: their import runs hundreds of thousands of Python frames, none of them
#: the package's (``benchmarks/bench_tracing.py``).
PRELOAD = ("numpy", "scipy.stats", "pandas", "statsmodels.api", "torch", "torchvision", "timm", "PIL.Image", "yaml",
           "tqdm", "lightning.fabric", "torchmetrics", "matplotlib.pyplot", "seaborn")


# --- the trace function --------------------------------------------------------------------------------------

class Recorder:
    """The units one cache entry's computation runs (opened by :func:`begin`, closed by :func:`end`)."""

    __slots__ = ("token", "codes", "units", "pid", "fork_log")

    def __init__(self, token: str):
        self.token = token
        self.codes: set[object] = set()
        self.units: set[tuple[str, str]] = set()
        self.pid = os.getpid()
        self.fork_log = os.path.join(tempfile.gettempdir(), f"ensdiv-rec-{os.getpid()}-{id(self):x}.log")


_STATE = {"installed": False, "page_log": None, "roots": ()}
_PREVIOUS = None  # a trace function installed before ours (a debugger's, coverage's): chained
_OUT: set[object] = set()  # code objects outside the roots (most frames: one set lookup each)
_IN: set[object] = set()  # code objects of the roots seen in this process
_STACK: list[Recorder] = []
_LOCK = threading.Lock()
_MAX_DEPTH = 256


def _trace(frame, event, arg):  # noqa: ANN001, ANN202 - the signature sys.settrace calls
    try:
        code = frame.f_code
        if code in _OUT:
            return None if _PREVIOUS is None else _PREVIOUS(frame, event, arg)
        if code not in _IN:
            if not code.co_filename.startswith(_STATE["roots"]):
                _OUT.add(code)
                return None if _PREVIOUS is None else _PREVIOUS(frame, event, arg)
            _IN.add(code)
            if _STATE["page_log"]:
                _append(_STATE["page_log"], f"{code.co_filename}\t{getattr(code, 'co_qualname', code.co_name)}\n")
        if _STACK:
            rec = _STACK[-1]
            if code not in rec.codes:
                rec.codes.add(code)
                if os.getpid() != rec.pid:  # a forked worker: the recorder's process reads this back
                    _append(rec.fork_log, f"{code.co_filename}\t{getattr(code, 'co_qualname', code.co_name)}\n")
    except (AttributeError, TypeError):  # the interpreter is shutting down: module globals are gone
        return None
    return None if _PREVIOUS is None else _PREVIOUS(frame, event, arg)


def _append(path: str, text: str) -> None:
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        pass  # no log means a re-run (page) or a recomputation (entry) later, never a wrong reuse


def _install() -> None:
    if _STATE["installed"]:
        return
    with _LOCK:
        if _STATE["installed"]:
            return
        global _PREVIOUS
        _STATE["roots"] = tuple(r.rstrip(os.sep) + os.sep for r in roots_from_env())
        current = sys.gettrace()
        _PREVIOUS = current if current is not _trace else None  # a debugger's or coverage's, chained
        sys.settrace(_trace)
        threading.settrace(_trace)
        _STATE["installed"] = True


def install_from_env() -> bool:
    """Trace the roots' code a page runs when ``$ENSDIV_TRACE_LOG`` is set (once per process)."""
    log = os.environ.get(LOG_ENV)
    if not log or _STATE["page_log"]:
        return bool(_STATE["page_log"])
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    _STATE["page_log"] = log
    _install()
    # the module bodies that ran before the tracer (``ensdiv/__init__`` itself, which installs it)
    roots = _STATE["roots"]
    for module in list(sys.modules.values()):
        file = os.path.realpath(getattr(module, "__file__", None) or "")
        if file.startswith(roots):
            _append(log, f"{file}\t<module>\n")
    return True


def begin(token: str) -> Recorder:
    """Open a recorder for the computation of the entry ``token`` (its kind and key); the trace function is
    installed if it is not yet. A token already open is reopened where it stands (a retried computation)."""
    _install()
    with _LOCK:
        for rec in reversed(_STACK):
            if rec.token == token:
                return rec
        if len(_STACK) >= _MAX_DEPTH:  # recorders of computations that never saved: fold the oldest two
            _fold(_STACK.pop(1), _STACK[0])
        rec = Recorder(token)
        _STACK.append(rec)
        return rec


def _units_of(rec: Recorder) -> set[tuple[str, str]]:
    found = set(rec.units)
    for code in list(rec.codes):
        found.add(unit_of(code.co_filename, getattr(code, "co_qualname", code.co_name)))
    try:
        with open(rec.fork_log, encoding="utf-8") as fh:
            found.update(unit_of(*line.rstrip("\n").split("\t", 1)) for line in fh if "\t" in line)
        os.unlink(rec.fork_log)
    except OSError:
        pass
    return found


def _fold(inner: Recorder, outer: Recorder) -> None:
    outer.units |= _units_of(inner)


def end(token: str) -> set[tuple[str, str]] | None:
    """Close the recorder of ``token`` and every recorder opened after it (their computations ran inside
    this one): returns the units they ran, which the recorder below it takes over too. ``None`` when no
    recorder of ``token`` is open (an entry saved without a miss before it in this process)."""
    with _LOCK:
        at = next((i for i in range(len(_STACK) - 1, -1, -1) if _STACK[i].token == token), None)
        if at is None:
            return None
        units: set[tuple[str, str]] = set()
        for rec in _STACK[at:]:
            units |= _units_of(rec)
        del _STACK[at:]
        if _STACK:
            _STACK[-1].units |= units
        return units


def open_units() -> set[tuple[str, str]]:
    """The units the computations open now have run so far (an empty set when none is open)."""
    with _LOCK:
        found: set[tuple[str, str]] = set()
        for rec in _STACK:
            found |= set(rec.units) | {unit_of(c.co_filename, getattr(c, "co_qualname", c.co_name))
                                       for c in list(rec.codes)}
        return found


def note_units(units: Iterable[tuple[str, str]]) -> None:
    """Units a computation or a page depends on without running them: those of a cache entry it loaded."""
    units = set(units)
    if not units:
        return
    with _LOCK:
        if _STACK:
            _STACK[-1].units |= units
    log = _STATE["page_log"] or os.environ.get(LOG_ENV)
    if log:
        _append(log, "".join(f"{f}\t{q}\n" for f, q in sorted(units)))


@functools.lru_cache(maxsize=4096)
def relative(file: str) -> str:
    """A unit's file as entry records name it: relative to the package's parent folder when below it."""
    path = Path(file)
    try:
        return path.resolve().relative_to(BASE).as_posix()
    except ValueError:
        return str(path)


@functools.lru_cache(maxsize=4096)
def absolute(file: str) -> str:
    return file if os.path.isabs(file) else str(BASE / file)


#: Package files whose code cannot change the value of a cache entry (storing it, recording it, reporting
#: progress, locating folders, raising errors, the book's build): left out of entry records, so editing them
#: recomputes nothing. Pages still re-run when such code they ran changes.
NEUTRAL = ("ensdiv/store.py", "ensdiv/tracing.py", "ensdiv/progress.py", "ensdiv/environment.py", "ensdiv/reads.py",
           "ensdiv/paths.py", "ensdiv/errors.py", "ensdiv/bundles.py", "ensdiv/book/")


def entry_record(units: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``{"<file relative to the package's parent>::<qualname>": hash}`` of units, for a cache entry (the
    :data:`NEUTRAL` files left out)."""
    pairs = {}
    for f, q in units:
        rel = relative(f)
        if not rel.startswith(NEUTRAL):
            pairs[(absolute(rel), q)] = f"{rel}::{q}"
    hashes = current_hashes(list(pairs))
    return {pairs[u]: hashes[u] for u in sorted(pairs, key=pairs.get)}


def changed_unit(record: dict[str, str]) -> str | None:
    """The first unit of an entry record whose source hashes otherwise now (``"<file>::<qualname>"``), or None."""
    pairs = {}
    for key in record:
        file, _, qualname = key.partition("::")
        pairs[key] = (absolute(file), qualname)
    now = current_hashes(list(pairs.values()))
    for key in sorted(record):
        if now[pairs[key]] != record[key]:
            return key
    return None


def record_units(record: dict[str, str]) -> list[tuple[str, str]]:
    """The ``(absolute file, qualname)`` units of an entry record."""
    out = []
    for key in record:
        file, _, qualname = key.partition("::")
        out.append((absolute(file), qualname))
    return out


# --- logs and units --------------------------------------------------------------------------------------------

def read_log(log: Path) -> list[tuple[str, str]]:
    """The units a log names, each once, sorted: ``(file, qualified name)``; ``[]`` for a missing log."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return sorted({unit_of(*line.split("\t", 1)) for line in lines if "\t" in line})


def unit_of(file: str, qualname: str) -> tuple[str, str]:
    """Lambdas and comprehensions belong to the definition around them."""
    parts = qualname.split(".")
    for i, part in enumerate(parts):
        if part.startswith("<") and part != "<locals>" and not (i == 0 and part == "<module>"):
            parts = parts[:i]
            break
    while parts and parts[-1] == "<locals>":
        parts = parts[:-1]
    return file, ".".join(parts) or "<module>"


# --- hashing ---------------------------------------------------------------------------------------------------

class _StripDocstrings(ast.NodeTransformer):
    def _strip(self, node: ast.AST) -> ast.AST:
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        self.generic_visit(node)
        return node

    visit_Module = visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _strip


def strip_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` without the docstrings of its module, classes and functions (in place)."""
    return _StripDocstrings().visit(tree)


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_ASSIGNS = (ast.Assign, ast.AnnAssign, ast.AugAssign)
_IMPORTS = (ast.Import, ast.ImportFrom)


def _outline(node: ast.AST) -> ast.AST:
    """A class with each definition in it reduced to its name, signature, bases and decorators (what runs when
    the class body runs)."""
    body = []
    for stmt in node.body:
        if isinstance(stmt, _DEFS):
            stmt = ast.copy_location(type(stmt)(**{**{f: getattr(stmt, f, None) for f in stmt._fields},
                                                   "body": [ast.Pass()]}), stmt)
        body.append(stmt)
    return type(node)(**{**{f: getattr(node, f, None) for f in node._fields}, "body": body})


def _effects(tree: ast.Module, assigned: set[str]) -> ast.Module:
    """A module's statements that run for their effect at import: not its definitions, imports or assignments,
    nor the calls that mutate one of its bindings (those belong to the binding, :func:`_mutated`)."""
    keep = [s for s in tree.body if not isinstance(s, _DEFS + _ASSIGNS + _IMPORTS) and _mutated(s, assigned) is None]
    return ast.Module(body=keep, type_ignores=[])


def _mutated(stmt: ast.AST, assigned: set[str]) -> str | None:
    """The module-level binding a top-level call mutates — ``register(PRESETS, ...)``, ``PRESETS.update(...)`` or
    ``PRESETS["a"]["b"].update(...)`` — or None. Such a call is part of that binding's value: a page that reads
    ``PRESETS`` depends on it, a page that only imports the module does not (an edit to one chapter's presets
    re-runs the pages that read them). So is a top-level loop over one of them (``for spec in PRESETS.values():
    spec["smoke"] = ...``)."""
    if isinstance(stmt, ast.For):
        root = stmt.iter.func.value if isinstance(stmt.iter, ast.Call) and isinstance(stmt.iter.func,
                                                                                      ast.Attribute) else stmt.iter
        while isinstance(root, ast.Subscript | ast.Attribute):
            root = root.value
        return root.id if isinstance(root, ast.Name) and root.id in assigned else None
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    owner = call.func.value if isinstance(call.func, ast.Attribute) else None
    while isinstance(owner, ast.Subscript | ast.Attribute):  # PRESETS["a"]["b"].update(...) mutates PRESETS
        owner = owner.value
    if isinstance(owner, ast.Name) and owner.id in assigned:
        return owner.id
    if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id in assigned:
        return call.args[0].id
    return None


def _names(node: ast.AST) -> set[str]:
    """Every identifier a piece of code names: variables and attribute names."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def _targets(stmt: ast.AST) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


class _Module:
    """One parsed source file: its definitions by qualified name and its top-level bindings by name."""

    def __init__(self, file: str, tree: ast.Module):
        self.file = file
        self.tree = tree
        self.index: dict[str, ast.AST] = {"<module>": tree}
        self.assigned: dict[str, list[ast.AST]] = {}
        self.defined: dict[str, ast.AST] = {}
        self.imported: dict[str, tuple[str, str | None]] = {}  # name -> (module file, name in it or None)
        self._walk(tree, "")
        for stmt in tree.body:
            if isinstance(stmt, _ASSIGNS):
                for name in _targets(stmt):
                    self.assigned.setdefault(name, []).append(stmt)
            elif isinstance(stmt, _DEFS):
                self.defined[stmt.name] = stmt
            elif isinstance(stmt, _IMPORTS):
                self._imports(stmt)
        for stmt in tree.body:
            name = _mutated(stmt, set(self.assigned))
            if name is not None:
                self.assigned[name].append(stmt)

    def _walk(self, node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _DEFS):
                name = f"{prefix}{child.name}"
                self.index[name] = child
                self._walk(child, f"{name}.<locals>." if not isinstance(child, ast.ClassDef) else f"{name}.")
            else:
                self._walk(child, prefix)

    def _imports(self, stmt: ast.AST) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                file = _module_file(alias.name)
                if file:
                    self.imported[(alias.asname or alias.name).split(".")[0]] = (
                        _module_file(alias.name.split(".")[0]) if not alias.asname else file, None)
            return
        base = stmt.module or ""
        if stmt.level:
            package = Path(self.file).parent
            for _ in range(stmt.level - 1):
                package = package.parent
            base = ".".join([*_dotted(package), *(base.split(".") if base else [])])
        for alias in stmt.names:
            sub = _module_file(f"{base}.{alias.name}")
            if sub:  # ``from package import module``
                self.imported[alias.asname or alias.name] = (sub, None)
                continue
            file = _module_file(base)
            if file:
                self.imported[alias.asname or alias.name] = (file, alias.name)


def _dotted(folder: Path) -> list[str]:
    """The dotted module path of a package folder (walking up while ``__init__.py`` exists)."""
    parts = []
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return parts


_MODULE_FILES: dict[tuple[tuple[str, ...], str], str | None] = {}


def _module_file(dotted: str) -> str | None:
    """The source file of a module below the traced roots' parents (``None`` for anything else)."""
    roots = tuple(roots_from_env())
    if (roots, dotted) in _MODULE_FILES:
        return _MODULE_FILES[(roots, dotted)]
    found = None
    parts = dotted.split(".")
    for root in roots:
        parent = Path(root).parent
        for cand in (parent.joinpath(*parts).with_suffix(".py"), parent.joinpath(*parts, "__init__.py")):
            if parts and cand.is_file() and str(cand.resolve()).startswith(root.rstrip(os.sep) + os.sep):
                found = str(cand.resolve())
                break
        if found:
            break
    _MODULE_FILES[(roots, dotted)] = found
    return found


class _Hasher:
    """Unit hashes of one pass over the sources (each file parsed once)."""

    def __init__(self) -> None:
        self.modules: dict[str, _Module | None] = {}
        self.touched: set[str] = set()  # the files the current unit's hash read

    def module(self, file: str) -> _Module | None:
        self.touched.add(file)
        if file not in self.modules:
            try:
                tree = strip_docstrings(ast.parse(Path(file).read_text(encoding="utf-8")))
                self.modules[file] = _Module(file, tree)
            except (OSError, SyntaxError, ValueError):
                self.modules[file] = None
        return self.modules[file]

    def bindings(self, file: str, names: set[str]) -> list[str]:
        """The dumps of the module-level bindings ``names`` reach from ``file``, transitively, followed through
        imports into the roots' modules (each ``(file, name)`` once)."""
        out: list[str] = []
        seen: set[tuple[str, str]] = set()
        todo = [(file, n) for n in sorted(names)]
        while todo:
            f, name = todo.pop()
            if (f, name) in seen:
                continue
            seen.add((f, name))
            mod = self.module(f)
            if mod is None:
                continue
            for stmt in mod.assigned.get(name, []):
                out.append(f"{relative(f)}:{name}={ast.dump(stmt)}")
                for n in _names(stmt):
                    if n in mod.defined:  # ``X = make()``: the value depends on ``make``, run at import
                        out.append(f"{relative(f)}:{n}={ast.dump(mod.defined[n])}")
                    elif (f, n) not in seen:
                        todo.append((f, n))
            if name in mod.imported:
                target, inner = mod.imported[name]
                if inner is not None:
                    todo.append((target, inner))
                else:  # a module used as ``module.NAME``: the names this code reads there
                    todo.extend((target, n) for n in names if (target, n) not in seen)
        return sorted(set(out))

    def unit(self, file: str, qualname: str) -> str:
        mod = self.module(file)
        if qualname.startswith(BIND):  # a constant a page's own cells name
            found = self.bindings(file, {qualname[len(BIND):]})
            return hashlib.sha256("\n".join(found).encode()).hexdigest() if found else "missing"
        node = mod.index.get(qualname) if mod else None
        if node is None:
            return "missing"
        if isinstance(node, ast.Module):
            shown: ast.AST = _effects(node, set(mod.assigned))
        elif isinstance(node, ast.ClassDef):
            shown = _outline(node)
        else:
            shown = node
        parts = [ast.dump(shown)]
        names = _names(shown)
        owner = qualname.rsplit(".", 1)[0] if "." in qualname else ""
        cls = mod.index.get(owner) if owner else None
        if isinstance(cls, ast.ClassDef) and shown is node:  # a method: its class's outline too
            parts.append(ast.dump(_outline(cls)))
            names |= _names(_outline(cls))
        parts.extend(self.bindings(file, names))
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()


#: The prefix of a unit that is one module-level binding (``<bind>:LEVEL``): a name a page's cells read.
BIND = "<bind>:"


def names_in(tree: ast.AST) -> set[str]:
    """Every identifier a piece of code names (variables and attributes)."""
    return _names(tree)


def binding_units(files: Iterable[str], names: set[str]) -> list[tuple[str, str]]:
    """``(file, "<bind>:NAME")`` for each name assigned at the top level of one of ``files``."""
    hasher = _Hasher()
    out = []
    for file in files:
        mod = hasher.module(file)
        if mod is not None:
            out.extend((file, f"{BIND}{n}") for n in sorted(names & set(mod.assigned)))
    return out


def hashes_now(units: Iterable[tuple[str, str]]) -> dict[str, str]:
    """:func:`code_hashes`, answered from the per-process memo of :func:`current_hashes`."""
    pairs = sorted(set(units))
    now = current_hashes(pairs)
    return {f"{f}::{q}": now[(f, q)] for f, q in pairs}


def code_hashes(units: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``{"<file>::<qualname>": sha256}`` of each unit's source as it is now (``"missing"`` when the file or
    the definition is gone)."""
    hasher = _Hasher()
    return {f"{file}::{qualname}": hasher.unit(file, qualname) for file, qualname in sorted(set(units))}


_HASHES: dict[tuple[str, str], tuple[tuple, str]] = {}  # unit -> (the stats of the files it read, hash)
_DEPS: dict[tuple[str, str], tuple[str, ...]] = {}


def _stat(file: str) -> tuple[int, int]:
    try:
        st = os.stat(file)
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


def current_hashes(units: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The hash of each ``(file, qualname)`` as the sources are now, computed once per process while none of
    the files its hash read changed size or modification time (every page and entry shares most units)."""
    out: dict[tuple[str, str], str] = {}
    stats: dict[str, tuple[int, int]] = {}

    def stat(file: str) -> tuple[int, int]:
        found = stats.get(file)
        if found is None:
            found = stats[file] = _stat(file)
        return found

    hasher: _Hasher | None = None
    for unit in units:
        cached = _HASHES.get(unit)
        if cached is not None:
            files = _DEPS[unit]
            now = tuple(stat(f) for f in files)
            if now == cached[0]:
                out[unit] = cached[1]
                continue
        hasher = hasher or _Hasher()
        hasher.touched = set()
        value = hasher.unit(*unit)
        files = tuple(sorted(hasher.touched | {unit[0]}))
        _DEPS[unit] = files
        _HASHES[unit] = (tuple(stat(f) for f in files), value)
        out[unit] = value
    return out


def combined(hashes: dict[str, str]) -> str:
    """One hash over a set of unit hashes."""
    h = hashlib.sha256()
    for key in sorted(hashes):
        h.update(f"{key}={hashes[key]}\n".encode())
    return h.hexdigest()


install_from_env()  # at import: ``import ensdiv`` imports this module first
