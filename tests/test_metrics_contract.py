"""The metric contract: tensors out, keyword-only validate_args, documented shapes, and the layering."""

import ast
import inspect
import pathlib

import pytest
import torch

import ensdiv.ensembles
import ensdiv.metrics as mt

#: Public names of ensdiv.metrics that are not metrics returning a tensor (documented in its docstring).
NOT_TENSOR = {"pair_counts", "ensemble_sweep", "MinibatchCKA", "SAT_EPS", "SAT_IDENTICAL"}
#: Training losses live in ensdiv.losses, not here.
LOSSES: set[str] = set()
PACKAGE = pathlib.Path(mt.__file__).parent


def public_functions():
    return [name for name in mt.__all__ if inspect.isfunction(getattr(mt, name)) and name not in LOSSES]


@pytest.mark.parametrize("name", public_functions())
def test_signature_and_docstring(name):
    fn = getattr(mt, name)
    param = inspect.signature(fn).parameters.get("validate_args")
    assert param is not None and param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is True
    doc = inspect.getdoc(fn)
    for section in ("Args:", "Returns:", "Shape:", ">>>"):
        assert section in doc, f"{name}: no {section!r} in its docstring"
    if name not in NOT_TENSOR:
        ret = inspect.signature(fn).return_annotation
        assert ret in ("torch.Tensor", torch.Tensor), f"{name} is annotated to return {ret}"


@pytest.mark.parametrize("name", ["combine", "vote", "fit_temperature", "greedy_select", "uniform_soup"])
def test_ensembles_docstrings(name):
    doc = inspect.getdoc(getattr(ensdiv.ensembles, name))
    assert "Shape:" in doc and ">>>" in doc


def test_exceptions_are_documented():
    for name in NOT_TENSOR | LOSSES:
        assert f"{name}`" in mt.__doc__ or f":data:`{name}`" in mt.__doc__, name


def ensdiv_imports(path):
    """(module imported, is at module level) for every ``ensdiv`` import in a file."""
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ensdiv"):
            out.append((node.module, id(node) in top))
        elif isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names if a.name.startswith("ensdiv")]
    return out


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")) + [pathlib.Path(ensdiv.ensembles.__file__)])
def test_layering(path):
    for module, at_top in ensdiv_imports(path):
        assert at_top, f"{path.name} imports {module} inside a function"
        assert not module.startswith("ensdiv.metrics._"), f"{path.name} imports a private module {module}"
        if path.parent == PACKAGE:
            assert module in ("ensdiv.errors",) or module.startswith("ensdiv.metrics"), (
                f"ensdiv.metrics must sit below the rest of the package; {path.name} imports {module}"
            )
