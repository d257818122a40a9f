"""What package code a computation ran, and a hash of each piece as it ran.

The book's cache keeps, with every entry, the units of package code its computation ran and their hashes, and
serves the entry only while they hash the same (:mod:`ensdiv.store`; the guarantee and its conditions are stated
once, in ``book/guide/cache.md``). A page's run keeps the same record, so the page re-runs when code it used
changed (:mod:`ensdiv.book.stamps`).

**How units are seen: counted at import, not traced.** ``import ensdiv`` installs an import hook (first thing,
:func:`install`) for the package and the folders of ``$ENSDIV_TRACE_ROOTS``. Each of their modules is compiled
from the source the hook read, with one statement first in every function body:
``if not __ensdiv_seen__[i]: __ensdiv_ran__(i)``. While nothing records, every flag is true and that statement
is a list lookup (no call, no trace function: ``benchmarks/bench_tracing.py`` measures it); code outside the
package is compiled as Python compiles it and costs nothing. A recording sets the flags false, so the first call
of each function in it notes the function's unit. Nothing is installed with :func:`sys.settrace`, so a debugger,
``breakpoint()`` or coverage cannot empty a record.

**Who records.**

- A cache entry's computation: :func:`begin` opens a recorder (a store miss does it) and :func:`end` closes it
  (the store's save); recorders nest, and an inner one's units are folded into the one below it. A computation
  that loads another entry takes over that entry's units (:func:`note_units`), so a change to the training code
  makes a model *and* its predictions stale.
- A page: ``ensdiv run``/``ensdiv book`` set ``$ENSDIV_TRACE_LOG`` for the page's kernel; every unit the kernel
  runs is appended to that file once (with the hash of each source file as the kernel imported it, so a page whose
  code was edited while it ran is not stamped with the new code).
- Other processes: a worker forked while a recorder is open appends to the recorder's own log file; a process
  spawned meanwhile (``$ENSDIV_TRACE_CHILD``) does too; the recorder reads the file back when it closes.
- A memo: a module-level ``functools.lru_cache`` of the package is wrapped at import (:class:`_Memo`): the units
  of the computation behind each memoised answer are noted again every time the answer is served, so an entry
  whose data came from a memo still records the code that made it. :func:`memo` does the same for a hand-made
  memo (:func:`built_by` then gives the units that built an object it returned).

**Hashed as it ran.** The hook keeps the source text it compiled; an entry's hashes are taken from that text
(``running=True``), never from the disk at save time, so an edit made while a model trains cannot stamp the old
model with the new code. Page stamps and the dry-run ledger ask about the disk (what the next run would run).

**Patched code.** The functions and classes a package module defines are remembered after its import;
:func:`patched` names the first one replaced since (a test's or a notebook's ``monkeypatch``), and the store
does not save an entry computed while one is.

**Units and their hashes** (:func:`code_hashes`): a function's unit is its whole definition (decorators and
default values included); a method's also covers its class's outline (fields, class constants, bases, the
signatures of its methods); a class's unit is that outline; a module's (``<module>``) is the statements that
run for their effect at import (a registration call, an ``if`` block), not its definitions, imports or
assignments. Each unit's hash also covers the module-level **bindings it names**: the assignment of a constant
it reads (and what that assignment names in turn), followed through ``from … import`` into the roots' other
modules, and the outline of a class it names (its fields and their defaults: a dataclass built without one of
its methods running still counts). So adding a function, an import or a constant to a module changes no unit,
editing a constant changes exactly the units that name it, and editing a docstring or a comment changes nothing
(the hash is of the AST without docstrings; comments and positions are not in it). Lambdas and comprehensions
belong to the definition around them. A unit that no longer exists hashes as ``"missing"``. A name bound in two
modules under one identifier may pull in both (an over-approximation: more re-runs, never a stale reuse).
A mapping named in :data:`KEYED` (the chapters' ``PRESETS``) is hashed entry by entry instead
(``<entry>:PRESETS[<key>]``): a unit covers the entries it reads with a constant key, and code that reads one by a
computed key notes it (:func:`note_entry`), so editing one page's preset changes that page's record alone.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import marshal
import os
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["LOG_ENV", "ROOTS_ENV", "CHILD_ENV", "ALLOW_PATCHED_ENV", "NEUTRAL", "BIND", "ENGINE", "install",
           "install_from_env", "read_log", "source_shas", "code_hashes", "hashes_now", "current_hashes", "combined",
           "Recorder", "begin", "end", "open_units", "note_units", "entry_record", "changed_unit", "record_units",
           "relative", "absolute", "unit_of", "names_in", "binding_units", "strip_docstrings", "patched", "memo",
           "built_by", "running_source", "edited_while_running", "recording", "attach", "KEYED", "ENTRY",
           "note_entry"]

LOG_ENV = "ENSDIV_TRACE_LOG"
ROOTS_ENV = "ENSDIV_TRACE_ROOTS"
#: Set while a recorder is open: the file a process spawned meanwhile appends the units it runs to.
CHILD_ENV = "ENSDIV_TRACE_CHILD"
#: The recording engine, stored with each entry's record: an entry recorded by another engine is recomputed.
ENGINE = "import-hook-1"
_PACKAGE = str(Path(__file__).resolve().parent)
#: the folder above the package: entry records name files relative to it (a cache moved between clones stays valid)
BASE = Path(_PACKAGE).parent
_SEEN_NAME, _RAN_NAME = "__ensdiv_seen__", "__ensdiv_ran__"


def roots_from_env() -> list[str]:
    """The recorded source folders: ``$ENSDIV_TRACE_ROOTS``, else the ``ensdiv`` package."""
    found = [os.path.realpath(p) for p in os.environ.get(ROOTS_ENV, "").split(os.pathsep) if p]
    return found or [_PACKAGE]


@functools.lru_cache(maxsize=64)
def _roots(env: str) -> tuple[str, ...]:
    return tuple(r.rstrip(os.sep) + os.sep for r in roots_from_env())


@functools.lru_cache(maxsize=64)
def _root_names(env: str) -> frozenset[str]:
    """The top-level module names the roots hold: a package folder's name, or the modules of a plain folder."""
    names = set()
    for root in roots_from_env():
        if os.path.isfile(os.path.join(root, "__init__.py")):
            names.add(os.path.basename(root))
        else:
            try:
                names.update(n[:-3] if n.endswith(".py") else n for n in os.listdir(root))
            except OSError:
                pass
    return frozenset(names)


