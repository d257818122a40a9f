"""Verdicts on evidence: empirical nulls, the claim's unit of replication, Holm, gates and evidence keys.

Each case the reviews found on pages is rebuilt here from synthetic data, with the effect removed by
construction, and must *not* pass: an inequality true for any data, a near-identity, a part–whole correlation, a
maximum of noisy improvements against a small bound and a tie at a grid's floor read the same on their null data,
so their randomisation p-value is large and they are *inconclusive* (counted, never dropped); one quantity in two
claims is refused; a diversity check on a run that failed its gate is not counted. A genuine effect of three
standard errors over seeds must count and pass. The statistics are checked against naive implementations.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from ensdiv import report
from ensdiv.errors import EnsdivError, InvalidInputError
from ensdiv.report import (
    Null,
    aa_null,
    claim,
    correlated,
    from_seeds,
    greater,
    less,
    model_bootstrap,
    nested_bootstrap,
    noninferior,
    null_draws,
    paired_bootstrap,
    partition_null,
    seed_flips,
)


def _claim(checks, ours, *, unit="trained methods", **kw):
    return claim(paper="foundations", item="Fig. 1", claim="A test claim.", checks=checks, ours=ours, scale="cpu",
                 write=False, unit=unit, **kw)


def _nll(probs, labels):
    return -np.log(probs[np.arange(labels.size), labels])


# --- the cases that must not count ------------------------------------------------------------------------------

def test_jensen_inequality_passes_on_permuted_labels_and_is_judged_by_its_rank_among_them():
    """The averaged ensemble's NLL is below its members' mean NLL for any predictions (Jensen): with the labels
    permuted (no model knows anything) the bare interval still passes every time. Against the permuted labels its
    p-value is its rank among them, so on 20 label sets that no model knows it passes about 5 % of the time (at
    most 3 of 20: P = 0.98 at 5 %), never 100 %."""
    rng = np.random.default_rng(0)
    m, n, c = 4, 400, 10
    logits = rng.normal(size=(m, n, c)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)

    def quantities(lab, seed):
        per = {"ens": _nll(probs.mean(0), lab), "members": np.mean([_nll(p, lab) for p in probs], axis=0)}
        return paired_bootstrap(per, seed=seed, n_resamples=100)

    outcomes = []
    for k in range(20):
        labels = rng.integers(0, c, n)
        ours = quantities(labels, k)
        null = null_draws("labels permuted", lambda r, lab=labels: quantities(r.permutation(lab),
                                                                              int(r.integers(1 << 30))),
                          draws=40, seed=100 + k)
        c_ = _claim([less("ens", "members", null=null, evidence="t/jensen")], ours, unit="these models")
        row = c_.checks[0]
        assert report.evaluate(less("ens", "members"), ours).result == "pass"  # what a bare interval says
        gaps = [d["ens"].value - d["members"].value for d in null.draws]
        observed = ours["ens"].value - ours["members"].value
        assert row["null_rate"] == 1.0 and row["counted"]
        assert row["p"] == pytest.approx((1 + sum(g <= observed + 1e-12 for g in gaps)) / 41)
        outcomes.append(row["ours"])
    assert outcomes.count("pass") <= 3 and set(outcomes) <= {"pass", "inconclusive"}


def test_near_identity_of_two_diversity_measures_does_not_count():
    """Disagreement and the Kohavi–Wolpert variance of two members are sums of the same vote-pattern
    frequencies (KW = D / 4 for two members): their correlation over ensembles is one on random votes too."""
    rng = np.random.default_rng(0)

    def measures(correct):  # correct: (E, 2, N) of 0/1
        d = (correct[:, 0] != correct[:, 1]).mean(-1)
        kw = (correct.sum(1) * (2 - correct.sum(1))).mean(-1) / 4
        return d, kw

    def corr(correct, seed):
        d, kw = measures(correct)
        return {"r": report.correlation(d, kw, method="pearson", seed=seed, n_resamples=200, source="models")}

    real = rng.random((30, 2, 200)) < rng.uniform(0.6, 0.95, (30, 2, 1))
    null = null_draws("votes drawn at random, independent of any model",
                      lambda r: corr(r.random((30, 2, 200)) < 0.8, int(r.integers(1 << 30))), draws=30, seed=1)
    c = _claim([correlated("r", sign=1, null=null, evidence="t/kw")], corr(real, 0), unit="groups of models")
    row = c.checks[0]
    assert row["null_rate"] == 1.0 and row["p"] == 1.0  # r = 1 on every draw: all 30 as extreme as this run's
    assert row["ours"] == "inconclusive" and row["counted"] and c.verdict == "inconclusive"


def test_part_whole_correlation_does_not_count():
    """One term of an average correlated with the average: positive on independent noise."""
    rng = np.random.default_rng(0)

    def corr(terms, seed):
        return {"r": report.correlation(terms[0], terms.mean(0), seed=seed, n_resamples=200, source="models")}

    null = null_draws("terms drawn independently", lambda r: corr(r.normal(size=(3, 40)), int(r.integers(1 << 30))),
                      draws=50, seed=1)
    c = _claim([correlated("r", sign=1, null=null, evidence="t/part")], corr(rng.normal(size=(3, 40)), 0),
               unit="groups of models")
    row = c.checks[0]
    assert row["null_rate"] > 0.9 and row["p"] > report.ALPHA and row["ours"] == "inconclusive" and row["counted"]


def test_maximum_of_noisy_zero_improvements_cannot_pass_an_absence_claim():
    """"No ensemble improves by more than 0.04 points": the maximum of 165 improvements measured on 5,000
    images is 0.3–0.6 points when every true improvement is zero: a maximum of 0.48 neither passes (it is above
    0.04) nor fails (it is no larger than the maxima where the claim is true), so the check is inconclusive."""
    sd = 0.17  # points: the spread of one ensemble's improvement measured on 5,000 images

    def maximum(rng, shift=0.0):
        return {"best": float(np.max(rng.normal(shift, sd, 165)))}

    truth = null_draws("165 improvements centred at zero (the claim true)", maximum, draws=200, seed=0)
    null = null_draws("165 improvements centred at 1 point (the claim false)", lambda r: maximum(r, 1.0), draws=200,
                      seed=1)
    check = report.below("best", 0.04, null=null, truth=truth, absence=True, evidence="t/max")
    c = _claim([check], {"best": 0.48}, unit="released artefact")
    row = c.checks[0]
    assert row["truth_rate"] == 0.0 and row["counted"] and row["ours"] == "inconclusive"
    below_it = sum(d["best"] >= 0.48 for d in truth.draws)
    assert row["p_fail"] == pytest.approx((1 + below_it) / 201) and row["p_fail"] > report.ALPHA
    assert 0.3 < np.median([d["best"] for d in truth.draws]) < 0.6  # the size the review measured (sd 0.17)


def test_tie_at_a_grid_floor_does_not_count():
    """"A needs no more epochs than B" scored on a grid whose floor both reach: on data where A truly needs
    twice B's epochs, both are still censored at the floor, so the statistic reads 0 there too: its p-value
    against that null is 1 and the check cannot pass."""
    grid = np.array([1, 2, 4, 8])

    def censored(true_epochs):
        return float(grid[np.searchsorted(grid, np.maximum(true_epochs, grid[0]))])

    def draw(rng, slower=1.0):
        b = rng.uniform(0.1, 0.5, 6)
        a = b * slower
        return {"a": from_seeds([censored(x) for x in a]), "b": from_seeds([censored(x) for x in b])}

    null = null_draws("A needs twice B's epochs, read on the same grid", lambda r: draw(r, 2.0), draws=50, seed=0)
    truth = null_draws("A and B need the same epochs", draw, draws=50, seed=1)
    check = noninferior("a", "b", margin=0.5, higher_is_better=False, null=null, truth=truth, evidence="t/grid")
    c = _claim([check], draw(np.random.default_rng(2)))
    row = c.checks[0]
    assert row["null_rate"] == 1.0 and row["p"] == 1.0 and row["ours"] == "inconclusive" and row["counted"]


def test_one_quantity_in_two_claims_is_refused():
    a = _claim([greater("pe", "single", evidence="pe/accuracy")], {"pe": 1.0, "single": 0.0})
    b = claim(paper="packed-ensembles", item="Fig. 1", claim="Another.", unit="trained methods", scale="cpu",
              checks=[greater("pe", "single", evidence="pe/accuracy")], ours={"pe": 1.0, "single": 0.0}, write=False)
    clashes = report.evidence_clashes([("nb/table1.ipynb", [a.record()]), ("nb/fig1.ipynb", [b.record()])])
    assert clashes == ["The evidence 'pe/accuracy' counts in nb/table1.ipynb (Fig. 1) and in nb/fig1.ipynb "
                       "(Fig. 1); one piece of evidence counts once."]
    with pytest.raises(InvalidInputError, match="Two checks count the evidence 'k'"):
        _claim([greater("a", "b", evidence="k"), greater("a", "c", evidence="k")], {"a": 1, "b": 0, "c": 0})


def test_a_check_on_a_run_that_failed_its_gate_is_not_meaningful():
    """SED's λ = 5 members collapsed (27 % against 81.6 %): their diversity passes are not counted."""
    flips = Null("members and baseline swapped", [{"div_sed": 0.1, "div_base": 0.3}] * 99)
    ours = {"div_sed": from_seeds([0.6, 0.62, 0.61, 0.63, 0.6]), "div_base": from_seeds([0.3, 0.31, 0.3, 0.29, 0.3]),
            "member_acc": from_seeds([27.0, 26.5, 27.5, 27.1, 26.9]), "base_acc": from_seeds([81.6, 81.2, 81.9,
                                                                                                81.5, 81.7])}
    gate = noninferior("member_acc", "base_acc", margin=5.0, name="members within 5 points of the baseline")
    c = _claim([greater("div_sed", "div_base", null=flips, evidence="t/div")], ours, gates=[gate])
    assert c.gates[0]["ours"] == "fail"
    assert c.checks[0]["excluded"] == "not meaningful (gate failed: members within 5 points of the baseline)"
    assert not c.checks[0]["counted"] and c.verdict == "not testable at this scale"
    passed = _claim([greater("div_sed", "div_base", null=flips, evidence="t/div")],
                    {**ours, "member_acc": ours["base_acc"]}, gates=[gate])
    assert passed.checks[0]["counted"] and passed.verdict == "holds"


