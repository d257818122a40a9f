"""What code a run executed: the package's functions, class bodies and module bodies a page ran, so a page is
re-executed only when code it ran has changed (what pytest-testmon does for tests, for pages).

``ensdiv run`` / ``ensdiv book`` set ``ENSDIV_TRACE_LOG`` (a file to append to) and ``ENSDIV_TRACE_ROOTS``
(the source folders that count, ``os.pathsep``-separated; the ``ensdiv`` package by default) for the kernel of
each page they execute and, through the environment, for its worker processes. ``import ensdiv`` then calls
:func:`install_from_env` before it imports anything else: a global trace function (:func:`sys.settrace`, also
for new threads), started once the heavy third-party packages are imported (:data:`PRELOAD`), sees each new
Python frame once per code object — it returns ``None``, so no line is traced
and C calls cost nothing — and appends ``<file>\\t<qualified name>`` for every code object of a root it has not
seen. Code the page skipped because the cache answered is not recorded and need not be: the cache key covers
what trained an entry.

:func:`code_hashes` turns such a log into one hash per unit, computed from the source *as it is now*: the
unit's AST with docstrings removed (comments are not in the AST, and positions are not dumped, so moving code
or editing a docstring or a comment changes nothing). A function's unit is its whole definition; a class's,
its body with each method reduced to its signature and decorators; a module's, its top-level statements with
each definition reduced the same way — so a module-level constant a page's code read is in the module unit of
every page that imported the module. Lambdas and comprehensions belong to the function around them. A unit
that no longer exists hashes as missing, which differs from any source.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LOG_ENV", "ROOTS_ENV", "install_from_env", "read_log", "code_hashes", "combined"]

LOG_ENV = "ENSDIV_TRACE_LOG"
ROOTS_ENV = "ENSDIV_TRACE_ROOTS"
_PACKAGE = str(Path(__file__).resolve().parent)
_INSTALLED = False


def roots_from_env() -> list[str]:
    """The traced source folders: ``$ENSDIV_TRACE_ROOTS``, else the ``ensdiv`` package."""
    found = [os.path.realpath(p) for p in os.environ.get(ROOTS_ENV, "").split(os.pathsep) if p]
    return found or [_PACKAGE]


#: Third-party packages ``import ensdiv`` or nearly every page imports anyway (the training engine, the plots),
#: imported before the tracer starts: their import runs hundreds of thousands of Python frames, none of them the
#: package's (``benchmarks/bench_tracing.py``).
PRELOAD = ("numpy", "scipy.stats", "pandas", "statsmodels.api", "torch", "torchvision", "timm", "PIL.Image", "yaml",
           "tqdm", "lightning.fabric", "torchmetrics", "matplotlib.pyplot", "seaborn")


def install_from_env() -> bool:
    """Trace new frames of the roots' code when ``$ENSDIV_TRACE_LOG`` is set (once per process)."""
    global _INSTALLED
    log = os.environ.get(LOG_ENV)
    if _INSTALLED or not log:
        return _INSTALLED
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    roots = tuple(r.rstrip(os.sep) + os.sep for r in roots_from_env())
    seen: set[object] = set()
    lock = threading.Lock()

    def trace(frame, event, arg):  # noqa: ANN001, ANN202 - the signature sys.settrace calls
        code = frame.f_code
        if code in seen:
            return None
        seen.add(code)
        name = code.co_filename
        if name.startswith(roots):
            with lock:
                try:
                    with open(log, "a", encoding="utf-8") as fh:
                        fh.write(f"{name}\t{getattr(code, 'co_qualname', code.co_name)}\n")
                except OSError:
                    pass  # no log means the page re-runs next time, never a wrong reuse
        return None

    sys.settrace(trace)
    threading.settrace(trace)
    _INSTALLED = True
    # the module bodies that ran before the tracer (``ensdiv/__init__`` itself, which installs it)
    with open(log, "a", encoding="utf-8") as fh:
        for module in list(sys.modules.values()):
            file = getattr(module, "__file__", None) or ""
            if os.path.realpath(file).startswith(roots):
                fh.write(f"{os.path.realpath(file)}\t<module>\n")
    return True


def read_log(log: Path) -> list[tuple[str, str]]:
    """The units a log names, each once, sorted: ``(file, qualified name)``; ``[]`` for a missing log."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return sorted({_unit(*line.split("\t", 1)) for line in lines if "\t" in line})


def _unit(file: str, qualname: str) -> tuple[str, str]:
    """Lambdas and comprehensions belong to the definition around them."""
    parts = qualname.split(".")
    for i, part in enumerate(parts):
        if part.startswith("<") and part != "<locals>":
            parts = parts[:i]
            break
    while parts and parts[-1] == "<locals>":
        parts = parts[:-1]
    return file, ".".join(parts) or "<module>"


class _StripDocstrings(ast.NodeTransformer):
    def _strip(self, node: ast.AST) -> ast.AST:
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        self.generic_visit(node)
        return node

    visit_Module = visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _strip


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _outline(node: ast.AST) -> ast.AST:
    """A module or class with each definition in it reduced to its name, signature, bases and decorators (what
    runs when the module or class body runs)."""
    body = []
    for stmt in node.body:
        if isinstance(stmt, _DEFS):
            stmt = ast.copy_location(type(stmt)(**{**{f: getattr(stmt, f, None) for f in stmt._fields},
                                                   "body": [ast.Pass()]}), stmt)
        body.append(stmt)
    clone = type(node)(**{**{f: getattr(node, f, None) for f in node._fields}, "body": body})
    return clone


def _index(tree: ast.Module) -> dict[str, ast.AST]:
    """Every definition of a module by the qualified name Python gives its code object."""
    found: dict[str, ast.AST] = {"<module>": tree}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _DEFS):
                name = f"{prefix}{child.name}"
                found[name] = child
                inner = f"{name}.<locals>." if not isinstance(child, ast.ClassDef) else f"{name}."
                walk(child, inner)
            else:
                walk(child, prefix)

    walk(tree, "")
    return found


def code_hashes(units: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``{"<file>::<qualname>": sha256}`` of each unit's source as it is now (``"missing"`` when the file or
    the definition is gone)."""
    trees: dict[str, dict[str, ast.AST] | None] = {}
    out = {}
    for file, qualname in sorted(set(units)):
        if file not in trees:
            try:
                trees[file] = _index(_StripDocstrings().visit(ast.parse(Path(file).read_text(encoding="utf-8"))))
            except (OSError, SyntaxError, ValueError):
                trees[file] = None
        index = trees[file]
        node = index.get(qualname) if index else None
        if node is None:
            out[f"{file}::{qualname}"] = "missing"
            continue
        shown = _outline(node) if isinstance(node, ast.Module | ast.ClassDef) else node
        out[f"{file}::{qualname}"] = hashlib.sha256(ast.dump(shown).encode()).hexdigest()
    return out


def combined(hashes: dict[str, str]) -> str:
    """One hash over a set of unit hashes."""
    h = hashlib.sha256()
    for key in sorted(hashes):
        h.update(f"{key}={hashes[key]}\n".encode())
    return h.hexdigest()


install_from_env()  # at import: ``import ensdiv`` imports this module first