def _in_roots(file: str) -> bool:
    return os.path.realpath(file).startswith(_roots(os.environ.get(ROOTS_ENV, "")))


# --- recorders -------------------------------------------------------------------------------------------------

class Recorder:
    """The units one computation runs (opened by :func:`begin`, closed by :func:`end`)."""

    __slots__ = ("token", "units", "pid", "fork_log")

    def __init__(self, token: str):
        self.token = token
        self.units: set[tuple[str, str]] = set()
        self.pid = os.getpid()
        self.fork_log = os.path.join(tempfile.gettempdir(), f"ensdiv-rec-{os.getpid()}-{id(self):x}.log")


class _Tally:
    """One instrumented module: its units by index and the flags its functions check."""

    __slots__ = ("file", "units", "seen", "__weakref__")

    def __init__(self, file: str, units: list[tuple[str, str]]):
        self.file = file
        self.units = units
        self.seen = [not _active()] * len(units)

    def ran(self, i: int) -> None:
        self.seen[i] = True
        note_units((self.units[i],))


_STATE: dict[str, Any] = {"page_log": None, "child_log": None, "page_seen": set()}
_STACK: list[Recorder] = []
_TALLIES: list[_Tally] = []
_LOCK = threading.RLock()
_MAX_DEPTH = 256
_BLOCKS = itertools.count()


def _after_fork() -> None:  # a lock another thread held at the fork would never be released in the child
    global _LOCK
    _LOCK = threading.RLock()


os.register_at_fork(after_in_child=_after_fork)


def _active() -> bool:
    return bool(_STACK or _STATE["page_log"] or _STATE["child_log"])


def _reset() -> None:
    """Every flag false while anything records (the next call of each function notes it), true otherwise."""
    value = not _active()
    for tally in _TALLIES:
        tally.seen[:] = [value] * len(tally.seen)


def _line(unit: tuple[str, str]) -> str:
    return f"{unit[0]}\t{unit[1]}\n"


def _append(path: str, text: str) -> None:
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        pass  # no log means a re-run (page) or a recomputation (entry) later, never a wrong reuse


