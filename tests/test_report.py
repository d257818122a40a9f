"""ensdiv.report: the verdict rule, the check helpers, the calibration row and the claim records.

Every expected value below is worked out by hand from the rule in the module docstring.
"""

from __future__ import annotations

import ast
import json
import math

import numpy as np
import pytest
import torch

from ensdiv import report
from ensdiv.errors import EnsdivError
from ensdiv.report import (
    Check,
    above,
    below,
    claim,
    evaluate,
    greater,
    less,
    load_claims,
    negative,
    positive,
    significant,
    slug,
    verdict,
    within,
)


@pytest.fixture
def build(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_BUILD", str(tmp_path))
    monkeypatch.delenv("ENSDIV_NOTEBOOK", raising=False)
    return tmp_path


def _claim(**overrides):
    args = dict(paper="foundations", item="Fig. 1", claim="Ensembles help.", checks=[positive("x")],
                ours={"x": 1.0}, scale="cpu", write=False)
    return claim(**{**args, **overrides})


def _bad_input(err: pytest.ExceptionInfo) -> None:
    assert isinstance(err.value, ValueError)
    assert isinstance(err.value, EnsdivError)
    assert str(err.value).endswith(".")


# --- the verdict rule ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("passed", "scale", "expected"), [
    ([True, True, True, True], "cpu", "holds"),
    ([True, True, True, False], "cpu", "holds partly"),
    ([True, True, False, False], "paper", "holds partly"),
    ([True, False, False, False], "cpu", "does not hold"),
    ([None, None, None], "cpu", "not testable at this scale"),
    ([], "paper", "not testable at this scale"),
    ([True, True, True, True], "smoke", "not testable at this scale"),
    ([True, None, None], "cpu", "holds"),  # None does not count: 1 of 1
    ([False, None, True], "cpu", "holds partly"),  # 1 of 2 is half
    ([np.bool_(True), np.bool_(False), False], "cpu", "does not hold"),  # 1 of 3
])
def test_verdict_table(passed, scale, expected):
    assert verdict(passed, scale=scale) == expected


# --- check helpers on hand values ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("check", "values", "expected"), [
    (less("a", "b"), {"a": 1.0, "b": 2.0}, True),
    (less("a", "b"), {"a": 2.0, "b": 2.0}, False),
    (less("a", "b", margin=0.5), {"a": 1.0, "b": 1.5}, False),  # 1.0 < 1.0 is false
    (less("a", "b", margin=0.5), {"a": 0.9, "b": 1.5}, True),
    (greater("a", "b"), {"a": 3, "b": 2}, True),
    (greater("a", "b"), {"a": 2, "b": 2}, False),
    (greater("a", "b", margin=1.0), {"a": 3.0, "b": 2.0}, False),
    (greater("a", "b", margin=1.0), {"a": 3.5, "b": 2.0}, True),
    (negative("r"), {"r": -0.2}, True),
    (negative("r"), {"r": 0.0}, False),
    (positive("r"), {"r": 0.3}, True),
    (positive("r"), {"r": 0}, False),
    (below("e", 0.05), {"e": 0.04}, True),
    (below("e", 0.05), {"e": 0.05}, False),
    (above("acc", 0.9), {"acc": 0.95}, True),
    (above("acc", 0.9), {"acc": 0.9}, False),
    (significant("p"), {"p": 0.01}, True),
    (significant("p"), {"p": 0.05}, False),
    (significant("p", alpha=0.01), {"p": 0.02}, False),
    (within("a", "b", abs=0.05), {"a": 1.04, "b": 1.0}, True),
    (within("a", "b", abs=0.05), {"a": 1.06, "b": 1.0}, False),
    (within("a", "b", rel=0.1), {"a": 2.15, "b": 2.0}, True),  # |0.15| <= 0.2
    (within("a", "b", rel=0.1), {"a": 1.7, "b": 2.0}, False),  # |0.3| > 0.2
    (within("a", "b", rel=0.1), {"a": -2.1, "b": -2.0}, True),  # rel uses |b|
    (within("a", "b", rel=0.01, abs=0.5), {"a": 2.3, "b": 2.0}, True),  # rel fails, abs passes
])
def test_helpers_on_hand_values(check, values, expected):
    assert evaluate(check, values) is expected


