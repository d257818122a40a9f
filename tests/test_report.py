"""ensdiv.report: the verdict rule, the check helpers, the calibration row and the claim records.

Every expected value below is worked out by hand from the rule in the module docstring.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

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
    correlated,
    evaluate,
    greater,
    less,
    load_claims,
    negative,
    positive,
    ratio_above,
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


def _n(**draw):
    """Null data: 99 copies of one draw (the tests' stand-in for data built with the effect removed; 99 draws
    can give a p-value of 1/100, below the book's 5 % after Holm over up to five checks)."""
    return report.Null("the effect removed (test)", [draw] * 99)


def _claim(raw=False, **overrides):
    """A cpu claim; unless ``raw``, a check built without null data gets one draw with its quantities at zero
    (where the built-in comparisons and signs fail), so that the test is about what it names."""
    args = dict(paper="foundations", item="Fig. 1", claim="Ensembles help.", checks=[positive("x")],
                ours={"x": 1.0}, scale="cpu", write=False)
    args.update(overrides)
    if not raw:
        args["checks"] = [c if not isinstance(c, Check) or c.null is not None
                          or c.null_reason not in ("", report.checks.NO_NULL)
                          else c.with_(null=_n(**{q: 0.0 for q in c.needs})) for c in args["checks"]]
    return claim(**args)


def _bad_input(err: pytest.ExceptionInfo) -> None:
    assert isinstance(err.value, ValueError)
    assert isinstance(err.value, EnsdivError)
    assert str(err.value).endswith(".")


# --- the verdict rule ----------------------------------------------------------------------------------------------

P, F, I = "pass", "fail", "inconclusive"


def _rule_in_words(outcomes, total):
    """The verdict sentences of ``RULE``, each read on its own (not the function's branches)."""
    n, passed, failed = len(outcomes), outcomes.count(P), outcomes.count(F)
    sentences = {
        "cannot decide": n == 0 or 2 * n < total,
        "holds": n > 0 and passed == n,
        "holds partly": failed == 0 and 0 < passed < n and 2 * passed >= n,
        "inconclusive": n > 0 and failed == 0 and 2 * passed < n,
        "mixed": failed > 0 and (passed > 0 or 2 * failed < n),
        "does not hold": passed == 0 and failed > 0 and 2 * failed >= n,
    }
    if sentences.pop("cannot decide"):
        return "cannot decide"
    (only,) = [k for k, v in sentences.items() if v]  # exactly one sentence applies
    return only


@pytest.mark.parametrize("total_extra", [0, 1, 2, 3])
def test_verdict_follows_each_sentence_of_the_rule_for_every_combination_of_outcomes(total_extra):
    """Every multiset of up to four counted outcomes, with 0–3 more checks built and not counted: exactly one
    sentence of the rule applies, and the function says it."""
    import itertools

    for n in range(5):
        for outcomes in itertools.combinations_with_replacement((P, F, I), n):
            outcomes = list(outcomes)
            assert verdict(outcomes, scale="cpu", total=n + total_extra) == \
                _rule_in_words(outcomes, n + total_extra), (outcomes, total_extra)


@pytest.mark.parametrize(("results", "scale", "expected"), [
    ([P, F], "cpu", "mixed"),  # one pass and one fail is mixed, not a refutation
    ([F, F, I], "cpu", "does not hold"),
    ([F, I, I], "cpu", "mixed"),
    ([None, None, None], "cpu", "cannot decide"),
    ([], "paper", "cannot decide"),
    ([P, P, P, P], "smoke", "not testable at this scale"),
    ([P, None, None], "cpu", "cannot decide"),  # 1 of 3 computable: fewer than half
    ([P, P, None], "cpu", "holds"),  # 2 of 3 computable; the verdict line says so
    ([True, np.bool_(False), False], "cpu", "mixed"),  # booleans read as pass/fail
])
def test_verdict_table(results, scale, expected):
    assert verdict(results, scale=scale) == expected


def test_verdict_counts_against_every_check_the_claim_has():
    assert verdict([P], scale="cpu", total=3) == "cannot decide"
    assert verdict([P, P], scale="cpu", total=3) == "holds"


@pytest.mark.slow
def test_holm_agrees_with_statsmodels():
    from statsmodels.stats.multitest import multipletests

    # statsmodels takes about 0.2 s a call here: 24 draws, four of each size from 1 to 6 p-values
    rng = np.random.default_rng(0)
    for m in list(range(1, 7)) * 4:
        p = list(rng.uniform(0, 0.12, m))
        assert report.holm(p) == multipletests(p, alpha=report.ALPHA, method="holm")[0].tolist()


# --- check helpers on hand values ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("check", "values", "expected"), [
    (less("a", "b"), {"a": 1.0, "b": 2.0}, P),
    (less("a", "b"), {"a": 2.0, "b": 2.0}, F),
    (less("a", "b", margin=0.5), {"a": 1.0, "b": 1.5}, F),  # 1.0 < 1.0 is false
    (less("a", "b", margin=0.5), {"a": 0.9, "b": 1.5}, P),
    (greater("a", "b"), {"a": 3, "b": 2}, P),
    (greater("a", "b"), {"a": 2, "b": 2}, F),
    (greater("a", "b", margin=1.0), {"a": 3.0, "b": 2.0}, F),
    (greater("a", "b", margin=1.0), {"a": 3.5, "b": 2.0}, P),
    (ratio_above("a", "b", 2.0), {"a": 4.2, "b": 2.0}, P),
    (report.noninferior("a", "b", margin=1.0), {"a": 93.5, "b": 94.0}, P),  # 0.5 points worse: within 1
    (report.noninferior("a", "b", margin=1.0), {"a": 92.5, "b": 94.0}, F),
    (report.noninferior("a", "b", margin=0.1, higher_is_better=False), {"a": 0.25, "b": 0.2}, P),
    (ratio_above("a", "b", 2.0), {"a": 3.8, "b": 2.0}, F),
    (negative("r"), {"r": -0.2}, P),
    (negative("r"), {"r": 0.0}, F),
    (positive("r"), {"r": 0.3}, P),
    (positive("r"), {"r": 0}, F),
    (correlated("r", sign=-1), {"r": -0.3}, P),
    (correlated("r", sign=1), {"r": -0.3}, F),
    (below("e", 0.05), {"e": 0.04}, P),
    (below("e", 0.05), {"e": 0.05}, F),
    (above("acc", 0.9), {"acc": 0.95}, P),
    (above("acc", 0.9), {"acc": 0.9}, F),
    (significant("p"), {"p": 0.01}, P),
    (significant("p"), {"p": 0.05}, F),
    (significant("p", alpha=0.01), {"p": 0.02}, F),
    (within("a", "b", abs=0.05), {"a": 1.04, "b": 1.0}, P),
    (within("a", "b", abs=0.05), {"a": 1.06, "b": 1.0}, F),
    (within("a", "b", rel=0.1), {"a": 2.15, "b": 2.0}, P),  # |0.15| <= 0.2
    (within("a", "b", rel=0.1), {"a": 1.7, "b": 2.0}, F),  # |0.3| > 0.2
    (within("a", "b", rel=0.1), {"a": -2.1, "b": -2.0}, P),  # rel uses |b|
    (within("a", "b", rel=0.01, abs=0.5), {"a": 2.3, "b": 2.0}, P),  # rel fails, abs passes
])
def test_helpers_on_hand_values(check, values, expected):
    out = evaluate(check, values)
    assert out.result == expected and out.interval is None  # plain numbers: no interval


