"""Notebook parameters are data, never code: how ``-p NAME VALUE`` is read, and how parameters are
written into a notebook.

**Reading** (:func:`parse_value`). A value is read as YAML 1.2 with the core schema, and only as plain
data: ``4`` is an int, ``0.1``/``1e-3`` finite floats, ``true``/``false`` booleans, ``null``/``~``/nothing
None, a quoted or any other scalar a string (``no``, ``off``, ``2024-01-01``, ``/a/b``), and ``[...]``/
``{...}`` (or block) lists and mappings of them with string keys. Refused, each with one sentence naming the
parameter: any explicit tag (``!!binary``, ``!!set``, ``!!str``, ``!local``, ``!``), anchors and aliases
(``&a``/``*a``, which make billion-laughs values), non-finite numbers (``.nan``, ``.inf``, ``1e999``:
their ``repr`` is no Python literal), a mapping key that is not a string or comes twice, more than one
document, a text longer than :data:`MAX_TEXT` characters, more than
:data:`~ensdiv.config.MAX_ELEMENTS` elements or :data:`~ensdiv.config.MAX_DEPTH` levels of nesting. The
value is built from PyYAML's event stream (its scanner and parser are iterative) with an explicit stack,
never by PyYAML's recursive composer and constructors, and the size and depth limits stop it early, so
no value raises ``RecursionError``.

**Writing** (:func:`inject`). The parameters are written by us, as ``name = <repr(value)>`` lines of a code
cell tagged ``injected-parameters`` right after the cell tagged ``parameters`` (papermill's convention),
once each name is an identifier and each value plain data (:func:`ensdiv.config.plain_data_problem`),
whose ``repr`` is a Python literal (checked: it reads back through :func:`ast.literal_eval` to the same
``repr``). papermill is then given the notebook with ``parameters=None``, so its own translators, which
paste some values unescaped, never see them.
"""

from __future__ import annotations

import ast
import copy
import keyword
import math
import re
from typing import Any

import nbformat
import yaml

from ensdiv.config import MAX_DEPTH, MAX_ELEMENTS, plain_data_problem
from ensdiv.errors import EnsdivError, InvalidInputError

__all__ = ["MAX_TEXT", "parse_value", "render", "inject"]

#: The longest ``-p`` value text read, in characters (checked before any parsing).
MAX_TEXT = 10_000

_PLAIN = "-p values are plain data: strings, numbers, true/false, null, and lists and mappings of them"
_NULL = re.compile(r"null|Null|NULL|~|")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_NONFINITE = re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_END = object()  # marks an open mapping that waits for its next key


class _Refused(Exception):
    """Why a value is refused (the end of the sentence that names its parameter)."""


def _short(text: str, width: int = 60) -> str:
    return repr(text if len(text) <= width else text[: width - 4] + " ...")


def _tag(tag: str) -> str:
    return "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org,2002:") else tag


def _scalar(text: str, plain: bool) -> Any:
    """A scalar as the YAML 1.2 core schema reads it (a quoted or block scalar is always a string)."""
    if not plain:
        return text
    if _NULL.fullmatch(text):
        return None
    if text in _BOOL:
        return _BOOL[text]
    if _INT.fullmatch(text):
        try:
            return int(text[2:], 8) if text.startswith("0o") else int(text, 0) if text.startswith("0x") else int(text)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            raise _Refused(f"holds an integer of {len(text):,} digits, too large to read") from None
    if _NONFINITE.fullmatch(text) or (_FLOAT.fullmatch(text) and not math.isfinite(float(text))):
        raise _Refused(f"holds the number {text}, which is not finite")
    return float(text) if _FLOAT.fullmatch(text) else text