def _child_env() -> None:
    """Point processes spawned from now on at the open recorder's log (or at nothing)."""
    if _STACK and _STACK[-1].pid == os.getpid():
        os.environ[CHILD_ENV] = _STACK[-1].fork_log
    elif _STATE["child_log"]:
        os.environ[CHILD_ENV] = _STATE["child_log"]
    else:
        os.environ.pop(CHILD_ENV, None)


def begin(token: str) -> Recorder:
    """Open a recorder for the computation of the entry ``token`` (its kind and key). A token already open is
    reopened where it stands (a retried computation)."""
    install()
    with _LOCK:
        for rec in reversed(_STACK):
            if rec.token == token:
                return rec
        if len(_STACK) >= _MAX_DEPTH:  # recorders of computations that never saved: fold the oldest two
            _fold(_STACK.pop(1), _STACK[0])
        rec = Recorder(token)
        _STACK.append(rec)
        _reset()
        _child_env()
        return rec


def _units_of(rec: Recorder) -> set[tuple[str, str]]:
    found = set(rec.units)
    try:
        with open(rec.fork_log, encoding="utf-8") as fh:
            found.update(unit_of(*line.rstrip("\n").split("\t", 1)) for line in fh if "\t" in line)
        os.unlink(rec.fork_log)
    except OSError:
        pass
    return found


@atexit.register
def _remove_logs() -> None:
    """The logs of recorders still open when the process ends (a miss nobody computed) go with it."""
    for rec in _STACK:
        if rec.pid == os.getpid():
            with contextlib.suppress(OSError):
                os.unlink(rec.fork_log)


def _fold(inner: Recorder, outer: Recorder) -> None:
    outer.units |= _units_of(inner)


def end(token: str) -> set[tuple[str, str]] | None:
    """Close the recorder of ``token`` and every recorder opened after it (their computations ran inside
    this one): returns the units they ran, with the module unit of each file among them, which the recorder below
    it takes over too. ``None`` when no recorder of ``token`` is open (an entry saved without a miss before it in
    this process)."""
    with _LOCK:
        at = next((i for i in range(len(_STACK) - 1, -1, -1) if _STACK[i].token == token), None)
        if at is None:
            return None
        units: set[tuple[str, str]] = set()
        for rec in _STACK[at:]:
            units |= _units_of(rec)
        units |= {(f, "<module>") for f, _ in units}
        del _STACK[at:]
        if _STACK:
            _STACK[-1].units |= units
        else:
            _reset()
        _child_env()
        return units


@contextlib.contextmanager
def recording() -> Iterator[set[tuple[str, str]]]:
    """Record what the block runs: the set it yields holds those units when the block ends (they are folded into
    the computation open around it too). A miss inside the block opens a recorder of its own above this one."""
    token = f"block:{os.getpid()}:{next(_BLOCKS)}"
    found: set[tuple[str, str]] = set()
    begin(token)
    try:
        yield found
    finally:
        found |= end(token) or set()


def open_units() -> set[tuple[str, str]]:
    """The units the computations open now have run so far (an empty set when none is open)."""
    with _LOCK:
        found: set[tuple[str, str]] = set()
        for rec in _STACK:
            found |= rec.units
        return found


def note_units(units: Iterable[tuple[str, str]]) -> None:
    """Units a computation or a page depends on without running them: those of a cache entry it loaded, or of a
    memoised answer it was served."""
    units = set(units)
    if not units or not _active():
        return
    with _LOCK:
        if _STACK:
            rec = _STACK[-1]
            if os.getpid() == rec.pid:
                rec.units |= units
            else:
                _append(rec.fork_log, "".join(map(_line, sorted(units))))
        page = _STATE["page_log"]
        if page:
            new = units - _STATE["page_seen"]
            _STATE["page_seen"] |= new
            if new:
                _append(page, "".join(map(_line, sorted(new))))
        if _STATE["child_log"]:
            _append(_STATE["child_log"], "".join(map(_line, sorted(units))))


def note_entry(file: str, name: str, key: str) -> None:
    """Note the unit of the entry ``name[key]`` of a :data:`KEYED` mapping that ``file`` defines (or imports), for
    code that reads the entry by a computed key: a page's preset (``ensdiv.chapters``)."""
    note_units([(file, f"{ENTRY}{name}[{key}]")])


# --- memos -----------------------------------------------------------------------------------------------------

_BUILT_UNITS: dict[int, tuple[weakref.ref, frozenset]] = {}