@pytest.mark.parametrize("check", [
    less("a", "b"), greater("a", "b"), negative("a"), positive("a"), below("a", 1.0), above("a", 1.0),
    significant("a"), within("a", "b", rel=0.1), within("a", "b", abs=0.1), ratio_above("a", "b", 1.5),
    correlated("a", sign=1),
])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -math.inf, None, "missing"])
def test_helpers_not_testable(check, bad):
    values = {"b": 1.0} if bad == "missing" else {"a": bad, "b": 1.0}
    assert evaluate(check, values).result is None
    assert evaluate(check, {"a": 1.0, "b": float("nan")} if "b" in check.needs else {}).result is None


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
    assert ratio_above("a", "b", 2).name == "a is more than 2 times b"
    assert correlated("r", sign=-1).name == "the correlation r is negative"
    assert positive("r", name="the correlation is positive").name == "the correlation is positive"


def test_check_without_needs_keyerror_means_not_testable():
    reads_c = Check("c exceeds a plus b", lambda v: v["c"] > v["a"] + v["b"])
    assert evaluate(reads_c, {"a": 1, "b": 2, "c": 4}).result == P
    assert evaluate(reads_c, {"a": 1, "b": 2, "c": 3}).result == F
    assert evaluate(reads_c, {"a": 1, "b": 2}).result is None
    assert evaluate(reads_c, {"a": 1, "b": 2, "c": float("nan")}).result is None  # NaN is hidden from the rule