def _build(text: str) -> Any:
    """The plain data of one YAML text, built from its events with an explicit stack.

    Raises:
        _Refused: a tag, anchor, alias, a non-string or repeated key, too much nesting or too many elements.
        yaml.YAMLError: the text is not valid YAML.
    """
    result: Any = None
    stack: list[list[Any]] = []  # [container, pending key (mappings only)]
    documents = elements = 0

    def add(value: Any) -> None:
        nonlocal result, elements
        elements += 1
        if elements > MAX_ELEMENTS:
            raise _Refused(f"holds more than {MAX_ELEMENTS:,} elements")
        if not stack:
            result = value
            return
        top = stack[-1]
        if isinstance(top[0], list):
            top[0].append(value)
        elif top[1] is _END:  # a key
            if type(value) is not str:
                shown = "a list" if isinstance(value, list) else "a mapping" if isinstance(value, dict) else repr(value)
                raise _Refused(f"has the mapping key {shown}, which is not a string")
            if value in top[0]:
                raise _Refused(f"gives the mapping key {value!r} twice")
            top[1] = value
        else:
            top[0][top[1]] = value
            top[1] = _END

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise _Refused("holds more than one YAML document")
        elif isinstance(event, yaml.AliasEvent):
            raise _Refused(f"uses the YAML alias *{event.anchor} (anchors and aliases are not read)")
        elif isinstance(event, yaml.NodeEvent):
            if event.anchor is not None:
                raise _Refused(f"defines the YAML anchor &{event.anchor} (anchors and aliases are not read)")
            if getattr(event, "tag", None) is not None:
                raise _Refused(f"has the YAML tag {_tag(event.tag)} (tags are not read)")
            if isinstance(event, yaml.ScalarEvent):
                add(_scalar(event.value, plain=event.style is None))
            else:  # the start of a list or a mapping
                if len(stack) >= MAX_DEPTH:
                    raise _Refused(f"is nested deeper than {MAX_DEPTH} levels")
                container: list | dict = [] if isinstance(event, yaml.SequenceStartEvent) else {}
                add(container)
                stack.append([container, _END])
        elif isinstance(event, yaml.CollectionEndEvent):
            stack.pop()
    return result


def parse_value(name: str, value: str) -> object:
    """One ``-p NAME VALUE``, read as plain YAML 1.2 data (see the module's docstring).

    Raises:
        EnsdivError: the value is not valid YAML, or is refused (a tag, an anchor or alias, a non-finite
            number, a non-string or repeated key, too long, too deep, too many elements): one sentence
            naming the parameter.
    """
    try:
        if len(value) > MAX_TEXT:
            raise _Refused(f"is {len(value):,} characters long, more than {MAX_TEXT:,}")
        return _build(value)
    except _Refused as why:
        raise EnsdivError(f"The value of parameter {name!r} {why}; {_PLAIN}.") from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise EnsdivError(
            f"The value {_short(value)} of parameter {name!r} is not valid YAML ({problem}); quote it to pass a "
            "string, e.g. -p NAME '\"text\"'."
        ) from None
    except (RecursionError, MemoryError) as exc:  # not expected (the limits come first); never a traceback
        raise EnsdivError(f"The value of parameter {name!r} could not be read ({type(exc).__name__}); "
                          f"{_PLAIN}.") from None


def render(params: dict[str, Any]) -> str:
    """The source of the injected-parameters cell: ``# Parameters``, then ``name = <Python literal>`` a line.

    Raises:
        InvalidInputError: a name that is not a Python identifier, or a value that is not plain data
            (:func:`ensdiv.config.plain_data_problem`); one sentence naming the parameter.
    """
    lines = ["# Parameters"]
    for name, value in params.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise InvalidInputError(f"Parameter name {name!r} is not a Python identifier, so it cannot be set.")
        why = plain_data_problem(value)
        if why:
            raise InvalidInputError(f"Parameter {name!r} cannot be written into a notebook: its value {why}; "
                                    "parameters are plain data (strings, numbers, booleans, None, lists and "
                                    "string-keyed mappings of them).")
        literal = repr(value)
        # plain data's repr is a literal that reads back to itself; anything else is a bug here, never code
        if "\n" in literal or repr(ast.literal_eval(literal)) != literal:
            raise AssertionError(f"the repr of parameter {name!r} is not a Python literal: {literal[:200]}")
        lines.append(f"{name} = {literal}")
    return "\n".join(lines) + "\n"


def inject(nb: nbformat.NotebookNode, params: dict[str, Any]) -> nbformat.NotebookNode:
    """A copy of notebook ``nb`` with ``params`` written as Python literals (:func:`render`) into a code cell
    tagged ``injected-parameters``, right after the cell tagged ``parameters`` (replacing an injected cell
    already there, as papermill does), and recorded in ``metadata.papermill.parameters``.

    Execute the copy with ``papermill.execute_notebook(copy, out, parameters=None, ...)``: papermill then
    leaves the cells as they are.

    Raises:
        InvalidInputError: see :func:`render`.
        EnsdivError: the notebook has no cell tagged ``parameters``.
    """
    source = render(params)
    nb = copy.deepcopy(nb)
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not tagged:
        raise EnsdivError("The notebook has no cell tagged `parameters`, so its parameters cannot be set.")
    cell = nbformat.v4.new_code_cell(source=source)
    cell.metadata["tags"] = ["injected-parameters"]
    injected = [i for i, c in enumerate(nb.cells) if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
    if injected:
        nb.cells[injected[0]] = cell
    else:
        nb.cells.insert(tagged[0] + 1, cell)
    if "papermill" not in nb.metadata:
        nb.metadata["papermill"] = {"default_parameters": {}, "environment_variables": {}}
    nb.metadata["papermill"]["parameters"] = copy.deepcopy(params)
    return nb
