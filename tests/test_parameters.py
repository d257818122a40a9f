"""Notebook parameters are data, never code: ``-p`` values are plain YAML data, every preset field has a
type, and what reaches the kernel is a Python literal written by us (issue #26, item 1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from ensdiv import chapters
from ensdiv.book import cli
from ensdiv.book import run as runner
from ensdiv.book.parameters import inject, parse_value, render
from ensdiv.config import SCALES, field_type, plain_data_problem, resolve_preset
from ensdiv.errors import EnsdivError, InvalidInputError

ROOT = Path(__file__).resolve().parent.parent
RELEASED = str(ROOT / "notebooks" / "attack-similarity" / "fig01_component_importance.ipynb")  # data_root: None
ALPHA_GAMMA = str(ROOT / "notebooks" / "packed-ensembles" / "fig06_07_alpha_gamma.ipynb")  # seeds: [0]


@pytest.fixture
def build_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))
    return tmp_path


def _refused(build_env: Path, capsys, name: str, value: str, notebook: str = RELEASED) -> str:
    """Run ``ensdiv run <notebook> --scale smoke -p name value``: exit status 2, one sentence on stderr that
    names the parameter, and nothing executed. Returns the sentence."""
    assert cli.main(["run", notebook, "--scale", "smoke", "-p", name, value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ensdiv: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{name!r}" in err and err.rstrip().endswith("."), err
    assert not (build_env / "build" / "executed").exists()  # refused before any notebook ran
    return err


# ---- -p values: plain YAML 1.2 data only, refused through the real CLI entry point ------------------------------
def test_refuses_binary_tag(build_env, capsys):
    assert "has the YAML tag !!binary" in _refused(build_env, capsys, "data_root", "!!binary X19pbXBvcnRfXw==")


def test_refuses_set_tag(build_env, capsys):
    assert "has the YAML tag !!set" in _refused(build_env, capsys, "data_root", "!!set {a, b}")


def test_refuses_python_object_tag(build_env, capsys):
    err = _refused(build_env, capsys, "data_root", "!!python/object/apply:os.system ['touch /tmp/x']")
    assert "has the YAML tag !!python/object/apply:os.system" in err


def test_refuses_str_tag(build_env, capsys):
    assert "has the YAML tag !!str" in _refused(build_env, capsys, "data_root", "!!str /data")


@pytest.mark.parametrize("value", ["!local /data", "! /data", "!!omap [a: 1]", "!!timestamp 2024-01-01",
                                   "[1, !!int '2']", "{a: !!float '1'}"])
def test_refuses_every_other_tag(value, build_env, capsys):
    assert "has the YAML tag" in _refused(build_env, capsys, "data_root", value)


def test_refuses_anchors(build_env, capsys):
    assert "defines the YAML anchor &a" in _refused(build_env, capsys, "data_root", "&a /data")


def test_refuses_aliases(build_env, capsys):
    laughs = "[&a [lol, lol], [*a, *a], [*a, *a, *a]]"  # a billion laughs, small
    assert "the YAML anchor &a" in _refused(build_env, capsys, "data_root", laughs)
    with pytest.raises(EnsdivError, match="uses the YAML alias \\*a"):
        parse_value("data_root", "*a")


def test_refuses_deep_nesting(build_env, capsys):
    assert "nested deeper than 8 levels" in _refused(build_env, capsys, "data_root", "[" * 5000 + "]" * 5000)
    with pytest.raises(EnsdivError, match="nested deeper than 8 levels"):
        parse_value("data_root", "[" * 10_000)  # unbalanced: refused when the ninth level opens


def test_refuses_ten_thousand_levels_by_size(build_env, capsys):
    assert "20,000 characters long, more than 10,000" in _refused(
        build_env, capsys, "data_root", "[" * 10_000 + "]" * 10_000)


def test_refuses_a_huge_value(build_env, capsys):
    assert "more than 10,000" in _refused(build_env, capsys, "data_root", "x" * 10_001)
    many = "[" + ", ".join(["1"] * 1001) + "]"
    assert "more than 1,000 elements" in _refused(build_env, capsys, "data_root", many)
    assert "too large to read" in _refused(build_env, capsys, "data_root", "9" * 5000)


def test_refuses_a_list_for_a_field_whose_preset_value_is_none(build_env, capsys):
    err = _refused(build_env, capsys, "data_root", "[1, 2]")
    assert "Parameter 'data_root' of preset 'attack-similarity/fig01_component_importance' must be a string, " \
           "got the list [1, 2]." in err


def test_refuses_a_mapping_for_a_field_whose_preset_value_is_none(build_env, capsys):
    err = _refused(build_env, capsys, "data_root", "{path: /data}")
    assert "must be a string, got the dict {'path': '/data'}." in err


def test_refuses_a_list_with_an_element_of_the_wrong_type(build_env, capsys):
    err = _refused(build_env, capsys, "seeds", "[0, one]", ALPHA_GAMMA)
    assert "Parameter 'seeds' of preset 'packed-ensembles/fig06_07_alpha_gamma' must be a list of integers " \
           "(like [0]), got the list [0, 'one'] (the element 'one')." in err
    assert "(the element 1.5)" in _refused(build_env, capsys, "seeds", "[0, 1.5]", ALPHA_GAMMA)


def test_refuses_a_mapping_with_a_non_string_key(build_env, capsys):
    assert "has the mapping key 1, which is not a string" in _refused(build_env, capsys, "data_root", "{1: a}")
    assert "has the mapping key a list" in _refused(build_env, capsys, "data_root", "{[a]: b}")
    assert "has the mapping key None" in _refused(build_env, capsys, "data_root", "{~: b}")


def test_refuses_a_repeated_mapping_key(build_env, capsys):
    assert "gives the mapping key 'a' twice" in _refused(build_env, capsys, "data_root", "{a: 1, a: 2}")


@pytest.mark.parametrize("value", [".nan", ".inf", "+.Inf", "[-.INF]", "1e999", "[1, .NaN]"])
def test_refuses_non_finite_numbers(value, build_env, capsys):
    assert "which is not finite" in _refused(build_env, capsys, "data_root", value)


def test_refuses_more_than_one_document(build_env, capsys):
    assert "more than one YAML document" in _refused(build_env, capsys, "data_root", "a\n---\nb")


def test_reads_plain_yaml_1_2_data():
    assert parse_value("x", "{a: 1, b: [x, 2.5, off], c: null, 'd': '!!str'}") == {
        "a": 1, "b": ["x", 2.5, "off"], "c": None, "d": "!!str"}
    assert parse_value("x", "- 1\n- '2'\n- |\n  text\n") == [1, "2", "text\n"]
    assert [parse_value("x", v) for v in ("0x1F", "0o17", "~", "", "=", "<<", "yes")] == [
        31, 15, None, None, "=", "<<", "yes"]
    assert parse_value("x", "[" * 8 + "]" * 8) == [[[[[[[[]]]]]]]]
    assert parse_value("x", "'" + "a" * 9_998 + "'") == "a" * 9_998


def test_recursion_and_memory_errors_are_one_sentence(monkeypatch):
    from ensdiv.book import parameters

    def boom(text):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(parameters, "_build", boom)
    with pytest.raises(EnsdivError, match="The value of parameter 'x' could not be read \\(RecursionError\\)"):
        parse_value("x", "[1]")


# ---- every preset field has a type, also where its value is None ---------------------------------------------
def test_every_preset_field_has_a_complete_type():
    """A field whose value says nothing of its type (None, [], {}) is declared in its preset's "types" block."""
    from ensdiv.config import _complete

    missing = []
    for module in chapters.MODULES:
        for name, spec in module.PRESETS.items():
            for scale in SCALES:
                cfg = chapters.preset(name, scale, verbose=False)
                for key, value in cfg.items():
                    if key not in ("preset", "scale") and not _complete(field_type(key, value, spec.get("types"))):
                        missing.append(f"{name} {scale} {key}={value!r}")
    assert not missing, missing