@pytest.mark.parametrize("check", [
    less("a", "b"), greater("a", "b"), negative("a"), positive("a"), below("a", 1.0), above("a", 1.0),
    significant("a"), within("a", "b", rel=0.1), within("a", "b", abs=0.1),
])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -math.inf, None, "missing"])
def test_helpers_not_testable(check, bad):
    values = {"b": 1.0} if bad == "missing" else {"a": bad, "b": 1.0}
    assert evaluate(check, values) is None
    assert evaluate(check, {"a": 1.0, "b": float("nan")} if "b" in check.needs else {}) is None


def test_helper_names_read_as_sentences():
    assert less("err_ens", "err_single").name == "err_ens is less than err_single"
    assert less("a", "b", margin=0.01).name == "a is less than b by more than 0.01"
    assert greater("a", "b").name == "a is greater than b"
    assert negative("r").name == "r is negative"
    assert positive("r").name == "r is positive"
    assert below("ece", 0.05).name == "ece is below 0.05"
    assert above("acc", 0.9).name == "acc is above 0.9"
    assert significant("p").name == "p is significant at the 0.05 level"
    assert within("a", "b", rel=0.05).name == "a is within 5% of b"
    assert within("a", "b", abs=0.2).name == "a is within 0.2 of b"
    assert within("a", "b", rel=0.1, abs=1).name == "a is within 10% or 1 of b"
    assert positive("r", name="the correlation is positive").name == "the correlation is positive"


def test_check_without_needs_keyerror_means_not_testable():
    reads_c = Check("c exceeds a plus b", lambda v: v["c"] > v["a"] + v["b"])
    assert evaluate(reads_c, {"a": 1, "b": 2, "c": 4}) is True
    assert evaluate(reads_c, {"a": 1, "b": 2, "c": 3}) is False
    assert evaluate(reads_c, {"a": 1, "b": 2}) is None
    assert evaluate(reads_c, {"a": 1, "b": 2, "c": float("nan")}) is None  # NaN is hidden from the rule


def test_rule_sees_plain_floats_and_ignores_labels():
    seen = {}
    check = Check("x is positive", lambda v: seen.update(v) or v["x"] > 0, needs=("x",))
    assert evaluate(check, {"x": torch.tensor(2), "model": "resnet18"}) is True
    assert seen == {"x": 2.0} and type(seen["x"]) is float


def test_within_needs_a_valid_tolerance():
    with pytest.raises(EnsdivError) as err:
        within("a", "b")
    _bad_input(err)
    with pytest.raises(EnsdivError) as err:
        within("a", "b", abs=-0.1)
    _bad_input(err)


# --- values as tensors and numpy scalars ---------------------------------------------------------------------------

def test_torch_and_numpy_values():
    values = {"a": torch.tensor(0.1), "b": np.float32(0.2), "n": np.int64(3), "flag": np.bool_(True)}
    assert evaluate(less("a", "b"), values) is True
    assert evaluate(greater("n", "b", margin=2.5), values) is True  # 3 > 2.7
    assert evaluate(positive("flag"), values) is True  # True is 1.0
    assert evaluate(positive("a"), {"a": torch.tensor(float("nan"))}) is None
    c = _claim(checks=[less("a", "b")], ours=values, paper_values={"a": np.float64(0.5), "b": 0.6})
    assert c.verdict == "holds"
    rows = {v["quantity"]: v for v in c.values}
    assert rows["a"]["ours"] == pytest.approx(0.1) and type(rows["a"]["ours"]) is float
    assert rows["n"]["ours"] == 3 and type(rows["n"]["ours"]) is int
    assert rows["flag"]["ours"] is True
    json.dumps(c.record(), allow_nan=False)  # JSON-safe