def test_an_image_bootstrap_does_not_decide_a_claim_about_methods():
    """The A/A of 27 Nov 2026 in miniature: two seeds of one recipe differ by chance in which images they get
    right; a paired image bootstrap calls them different, and the claim about methods makes that inconclusive."""
    rng = np.random.default_rng(0)
    base = rng.random(5000) < 0.9
    seed_a = np.where(rng.random(5000) < 0.1, ~base, base)
    seed_b = np.where(rng.random(5000) < 0.1, ~base, base)
    seed_a[:500] = True  # seed a happens to get more of the first images right
    est = paired_bootstrap({"a": seed_a, "b": seed_b}, seed=0, n_resamples=500)
    null = Null("the two seeds swapped", [{"a": est["b"], "b": est["a"]}] * 99)
    c = _claim([greater("a", "b", null=null, evidence="t/aa")], est)
    row = c.checks[0]
    assert report.evaluate(greater("a", "b"), est).result == "pass"  # what the old rule counted
    assert row["ours"] == "inconclusive" and row["note"] == "seed variance not covered" and row["counted"]
    assert c.verdict == "inconclusive"


def test_a_genuine_effect_of_three_standard_errors_over_seeds_counts_and_passes():
    rng = np.random.default_rng(3)
    s = 8
    noise = rng.normal(0, 1, s)
    diff = 3 / np.sqrt(s) + (noise - noise.mean()) / noise.std(ddof=1)  # sample sd 1, mean 3 / sqrt(8): t = 3
    single = rng.normal(90, 0.5, s)
    ours = {"pe": from_seeds(single + diff), "single": from_seeds(single)}
    t = stats.ttest_1samp(diff, 0.0, alternative="greater")
    assert t.statistic == pytest.approx(3.0)
    null = seed_flips(ours, "pe", "single", seed=0)
    c = _claim([greater("pe", "single", null=null, evidence="t/genuine")], ours)
    row = c.checks[0]
    flipped = [np.mean(np.where(signs, -diff, diff)) for signs in itertools.product((False, True), repeat=s)]
    as_extreme = sum(m >= diff.mean() - 1e-12 for m in flipped)  # a naive loop over the 256 patterns
    assert row["counted"] and row["ours"] == "pass"
    assert row["p"] == pytest.approx(as_extreme / 256) and row["p"] < report.ALPHA
    assert c.verdict == "holds"