def test_rule_sees_plain_floats_and_ignores_labels():
    seen = {}
    check = Check("x is positive", lambda v: seen.update(v) or v["x"] > 0, needs=("x",))
    assert evaluate(check, {"x": torch.tensor(2), "model": "resnet18"}).result == P
    assert seen == {"x": 2.0} and type(seen["x"]) is float


def test_within_and_correlated_need_valid_arguments():
    for bad in (lambda: within("a", "b"), lambda: within("a", "b", abs=-0.1), lambda: correlated("r", sign=0)):
        with pytest.raises(EnsdivError) as err:
            bad()
        _bad_input(err)


# --- intervals: three outcomes ------------------------------------------------------------------------------------

def _est(value, reps, group="g", kind="bootstrap", source="evaluation samples"):
    return report.Estimate(value, np.asarray(reps, dtype=float), source, kind, group)


def test_an_interval_that_straddles_the_margin_is_inconclusive():
    """Replicates of a and b from one group: a - b in every replicate is (-0.2 .. 0.1), 90 % interval by hand."""
    a = _est(0.5, [0.40, 0.45, 0.50, 0.55, 0.60] * 4)
    b = _est(0.6, [0.60, 0.55, 0.50, 0.45, 0.50] * 4)
    out = evaluate(less("a", "b"), {"a": a, "b": b})
    diffs = np.array([-0.2, -0.1, 0.0, 0.1, 0.1] * 4)
    assert out.interval == pytest.approx(tuple(np.quantile(diffs, [0.05, 0.95])))
    assert out.result == I and out.value == pytest.approx(-0.1) and out.source == "evaluation samples"
    assert evaluate(less("a", "b", margin=0.5), {"a": a, "b": b}).result == F  # the whole interval above -0.5
    assert evaluate(less("a", "b"), {"a": a, "b": _est(0.9, [0.9] * 20)}).result == P  # all below 0


def test_seed_estimates_use_a_student_t_interval_paired_by_seed():
    a, b = report.from_seeds([0.91, 0.93, 0.92]), report.from_seeds([0.90, 0.91, 0.91])
    out = evaluate(greater("a", "b"), {"a": a, "b": b})
    d = np.array([0.01, 0.02, 0.01])  # paired by seed
    half = 2.919986 * d.std(ddof=1) / math.sqrt(3)  # t(0.95, 2 df) by hand from a table
    assert out.interval == pytest.approx((d.mean() - half, d.mean() + half), abs=1e-6)
    assert out.result == P and out.source == "training seeds"  # 0.0133 +- 0.0097 lies above zero
    assert evaluate(greater("a", "b", margin=0.01), {"a": a, "b": b}).result == I  # 0.0036 .. 0.0231 straddles
    one = evaluate(greater("a", "b"), {"a": report.from_seeds([0.9]), "b": report.from_seeds([0.8])})
    assert one.result == P and one.interval is None  # one seed: no interval, a point comparison


def test_fisher_interval_estimate():
    r = report.Estimate(-0.31, None, "stated", "interval", low=-0.5, high=-0.1)
    assert evaluate(correlated("r", sign=-1), {"r": r}).result == P
    assert evaluate(correlated("r", sign=-1), {"r": report.Estimate(-0.31, None, "stated", "interval", low=-0.6,
                                                                   high=0.05)}).result == I


def test_paired_bootstrap_matches_a_naive_loop():
    """Two classifiers' correctness on 400 images: the helper's replicates of acc_a - acc_b have the mean and
    spread of a naive loop over resampled indices, and identical classifiers differ by exactly zero."""
    rng = np.random.default_rng(0)
    a = (rng.random(400) < 0.85).astype(int)
    b = np.where(rng.random(400) < 0.9, a, 1 - a)  # agrees with a on ~90 % of images
    est = report.paired_bootstrap({"a": torch.tensor(a), "b": b, "a2": a.copy()}, seed=1, n_resamples=4000)
    assert est["a"].value == pytest.approx(a.mean()) and est["b"].value == pytest.approx(b.mean())
    helper = est["a"].replicates - est["b"].replicates
    naive = []
    loop = np.random.default_rng(7)
    for _ in range(4000):
        idx = loop.integers(0, 400, 400)
        naive.append(a[idx].mean() - b[idx].mean())
    naive = np.array(naive)
    assert helper.mean() == pytest.approx(naive.mean(), abs=0.002)
    assert helper.std() == pytest.approx(naive.std(), rel=0.06)
    assert np.all(est["a"].replicates == est["a2"].replicates)  # paired: one resample serves every model
    # the unpaired spread would be much wider: paired differences of agreeing classifiers are tight
    unpaired = est["a"].replicates - np.random.default_rng(3).permutation(est["b"].replicates)
    assert helper.std() < 0.6 * unpaired.std()