def test_a_preset_without_the_type_of_a_none_field_is_refused():
    spec = {"common": {"seed": 0, "root": None, "names": []}}
    with pytest.raises(TypeError, match="gives 'root' the value None .* \"types\": {'root': str}"):
        resolve_preset("demo/x", spec, "cpu", verbose=False)
    with pytest.raises(TypeError, match="gives 'names' the value \\[\\] .* \"types\": {'names': list\\[str\\]}"):
        resolve_preset("demo/x", {**spec, "types": {"root": str}}, "cpu", verbose=False)
    with pytest.raises(TypeError, match="declares 'roots', which is no field"):
        resolve_preset("demo/x", {**spec, "types": {"roots": str}}, "cpu", verbose=False)
    with pytest.raises(TypeError, match="must be bool, int, float, str"):
        resolve_preset("demo/x", {**spec, "types": {"root": bytes, "names": list[str]}}, "cpu", verbose=False)


SPEC = {
    "common": {"root": None, "names": [], "seeds": [0, 1], "sets": {"val": "a/test"}, "kw": {},
               "nested": {"a": [{"seed": 1}], "b": [{"lr": 0.1}]}},
    "types": {"root": str, "names": list[str], "kw": dict[str, Any]},
}


@pytest.mark.parametrize(
    ("override", "expect"),
    [
        ({"root": 3}, "'root' of preset 'demo/x' must be a string, got the int 3."),
        ({"root": b"/data"}, "'root' of preset 'demo/x' must be plain data (strings, numbers, booleans, None, lists "
                             "and string-keyed mappings of them); its value holds a bytes, which is not plain data."),
        ({"names": ["a", 1]}, "'names' of preset 'demo/x' must be a list of strings (like []), got the list "
                              "['a', 1] (the element 1)."),
        ({"seeds": [0, True]}, "'seeds' of preset 'demo/x' must be a list of integers (like [0, 1]), got the list "
                               "[0, True] (the element True)."),
        ({"sets": {"val": 1}}, "'sets' of preset 'demo/x' must be a mapping from strings to strings (like "
                               "{'val': 'a/test'}), got the dict {'val': 1} (the value of 'val')."),
        ({"kw": {1: "a"}}, "'kw' of preset 'demo/x' must be plain data (strings, numbers, booleans, None, lists and "
                           "string-keyed mappings of them); its value has the mapping key 1, which is not a string."),
        ({"kw": {"a": {1, 2}}}, "its value holds a set, which is not plain data."),
        ({"root": float("nan")}, "its value holds the non-finite number nan."),
        ({"nested": {"a": [[1]]}}, "'nested' of preset 'demo/x' must be a mapping from strings to lists of mappings "
                                   "from strings to numbers (like {'a': [{'seed': 1}], 'b': [{'lr': 0.1}]}), got the "
                                   "dict {'a': [[1]]} (the value of 'a')."),
    ],
)
def test_preset_fields_refuse_values_of_another_type(override, expect):
    with pytest.raises(InvalidInputError) as info:
        resolve_preset("demo/x", SPEC, "cpu", verbose=False, **override)
    text = str(info.value)
    assert text.startswith("Parameter '") and text.endswith(expect) and text.count(". ") == 0, text