def test_three_seeds_can_never_count_under_sign_flips():
    ours = {"pe": from_seeds([92.0, 92.1, 92.2]), "single": from_seeds([90.0, 90.1, 90.2])}
    null = seed_flips(ours, "pe", "single", seed=0)
    assert len(null.draws) == 8  # every pattern once
    c = _claim([greater("pe", "single", null=null, evidence="t/3")], ours)
    assert c.checks[0]["null_rate"] == pytest.approx(1 / 8) and not c.checks[0]["counted"]
    assert c.checks[0]["excluded"] == "cannot decide with 3 seeds (needs 5): its smallest p-value is 1/8"
    assert c.verdict == "cannot decide" and c.undecided == c.checks[0]["excluded"]


# --- Holm and the rule --------------------------------------------------------------------------------------------

def test_holm_against_a_hand_computed_case():
    # sorted 0.01, 0.02, 0.04 with alpha 0.05: 0.01 <= 0.05/3, 0.02 <= 0.05/2, 0.04 <= 0.05/1
    assert report.holm([0.04, 0.01, 0.02]) == [True, True, True]
    # 0.02 > 0.05/3 stops the step-down at once
    assert report.holm([0.02, 0.03, 0.04]) == [False, False, False]
    assert report.holm([]) == []


def test_holm_turns_a_lone_pass_among_many_into_inconclusive():
    """Nine checks, one with p = 4/200 against its 199 null draws: it passes alone, not after Holm over nine
    (0.02 > 0.05/9); with 8 inconclusive the claim is inconclusive (fewer than half pass), not "holds partly" as
    the old rule read design-diversity Fig. 7."""
    noise = np.array([-0.2, -0.1, 0.0, 0.1, 0.2, 0.15, -0.15, 0.05, -0.05])
    ests = {f"x{i}": from_seeds((0.975 if i == 0 else 0.0) + noise) for i in range(9)}
    spread = np.linspace(-1, 1, 199)  # three draws (0.980, 0.990, 1.0) at least 0.975
    checks = [report.positive(f"x{i}", null=Null("spread", [{f"x{i}": v} for v in spread]), evidence=f"t/{i}")
              for i in range(9)]
    c = _claim(checks, ests)
    assert c.checks[0]["p"] == pytest.approx(4 / 200) and c.checks[0]["holm"] is False
    assert c.checks[0]["ours"] == "inconclusive" and "Holm over 9" in c.checks[0]["note"]
    assert c.verdict == "inconclusive"


def test_holds_partly_needs_half_of_the_counted_checks():
    assert report.verdict(["pass", "inconclusive"], scale="cpu") == "holds partly"
    assert report.verdict(["pass", "inconclusive", "inconclusive"], scale="cpu") == "inconclusive"


def test_implied_checks_are_shown_and_not_counted():
    null = Null("zero", [{"r_attr": 0.0, "r_dis": 0.0}] * 99)
    checks = [report.positive("r_attr", null=null, evidence="t/a"), report.negative("r_dis", null=null, evidence="t/d"),
              greater("r_attr", "r_dis", null=null, implied_by=("r_attr is positive", "r_dis is negative"))]
    c = _claim(checks, {"r_attr": 0.4, "r_dis": -0.3}, unit="released artefact")
    assert c.checks[2]["excluded"] == "implied by r_attr is positive, r_dis is negative"
    assert c.strength()["counted"] == 2
    with pytest.raises(InvalidInputError, match="implied by 'nope'"):
        _claim([greater("a", "b", implied_by=("nope",))], {"a": 1, "b": 0})


def test_an_implied_mark_the_null_draws_contradict_is_refused_and_the_check_counts():
    """A positive trend over categories does not imply that the top category beats the bottom one: a middle
    category is enough. Training-methods Figs. 1 and 2 marked it implied, which dropped the paper's end
    comparison from the verdict; now a null draw where the trend holds and the ends do not refuses the mark."""
    trend_null = Null("categories dealt", [{"rho": 0.5, "dataset": 1.0, "reinit": 2.0}] + [
        {"rho": 0.0, "dataset": 1.0, "reinit": 1.0}] * 98)
    checks = [report.positive("rho", null=trend_null, evidence="t/trend"),
              greater("dataset", "reinit", null=trend_null, evidence="t/ends", implied_by=("rho is positive",))]
    c = _claim(checks, {"rho": 0.6, "dataset": 3.0, "reinit": 1.0}, unit="released artefact")
    ends = c.checks[1]
    assert ends["implied_by"] == [] and ends["counted"] and ends["excluded"] == ""
    assert ends["implication_refused"] == ("on null draw 1 of 'dataset is greater than reinit': rho is positive "
                                           "holds and dataset is greater than reinit does not")
    assert c.strength()["counted"] == 2
    assert any("marked implied, but its impliers do not imply it" in p for p in report.audit(c.record()))
    # a true implication (the worst drop is at least the mean drop) stays shown, not counted, on any draws
    drops = Null("no set effect", [{"mean": m, "worst": m + w} for m in (0.0, 0.3) for w in (0.0, 0.2)] * 25)
    c = _claim([report.above("mean", 0.25, null=drops, evidence="t/mean"),
                report.above("worst", 0.25, null=drops, implied_by=("mean is above 0.25",))],
               {"mean": 0.4, "worst": 0.6}, unit="released artefact")
    assert c.checks[1]["excluded"] == "implied by mean is above 0.25" and c.checks[1]["implication_refused"] == ""


def test_an_untestable_premise_is_not_testable_with_the_numbers_shown():
    null = Null("zero", [{"speedup": 1.0}])
    c = _claim([report.above("speedup", 1.0, null=null, evidence="t/speed")], {"speedup": 1.4}, unit="timings",
               untestable="GPU parallelism; this run times one-thread CPU processes")
    assert c.verdict == "not testable at this scale"
    assert c.checks[0]["ours"] == "inconclusive" and c.checks[0]["note"] == "timing variance not covered"
    assert c.checks[0]["excluded"].startswith("premise not testable at this scale (GPU")