def test_non_scalar_needed_quantity_is_an_error():
    with pytest.raises(EnsdivError) as err:
        evaluate(positive("a"), {"a": torch.tensor([1.0, 2.0])})
    _bad_input(err)
    with pytest.raises(EnsdivError) as err:
        evaluate(positive("a"), {"a": "0.5"})
    _bad_input(err)


# --- the calibration row -------------------------------------------------------------------------------------------

def test_check_failing_on_paper_numbers_is_excluded():
    checks = [less("err_ens", "err_single"), positive("gain"), below("err_ens", 0.05)]
    ours = {"err_ens": 0.08, "err_single": 0.10, "gain": 0.02}  # passes, passes, fails
    paper = {"err_ens": 0.06, "err_single": 0.09, "gain": 0.03}  # passes, passes, fails (0.06 >= 0.05)
    without = _claim(checks=checks, ours=ours)
    assert without.verdict == "holds partly"  # 2 of 3
    calibrated = _claim(checks=checks, ours=ours, paper_values=paper)
    assert calibrated.verdict == "holds"  # 2 of 2: the third is not a test of the paper's claim
    assert calibrated.checks == [
        {"name": "err_ens is less than err_single", "ours": True, "paper": True, "counted": True},
        {"name": "gain is positive", "ours": True, "paper": True, "counted": True},
        {"name": "err_ens is below 0.05", "ours": False, "paper": False, "counted": False},
    ]
    assert "fails on the paper's numbers" in calibrated.checks_frame()["on the paper's numbers"].tolist()


def test_check_the_paper_cannot_evaluate_still_counts():
    checks = [positive("gain"), below("ece", 0.05)]
    c = _claim(checks=checks, ours={"gain": 0.1, "ece": 0.07}, paper_values={"gain": 0.2})  # paper has no ece
    assert [ch["paper"] for ch in c.checks] == [True, None]
    assert [ch["counted"] for ch in c.checks] == [True, True]
    assert c.verdict == "holds partly"  # 1 of 2


def test_check_not_testable_on_ours_does_not_count():
    c = _claim(checks=[positive("gain"), below("ece", 0.05)], ours={"gain": 0.1, "ece": float("nan")})
    assert [ch["counted"] for ch in c.checks] == [True, False]
    assert c.verdict == "holds"


def test_smoke_claim_is_never_testable():
    c = _claim(checks=[positive("x")], ours={"x": 1.0}, scale="smoke")
    assert c.checks[0]["ours"] is True
    assert c.verdict == "not testable at this scale"


# --- tables and rendering ------------------------------------------------------------------------------------------

def test_values_table_defaults_and_formatting():
    ours = {"acc": 0.912345, "params": 11_000_000, "p": 0.0000123, "err": float("nan")}
    c = _claim(checks=[above("acc", 0.5)], ours=ours, paper_values={"acc": 93.2, "flops": 1.0})
    frame = c.frame()
    assert frame.columns.tolist() == ["quantity", "paper", "this run"]
    assert frame["quantity"].tolist() == ["acc", "params", "p", "err", "flops"]
    assert frame["this run"].tolist() == ["0.9123", "11000000", "1.23e-05", "–", "–"]
    assert frame["paper"].tolist() == ["93.2", "–", "–", "–", "1"]
    assert _claim(ours=ours, key=["p", "acc"]).frame()["quantity"].tolist() == ["p", "acc"]