def test_preset_fields_accept_values_of_their_type():
    cfg = resolve_preset("demo/x", SPEC, "cpu", verbose=False, root="/data", names=["a"], seeds=(2, 3),
                         sets={"val": "b", "ood": "c"}, kw={"channels": [8, 16]}, nested={"c": [{"x": 2}]})
    assert cfg.root == "/data" and cfg.names == ["a"] and cfg.kw == {"channels": [8, 16]}


def test_plain_data_is_checked_without_recursion():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert plain_data_problem(deep) == "is nested deeper than 8 levels"
    assert plain_data_problem([[0] * 600, [0] * 600]) == "holds more than 1,000 elements"

    class Sneaky(str):
        def __repr__(self) -> str:
            return "__import__('os')"

    assert plain_data_problem(Sneaky("x")) == "holds a Sneaky, which is not plain data"
    assert plain_data_problem({"a": [1, 2.5, None, True, "s", (1,)]}) is None


# ---- what reaches the kernel: a Python literal written by us ------------------------------------------------------
def _tiny(params: str = 'scale = "cpu"\nvalue = None') -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    body = ("import json\nprint(json.dumps({k: [type(v).__name__, v] for k, v in dict(scale=scale, value=value, "
            "flag=flag, n=n, x=x, nothing=nothing, xs=xs, d=d).items()}))")
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), cell, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def test_render_writes_python_literals():
    evil = "a'b\"c\n\"\"\"\\ __import__('os').system('touch /tmp/pwned')"
    assert render({"scale": "smoke", "value": evil, "n": -0.0}) == (
        "# Parameters\nscale = 'smoke'\nvalue = " + repr(evil) + "\nn = -0.0\n")
    with pytest.raises(InvalidInputError, match="Parameter 'value' cannot be written into a notebook: its value "
                                                "holds a bytes, which is not plain data"):
        render({"value": b"__import__('os')"})
    with pytest.raises(InvalidInputError, match="is not a Python identifier"):
        render({"x = 1; import os; y": 1})
    with pytest.raises(InvalidInputError, match="is not a Python identifier"):
        render({"lambda": 1})