# --- the nulls' constructions ---------------------------------------------------------------------------------------

def test_seed_flips_enumerate_every_pattern_on_nested_estimates():
    rng = np.random.default_rng(0)
    rows = {"a": rng.random((3, 200)) < 0.9, "b": rng.random((3, 200)) < 0.8}
    est = nested_bootstrap(rows, seed=0, n_resamples=100, paired_rows=True)
    null = seed_flips(est, "a", "b", seed=0)
    assert len(null.draws) == 8
    # the all-swapped pattern exchanges the two estimates exactly
    last = null.draws[-1]
    assert last["a"].value == pytest.approx(est["b"].value)
    assert np.allclose(last["a"].replicates, est["b"].replicates)
    # swapping row 0 only: a's value is the mean of b's row 0 and a's rows 1-2
    one = null.draws[4]
    assert one["a"].value == pytest.approx((rows["b"][0].mean() + rows["a"][1].mean() + rows["a"][2].mean()) / 3)


def test_aa_null_splits_one_method_into_disjoint_halves():
    runs = np.array([0.90, 0.91, 0.89, 0.92, 0.90, 0.93])
    null = aa_null(runs, "pe", "de", seed=0, draws=30, method="the deep ensemble")
    for d in null.draws:
        a, b = sorted(d["pe"].replicates), sorted(d["de"].replicates)
        assert sorted(a + b) == pytest.approx(sorted(runs[:6]))  # every run used once
    assert "the deep ensemble's 6 runs (3 each)" in null.construction
    rng = np.random.default_rng(0)
    nested = aa_null(rng.random((4, 300)) < 0.9, "pe", "de", seed=0, draws=5, n_resamples=100)
    assert nested.draws[0]["pe"].source == "seeds × test images"
    with pytest.raises(InvalidInputError, match="at least four runs"):
        aa_null([0.9, 0.91, 0.92], "a", "b", seed=0)


def test_partition_null_keeps_group_sizes():
    values = np.arange(10.0)
    groups = ["cnn"] * 7 + ["vit"] * 3
    null = partition_null(values, groups, seed=0, draws=20, n_resamples=50)
    assert "7 cnn, 3 vit" in null.construction
    means = [(d["cnn"].value * 7 + d["vit"].value * 3) for d in null.draws]
    assert means == pytest.approx([45.0] * 20)  # every model dealt once


def test_null_and_truth_reject_bad_input():
    with pytest.raises(InvalidInputError, match="construction named"):
        Null("  ", [{"a": 1.0}])
    with pytest.raises(InvalidInputError, match="at least one draw"):
        Null("x", [])
    with pytest.raises(InvalidInputError, match="at least one draw"):
        Null("x", [1.0])
    with pytest.raises(InvalidInputError, match="at least one draw"):
        null_draws("x", lambda r: {}, draws=0, seed=0)
    typed = report.Check("c", needs=("a",), statistic=lambda v: v["a"], region=(">", 0), null={"a": 0.0})
    assert typed.null is None and typed.null_reason == report.checks.TYPED_NULL  # shown, never counted
    with pytest.raises(InvalidInputError, match="truth= must be an ed.report.Null"):
        report.Check("c", needs=("a",), statistic=lambda v: v["a"], region=(">", 0), truth={"a": 0.0})
    with pytest.raises(InvalidInputError, match="as many seeds"):
        seed_flips({"a": from_seeds([1, 2, 3]), "b": from_seeds([1, 2])}, "a", "b", seed=0)
    est = paired_bootstrap({"a": np.ones(10), "b": np.zeros(10)}, seed=0, n_resamples=20)
    with pytest.raises(InvalidInputError, match="no seeds to swap"):
        seed_flips(est, "a", "b", seed=0)


def test_claim_rejects_bad_unit_gate_and_key_check():
    ours = {"a": 1.0, "b": 0.0}
    with pytest.raises(InvalidInputError, match="Unknown unit 'seeds'"):
        _claim([greater("a", "b")], ours, unit="seeds")
    with pytest.raises(InvalidInputError, match="depends on the gate 'g'"):
        _claim([greater("a", "b", gates=("g",))], ours)
    with pytest.raises(InvalidInputError, match="key_check 'x'"):
        _claim([greater("a", "b")], ours, key_check="x")
    with pytest.raises(EnsdivError, match="Unknown unit"):
        report.covers("methods", "training seeds")


# --- the bootstraps against naive implementations -------------------------------------------------------------------

def test_member_weights_are_the_products_of_a_naive_resamples_counts():
    """Each ensemble's weight in resample r is the product of how often resample r drew each of its members: the
    counts recomputed from the same multinomial draws (``resample_counts``, the members sorted)."""
    members = [("b", "c"), ("a", "b"), ("a", "c", "d")]
    w = report.member_weights(members, n_boot=50, seed=7)
    counts = report.resample_counts(4, n_resamples=50, seed=7)  # a, b, c, d
    col = {"a": 0, "b": 1, "c": 2, "d": 3}
    naive = np.array([[np.prod([counts[r, col[m]] for m in g]) for g in members] for r in range(50)])
    assert np.array_equal(w, naive)


def test_member_weights_keep_shared_members_and_strata_fixed():
    # a member in every ensemble weighs one; a stratum of one member is drawn once in every resample
    w = report.member_weights([("x", "a"), ("x", "b"), ("x", "c")], n_boot=200, seed=0,
                              strata={"a": 0, "b": 0, "c": 1})
    assert np.all(w[:, 2] == 1.0)  # "c" is alone in its stratum; "x" is shared
    assert np.all(w[:, 0] + w[:, 1] == 2.0)  # "a" and "b": two draws between them
    assert np.isnan(report.member_weights([("x", "a")], n_boot=3, seed=0)).all()  # one member: nothing to resample


def test_member_weights_refuse_no_ensembles_and_members_without_a_stratum():
    with pytest.raises(InvalidInputError, match="at least one ensemble"):
        report.member_weights([], n_boot=3, seed=0)
    with pytest.raises(InvalidInputError, match="no stratum"):
        report.member_weights([("a", "b"), ("a", "c")], n_boot=3, seed=0, strata={"b": 0})


