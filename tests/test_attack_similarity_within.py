"""Fig. 1, Fig. 4, Fig. G.1 and Tab. D.1's evidence helpers against naive implementations (issue #50)."""

import itertools

import numpy as np
import pandas as pd
import pytest
import torch

from ensdiv.chapters.attack_similarity import components as co
from ensdiv.chapters.attack_similarity import evidence as ev
from ensdiv.chapters.attack_similarity import within as wi


def test_importance_estimates_weigh_pairs_of_a_model_resample_like_a_loop():
    rng = np.random.default_rng(0)
    n = 6
    pairs = np.array(list(itertools.combinations(range(n), 2)))
    per_pair = rng.normal(size=(len(pairs), 3))
    est = co.importance_estimates(per_pair, pairs, n, {"c1": lambda v: float(v[1])}, n_resamples=5, seed=3)
    assert est["c1"].value == pytest.approx(per_pair[:, 1].mean())
    # the same resamples by hand: every pair of positions holding two distinct models
    counts = np.random.default_rng(3).multinomial(n, np.full(n, 1 / n), size=5)
    at = {tuple(p): k for k, p in enumerate(pairs.tolist())}
    for r, c in enumerate(counts):
        idx = np.repeat(np.arange(n), c)
        vals = [per_pair[at[(min(a, b), max(a, b))], 1] for a, b in itertools.combinations(idx, 2) if a != b]
        assert est["c1"].replicates[r] == pytest.approx(np.mean(vals))


def test_better_rank_by_hand():
    v = np.array([0.9, 0.1, 0.5, 0.3, 0.2])  # ranks 1, 5, 2, 3, 4
    assert co.better_rank(v, [1, 4]) == 4.0
    assert co.better_rank(v, [0]) == 1.0


def test_pair_r_matches_a_loop_over_position_pairs():
    rng = np.random.default_rng(2)
    a = rng.normal(size=(7, 7))
    b = a + rng.normal(size=(7, 7))
    a, b = (a + a.T) / 2, (b + b.T) / 2
    idx = np.array([0, 0, 2, 3, 3, 5, 6])
    xs, ys = zip(*[(a[i, j], b[i, j]) for i, j in itertools.combinations(idx, 2) if i != j], strict=True)
    assert ev.pair_r(a, b, idx) == pytest.approx(np.corrcoef(xs, ys)[0, 1])
    assert np.isnan(ev.pair_r(a[:3, :3], b[:3, :3]))  # 3 pairs: not computable


def test_group_estimates_min_of_groups_by_hand():
    values = [4.4, 4.0, 4.2, 4.6, 3.0, 3.4, 2.5, 2.9, 2.7]
    labels = ["init", "init", "hparam", "hparam", "regime", "regime", wi.ALL, wi.ALL, wi.ALL]
    est = wi.group_estimates(values, labels, n_resamples=100, seed=0)
    assert est["regime"].value == pytest.approx(3.2)
    assert est[wi.LOWEST_WITHIN].value == pytest.approx(3.2)
    assert est[wi.LOWER_INIT_HPARAM].value == pytest.approx(4.2)  # init 4.2, hparam 4.4
    reps = np.minimum(est["init"].replicates, est["hparam"].replicates)  # the lower of the two, per resample,
    assert np.allclose(est[wi.LOWER_INIT_HPARAM].replicates, reps - (reps.mean() - 4.2))  # moved to mean 4.2
    assert est[wi.LOWER_INIT_HPARAM].group == est["regime"].group  # paired in a check


def test_variant_scores_and_model_means():
    s = np.array([[4.6, 4.0, 3.0], [4.0, 4.6, 2.0], [3.0, 2.0, 4.6]])
    assert wi.variant_scores(s, ["base", "init", "regime"]) == ([4.0, 3.0], ["init", "regime"])
    assert wi.model_means(s).tolist() == [3.5, 3.0, 2.5]


def test_variant_ensembles_every_subset_with_and_without_the_base():
    rng = np.random.default_rng(3)
    logits = torch.tensor(rng.normal(size=(7, 20, 3)))
    labels = torch.tensor(rng.integers(0, 3, 20))
    groups = ["base", "init", "init", "hparam", "hparam", "regime", "regime"]
    t = wi.variant_ensembles(logits, labels, groups, base="b")
    assert t.groupby("kind").size().to_dict() == {"hparam": 4, "init": 4, "regime": 4}  # 3 pairs + 1 triple
    # one row by hand: the base with the first regime variant
    pair = t[(t["kind"] == "regime") & (t["N"] == 2)].iloc[0]
    ens = (logits[[0, 5]].mean(0).argmax(-1) != labels).double().mean()
    assert pair["top-1 error (%)"] == pytest.approx(100 * float(ens))


def test_kind_table_with_k_slope_recovers_an_effect_at_equal_member_error():
    rng = np.random.default_rng(4)
    n = 120
    t = pd.DataFrame({"kind": rng.choice(["regime", "init", "hparam"], n), "base": rng.choice(["r", "v"], n),
                      "N": rng.integers(2, 4, n), "mean member error (%)": rng.uniform(10, 20, n)})
    t["best member error (%)"] = t["mean member error (%)"] - rng.uniform(0, 3, n)
    level = t["base"].map({"r": 1.0, "v": 3.0}) + 0.5 * t["N"]
    t["top-1 error (%)"] = (0.5 * t["mean member error (%)"] + 0.3 * t["best member error (%)"]
                            - 1.5 * (t["kind"] == "regime") + level)
    kt = wi.kind_table(t, "regime", ["init", "hparam", "regime"], strata=("base", "N"))
    assert ev.k_slope(kt, "top-1 error (%)") == pytest.approx(-1.5)


def test_deal_within_keeps_each_stratum():
    labels = ["a", "b", "c", "a", "b", "c", "z", "z"]
    strata = [0, 0, 0, 1, 1, 1, 2, 2]
    seen = set()
    for seed in range(20):
        out = wi.deal_within(labels, strata, np.random.default_rng(seed))
        assert sorted(out[:3]) == ["a", "b", "c"] and sorted(out[3:6]) == ["a", "b", "c"] and out[6:] == ["z", "z"]
        seen.add(tuple(out))
    assert len(seen) > 1


def test_every_resnet_variant_of_table_d1_is_a_zoo_model_and_each_group_has_four():
    """The ResNet variants are the zoo's own models (reinit/, hparam/), so the pages train none of them again: a
    variant that only moved the initialisation must use ``init_seed`` (``seed`` also moves the data order and keyed
    two models the zoo does not have). Four variants per group and base at cpu and paper, two at smoke, and none equal
    to another or to its base (at paper the base already flips and crops, so "flip + crop" was the base again)."""
    from ensdiv.chapters import attack_similarity as ch
    from ensdiv.chapters import zoo

    for scale, per_group in (("cpu", 4), ("paper", 4), ("smoke", 2)):
        cfg = ch.preset("tabD1_within_architecture", scale, verbose=False)
        keys = {repr(r.key()): k for k, r in zoo.zoo_recipes(scale).items()}
        for base in cfg.base_models:
            members, groups = ch.chapter_variants(cfg, base)
            assert {g: groups.count(g) for g in wi.WITHIN_GROUPS} == dict.fromkeys(wi.WITHIN_GROUPS, per_group)
            if base == "arch/resnet" and scale == "cpu":
                assert all(repr(m.key()) in keys for m in members)
            assert len({repr(m.key()) for m in members}) == len(members)  # no variant repeats another