def test_paired_bootstrap_with_a_statistic_of_several_arrays():
    scores = np.array([0.9, 0.8, 0.3, 0.2, 0.7, 0.1])
    labels = np.array([1, 1, 0, 0, 1, 0])
    est = report.paired_bootstrap({"auc": (scores, labels)}, seed=0, n_resamples=50,
                                  statistic=lambda s, y: float(np.mean(s[y == 1]) - np.mean(s[y == 0]))
                                  if 0 < y.sum() < len(y) else float("nan"))
    assert est["auc"].value == pytest.approx(0.8 - 0.2)
    assert est["auc"].replicates.shape == (50,)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"per_sample": {}}, "at least one quantity"),
    ({"per_sample": {"a": np.ones(3), "b": np.ones(4)}}, "same number of samples"),
    ({"per_sample": {"a": np.ones(1)}}, "at least two samples"),
])
def test_paired_bootstrap_bad_input(kwargs, match):
    with pytest.raises(EnsdivError, match=match) as err:
        report.paired_bootstrap(seed=0, **kwargs)
    _bad_input(err)



def test_sample_bootstrap_resamples_independent_sets_on_their_own():
    """A clean set with its corrupted copy (one sample: the same 500 images) and a re-collected set of 300 other
    images (a second sample). The spread of (v2 - clean) is that of two independent proportions (by hand:
    sqrt(p1 q1 / n1 + p2 q2 / n2)) and matches a naive loop resampling each set on its own; the corrupted copy
    stays paired with its clean image, so (clean - corrupted) is as tight as a paired loop says."""
    rng = np.random.default_rng(0)
    clean = (rng.random(500) < 0.8).astype(float)
    corrupted = np.where(rng.random(500) < 0.9, clean, 0.0)  # loses ~10 % of the right answers
    v2 = (rng.random(300) < 0.7).astype(float)
    est = report.sample_bootstrap(
        {"val": {"clean": clean, "corrupted": corrupted}, "v2": {"v2": torch.tensor(v2)}},
        {"v2 - clean": lambda a: a["v2"].mean(1) - a["clean"].mean(1),
         "clean - corrupted": lambda a: a["clean"].mean(1) - a["corrupted"].mean(1)},
        seed=1, n_resamples=4000)
    assert est["v2 - clean"].value == pytest.approx(v2.mean() - clean.mean())
    assert est["clean - corrupted"].value == pytest.approx(clean.mean() - corrupted.mean())
    assert est["v2 - clean"].group == est["clean - corrupted"].group  # one group: combined replicate by replicate
    p1, p2 = clean.mean(), v2.mean()
    assert est["v2 - clean"].replicates.std() == pytest.approx(np.sqrt(p1 * (1 - p1) / 500 + p2 * (1 - p2) / 300),
                                                               rel=0.08)
    loop = np.random.default_rng(7)
    paired = []
    for _ in range(4000):
        i = loop.integers(0, 500, 500)
        paired.append(clean[i].mean() - corrupted[i].mean())
    assert est["clean - corrupted"].replicates.std() == pytest.approx(np.std(paired), rel=0.08)
    # were the corrupted copy resampled on its own, the spread would be far wider than the paired one
    assert np.std(paired) < 0.5 * np.sqrt(2 * p1 * (1 - p1) / 500)


@pytest.mark.parametrize(("samples", "quantities", "match"), [
    ({}, {"q": lambda a: 0}, "at least one sample"),
    ({"s": {"a": np.ones(3)}}, {}, "at least one sample and one quantity"),
    ({"s": {"a": np.ones(3)}, "t": {"a": np.ones(4)}}, {"q": lambda a: 0}, "in samples 's' and 't'"),
    ({"s": {"a": np.ones(3), "b": np.ones(4)}}, {"q": lambda a: 0}, "different lengths"),
    ({"s": {"a": np.ones(1)}}, {"q": lambda a: 0}, "at least two"),
])
def test_sample_bootstrap_bad_input(samples, quantities, match):
    with pytest.raises(EnsdivError, match=match) as err:
        report.sample_bootstrap(samples, quantities, seed=0)
    _bad_input(err)

def test_correlation_estimate_and_bad_input():
    x = np.arange(12.0)
    est = report.correlation(x, x ** 2, seed=0, n_resamples=200)
    assert est.value == pytest.approx(1.0) and est.interval()[0] > 0.9
    with pytest.raises(EnsdivError, match="at least 4"):
        report.correlation([1, 2, 3], [1, 2, 3], seed=0)
    with pytest.raises(EnsdivError, match="spearman or pearson"):
        report.correlation(x, x, seed=0, method="kendall")
    assert [round(v, 3) for v in report.fisher_interval(0.5, 28)] == [0.217, 0.706]  # by hand: tanh(0.549+-0.329)