def test_a_bootstrap_over_drawn_ensembles_does_not_cover_groups_of_models():
    assert not report.covers("groups of models", "ensemble members")
    assert report.covers("groups of models", "models") and report.covers("these models", "ensemble members")


def test_nested_bootstrap_matches_a_naive_two_stage_resampling():
    """Replicate r: the images of resample r (shared), the rows of resample r; the mean of the rows' means.
    Recomputed by a loop from the returned parts' row counts and per-row replicates, and the per-row replicates
    from scipy's own bootstrap distribution of one row."""
    rng = np.random.default_rng(0)
    a = (rng.random((4, 60)) < 0.8).astype(float)
    est = nested_bootstrap({"a": a}, seed=3, n_resamples=50)["a"]
    reps, counts, means = est.parts
    assert means == pytest.approx(a.mean(1)) and est.value == pytest.approx(a.mean())
    naive = [sum(counts[r, s] * reps[s, r] for s in range(4)) / 4 for r in range(50)]
    assert est.replicates == pytest.approx(naive)
    assert counts.sum(1) == pytest.approx([4.0] * 50)  # each resample draws four rows
    one = paired_bootstrap({f"a\x00{s}": a[s] for s in range(4)}, seed=3, n_resamples=50)
    assert reps[2] == pytest.approx(one["a\x002"].replicates)
    # the spread covers the seeds: rows that differ widen the interval beyond an image bootstrap of the mean
    shifted = a + np.array([[0.0], [0.2], [-0.2], [0.1]])
    wide = nested_bootstrap({"a": shifted}, seed=3, n_resamples=400)["a"].interval()
    narrow = paired_bootstrap({"a": shifted.mean(0)}, seed=3, n_resamples=400)["a"].interval()
    assert wide[1] - wide[0] > 2 * (narrow[1] - narrow[0])


def test_nested_bootstrap_rejects_bad_input():
    with pytest.raises(InvalidInputError, match=r"\(S, N\) array"):
        nested_bootstrap({"a": np.ones(10)}, seed=0)
    with pytest.raises(InvalidInputError, match="at least two"):
        nested_bootstrap({"a": np.ones((1, 10))}, seed=0)
    with pytest.raises(InvalidInputError, match="same test images"):
        nested_bootstrap({"a": np.ones((2, 10)), "b": np.ones((2, 11))}, seed=0)
    with pytest.raises(InvalidInputError, match="'seeds' or 'models'"):
        nested_bootstrap({"a": np.ones((2, 10))}, seed=0, unit="images")
    with pytest.raises(InvalidInputError, match="as many rows"):
        nested_bootstrap({"a": np.ones((2, 10)), "b": np.ones((3, 10))}, seed=0, paired_rows=True)
    with pytest.raises(InvalidInputError, match="at least one quantity"):
        nested_bootstrap({}, seed=0)


def test_model_bootstrap_matches_scipy_per_group_and_rejects_bad_input():
    values = np.array([0.9, 0.8, 0.85, 0.7, 0.72, 0.71, 0.69])
    groups = ["cnn"] * 3 + ["vit"] * 4
    est = model_bootstrap(values, groups, seed=0, n_resamples=2000)
    for g, idx in (("cnn", slice(0, 3)), ("vit", slice(3, 7))):
        ref = stats.bootstrap((values[idx],), np.mean, n_resamples=2000, method="percentile", confidence_level=0.9,
                              rng=np.random.default_rng(1))
        lo, hi = est[g].interval()
        assert lo == pytest.approx(ref.confidence_interval.low, abs=0.01)
        assert hi == pytest.approx(ref.confidence_interval.high, abs=0.01)
    with pytest.raises(InvalidInputError, match="one group per value"):
        model_bootstrap(values, groups[:-1], seed=0)
    with pytest.raises(InvalidInputError, match="fewer than two models"):
        model_bootstrap([0.1, 0.2, 0.3], ["a", "a", "b"], seed=0)
    with pytest.raises(InvalidInputError, match="finite"):
        model_bootstrap([0.1, np.nan, 0.3, 0.4], ["a", "a", "b", "b"], seed=0)


def test_the_extreme_of_groups_is_taken_per_resample_and_moved_to_its_value_and_rejects_bad_input():
    rng = np.random.default_rng(3)
    values = rng.normal(0, 1, 15)
    est = model_bootstrap(values, [g for g in "abc" for _ in range(5)], seed=0, n_resamples=300)
    reps = np.stack([est[g].replicates for g in "abc"])
    for lowest, pick, pick_value in ((False, np.max, max), (True, np.min, min)):
        got = report.extreme_of(est, list("abc"), lowest=lowest)
        naive = [pick(reps[:, r]) for r in range(reps.shape[1])]  # a loop over the resamples
        value = pick_value(values[i * 5:(i + 1) * 5].mean() for i in range(3))
        assert got.value == pytest.approx(value)
        assert got.replicates == pytest.approx(np.array(naive) - (np.mean(naive) - value))
        assert got.group == est["a"].group and got.source == "models"
    nan = report.Estimate(float("nan"), np.full(300, np.nan), "models", group=est["a"].group)
    assert np.isnan(report.extreme_of({**est, "d": nan}, list("abd")).value)
    with pytest.raises(InvalidInputError, match="one paired bootstrap"):
        report.extreme_of({**est, "d": report.Estimate(0.0, np.zeros(300), "models", group="other")}, list("ad"))
    with pytest.raises(InvalidInputError, match="replicates"):
        report.extreme_of({"x": report.Estimate(0.0, None, "models")}, ["x"])
    with pytest.raises(InvalidInputError, match="replicates"):
        report.extreme_of(est, [])


def test_p_values_match_scipy_and_the_bootstrap_share():
    diffs = np.array([0.3, 0.1, 0.4, -0.1, 0.2])
    ours = {"a": from_seeds(diffs), "b": from_seeds(np.zeros(5))}
    out = report.evaluate(greater("a", "b"), ours)
    assert out.p == pytest.approx(stats.ttest_1samp(diffs, 0.0, alternative="greater").pvalue)
    out = report.evaluate(less("a", "b"), ours)
    assert out.p == pytest.approx(stats.ttest_1samp(diffs, 0.0, alternative="less").pvalue)
    reps = np.array([0.5, 0.2, -0.1, 0.3, 0.0, 0.4, 0.6, 0.1, 0.2])  # 2 of 9 at or below zero
    boot = {"a": report.Estimate(0.25, reps, group="g"), "b": report.Estimate(0.0, np.zeros(9), group="g")}
    assert report.evaluate(greater("a", "b"), boot).p == pytest.approx(3 / 10)