def test_text_and_html_rendering():
    checks = [positive("a"), positive("b"), positive("c"), positive("d")]
    c = _claim(checks=checks, ours={"a": 1, "b": 1, "c": 1, "d": -1}, notes="Member seeds differ.")
    text = str(c)
    assert text.splitlines()[0] == "**Verdict: holds partly** (3 of 4 checks; scale cpu)"
    assert repr(c) == text
    assert text.index("this run") < text.index("counted") < text.index("Member seeds differ.")
    page = c._repr_html_()
    assert page.startswith("<p><b>Verdict: holds partly</b> (3 of 4 checks; scale cpu)</p>")
    assert page.count("<table") == 2
    assert page.index("this run") < page.index("on the paper") < page.rindex("</table>") < page.index("Member seeds")
    assert "<script" not in page
    assert c.checks_frame().columns.tolist() == ["check", "on the paper's numbers", "this run", "counted"]
    assert c.checks_frame()["this run"].tolist() == ["pass", "pass", "pass", "fail"]


def test_summary_mentions_excluded_checks():
    c = _claim(checks=[positive("a"), positive("b")], ours={"a": 1, "b": 1}, paper_values={"a": 1, "b": -1})
    assert str(c).splitlines()[0] == (
        "**Verdict: holds** (1 of 1 checks; 1 failing on the paper's numbers not counted; scale cpu)")


@pytest.mark.parametrize(("item", "expected"), [("Table 1", "table-1"), ("Fig. 6–7", "fig-6-7"),
                                                ("App. E/F", "app-e-f"), ("  Tab. D.1 ", "tab-d-1")])
def test_slug(item, expected):
    assert slug(item) == expected


# --- records on disk -----------------------------------------------------------------------------------------------

def test_record_round_trips_through_load_claims(build, monkeypatch):
    monkeypatch.setenv("ENSDIV_NOTEBOOK", "notebooks/sed/fig02.ipynb")
    b = _claim(paper="sed", item="Fig. 2", ours={"x": 2.0, "y": float("nan")}, write=True)
    a = _claim(paper="packed-ensembles", item="Table 1", ours={"x": torch.tensor(0.5)}, write=True)
    a2 = _claim(paper="packed-ensembles", item="Table 1", ours={"x": -1.0}, claim_id="ood", write=True)
    folder = build / "claims" / "cpu"
    assert sorted(p.name for p in folder.iterdir()) == [
        "packed-ensembles__table-1.json", "packed-ensembles__table-1__ood.json", "sed__fig-2.json"]
    loaded = load_claims("cpu")
    assert loaded == [a.record(), a2.record(), b.record()]
    assert loaded[2]["notebook"] == "notebooks/sed/fig02.ipynb"
    assert loaded[2]["ensdiv_version"]
    assert loaded[2]["values"][1] == {"quantity": "y", "paper": None, "ours": None}  # NaN written as null
    assert loaded[1]["verdict"] == "does not hold" and loaded[1]["claim_id"] == "ood"
    assert load_claims("paper") == []


def test_record_without_notebook_env(build):
    assert _claim().record()["notebook"] is None


def test_write_false_writes_nothing(build):
    _claim(write=False)
    assert not (build / "claims").exists()