# --- values as tensors and numpy scalars ---------------------------------------------------------------------------

def test_torch_and_numpy_values():
    values = {"a": torch.tensor(0.1), "b": np.float32(0.2), "n": np.int64(3), "flag": np.bool_(True)}
    assert evaluate(less("a", "b"), values).result == P
    assert evaluate(greater("n", "b", margin=2.5), values).result == P  # 3 > 2.7
    assert evaluate(positive("flag"), values).result == P  # True is 1.0
    assert evaluate(positive("a"), {"a": torch.tensor(float("nan"))}).result is None
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


# --- the calibration row, the null row, facts ---------------------------------------------------------------------

def test_check_failing_on_paper_numbers_is_excluded():
    checks = [less("err_ens", "err_single"), positive("gain"), below("err_ens", 0.05, null=_n(err_ens=0.1))]
    ours = {"err_ens": 0.08, "err_single": 0.10, "gain": 0.02}  # passes, passes, fails
    paper = {"err_ens": 0.06, "err_single": 0.09, "gain": 0.03}  # passes, passes, fails (0.06 >= 0.05)
    without = _claim(checks=checks, ours=ours)
    assert without.verdict == "mixed"  # 2 pass, 1 fails
    calibrated = _claim(checks=checks, ours=ours, paper_values=paper)
    assert calibrated.verdict == "holds"  # 2 of 2: the third is not a test of the paper's claim
    assert [(c["ours"], c["paper"], c["null_rate"], c["counted"], c["excluded"]) for c in calibrated.checks] == [
        (P, P, 0.0, True, ""), (P, P, 0.0, True, ""), (F, F, 0.0, False, "fails on the paper's numbers")]
    assert calibrated.checks_frame()["on the paper's numbers"].tolist() == ["pass", "pass", "fail"]
    assert calibrated.paper_findings == ["err_ens is below 0.05"]  # a finding about the paper, never dropped


def test_a_check_whose_statistic_sits_among_its_null_draws_is_inconclusive_and_still_counts():
    """"ERR is below 0.6" where runs with the effect removed give 0.25–0.35 as well: the p-value of 0.3 against
    them is large, so the check is inconclusive; it stays in the verdict (never dropped) and the row says how often
    it passed there."""
    null = report.Null("the effect removed (test)", [{"err": e} for e in np.linspace(0.25, 0.35, 99)])
    checks = [below("err", 0.6, null=null), less("err", "err_base")]
    c = _claim(checks=checks, ours={"err": 0.3, "err_base": 0.35})
    assert [(ch["null_rate"], ch["counted"], ch["ours"]) for ch in c.checks] == [(1.0, True, I), (0.0, True, P)]
    assert c.checks[0]["p"] == pytest.approx((1 + 50) / 100)  # 50 of 99 draws at or below 0.3
    assert c.checks[0]["null"] == "100% of 99 draws"
    assert c.verdict == "holds partly" and c.strength()["counted"] == 2


def test_a_check_without_a_null_says_why():
    c = _claim(raw=True, checks=[above("acc", 0.5), above("err", 0.5, null=0.1), Check(
        "x is odd", lambda v: v["x"] % 2 == 1, needs=("x",), null_reason="the labels are the claim")],
               ours={"acc": 0.9, "err": 0.9, "x": 3})
    assert [(ch["null"], ch["counted"]) for ch in c.checks] == [
        ("no null: no null built from this run's data", False),
        ("no null: a value typed on the page is not a null built from this run's data", False),
        ("no null: the labels are the claim", False)]
    assert c.verdict == "cannot decide"  # nothing counts, and the scale is not the reason
    assert c.undecided == ("no null built from this run's data; a value typed on the page is not a null built from "
                           "this run's data; the labels are the claim")


def test_facts_are_shown_and_never_counted():
    c = _claim(checks=[less("err_pe", "err_de")], ours={"err_pe": 0.05, "err_de": 0.06},
               facts={"params_pe": 1.2e6}, paper_values={"params_pe": 1.1e6})
    assert c.facts == [{"quantity": "params_pe", "paper": 1.1e6, "ours": 1.2e6}]
    assert [v["quantity"] for v in c.values] == ["err_pe", "err_de"]
    assert "params_pe" in str(c) and c.strength()["checks"] == 1
    with pytest.raises(EnsdivError, match="is a fact and a checked quantity") as err:
        _claim(checks=[positive("params_pe")], ours={"params_pe": 1.0}, facts={"params_pe": 1.0})
    _bad_input(err)