def test_all_sign_patterns_when_few_and_random_ones_when_many():
    from ensdiv.report.nulls import _patterns

    rng = np.random.default_rng(0)
    assert {tuple(p) for p in _patterns(3, 200, rng)} == set(itertools.product((False, True), repeat=3))
    assert _patterns(10, 200, rng).shape == (1024, 10)  # exact up to ten seeds
    assert _patterns(12, 200, rng).shape == (200, 12)


def test_the_rule_is_stated_once_in_the_book_the_claims_page_and_the_package():
    from ensdiv.paths import project_root

    intro = (project_root() / "book" / "intro.md").read_text(encoding="utf-8")
    assert report.RULE in intro
    assert report.RULE in report.__doc__
    assert report.RULE in report.claims_page("cpu", [])
    for number in (f"{report.ALPHA:.0%}", f"{report.LEVEL:.0%}", "Holm", "1 / 2^S", "(1 + k) / (1 + D)"):
        assert number in report.RULE


def test_every_builder_takes_the_reason_no_null_can_be_built():
    """``null_reason=`` (why no null can be built from data) is accepted by every builder, not only by
    ``below``/``above``, and kept; with a null it is not needed and a typed value still reads as typed."""
    from ensdiv.report.checks import NO_NULL, TYPED_NULL

    why = "the two counts are the same identity of the accuracies"
    for check in (report.less("a", "b", null_reason=why), report.greater("a", "b", null_reason=why),
                  report.correlated("r", sign=1, null_reason=why), report.positive("a", null_reason=why),
                  report.negative("a", null_reason=why), report.below("a", 1.0, null_reason=why)):
        assert (check.null, check.null_reason) == (None, why)
    assert report.less("a", "b").null_reason == NO_NULL
    assert report.less("a", "b", null=0.0, null_reason=why).null_reason == TYPED_NULL


def test_a_ratio_over_a_zero_denominator_is_not_computable_not_a_crash():
    """``ratio_above`` with a denominator of 0 (a dry run's degenerate timing) is "not computable" (``None``)."""
    assert report.evaluate(report.ratio_above("a", "b", 1.5), {"a": 1.0, "b": 0}).result is None
    assert report.evaluate(report.ratio_above("a", "b", 1.5), {"a": 3.0, "b": 1.0}).result == "pass"


# --- the one bootstrap draw: resample_indices and resample_counts ------------------------------------------------


def test_resampled_means_have_scipys_bootstrap_standard_error():
    """A mean over :func:`resample_indices` rows, and over :func:`resample_counts` weights, spreads as
    ``scipy.stats.bootstrap``'s distribution of the mean does, and as the plug-in σ/√n says."""
    x = np.random.default_rng(5).normal(size=200)
    by_index = x[report.resample_indices(x.size, n_resamples=4000, seed=1)].mean(1)
    counts = report.resample_counts(x.size, n_resamples=4000, seed=2)
    by_count = counts @ x / x.size
    ref = stats.bootstrap((x,), np.mean, n_resamples=4000, method="percentile", random_state=3).standard_error
    plug_in = x.std() / np.sqrt(x.size)
    for se in (by_index.std(), by_count.std()):
        assert se == pytest.approx(ref, rel=0.06) and se == pytest.approx(plug_in, rel=0.06)
    assert by_index.mean() == pytest.approx(x.mean(), abs=0.01) and by_count.mean() == pytest.approx(x.mean(), abs=0.01)


def test_resample_counts_are_the_counts_of_a_draw_with_replacement():
    """Each row sums to ``n``; each unit's count has the binomial mean 1 and variance ``1 - 1/n``; the dtype is
    the one asked for."""
    n = 10
    c = report.resample_counts(n, n_resamples=20000, seed=0)
    assert c.dtype == np.float64 and c.shape == (20000, n) and (c.sum(1) == n).all()
    assert c.mean(0) == pytest.approx(np.ones(n), abs=0.03)
    assert c.var(0) == pytest.approx(np.full(n, 1 - 1 / n), abs=0.04)
    assert report.resample_counts(3, n_resamples=2, seed=0, dtype=np.float32).dtype == np.float32
    idx = report.resample_indices(n, n_resamples=500, seed=0)
    assert idx.min() >= 0 and idx.max() == n - 1 and np.issubdtype(idx.dtype, np.integer)


def test_a_generator_in_use_continues_its_stream():
    """``seed`` may be a generator: one row at a time draws what one call draws, and a sequence seed is a stream
    of its own (numpy's ``default_rng``) — what the chapters' former hand-drawn resamples drew."""
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    rows = np.stack([report.resample_indices(9, n_resamples=1, seed=a)[0] for _ in range(30)])
    assert np.array_equal(rows, report.resample_indices(9, n_resamples=30, seed=b))
    assert np.array_equal(report.resample_indices(6, n_resamples=4, seed=[3, 7]),
                          np.random.default_rng([3, 7]).integers(0, 6, (4, 6)))
    assert np.array_equal(report.resample_counts(6, n_resamples=4, seed=[3, 7]),
                          np.random.default_rng([3, 7]).multinomial(6, np.full(6, 1 / 6), size=4))


@pytest.mark.parametrize("fn", [report.resample_indices, report.resample_counts])
def test_resampling_rejects_bad_input(fn):
    """Bad input: no unit, no resample, a non-integer size, a boolean, no seed (each one sentence)."""
    for n, r in ((0, 5), (5, 0), (2.5, 5), (5, True)):
        with pytest.raises(InvalidInputError, match="integer >= 1"):
            fn(n, n_resamples=r, seed=0)
    with pytest.raises(InvalidInputError, match="seed is required"):
        fn(5, n_resamples=5, seed=None)