def attach(obj: Any, units: Iterable[tuple[str, str]]) -> None:
    """Remember the units that built ``obj`` (:func:`built_by`), for a computation that takes it later; nothing
    for an object that takes no weak reference (a number, a tuple)."""
    key = id(obj)
    try:
        ref = weakref.ref(obj, lambda _r: _BUILT_UNITS.pop(key, None))
    except TypeError:
        return
    _BUILT_UNITS[key] = (ref, frozenset(units))


def built_by(obj: Any) -> frozenset:
    """The units that built ``obj``, when a memo (:func:`memo`, a wrapped ``lru_cache``) returned it; empty
    otherwise. A computation that takes an object built before its miss notes these (:func:`note_units`)."""
    found = _BUILT_UNITS.get(id(obj))
    return found[1] if found is not None and found[0]() is obj else frozenset()


class _Memo:
    """A memo whose answers carry the units that computed them: a served answer notes them again."""

    def __init__(self, call: Callable[..., Any], fn: Callable[..., Any], clear: Callable[[], None] | None = None):
        functools.update_wrapper(self, fn)
        self._call, self._clear = call, clear
        self._units: dict[Any, frozenset] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            key = functools._make_key(args, kwargs, False)
            hash(key)
        except TypeError:
            return self._call(*args, **kwargs)
        units = self._units.get(key)
        if units is not None:
            note_units(units)
            return self._call(*args, **kwargs)
        with recording() as ran:
            value = self._call(*args, **kwargs)
        self._units[key] = frozenset(ran)
        attach(value, ran)
        return value

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def cache_clear(self) -> None:
        self._units.clear()
        if self._clear is not None:
            self._clear()

    def cache_info(self) -> Any:
        return self._call.cache_info() if hasattr(self._call, "cache_info") else None


def memo(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Memoise ``fn`` (its arguments hashable) so that each answer, when served again, notes the units that
    computed it: a hand-made memo's stand-in for ``functools.cache``, which the hook wraps by itself."""
    cached = functools.cache(fn)
    return _Memo(cached, fn, cached.cache_clear)


# --- the import hook -------------------------------------------------------------------------------------------

class _Instrument(ast.NodeTransformer):
    """Put ``if not __ensdiv_seen__[i]: __ensdiv_ran__(i)`` first in every function body (after its docstring),
    numbering the units in the order they appear."""

    def __init__(self, file: str):
        self.file = file
        self.units: list[tuple[str, str]] = []
        self.prefix = ""

    def _def(self, node: ast.AST) -> ast.AST:
        name = f"{self.prefix}{node.name}"
        outer, self.prefix = self.prefix, f"{name}.<locals>."
        self.generic_visit(node)
        self.prefix = outer
        i = len(self.units)
        self.units.append(unit_of(self.file, name))
        check = ast.If(test=ast.UnaryOp(op=ast.Not(), operand=ast.Subscript(
            value=ast.Name(id=_SEEN_NAME, ctx=ast.Load()), slice=ast.Constant(i), ctx=ast.Load())),
            body=[ast.Expr(value=ast.Call(func=ast.Name(id=_RAN_NAME, ctx=ast.Load()), args=[ast.Constant(i)],
                                          keywords=[]))], orelse=[])
        body = node.body
        at = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str) else 0
        anchor = body[at] if at < len(body) else body[-1]
        node.body = [*body[:at], check, *body[at:]]
        for sub in ast.walk(check):
            ast.copy_location(sub, anchor)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _def

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        outer, self.prefix = self.prefix, f"{self.prefix}{node.name}."
        self.generic_visit(node)
        self.prefix = outer
        return node


_SOURCES: dict[str, str] = {}  # file -> the source text this process compiled it from
_SHAS: dict[str, str] = {}  # file -> sha256 of that text
_DEFINED: dict[str, tuple[Any, dict[str, Any], dict[str, dict[str, Any]]]] = {}  # file -> (module, defs, members)


def _keep_source(real: str, data: bytes) -> tuple[str, str]:
    """Keep the source text a module is compiled from, and its SHA-256."""
    _SOURCES[real], _SHAS[real] = importlib.util.decode_source(data), hashlib.sha256(data).hexdigest()
    return _SOURCES[real], _SHAS[real]


def running_source(file: str) -> str | None:
    """The source text the running process compiled ``file`` from (``None`` when it did not import it)."""
    return _SOURCES.get(os.path.realpath(file))