def test_inject_adds_one_cell_after_the_parameters_cell():
    nb = _tiny()
    once = inject(nb, {"scale": "smoke", "value": 1})
    assert [c.metadata.get("tags", []) for c in once.cells] == [[], ["parameters"], ["injected-parameters"], []]
    assert once.cells[2].source == "# Parameters\nscale = 'smoke'\nvalue = 1\n"
    assert once.metadata.papermill.parameters == {"scale": "smoke", "value": 1}
    assert len(nb.cells) == 3  # the source notebook is left as it was
    twice = inject(once, {"scale": "cpu"})  # an injected cell already there is replaced
    assert len(twice.cells) == 4 and twice.cells[2].source == "# Parameters\nscale = 'cpu'\n"
    nb.cells[1].metadata["tags"] = []
    with pytest.raises(EnsdivError, match="no cell tagged `parameters`"):
        inject(nb, {"scale": "cpu"})


@pytest.mark.kernel
def test_injected_values_arrive_with_their_types_and_run_nothing(tmp_path):
    import papermill as pm

    pwned = tmp_path / "pwned"
    evil = f"it's \"quoted\"\nnew line \"\"\" triple \\ backslash \\\"; __import__('os').system('touch {pwned}')"
    params = {"scale": "smoke", "value": evil, "flag": True, "n": 3, "x": 1e-3, "nothing": None,
              "xs": [1, "two", [3.5]], "d": {"a": {"b": ["'''", '"""']}, "c": "\\"}}
    params_cell = 'scale = "cpu"\nvalue = None\nflag = False\nn = 0\nx = 0.0\nnothing = 1\nxs = []\nd = {}'
    nb = inject(_tiny(params_cell), params)
    out = pm.execute_notebook(nb, str(tmp_path / "out.ipynb"), parameters=None, kernel_name="python3",
                              progress_bar=False, log_output=False, cwd=str(tmp_path))
    printed = "".join(o.get("text", "") for o in out.cells[-1].outputs)
    got = json.loads(printed)
    assert {k: v[1] for k, v in got.items()} == params
    assert {k: v[0] for k, v in got.items()} == {"scale": "str", "value": "str", "flag": "bool", "n": "int",
                                                 "x": "float", "nothing": "NoneType", "xs": "list", "d": "dict"}
    assert not pwned.exists() and not Path("/tmp/pwned").exists()
    assert out.cells[2].source == render(params)  # papermill added no cell of its own
    assert sum("injected-parameters" in c.metadata.get("tags", []) for c in out.cells) == 1


@pytest.mark.kernel
def test_runner_writes_parameters_as_python_literals(tmp_path, monkeypatch):
    """The runner hands papermill our injected cell, never the parameters (needs runner.run_notebooks to call
    ``parameters.inject`` and ``execute_notebook(..., parameters=None)``)."""
    monkeypatch.setenv("ENSDIV_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "a.ipynb"
    nb = _tiny()
    nb.cells[-1].source = "print(repr(value))"
    nbformat.write(nb, str(path))
    evil = f"\\\"\"\"'\n__import__('os').system('touch {tmp_path / 'pwned'}')"
    (res,) = runner.run_notebooks([path], scale="smoke", params={"value": evil}, out_root=tmp_path / "out",
                                  progress=False)
    assert res.status == "ok", res.error
    executed = nbformat.read(str(res.output), as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert [c.source for c in injected] == [render({"scale": "smoke", "value": evil})]
    assert executed.cells[-1].outputs[0]["text"] == repr(evil) + "\n"
    assert not (tmp_path / "pwned").exists()
    assert executed.metadata.papermill.input_path == str(path.resolve())  # not the whole source notebook
    with pytest.raises(InvalidInputError, match="its value holds a bytes"):  # checked before anything runs
        runner.run_notebooks([path], scale="smoke", params={"value": b"x"}, out_root=tmp_path / "out2")
    assert not (tmp_path / "out2").exists()