def test_five_seeds_cannot_decide_a_claim_of_two_checks_and_say_how_many_would():
    """Holm asks the smaller of two p-values for 0.05 / 2 = 0.025; five seeds reach 1/32 = 0.031 at best, so
    neither check can pass or fail whatever the data: the claim cannot decide, and says that 6 seeds would."""
    ours = {k: from_seeds(v) for k, v in {"a": [2.0, 2.1, 2.2, 2.3, 2.4], "b": [0.0, 0.1, 0.2, 0.3, 0.4],
                                            "c": [1.0, 1.1, 1.2, 1.3, 1.4]}.items()}
    checks = [greater("a", "b", null=seed_flips(ours, "a", "b", seed=0), evidence="t/ab"),
              greater("a", "c", null=seed_flips(ours, "a", "c", seed=0), evidence="t/ac")]
    c = _claim(checks, ours)
    assert [row["counted"] for row in c.checks] == [False, False]
    assert c.verdict == "cannot decide"
    assert c.undecided == ("cannot decide over 2 checks: Holm asks one p-value of at most 0.025, and their nulls "
                           "reach 0.0312 (seed flips need 6 seeds)")
    one = _claim(checks[:1], ours)
    assert one.verdict == "holds" and one.checks[0]["p"] == 1 / 32  # alone, 1/32 <= 0.05


def test_an_absence_check_whose_page_says_why_it_has_no_null_is_not_counted():
    """Attack-similarity F.1: data where the claim is true exist, but the page states that the claim's premise
    (teachers of similar accuracy) does not hold in the zoo; the check is shown and not counted."""
    truth = null_draws("r on permuted teachers", lambda r: {"r": float(r.normal(0, 0.1))}, draws=200, seed=0)
    check = report.within("r", "zero", abs=0.3, truth=truth).with_(null_reason="the premise does not hold here")
    c = _claim([check], {"r": report.correlation(np.arange(8.0), np.arange(8.0) ** 2, seed=0, n_resamples=100,
                                                 source="models"), "zero": 0.0}, unit="groups of models")
    assert not c.checks[0]["counted"] and c.checks[0]["excluded"] == "the premise does not hold here"
    assert c.verdict == "cannot decide"


def test_a_non_inferiority_reads_its_centred_null_at_the_margin():
    """A non-inferiority claim (r no more than 0.2 lower) with its own bootstrap centred as the null: the draws
    sit at no difference and must be moved to the margin before a difference is compared with them. Read where
    they sit, a difference of -0.04 (far above the margin) had p = 0.98; at the margin it passes, and one of -0.19
    does not."""
    rng = np.random.default_rng(1)
    spread = rng.normal(0.0, 0.02, 1000)
    Estimate = report.Estimate

    def made(diff):
        ours = {"second": Estimate(0.95 + diff, 0.95 + diff + spread, "models", group="g"),
                "rerun": Estimate(0.95, np.full(1000, 0.95), "models", group="g")}
        null = report.centred_null(ours, "second", "rerun", units=15)
        truth = report.Null("the two the same", [{"second": 0.95 + e, "rerun": 0.95} for e in spread[:30]])
        return _claim([report.noninferior("second", "rerun", margin=0.2, null=null, truth=truth,
                                          evidence="t/noninferior")], ours, unit="released artefact")

    far, near = made(-0.04), made(-0.19)
    assert far.checks[0]["p"] == pytest.approx(1 / 31) and far.verdict == "holds"  # the truth's 30 draws bound it
    assert near.verdict != "holds" and near.checks[0]["p"] > 0.1


def test_a_bound_over_seeds_is_a_sign_flip_test_of_the_centred_seeds():
    """Per-seed values centred and sign-flipped in all 2**S patterns: the p-value of "above 0.8" is the one-sample
    sign-flip test of a mean of 0.8, counted by hand; a ratio of two methods' seeds is centred at 1; seeds of
    unequal counts are refused in one sentence."""
    values = np.array([0.9, 0.85, 1.0, 0.95, 0.88, 0.92])
    ours = {"a": report.from_seeds(values)}
    null = report.centred_null(ours, "a")
    assert null.exact and null.centred and len(null.draws) == 64 and null.replicates == 6
    c = _claim([report.above("a", 0.8, null=null, null_at=0.0, evidence="t/seed-bound")], ours)
    d = values - values.mean()
    k = sum(np.mean(np.array(sg) * d) + 0.8 >= values.mean() - 1e-12 for sg in itertools.product((1, -1), repeat=6))
    by_hand = max(k, 1) / 64  # this run's own pattern among the 64: at least 1/64
    assert c.checks[0]["p"] == pytest.approx(by_hand) == pytest.approx(1 / 64) and c.verdict == "holds"
    near = _claim([report.above("a", 0.9, null=report.centred_null(ours, "a"), null_at=0.0, evidence="t/near")], ours)
    assert near.verdict != "holds" and near.checks[0]["p"] > 0.2
    small, control = np.array([80.0, 82.0, 79.0]), np.array([90.0, 91.0, 88.0])
    pair = {"s": report.from_seeds(small), "c": report.from_seeds(control)}
    ratio = report.centred_null(pair, "s", "c", ratio=True)
    r = small / control
    assert sorted(d["s"] for d in ratio.draws)[-1] == pytest.approx(1 + np.abs(r / r.mean() - 1).mean())
    assert all(d["c"] == 1.0 for d in ratio.draws)
    with pytest.raises(InvalidInputError, match="as many seeds"):
        report.centred_null({"s": report.from_seeds(small), "c": report.from_seeds(control[:2])}, "s", "c")
    with pytest.raises(InvalidInputError, match="17 seeds is too many"):  # 2**17 patterns
        report.centred_null({"a": report.from_seeds(np.arange(17.0))}, "a")