@functools.lru_cache(maxsize=1)
def _hook_sha() -> str:
    """This module's own source: instrumented code cached by another version of the hook is compiled again."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _cache_file(path: str) -> str:
    return importlib.util.cache_from_source(path, optimization=f"ensdiv{ENGINE.replace('-', '')}")


class _Loader(importlib.machinery.SourceFileLoader):
    """Compiles a module of the roots with its functions instrumented (:class:`_Instrument`), keeps the source
    it compiled, and remembers what the module defined."""

    def _compiled(self, fullname: str) -> tuple[Any, list[tuple[str, str]]]:
        path = self.get_filename(fullname)
        real = os.path.realpath(path)
        data = self.get_data(path)
        source, sha = _keep_source(real, data)
        stamp = f"{ENGINE}\n{_hook_sha()}\n{sys.version}\n{real}\n{sha}".encode()
        cache = _cache_file(path)
        try:
            raw = Path(cache).read_bytes()
            if raw.startswith(stamp + b"\n"):
                units, code = marshal.loads(raw[len(stamp) + 1:])
                return code, [tuple(u) for u in units]
        except (OSError, ValueError, EOFError, TypeError):
            pass
        tree = ast.parse(source, path)
        inst = _Instrument(real)
        tree = inst.visit(tree)
        code = compile(tree, path, "exec", dont_inherit=True)
        if not sys.dont_write_bytecode:
            try:
                os.makedirs(os.path.dirname(cache), exist_ok=True)
                tmp = f"{cache}.{os.getpid()}.tmp"
                Path(tmp).write_bytes(stamp + b"\n" + marshal.dumps(([list(u) for u in inst.units], code)))
                os.replace(tmp, cache)
            except OSError:
                pass
        return code, inst.units

    def get_code(self, fullname: str) -> Any:
        # runpy (``python -m ensdiv.book.cli``) executes this code in a ``__main__`` of its own, without
        # exec_module's counters, so it gets the module as Python compiles it: a script's own body is no unit
        return super().get_code(fullname)

    def exec_module(self, module: Any) -> None:
        code, units = self._compiled(module.__name__)
        real = os.path.realpath(self.get_filename(module.__name__))
        tally = _Tally(real, units)
        _log_source(real)
        with _LOCK:
            _TALLIES.append(tally)
        module.__dict__[_SEEN_NAME] = tally.seen
        module.__dict__[_RAN_NAME] = tally.ran
        if _active():
            note_units(((real, "<module>"),))
        exec(code, module.__dict__)  # noqa: S102 - what SourceLoader.exec_module does, with our code object
        _wrap_memos(module)
        _remember_defined(real, module)


class _Finder(importlib.abc.MetaPathFinder):
    """Hands the modules of the roots to :class:`_Loader`; every other import is left to the usual finders."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.partition(".")[0] not in _root_names(os.environ.get(ROOTS_ENV, "")):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader) \
                or not spec.origin or not _in_roots(spec.origin):
            return None
        spec.loader = _Loader(fullname, spec.origin)
        return spec


_FINDER = _Finder()


def install() -> None:
    """Put the import hook first on ``sys.meta_path`` (once per process). The package's own first modules
    (``ensdiv/__init__``, this one) were imported before it: their sources are read now."""
    if _FINDER in sys.meta_path:
        return
    sys.meta_path.insert(0, _FINDER)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and file.endswith(".py") and _in_roots(file):
            real = os.path.realpath(file)
            if real not in _SOURCES:
                try:
                    _keep_source(real, Path(real).read_bytes())
                except OSError:
                    continue


def _wrap_memos(module: Any) -> None:
    """Wrap the module-level ``functools.lru_cache``/``cache`` functions a module defines (:class:`_Memo`)."""
    for name, obj in list(vars(module).items()):
        if isinstance(obj, functools._lru_cache_wrapper) and getattr(obj, "__module__", None) == module.__name__:
            setattr(module, name, _Memo(obj, obj.__wrapped__, obj.cache_clear))


def _members(cls: type) -> dict[str, Any]:
    return {k: v for k, v in vars(cls).items() if callable(v) or isinstance(v, staticmethod | classmethod | property)}


def _remember_defined(file: str, module: Any) -> None:
    defs = {n: o for n, o in vars(module).items()
            if callable(o) and getattr(o, "__module__", None) == module.__name__}
    members = {n: _members(o) for n, o in defs.items() if isinstance(o, type)}
    _DEFINED[file] = (module, defs, members)