def test_estimates_in_a_claim_carry_their_interval_and_source():
    a = _est(0.2, np.linspace(0.1, 0.3, 21))
    b = _est(0.5, np.linspace(0.4, 0.6, 21))
    c = _claim(checks=[less("a", "b")], ours={"a": a, "b": b})
    assert c.verdict == "holds" and c.variance == "evaluation samples"
    assert c.checks[0]["interval"] == pytest.approx([-0.3, -0.3])
    assert c.values[0]["interval"] == pytest.approx(list(np.quantile(np.linspace(0.1, 0.3, 21), [0.05, 0.95])))
    assert json.loads(json.dumps(c.record()))["strength"] == {"checks": 1, "counted": 1, "passed": 1, "failed": 0,
                                                              "inconclusive": 0, "untestable": 0, "excluded": 0}
    assert _claim(checks=[less("a", "b")], ours={"a": 0.2, "b": 0.5}).variance.startswith("none")


def test_check_the_paper_cannot_evaluate_still_counts():
    checks = [positive("gain"), below("ece", 0.05, null=_n(ece=0.2))]
    c = _claim(checks=checks, ours={"gain": 0.1, "ece": 0.07}, paper_values={"gain": 0.2})  # paper has no ece
    assert [ch["paper"] for ch in c.checks] == [P, None]
    assert [ch["counted"] for ch in c.checks] == [True, True]
    assert c.verdict == "mixed"  # one pass and one fail


def test_check_not_testable_on_ours_does_not_count():
    c = _claim(checks=[positive("gain"), positive("g2"), below("ece", 0.05, null=_n(ece=0.2))],
               ours={"gain": 0.1, "g2": 0.2, "ece": float("nan")})
    assert [ch["counted"] for ch in c.checks] == [True, True, False]
    assert c.verdict == "holds" and c.strength()["untestable"] == 1


def test_smoke_claim_is_never_testable():
    c = _claim(checks=[positive("x")], ours={"x": 1.0}, scale="smoke")
    assert c.checks[0]["ours"] == P
    assert c.verdict == "not testable at this scale"


# --- tables and rendering ------------------------------------------------------------------------------------------

def test_values_table_defaults_and_formatting():
    ours = {"acc": 0.912345, "params": 11_000_000, "p": 0.0000123, "err": float("nan")}
    c = _claim(checks=[above("acc", 0.5, null=0.1)], ours=ours, paper_values={"acc": 93.2, "flops": 1.0})
    frame = c.frame()
    assert frame.columns.tolist() == ["quantity", "paper", "this run", "90% interval"]
    assert frame["quantity"].tolist() == ["acc", "params", "p", "err", "flops"]
    assert frame["this run"].tolist() == ["0.9123", "11000000", "1.23e-05", "–", "–"]
    assert frame["paper"].tolist() == ["93.2", "–", "–", "–", "1"]
    assert _claim(ours=ours, key=["p", "acc"]).frame()["quantity"].tolist() == ["p", "acc"]


def test_text_and_html_rendering():
    checks = [positive("a"), positive("b"), positive("c"), positive("d")]
    c = _claim(checks=checks, ours={"a": 1, "b": 1, "c": 1, "d": -1}, notes="Member seeds differ.")
    text = str(c)
    first = ("**Verdict: mixed** (3 of 4 counted checks pass, 1 fail; intervals: none: no counted check compares "
             "estimates; scale cpu)")
    assert text.splitlines()[0] == first
    assert repr(c) == text
    assert text.index("this run") < text.index("passes with no effect") < text.index("Member seeds differ.")
    page = c._repr_html_()
    assert page.startswith("<p><b>Verdict: mixed</b>")
    assert page.count("<table") == 2
    assert page.index("this run") < page.index("on the paper") < page.rindex("</table>") < page.index("Member seeds")
    assert "<script" not in page
    assert c.checks_frame().columns.tolist() == ["check", "on the paper's numbers", "passes with no effect",
                                                 "this run", "interval", "counted"]
    assert c.checks_frame()["this run"].tolist() == ["pass", "pass", "pass", "fail"]