def test_a_claim_about_a_bound_is_tested_at_the_bound_not_at_no_effect():
    """A null that removes the effect altogether sits far below a bound of 0.8, so any estimate above the bound
    beats it; the estimate's own bootstrap centred and moved to the bound does not: 0.85 with replicates spread
    ±0.2 is inconclusive there, 1.6 passes, and a cell names the p-value at the bound."""
    rng = np.random.default_rng(0)
    spread = rng.normal(0.0, 0.12, 1000)
    Estimate = report.Estimate

    def made(value):
        ours = {"ratio": Estimate(value, value + spread, "models")}
        null = report.centred_null(ours, "ratio", ratio=True, units=69)
        return _claim([report.above("ratio", 0.8, null=null, null_at=1.0, null_scale=True, evidence="t/ratio")],
                      ours, unit="released artefact")

    none = report.centred_null({"ratio": Estimate(0.9, np.array([]), "models")}, "ratio", units=2)
    assert len(none.draws) == 1 and np.isnan(none.draws[0]["ratio"])  # no replicate (two models): not computable
    near, far = made(0.85), made(1.6)
    assert near.verdict == "inconclusive" and near.checks[0]["p"] > 0.2
    assert far.verdict == "holds" and far.checks[0]["p"] == pytest.approx(1 / 1001)
    assert far.checks[0]["null"] == "p = 0.001 at the bound (1000 draws)"
    # by hand: the draws at the bound are 0.8 * (1 + k * (r / 0.85 - 1)), k the small-sample widening
    k = np.sqrt(69 / 68) * stats.t.ppf(0.95, 68) / stats.norm.ppf(0.95)
    at_bound = 0.8 * (1 + k * ((0.85 + spread) / 0.85 - 1))
    assert near.checks[0]["p"] == pytest.approx((1 + np.sum(at_bound >= 0.85)) / 1001)
    one = {"ratio": Estimate(1.0, 1 + spread, "models")}
    with pytest.raises(InvalidInputError, match="does not move it to its bound"):
        _claim([report.above("ratio", 0.8, null=report.centred_null(one, "ratio", ratio=True), evidence="t/r")],
               one, unit="released artefact")
    with pytest.raises(InvalidInputError, match="one paired bootstrap"):
        report.centred_null({"a": Estimate(1.0, spread, "models", group="g"),
                             "b": Estimate(0.0, spread, "models", group="h")}, "a", "b")
    with pytest.raises(InvalidInputError, match="as a bootstrap Estimate"):
        report.centred_null({"a": 1.0}, "a")
    with pytest.raises(InvalidInputError, match="cannot be widened"):
        report.centred_null(one, "ratio", ratio=True, units=1)
    with pytest.raises(InvalidInputError, match="reads one quantity"):
        report.centred_null({"a": Estimate(1.0, spread, "models", group="g"),
                             "b": Estimate(0.0, spread, "models", group="g")}, "a", "b", ratio=True)
    # where the estimate is undefined (too few models), so are the draws: the check is not counted
    undefined = report.centred_null({"r": Estimate(float("nan"), spread, "models")}, "r", units=15)
    assert all(np.isnan(d["r"]) for d in undefined.draws)


def test_a_check_whose_null_keeps_its_region_is_inconclusive_unless_it_names_what_it_tests_beyond():
    """A part-whole correlation: r near 1 and every null draw of it near 0.8, the claim "r is positive". Read against
    those draws, r passes when it happens to sit above them (here it does), though the region "r > 0" is what the
    null keeps: the check is inconclusive, with the share of its draws inside the region. Named with
    ``beyond=``, it tests "above what the null keeps" and counts; a null at no effect is never caught (its draws
    straddle the bound)."""
    rng = np.random.default_rng(3)
    x = np.arange(40.0)
    ours = {"r": report.correlation(x, x + rng.normal(0, 2, 40), seed=0, n_resamples=200, source="models")}
    kept = report.Null("a part kept", [{"r": float(v)} for v in rng.normal(0.8, 0.03, 99)])
    plain = _claim([report.correlated("r", sign=1, null=kept, evidence="t/kept")], ours, unit="groups of models")
    row = plain.checks[0]
    assert row["null_kept"] == 1.0 and row["counted"] and row["ours"] == "inconclusive"
    assert "keeps what its region asks (100%" in row["note"] and row["p"] < report.ALPHA  # it beat the draws
    assert plain.verdict == "inconclusive"
    named = _claim([report.correlated("r", sign=1, null=kept, beyond="the part the null keeps", evidence="t/kept")],
                   ours, unit="groups of models")
    assert named.checks[0]["counted"] and named.verdict == "holds"
    assert named.checks[0]["null"].endswith("tests beyond the part the null keeps")
    at_zero = report.Null("pairs permuted", [{"r": float(v)} for v in rng.normal(0.0, 0.15, 99)])
    fair = _claim([report.correlated("r", sign=1, null=at_zero, evidence="t/zero")], ours, unit="groups of models")
    assert 0.3 < fair.checks[0]["null_kept"] < 0.7 and fair.checks[0]["counted"] and fair.verdict == "holds"


def test_the_share_of_null_draws_in_a_region_is_read_at_the_bound():
    """kept_share counts by hand: draws moved by a margin, a ratio's draws scaled to its bound, and no share for
    a tolerance or a check without a region."""
    assert report.kept_share(report.greater("a", "b", margin=1.0), [0.5, -0.1, -0.2, 0.05]) == 0.5  # 1.5 .9 .8 1.05
    ratio = report.above("a", 0.8, null_at=1.0, null_scale=True)
    assert report.kept_share(ratio, [1.0, 1.1, 0.9, 1.3]) == 0.5  # 0.8 0.88 0.72 1.04 against "> 0.8"
    assert report.kept_share(report.within("a", "b", abs=1.0), [0.0]) is None
    assert report.kept_share(report.Check("rule", rule=lambda v: True), [1.0]) is None
    assert report.kept_share(report.positive("a"), [np.nan]) is None


def test_a_centred_null_is_never_read_as_keeping_its_region():
    """A bootstrap centred at the bound sits there by construction; a skewed one (a correlation near 1) puts most
    of its draws on one side of the bound, which says nothing about whether the null keeps the effect. Such a
    check is tested as before, even with 85 % of its centred draws inside the region."""
    rng = np.random.default_rng(5)
    # skewed: 85 % of the replicates just above the point value, a tail well below it
    reps = 0.95 + np.where(rng.random(999) < 0.85, 0.005, -0.06) + rng.normal(0, 0.001, 999)
    ours = {"r": report.Estimate(0.95, reps, "models")}
    null = report.centred_null(ours, "r", units=11)
    check = report.above("r", 0.8, null=null, null_at=0.0, evidence="t/skew")
    draws = np.array([float(d["r"]) for d in null.draws])
    assert report.kept_share(check, draws) > report.KEEPS  # the skew alone
    row = _claim([check], ours, unit="released artefact").checks[0]
    assert row["null_kept"] is None and row["counted"] and row["ours"] == "pass"