#: Set to ``1`` where a run replaces package functions on purpose and answers for what it saves (a test's
#: stand-in for timm's weights cache, a wrapper that counts calls): :func:`patched` then reports nothing.
ALLOW_PATCHED_ENV = "ENSDIV_ALLOW_PATCHED"


def patched() -> str | None:
    """The first function or class of the package (outside :data:`NEUTRAL`) replaced since its module was
    imported, as ``"<file>::<name>"``; ``None`` when none is (or ``$ENSDIV_ALLOW_PATCHED`` is ``1``)."""
    if os.environ.get(ALLOW_PATCHED_ENV) == "1":
        return None
    for file, (module, defs, members) in list(_DEFINED.items()):
        rel = relative(file)
        if rel.startswith(NEUTRAL):
            continue
        space = vars(module)
        for name, obj in defs.items():
            if space.get(name) is not obj:
                return f"{rel}::{name}"
        for name, was in members.items():
            now = _members(defs[name])
            if now.keys() != was.keys():
                return f"{rel}::{name}.{sorted(now.keys() ^ was.keys())[0]}"
            for attr, obj in was.items():
                if now[attr] is not obj:
                    return f"{rel}::{name}.{attr}"
    return None


def install_from_env() -> bool:
    """Install the hook; record the units a page runs when ``$ENSDIV_TRACE_LOG`` is set, and those a spawned
    process runs when ``$ENSDIV_TRACE_CHILD`` is (once per process)."""
    install()
    log = os.environ.get(LOG_ENV)
    child = os.environ.get(CHILD_ENV)
    if child and not _STATE["child_log"] and not _STACK:
        _STATE["child_log"] = child
        _reset()
    if not log or _STATE["page_log"]:
        return bool(_STATE["page_log"])
    _STATE["page_log"] = log
    _reset()
    # the module bodies that ran before: ``ensdiv/__init__`` itself, which installs the hook; and the sources
    # each imported file was compiled from (a page's stamp is refused when one changed before it was taken)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and _in_roots(file):
            note_units(((os.path.realpath(file), "<module>"),))
    _append(log, "".join(f"{f}\t{_SHA_MARK}{s}\n" for f, s in sorted(_SHAS.items())))
    return True


_SHA_MARK = "<source>:"


def _log_source(file: str) -> None:
    if _STATE["page_log"] and file in _SHAS:
        _append(_STATE["page_log"], f"{file}\t{_SHA_MARK}{_SHAS[file]}\n")


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
#: recomputes nothing, and out of what makes a dry run stale (every smoke page runs them in ``make test``).
NEUTRAL = ("ensdiv/store.py", "ensdiv/tracing.py", "ensdiv/progress.py", "ensdiv/environment.py", "ensdiv/reads.py",
           "ensdiv/seeding.py",
           "ensdiv/paths.py", "ensdiv/errors.py", "ensdiv/bundles.py", "ensdiv/book/")