def test_summary_mentions_excluded_checks():
    c = _claim(checks=[positive("a"), positive("b")], ours={"a": 1, "b": 1}, paper_values={"a": 1, "b": -1})
    assert str(c).splitlines()[0].startswith(
        "**Verdict: holds** (1 of 1 counted checks pass; 1 not counted (see the checks table)")


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
    assert loaded[2]["values"][1] == {"quantity": "y", "paper": None, "ours": None, "interval": None,
                                      "source": None}  # NaN written as null
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

    monkeypatch.setattr(report.claims.json, "dump", broken_dump)
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
    imported = set()
    for module in Path(report.__file__).parent.glob("*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    # ensdiv.config: the dry-run flag (a dry run's verdicts are not testable); it imports no torch either
    assert {m for m in imported if m.startswith("ensdiv") and not m.startswith("ensdiv.report")} == {
        "ensdiv.config", "ensdiv.errors", "ensdiv.paths"}
    assert not any(m.split(".")[0] == "torch" for m in imported)
    config = ast.parse((Path(report.__file__).parent.parent / "config.py").read_text(encoding="utf-8"))
    from_config = {a.name for n in ast.walk(config) if isinstance(n, ast.Import) for a in n.names}
    from_config |= {n.module for n in ast.walk(config) if isinstance(n, ast.ImportFrom)}
    assert {m for m in from_config if m.startswith("ensdiv")} == {"ensdiv.errors"}
    assert not any(m.split(".")[0] in ("torch", "numpy") for m in from_config)


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


# --- verdicts a second, independent run did not keep --------------------------------------------------------------
def _stability(tmp_path, record):
    """A project folder whose ``benchmarks/results/book.json`` holds ``record`` as its recorded comparison."""
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "book.json").write_text(json.dumps({"verdict_stability": record}))
    return tmp_path


def test_a_verdict_moved_in_an_independent_run_is_marked_on_its_page_and_the_claims_page(build, monkeypatch):
    """The comparison ``bench_book.py --compare`` records names two moved claims: one whose check sat near its
    bound (fragile) and one whose gate moved; a third claim kept its verdict and a fourth was in one run only. The
    page's verdict box and its claims-page row say so for the two that moved, and for nothing else."""
    from ensdiv.book import site

    near = "near its boundary: x below y (pass → inconclusive)"
    root = _stability(build, {"scale": "cpu", "moved": [
        {"paper": "sed", "item": "Fig. 3", "claim_id": "", "a": "holds", "b": "inconclusive", "why": near},
        {"paper": "sed", "item": "Tab. 1", "claim_id": "", "a": "holds", "b": "not testable at this scale",
         "why": "gate: members trained (pass → fail)"},
        {"paper": "sed", "item": "Fig. 9", "claim_id": "", "a": "holds", "b": None, "why": "only in one run"}]})
    moved = site.moved_claims("cpu", root=root)
    assert moved == {
        ("sed", "Fig. 3", ""): f"fragile: moved in an independent run (holds → inconclusive; {near})",
        ("sed", "Tab. 1", ""): "moved in an independent run (holds → not testable at this scale; gate: members "
                               "trained (pass → fail))"}
    pages = []
    for item in ("Fig. 3", "Tab. 1", "Fig. 4"):
        monkeypatch.setenv("ENSDIV_NOTEBOOK", f"notebooks/sed/{item[-1]}.ipynb")
        made = _claim(paper="sed", item=item, checks=[report.less("x", "y")], ours={"x": 1, "y": 2})
        pages.append(site._mark_moved(report.PageRun(f"notebooks/sed/{item[-1]}.ipynb", "ok",
                                                     records=[made.record()]), moved))
    assert f"Fragile: moved in an independent run (holds → inconclusive; {near})." in report.verdict_box(pages[0])
    assert "Moved in an independent run (holds → not testable" in report.verdict_box(pages[1])
    assert "independent run" not in report.verdict_box(pages[2])
    rows = {n: line for line in report.claims_page("cpu", pages).splitlines()
            for n in "134" if f"</notebooks/sed/{n}>" in line}
    assert "— fragile: moved in an independent run (holds → inconclusive" in rows["3"]
    assert "— moved in an independent run (holds → not testable" in rows["1"]
    assert "independent run" not in rows["4"]


@pytest.mark.parametrize("stability", [
    None,  # no comparison recorded
    "not a mapping",
    {"scale": "smoke", "moved": [{"paper": "sed", "item": "Fig. 3", "a": "holds", "b": "fails", "why": "x"}]},
    {"scale": "cpu", "moved": ["not a row", {"item": "Fig. 3", "why": "x"}]},  # rows without a claim's key
])
def test_no_comparison_of_claims_at_the_books_scale_marks_nothing(build, stability):
    from ensdiv.book import site

    assert site.moved_claims("cpu", root=_stability(build, stability)) == {}


def test_an_unreadable_comparison_marks_nothing(build):
    from ensdiv.book import site

    (build / "benchmarks" / "results").mkdir(parents=True)
    (build / "benchmarks" / "results" / "book.json").write_text("{not json")
    assert site.moved_claims("cpu", root=build) == {}
    assert site.moved_claims("cpu", root=build / "missing") == {}