def test_atomic_write_leaves_no_temp_files(build, monkeypatch):
    _claim(ours={"x": 1.0}, write=True)
    _claim(ours={"x": -1.0}, write=True)  # overwrites in place
    folder = build / "claims" / "cpu"
    assert [p.name for p in folder.iterdir()] == ["foundations__fig-1.json"]
    assert load_claims("cpu")[0]["verdict"] == "does not hold"

    def broken_dump(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(report.json, "dump", broken_dump)
    with pytest.raises(OSError):
        _claim(item="Fig. 9", write=True)
    assert [p.name for p in folder.iterdir()] == ["foundations__fig-1.json"]


def test_corrupt_record_names_the_file(build):
    _claim(write=True)
    bad = build / "claims" / "cpu" / "sed__fig-3.json"
    bad.write_text('{"paper": "sed", ', encoding="utf-8")
    with pytest.raises(EnsdivError, match="sed__fig-3.json"):
        load_claims("cpu")
    bad.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(EnsdivError, match="sed__fig-3.json"):
        load_claims("cpu")


def test_report_stays_light():
    tree = ast.parse(open(report.__file__, encoding="utf-8").read())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert {m for m in imported if m.startswith("ensdiv")} == {"ensdiv.errors", "ensdiv.paths"}
    assert not any(m.split(".")[0] == "torch" for m in imported)


# --- bad input: one clear sentence, both EnsdivError and ValueError ------------------------------------------------

def test_empty_checks_list():
    with pytest.raises(EnsdivError) as err:
        _claim(checks=[])
    _bad_input(err)


def test_check_that_is_not_a_check():
    with pytest.raises(EnsdivError) as err:
        _claim(checks=[lambda v: True])
    _bad_input(err)


def test_two_checks_with_the_same_name():
    with pytest.raises(EnsdivError, match="x is positive") as err:
        _claim(checks=[positive("x"), Check("x is positive", lambda v: True)])
    _bad_input(err)


def test_unknown_scale():
    with pytest.raises(EnsdivError, match="smoke, cpu, paper") as err:
        _claim(scale="gpu")
    _bad_input(err)
    with pytest.raises(EnsdivError) as err:
        verdict([True], scale="full")
    _bad_input(err)
    with pytest.raises(EnsdivError) as err:
        load_claims("big")
    _bad_input(err)


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_claim_text(text):
    with pytest.raises(EnsdivError) as err:
        _claim(claim=text)
    _bad_input(err)


def test_unknown_paper():
    with pytest.raises(EnsdivError, match="packed-ensembles") as err:
        _claim(paper="packed_ensembles")
    _bad_input(err)


# --- chapter landing pages ---------------------------------------------------------------------------------------
def test_chapter_summary_lists_the_chapters_claims_and_failed_pages(build, monkeypatch):
    """Two sed claims (one holds, one does not), a claim of another chapter and a failed sed page: the sed
    summary counts and lists exactly its own three rows, links each page, and shows the thumbnail."""
    records = [("notebooks/sed/a.ipynb", "sed", "Fig. 3", 1), ("notebooks/sed/b.ipynb", "sed", "Tab. 1", 3),
               ("notebooks/packed-ensembles/c.ipynb", "packed-ensembles", "Fig. 1", 1)]
    for nb, paper, item, x in records:
        monkeypatch.setenv("ENSDIV_NOTEBOOK", nb)
        _claim(paper=paper, item=item, checks=[report.less("x", "y")], ours={"x": x, "y": 2}, write=True)
    books = ["notebooks/sed/a.ipynb", "notebooks/sed/b.ipynb", "notebooks/sed/broken.ipynb",
             "notebooks/packed-ensembles/c.ipynb"]
    text = report.chapter_summary("cpu", chapter="sed", notebooks=books, failed={"notebooks/sed/broken.ipynb": "boom"},
                                  key_page="notebooks/sed/a.ipynb", thumbnail="/book/_generated/sed-key.png",
                                  claims_doc="book/claims")
    assert "3 claims, 1 holds, 1 does not hold, 1 failed." in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 3 and not any("packed" in r for r in rows)
    assert any("</notebooks/sed/a>" in r and "**holds**" in r for r in rows)
    assert any("</notebooks/sed/broken>" in r and "**failed**" in r and "boom" in r for r in rows)
    assert "```{image} /book/_generated/sed-key.png" in text and "{doc}`/book/claims`" in text
    failed_key = report.chapter_summary("cpu", chapter="sed", notebooks=books, key_page="notebooks/sed/broken.ipynb",
                                        failed={"notebooks/sed/broken.ipynb": "boom"})
    assert "key page {doc}`broken </notebooks/sed/broken>` failed." in failed_key and "{image}" not in failed_key
    with pytest.raises(report.InvalidInputError, match="Unknown scale"):
        report.chapter_summary("big", chapter="sed", notebooks=books)