def entry_record(units: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``{"<file relative to the package's parent>::<qualname>": hash}`` of units as the running process compiled
    them, for a cache entry (the :data:`NEUTRAL` files left out)."""
    pairs = {}
    for f, q in units:
        rel = relative(f)
        if not rel.startswith(NEUTRAL):
            pairs[(absolute(rel), q)] = f"{rel}::{q}"
    hashes = current_hashes(list(pairs), running=True)
    return {pairs[u]: hashes[u] for u in sorted(pairs, key=pairs.get)}


def changed_unit(record: dict[str, str]) -> str | None:
    """The first unit of an entry record that hashes otherwise in the running code (``"<file>::<qualname>"``),
    or None."""
    pairs = {}
    for key in record:
        file, _, qualname = key.partition("::")
        pairs[key] = (absolute(file), qualname)
    now = current_hashes(list(pairs.values()), running=True)
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
    return sorted({unit_of(*line.split("\t", 1)) for line in lines
                   if "\t" in line and not line.split("\t", 1)[1].startswith(_SHA_MARK)})


def source_shas(log: Path) -> dict[str, str]:
    """``{file: sha256}`` of the sources a page's kernel compiled, from its log (``{}`` for a missing log)."""
    try:
        lines = Path(log).read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        file, _, rest = line.partition("\t")
        if rest.startswith(_SHA_MARK):
            found[file] = rest[len(_SHA_MARK):]
    return found


def edited_while_running(log: Path) -> str | None:
    """The first file a page's kernel compiled whose source on disk differs now (relative), or None."""
    for file, sha in sorted(source_shas(log).items()):
        try:
            now = hashlib.sha256(Path(file).read_bytes()).hexdigest()
        except OSError:
            now = "missing"
        if now != sha:
            return relative(file)
    return None


def unit_of(file: str, qualname: str) -> tuple[str, str]:
    """Lambdas and comprehensions belong to the definition around them (a binding or an entry unit is itself)."""
    if qualname.startswith((BIND, ENTRY)):
        return file, qualname
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


#: Module-level mappings hashed per key: a unit that names one covers only the entries it reads with a constant
#: key (``PRESETS["sed/tab01"]``), and code that reads an entry by a computed key notes that entry's unit
#: (:func:`note_entry`; the chapters' ``preset()`` does). So editing one page's preset changes that page's unit
#: alone, and adding one (``ensdiv new-page``) changes none.
KEYED = frozenset({"PRESETS"})

#: The prefix of a unit that is one entry of a :data:`KEYED` mapping (``<entry>:PRESETS[sed/tab01]``).
ENTRY = "<entry>:"


def _key_of(node: ast.AST, name: str) -> str | None:
    """The constant first key under which ``node`` (``name["k"]…``, a target or a call's owner) reaches into
    the mapping ``name``; None when it reaches it by a computed key or not at all."""
    while isinstance(node, ast.Subscript | ast.Attribute | ast.Call):
        inner = node.func if isinstance(node, ast.Call) else node.value
        if isinstance(node, ast.Subscript) and isinstance(inner, ast.Name) and inner.id == name:
            key = node.slice
            return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
        node = inner
    return None


def _keyed_refs(node: ast.AST) -> set[tuple[str, str]]:
    """``(mapping, key)`` for every constant-key read of a :data:`KEYED` mapping in ``node``."""
    return {(sub.value.id, sub.slice.value) for sub in ast.walk(node)
            if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id in KEYED
            and isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, str)}