# --- chapter landing pages ---------------------------------------------------------------------------------------
def test_chapter_summary_lists_the_chapters_claims_and_failed_pages(build, monkeypatch):
    """Two sed claims (one holds, one does not), a claim of another chapter and a failed sed page: the sed
    summary counts and lists exactly its own three rows, links each page, and shows the thumbnail."""
    records = [("notebooks/sed/a.ipynb", "sed", "Fig. 3", 1), ("notebooks/sed/b.ipynb", "sed", "Tab. 1", 3),
               ("notebooks/packed-ensembles/c.ipynb", "packed-ensembles", "Fig. 1", 1)]
    pages = []
    for nb, paper, item, x in records:
        monkeypatch.setenv("ENSDIV_NOTEBOOK", nb)
        made = _claim(paper=paper, item=item, checks=[report.less("x", "y")], ours={"x": x, "y": 2})
        pages.append(report.PageRun(nb, "ok", records=[made.record()]))
    pages.append(report.PageRun("notebooks/sed/broken.ipynb", "failed", "boom"))
    text = report.chapter_summary("cpu", chapter="sed", pages=pages, key_page="notebooks/sed/a.ipynb",
                                  thumbnail="/book/_generated/sed-key.png", claims_doc="book/claims")
    assert "3 claims, 1 holds, 1 does not hold, 1 failed." in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 3 and not any("packed" in r for r in rows)
    assert any("</notebooks/sed/a>" in r and '<span class="ensdiv-badge holds">holds</span>' in r for r in rows)
    assert any("</notebooks/sed/broken>" in r and 'ensdiv-badge failed' in r and "boom" in r for r in rows)
    assert "```{image} /book/_generated/sed-key.png" in text and "{doc}`/book/claims`" in text
    failed_key = report.chapter_summary("cpu", chapter="sed", pages=pages, key_page="notebooks/sed/broken.ipynb")
    assert "key page {doc}`broken </notebooks/sed/broken>` failed." in failed_key and "{image}" not in failed_key
    with pytest.raises(EnsdivError, match="Unknown scale"):
        report.chapter_summary("big", chapter="sed", pages=pages)


def test_nan_mean_equals_numpy_and_is_silent_where_every_entry_is_nan():
    import warnings

    rng = np.random.default_rng(0)
    a = rng.random((6, 5))
    a[a < 0.3] = np.nan
    a[2] = np.nan  # one row with nothing defined
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "Mean of empty slice" would raise here
        got = report.nan_mean(a, axis=1)
    rows = [r for r in range(6) if r != 2]
    np.testing.assert_allclose(got[rows], np.nanmean(a[rows], axis=1))
    assert np.isnan(got[2])
    np.testing.assert_allclose(report.nan_mean(a[rows], axis=0), np.nanmean(a[rows], axis=0))


def test_audit_refuses_these_models_unless_it_names_fixed_models_and_compares_no_seeds():
    """SED Fig. 2 as it was declared: "these models" for what SED's PDS does, over an image bootstrap and with no
    models named: refused. Named fixed models pass; a seed comparison under "these models" is refused."""
    boot = {"hi": _est(60.0, np.linspace(55, 65, 21)), "lo": _est(80.0, np.linspace(75, 85, 21))}
    sed_fig2 = dict(paper="sed", item="Fig. 2", claim="High-PDS samples are ambiguous.", unit="these models",
                    checks=[less("hi", "lo", null=_n(hi=70.0, lo=70.0), evidence="sed/fig-2/x")], ours=boot,
                    scale="cpu", write=False, variance="rendition images")
    problems = report.audit(claim(**sed_fig2).record())
    assert problems == ["the claim is about 'these models' and does not name them (models=...); a claim about what "
                        "a training method gives is about 'trained methods', with seeds as its unit."]
    assert report.audit(claim(**sed_fig2, models="the five released committee checkpoints").record()) == []
    seeds = {"a": report.from_seeds([1.0, 1.1, 1.2, 1.3, 1.4]), "b": report.from_seeds([0.0, 0.1, 0.2, 0.3, 0.4])}
    methods = claim(**{**sed_fig2, "ours": seeds, "checks": [greater(
        "a", "b", null=report.seed_flips(seeds, "a", "b", seed=0), evidence="t/seeds")]}, models="two recipes")
    assert report.audit(methods.record()) == [
        "check 'a is greater than b' compares training runs (seeds) in a claim about 'these models'; its unit is "
        "'trained methods'."]