def _entry_nodes(stmts: list[ast.AST], name: str, key: str) -> list[ast.AST] | None:
    """The parts of the statements that build ``name`` which make its entry ``key``: that
    key's value in a dict literal with constant keys (``name = {...}``, ``name.update({...})``), a statement on
    ``name["key"]``, and every statement that cannot be tied to other keys (a loop over the entries,
    ``add_dry_blocks(name, ...)``, a literal with computed keys, a comprehension): those are part of every entry.
    None when no statement can make the entry (it is missing)."""
    out: list[ast.AST] = []
    made = False
    for stmt in stmts:
        literal = None
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and isinstance(stmt.value, ast.Dict):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if all(isinstance(t, ast.Name) for t in targets):
                literal = stmt.value
        elif (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
              and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "update"
              and isinstance(stmt.value.func.value, ast.Name) and stmt.value.func.value.id == name
              and len(stmt.value.args) == 1 and not stmt.value.keywords and isinstance(stmt.value.args[0], ast.Dict)):
            literal = stmt.value.args[0]
        if literal is not None and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                       for k in literal.keys):
            for k, v in zip(literal.keys, literal.values, strict=True):
                if k.value == key:
                    out.append(v)
                    made = True
            continue
        owner = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            owner = stmt.targets[0]
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
            owner = stmt.target
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            owner = stmt.value.func
        at = _key_of(owner, name) if owner is not None else None
        if at is None:  # not tied to one key: part of every entry, and it may be what makes this one
            out.append(stmt)
            made = True
        elif at == key:
            out.append(stmt)
            made = True
    return out if made else None


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

    def __init__(self, *, running: bool = False) -> None:
        self.modules: dict[str, _Module | None] = {}
        self.touched: set[str] = set()  # the files the current unit's hash read
        self.running = running  # sources as the running process compiled them, and the classes a unit names

    def module(self, file: str) -> _Module | None:
        self.touched.add(file)
        if file not in self.modules:
            try:
                text = running_source(file) if self.running else None
                if text is None:
                    text = Path(file).read_text(encoding="utf-8")
                tree = strip_docstrings(ast.parse(text))
                self.modules[file] = _Module(file, tree)
            except (OSError, SyntaxError, ValueError):
                self.modules[file] = None
        return self.modules[file]

    def bindings(self, file: str, names: set[str], keyed: set[tuple[str, str]] = frozenset()) -> list[str]:
        """The dumps of the module-level bindings ``names`` reach from ``file``, transitively, followed through
        imports into the roots' modules (each ``(file, name)`` once); a :data:`KEYED` mapping only by the entries
        ``keyed`` (and the code followed) read with a constant key."""
        out: list[str] = []
        seen: set[tuple] = set()
        todo: list[tuple] = [(file, n) for n in sorted(names)] + [(file, *ref) for ref in sorted(keyed)]

        def follow(f: str, mod: _Module, node: ast.AST) -> None:
            for n in _names(node):
                if n in mod.defined:  # ``X = make()``: the value depends on ``make``, run at import
                    out.append(f"{relative(f)}:{n}={ast.dump(mod.defined[n])}")
                elif (f, n) not in seen:
                    todo.append((f, n))
            todo.extend((f, *ref) for ref in _keyed_refs(node) if (f, *ref) not in seen)

        while todo:
            item = todo.pop()
            f, name = item[0], item[1]
            if item in seen or (len(item) == 2 and name in KEYED):
                continue
            seen.add(item)
            mod = self.module(f)
            if mod is None:
                continue
            if len(item) == 3:  # one entry of a keyed mapping
                if name in mod.imported and mod.imported[name][1] is not None:
                    todo.append((mod.imported[name][0], mod.imported[name][1], item[2]))
                    continue
                nodes = _entry_nodes(mod.assigned.get(name, []), name, item[2])
                out.append(f"{relative(f)}:{name}[{item[2]}]=" + ("missing" if nodes is None else
                                                                    "|".join(ast.dump(n) for n in nodes)))
                for node in nodes or []:
                    follow(f, mod, node)
                continue
            for stmt in mod.assigned.get(name, []):
                out.append(f"{relative(f)}:{name}={ast.dump(stmt)}")
                follow(f, mod, stmt)
            if self.running and isinstance(mod.defined.get(name), ast.ClassDef):  # a class it names: its fields
                out.append(f"{relative(f)}:{name}={ast.dump(_outline(mod.defined[name]))}")
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
        if qualname.startswith(ENTRY):  # one entry of a keyed mapping: ``<entry>:PRESETS[sed/tab01]``
            name, _, key = qualname[len(ENTRY):-1].partition("[")
            found = self.bindings(file, set(), {(name, key)})
            if not found or any(line.endswith(f":{name}[{key}]=missing") for line in found):
                return "missing"
            return hashlib.sha256("\n".join(found).encode()).hexdigest()
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
        parts.extend(self.bindings(file, names, _keyed_refs(shown)))
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
_RUNNING: dict[tuple[str, str], tuple[dict[str, str], str]] = {}  # unit -> ({file it read: sha}, hash as running)


def _stat(file: str) -> tuple[int, int]:
    try:
        st = os.stat(file)
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


def current_hashes(units: list[tuple[str, str]], *, running: bool = False) -> dict[tuple[str, str], str]:
    """The hash of each ``(file, qualname)`` as the sources are now on disk, computed once per process while none
    of the files its hash read changed size or modification time (every page and entry shares most units).

    ``running=True``: as the running process compiled them (a file it did not import is read from disk once),
    the outlines of the classes a unit names included: the hashes of a cache entry's record."""
    if running:
        return _running_hashes(units)
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


def _running_hashes(units: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    hasher: _Hasher | None = None
    for unit in units:
        cached = _RUNNING.get(unit)
        if cached is not None and all(_SHAS.get(f) == sha for f, sha in cached[0].items()):
            out[unit] = cached[1]
            continue
        hasher = _Hasher(running=True) if hasher is None or cached is not None else hasher
        hasher.touched = set()
        value = hasher.unit(*unit)
        files = hasher.touched | {unit[0]}
        if all(f in _SHAS for f in files):  # one read from disk: asked again next time (it may be imported then)
            _RUNNING[unit] = ({f: _SHAS[f] for f in files}, value)
        out[unit] = value
    return out


def combined(hashes: dict[str, str]) -> str:
    """One hash over a set of unit hashes."""
    h = hashlib.sha256()
    for key in sorted(hashes):
        h.update(f"{key}={hashes[key]}\n".encode())
    return h.hexdigest()


install_from_env()  # at import: ``import ensdiv`` imports this module first
