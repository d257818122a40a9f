"""design-diversity, first half: top-k accuracy, the vectorised Eq. 7 over many ensembles, the seeded vote
tie-break of the sweep, and the chapter's sets, cache and presets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torchmetrics.functional.classification import multiclass_accuracy

import ensdiv as ed
from ensdiv.chapters import design_diversity as ch
from ensdiv.chapters import design_diversity_training as dt
from ensdiv.errors import InvalidInputError
from ensdiv.metrics import (
    attribution_diversity,
    attribution_gram,
    combination_index,
    ensemble_attribution_diversity,
    ensemble_sweep,
    normalize_attributions,
    topk_accuracy,
)


# ---- top-k accuracy ---------------------------------------------------------------------------------------
def test_topk_hand_case():
    s = torch.tensor([[0.1, 0.5, 0.4, 0.0], [0.7, 0.2, 0.1, 0.0], [0.2, 0.3, 0.4, 0.1], [0.0, 0.1, 0.2, 0.7]])
    y = torch.tensor([2, 0, 3, 0])  # label ranks 1, 0, 3, 3
    assert [float(topk_accuracy(s, y, k=k)) for k in (1, 2, 3, 4, 9)] == [0.25, 0.5, 0.5, 1.0, 1.0]


def test_topk_ties_count_for_the_label():
    s = torch.tensor([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0]])
    assert float(topk_accuracy(s, torch.tensor([1, 2]), k=1)) == 1.0  # argmax would pick class 0 / class 1
    assert float(topk_accuracy(s, torch.tensor([2, 0]), k=2)) == 0.0


@pytest.mark.parametrize("k", [1, 2, 5])
def test_topk_matches_torchmetrics(k):
    g = torch.Generator().manual_seed(k)
    s, y = torch.randn(500, 10, generator=g), torch.randint(0, 10, (500,), generator=g)
    ref = multiclass_accuracy(s, y, num_classes=10, top_k=k, average="micro")
    assert float(topk_accuracy(s, y, k=k)) == pytest.approx(float(ref), abs=1e-6)


@pytest.mark.parametrize(
    ("scores", "labels", "k", "match"),
    [
        (torch.zeros(3, 4), torch.zeros(3, dtype=torch.long), 0, "positive int"),
        (torch.zeros(3, 4), torch.zeros(3, dtype=torch.long), 1.5, "positive int"),
        (torch.zeros(3, 4), torch.zeros(3, dtype=torch.long), True, "positive int"),
        (torch.zeros(3), torch.zeros(3, dtype=torch.long), 1, "shaped"),
        (torch.zeros(3, 4, dtype=torch.long), torch.zeros(3, dtype=torch.long), 1, "floating"),
        (torch.zeros(0, 4), torch.zeros(0, dtype=torch.long), 1, "at least one sample"),
        (torch.zeros(3, 4), torch.tensor([0, 1, 4]), 1, "class indices"),
        (torch.zeros(3, 4), torch.zeros(2, dtype=torch.long), 1, r"\(3,\)"),
        (torch.full((3, 4), float("nan")), torch.zeros(3, dtype=torch.long), 1, "NaN"),
    ],
)
def test_topk_bad_inputs(scores, labels, k, match):
    with pytest.raises(InvalidInputError, match=match):
        topk_accuracy(scores, labels, k=k)


# ---- Eq. 7 over many ensembles ------------------------------------------------------------------------------
def _maps(m=6, n=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    scale = torch.logspace(-2, 1, m)[:, None, None, None, None]  # members with very different magnitudes
    return torch.rand(m, n, 1, 4, 5, generator=g) * scale


@pytest.mark.parametrize("size", [2, 3, 4])
def test_ensemble_attribution_diversity_matches_naive_loop(size):
    a = _maps()
    combos = combination_index(a.shape[0], size)
    naive = torch.stack([attribution_diversity(a[list(c)].double()) for c in combos.tolist()])
    fast = ensemble_attribution_diversity(a, combos)
    torch.testing.assert_close(fast, naive, rtol=1e-9, atol=1e-12)
    gram = attribution_gram(a, chunk=3)  # chunked accumulation gives the same Gram
    torch.testing.assert_close(ensemble_attribution_diversity(gram, combos, gram=True), naive, rtol=1e-9, atol=1e-12)


def test_sweep_attribution_column_matches_naive_loop():
    a = _maps(m=5, n=9)
    g = torch.Generator().manual_seed(1)
    logits, labels = torch.randn(5, 9, 3, generator=g), torch.randint(0, 3, (9,), generator=g)
    df = ensemble_sweep(logits, labels, size=3, attributions=a)
    naive = [float(attribution_diversity(a[list(c)].double())) for c in df["members"]]
    np.testing.assert_allclose(df["attribution_diversity"], naive, rtol=1e-9)


def test_normalised_maps_give_one_minus_mean_cosine():
    a = _maps(m=3, n=4)
    unit = normalize_attributions(a)
    norms = unit.reshape(3, 4, -1).norm(dim=-1)
    torch.testing.assert_close(norms, torch.ones(3, 4))
    flat = a.reshape(3, 4, -1)
    cos = torch.nn.functional.cosine_similarity(flat[:, None], flat[None, :], dim=-1)  # (3, 3, N)
    expected = (1 - cos.mean((0, 1))).mean()  # (1/k) Σ_i 1 - (1/k²) Σ_ij cos_ij, averaged over samples
    got = ensemble_attribution_diversity(unit, torch.tensor([[0, 1, 2]]))[0]
    assert float(got) == pytest.approx(float(expected), rel=1e-5)
    assert float(normalize_attributions(torch.zeros(1, 1, 3)).abs().sum()) == 0.0  # an all-zero map stays zero
    torch.testing.assert_close(normalize_attributions(torch.tensor([[[1.0, -3.0]]]), norm="l1"),
                               torch.tensor([[[0.25, -0.75]]]))
    torch.testing.assert_close(normalize_attributions(torch.tensor([[[1.0, -4.0]]]), norm="max"),
                               torch.tensor([[[0.25, -1.0]]]))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: normalize_attributions(torch.zeros(2, 3)), "members first"),
        (lambda: normalize_attributions(torch.zeros(2, 3, 4), norm="l3"), "norm must be"),
        (lambda: normalize_attributions(torch.zeros(2, 3, 4, dtype=torch.long)), "floating"),
        (lambda: attribution_gram(torch.zeros(2, 0, 4)), "at least one sample"),
        (lambda: ensemble_attribution_diversity(torch.zeros(2, 3, 4), torch.tensor([[0, 2]])), "0..1"),
        (lambda: ensemble_attribution_diversity(torch.zeros(2, 3, 4), torch.tensor([[-1, 0]])), "0..1"),
        (lambda: ensemble_attribution_diversity(torch.zeros(2, 3, 4), torch.tensor([0, 1])), r"\(K, k\)"),
        (lambda: ensemble_attribution_diversity(torch.zeros(2, 3, 4), torch.tensor([[0.0, 1.0]])), r"\(K, k\)"),
        (lambda: ensemble_attribution_diversity(torch.zeros(2, 3), torch.tensor([[0, 1]]), gram=True), "square"),
    ],
)
def test_attribution_sweep_bad_inputs(call, match):
    with pytest.raises(InvalidInputError, match=match):
        call()


# ---- majority vote with a seeded random tie-break --------------------------------------------------------
def _three_way_ties(n=600, m=4, c=3):
    """Members' logits whose predictions make every 3-member ensemble of members 0-2 tie 1-1-1."""
    preds = torch.stack([torch.zeros(n), torch.ones(n), torch.full((n,), 2.0), torch.zeros(n)]).long()[:m]
    return torch.nn.functional.one_hot(preds, c).float() * 5, torch.zeros(n, dtype=torch.long)


def test_vote_tie_break_is_deterministic_under_a_seed():
    logits, labels = _three_way_ties()
    a = ensemble_sweep(logits, labels, size=3, how="vote", seed=3)
    b = ensemble_sweep(logits, labels, size=3, how="vote", seed=3)
    c = ensemble_sweep(logits, labels, size=3, how="vote", seed=4)
    assert a["accuracy"].tolist() == b["accuracy"].tolist()
    assert a["accuracy"].tolist() != c["accuracy"].tolist()


def test_vote_tie_break_matches_naive_loop_and_is_uniform():
    logits, labels = _three_way_ties()
    n, c = labels.shape[0], logits.shape[-1]
    df = ensemble_sweep(logits, labels, size=3, how="vote", seed=11)
    jitter = 0.5 * torch.rand(n, c, generator=torch.Generator().manual_seed(11))  # the documented rule
    for members, acc in zip(df["members"], df["accuracy"], strict=True):
        votes = torch.nn.functional.one_hot(logits[list(members)].argmax(-1), c).sum(0).double()
        naive = float(((votes + jitter).argmax(-1) == labels).double().mean())
        assert acc == pytest.approx(naive)
    tied = df.loc[df["members"] == (0, 1, 2), "accuracy"].item()  # each class wins a third of the ties
    assert abs(tied - 1 / 3) < 4 * (2 / 9 / n) ** 0.5
    majority = df.loc[df["members"] == (0, 1, 3), "accuracy"].item()  # two votes for class 0: no tie, no chance
    assert majority == 1.0


# ---- the chapter ----------------------------------------------------------------------------------------------
def test_minmax_and_subset_index():
    np.testing.assert_allclose(ch.minmax([2.0, 4.0, 3.0]), [0.0, 1.0, 0.5])
    np.testing.assert_allclose(ch.minmax([1.0, 1.0]), [0.0, 0.0])
    small, big = ch.subset_index(100, 10, 3), ch.subset_index(100, 40, 3)
    assert set(small.tolist()) <= set(big.tolist()) and len(small) == 10  # attribution images inside eval images
    assert torch.equal(ch.subset_index(5, 0, 0), torch.arange(5)) and torch.equal(ch.subset_index(5, 9, 0),
                                                                                     torch.arange(5))


def test_adjusted_r2_against_statsmodels_free_hand_case():
    y = np.array([1.0, 2.0, 3.0, 4.0])
    assert ch.adjusted_r2(y, x=[1.0, 2.0, 3.0, 4.0]) == pytest.approx(1.0)
    # two groups with means 1.5 and 3.5: R² = 4 / 5, adjusted 1 - (1 - 0.8) * 3 / 2 = 0.7
    assert ch.adjusted_r2(y, groups=["a", "a", "b", "b"]) == pytest.approx(0.7)


def test_arch_class_and_training_approach():
    assert [ch.arch_class(n) for n in ("test_resnet", "resnext50_32x4d.a1h_in1k", "tf_efficientnet_b7.ra_in1k",
                                       "swinv2_base_window8_256.ms_in1k", "mixer", "deit")] == \
        ["CNN", "CNN", "NAS", "ViT", "MLP", "ViT"]
    zoo = ch.zoo_recipes("cpu", ["dd/dino_resnet1", "dd/MNASNET_1", "framework/deit-distill-hard"])
    assert [ch.training_approach(r) for r in zoo.values()] == ["Self-sup.", "Superv.", "K. distill."]

    class Timm:  # a paper-scale model carries its timm name
        def __init__(self, name):
            self.ensdiv_name = name

    # DeiT's own weights are supervised; only its distilled model is knowledge distillation (#29)
    assert [ch.training_approach(Timm(n)) for n in ("deit_base_patch16_224.fb_in1k",
                                                    "deit_base_distilled_patch16_224.fb_in1k",
                                                    "vit_small_patch16_224.dino")] == \
        ["Superv.", "K. distill.", "Self-sup."]
    assert "deit_base_distilled_patch16_224.fb_in1k" in ch.PRESETS["design-diversity/tab01_architecture_resiliency"][
        "paper"]["zoo"]


def test_paper_zoo_stands_for_every_model_of_table_i():
    """Table i / Fig. A at paper scale read the row of the model each timm model stands for (#29: the checks were
    all NaN when the timm names met Table i's ids)."""
    assert sorted(ch.PAPER_ZOO_STANDS_FOR.values()) == sorted(ch.PAPER_TABLE_I) == sorted(ch.PAPER_FIG_A)
    assert ch.PAPER_ZOO == list(ch.PAPER_ZOO_STANDS_FOR)

    class Timm:
        ensdiv_name = "resnet50.tv_in1k"

    assert ch.table_i_id(Timm()) == "bootstrapNAS-B_1"
    (recipe,) = ch.zoo_recipes("cpu", ["dd/MNASNET_1"]).values()
    assert ch.table_i_id(recipe) == recipe.name


def test_presets_cover_every_scale_and_the_cpu_zoo_has_14_models():
    for stem in ch.PRESETS:
        for scale in ed.SCALES:
            cfg = ch.preset(stem, scale, verbose=False)
            assert cfg.scale == scale
    cfg = ch.preset("fig05_06_ensemble_diversity", "cpu", verbose=False)
    assert len(ch.zoo_recipes("cpu", cfg.zoo)) == 14 and len(combination_index(14, 3)) == 364
    assert len(ch.preset("fig05_06_ensemble_diversity", "paper", verbose=False).zoo) == 14


def test_smoke_sets_are_shifted_copies_of_the_same_test_images():
    cfg = ch.preset("fig07_trend_lines", "smoke", verbose=False, eval_images=12)
    clean, _, _ = ch.eval_rows(cfg, "clean")
    lines, name, idx = ch.eval_rows(cfg, "lines")
    assert idx is None and name == "fmnist-cbar/lines/1.6" and torch.equal(clean.y, lines.y)
    assert lines.x.shape == clean.x.shape and not torch.equal(lines.x, clean.x)
    with pytest.raises(ed.UnknownNameError):
        ch.eval_set(cfg, "fog")


def test_chapter_attributions_are_cached_and_target_the_label(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))
    torch.manual_seed(0)
    nets = [torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10)).eval() for _ in range(2)]
    for i, net in enumerate(nets):
        net.ensdiv_name, net.ensdiv_cache_id = f"lin{i}", {"test": i}
    cfg = ch.preset("fig05_06_ensemble_diversity", "smoke", verbose=False, attr_images=5)
    maps, labels = ch.chapter_attributions(cfg, nets, "clean")
    assert maps.shape == (2, 5, 1, 28, 28) and labels.shape == (5,)
    w = nets[0][1].weight.detach()
    expected = w[labels].abs().reshape(5, 1, 28, 28)  # |d logit_y / dx| of a linear model is |w_y|
    torch.testing.assert_close(maps[0], expected.to(torch.bfloat16).float())
    with torch.no_grad():
        nets[0][1].weight.zero_()  # a changed model under the same cache id: the cache answers
    again, _ = ch.chapter_attributions(cfg, nets, "clean")
    torch.testing.assert_close(again, maps)
    assert len(list((tmp_path / "cache" / "dd-attributions").rglob("*.pt"))) == 2


# ---- the evidence helpers (null data and cheap intervals) -----------------------------------------------------------
def test_mean_estimates_replicates_are_means_of_resampled_images():
    x = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    y = np.array([0.0, 0.0, 1.0, 0.0, 1.0])
    counts = ch.bootstrap_counts(5, n_boot=30, seed=3)
    est = ch.mean_estimates({"x": x, "y": y}, {"d": lambda m: m["x"] - m["y"]}, counts)
    assert est["d"].value == pytest.approx(0.6 - 0.4)
    for row, rep in zip(counts, est["d"].replicates, strict=True):
        drawn = np.repeat(np.arange(5), row.astype(int))  # the images of this resample, with repeats
        assert rep == pytest.approx(x[drawn].mean() - y[drawn].mean())


def test_permute_rows_keeps_each_images_values():
    rows = np.array([[1, 2, 3, 4], [10, 20, 30, 40], [100, 200, 300, 400]])
    out = ch.permute_rows(rows, np.random.default_rng(0))
    for j in range(4):
        assert sorted(out[:, j].tolist()) == sorted(rows[:, j].tolist())


def test_weighted_null_equals_pearson_on_repeated_ensembles():
    from ensdiv.chapters.design_diversity.evidence import member_weights

    combos = [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3), (0, 1, 4), (2, 3, 4)]
    a = np.array([0.1, 0.4, 0.35, 0.8, 0.2, 0.9])
    y = np.array([1.0, 2.0, 1.5, 3.0, 0.5, 2.5])
    null = ch.weighted_null("identity", combos, lambda rng: {"a": a, "y": y}, {"r": ("pearson", "a", "y")},
                            draws=1, n_boot=20, seed=5)
    est = null.draws[0]["r"]
    assert est.value == pytest.approx(np.corrcoef(a, y)[0, 1])
    w = member_weights(combos, n_boot=20, seed=5)
    for row, rep in zip(w, est.replicates, strict=True):
        k = row.astype(int)
        if k.sum() < 4 or np.ptp(np.repeat(a, k)) == 0:
            continue
        assert rep == pytest.approx(np.corrcoef(np.repeat(a, k), np.repeat(y, k))[0, 1])
    assert w.shape == (20, len(combos))


def test_member_effects_match_statsmodels_ols_on_member_dummies():
    import statsmodels.api as sm

    rng = np.random.default_rng(0)
    members = [(i, j) for i in range(6) for j in range(i + 1, 6)]
    y = rng.normal(size=len(members))
    design = np.zeros((len(members), 6))
    for e, (i, j) in enumerate(members):
        design[e, [i, j]] = 1.0
    assert np.allclose(ch.evidence.member_effects(y, members), sm.OLS(y, design).fit().fittedvalues)
    with pytest.raises(InvalidInputError, match="one value per pair"):
        ch.evidence.member_effects(y[:-1], members)


def _scale_p(members, sal, ig, make, draws=400, seed=0):
    """One-sided randomisation p-value of r(Saliency, IG) against null Saliency columns from ``make(rng)``."""
    rng = np.random.default_rng(seed)
    obs = np.corrcoef(sal, ig)[0, 1]
    null = [np.corrcoef(make(rng), ig)[0, 1] for _ in range(draws)]
    return (1 + sum(r >= obs for r in null)) / (1 + draws)


def test_a_shared_gradient_scale_alone_does_not_pass_the_kept_scale_null():
    """Saliency and IG pair scores that share only each model's scale (a_i + a_j) and agree on nothing else: dealing
    the models' Saliency (the old null) calls their r significant; keeping each model's effect and dealing the
    residuals (the new one) does not. With a genuine pair-by-pair agreement added, the new null rejects too."""
    rng = np.random.default_rng(1)
    n = 11
    members = [(i, j) for i in range(n) for j in range(i + 1, n)]
    g = rng.normal(size=n) * 2
    scale = np.array([g[i] + g[j] for i, j in members])
    sal, ig = scale + rng.normal(size=len(members)), scale + rng.normal(size=len(members))
    where = {p: e for e, p in enumerate(members)}

    def dealt_models(rng):
        deal = rng.permutation(n)
        return sal[[where[tuple(sorted(deal[list(p)]))] for p in members]]

    assert _scale_p(members, sal, ig, dealt_models) < 0.01  # the artefact alone "passes" the old null
    ps = []
    for k in range(40):  # 40 runs of the artefact alone
        sal2, ig2 = scale + rng.normal(size=len(members)), scale + rng.normal(size=len(members))
        ps.append(_scale_p(members, sal2, ig2, lambda r, s=sal2: ch.evidence.shuffled_residuals(s, members, r),
                           seed=k))
    assert np.mean(np.array(ps) <= 0.05) <= 0.15  # about its level, where the old null passed every time
    shared = rng.normal(size=len(members))  # a pair-by-pair agreement beyond the scale
    sal3, ig3 = scale + shared + 0.3 * rng.normal(size=len(members)), scale + shared
    assert _scale_p(members, sal3, ig3, lambda r: ch.evidence.shuffled_residuals(sal3, members, r)) < 0.01


def test_a_class_that_only_carries_its_recipe_does_not_pass_the_within_recipe_null():
    """Lines accuracy set by the training recipe alone, the class moving with the recipe (as in Table 1's zoo):
    dealing the classes over all models calls the class's adjusted R² significant; dealing them within each
    recipe (``ed.report.deal_within``) does not. A class effect inside the recipes is found by the latter."""
    cls = np.array(["CNN"] * 6 + ["NAS"] * 2 + ["ViT"] * 5 + ["CNN"])
    recipe = np.array(["sgd"] * 8 + ["adamw"] * 6)

    def p_value(y, deal, draws=300):
        rng = np.random.default_rng(0)
        obs = ch.adjusted_r2(y, groups=cls)
        null = [ch.adjusted_r2(y, groups=np.array(deal(rng))) for _ in range(draws)]
        return (1 + sum(v >= obs for v in null)) / (1 + draws)

    over_all = lambda rng: rng.permutation(cls)  # noqa: E731
    within = lambda rng: ed.report.deal_within(cls, recipe, rng)  # noqa: E731
    hits_all, hits_within = 0, 0
    for seed in range(20):
        y = np.where(recipe == "adamw", 10.0, 0.0) + np.random.default_rng(seed).normal(size=14)
        hits_all += p_value(y, over_all) <= 0.05
        hits_within += p_value(y, within) <= 0.05
    assert hits_all >= 18 and hits_within <= 2
    y = np.where(cls == "NAS", 5.0, 0.0) + np.random.default_rng(99).normal(scale=0.5, size=14)
    assert p_value(y, within) <= 0.05  # NAS against CNN inside the sgd recipe


def _sweep(attribution, improvement, n_models=5, size=3):
    """A sweep over every ``size``-member ensemble of ``n_models`` models, its columns functions of the members."""
    import itertools

    combos = [tuple(c) for c in itertools.combinations(range(n_models), size)]
    return {"members": combos, "attribution_diversity": [attribution(c) for c in combos],
            "oracle_disagreement": [float(sum(c)) for c in combos], "improvement": [improvement(c) for c in combos]}


def test_sweep_estimates_are_figs_5_6_statistics_of_the_ensembles():
    """r of each measure with the improvement against scipy's Pearson, the share below zero counted by hand."""
    from scipy import stats

    sweep = _sweep(lambda c: float(c[0] * c[2]), lambda c: float(c[1]) - 1.5)
    est = ch.sweep_estimates(sweep, n_resamples=50, seed=0)
    assert est["r_attribution"].value == pytest.approx(
        stats.pearsonr(sweep["attribution_diversity"], sweep["improvement"])[0])
    assert est["r_disagreement"].value == pytest.approx(
        stats.pearsonr(sweep["oracle_disagreement"], sweep["improvement"])[0])
    # the triples of 0..4 whose middle member is 1 sit below 1.5: (0, 1, 2), (0, 1, 3), (0, 1, 4) of ten
    assert est["share_below_zero"].value == pytest.approx(0.3)
    assert {e.group for e in est.values()} == {est["r_attribution"].group}  # one paired member bootstrap


def test_sweep_nulls_deal_maps_among_models_permute_improvements_and_flip_signs():
    """The attribution diversity says whether model 0 is in the ensemble, and so does the improvement (r = 1).
    Dealt maps move that to one random model j: the dealt r is 1 when j = 0 and, for j != 0, the r of two
    indicators over the ten triples of five models: (3/10 - 6/10 * 6/10) / (6/10 * 4/10) = -0.25."""
    in0 = lambda c: float(0 in c)  # noqa: E731
    sweep = _sweep(in0, lambda c: in0(c) + 0.5)  # every improvement positive
    nulls = ch.sweep_nulls(sweep, 5, draws=400, seed=3)
    dealt = np.array([float(d["r_attribution"]) for d in nulls["maps"].draws])
    assert np.all(np.isclose(dealt, 1.0) | np.isclose(dealt, -0.25))
    assert abs(np.isclose(dealt, 1.0).mean() - 1 / 5) < 4 * np.sqrt(0.2 * 0.8 / 400)
    permuted = np.array([float(d["r_disagreement"]) for d in nulls["improvements"].draws])
    assert abs(permuted.mean()) < 4 * permuted.std() / np.sqrt(400)  # a permutation's r is 0 on average
    flipped = np.array([float(d["share_below_zero"]) for d in nulls["signs"].draws])
    assert set(np.round(flipped * 10)) <= set(range(11))
    assert abs(flipped.mean() - 0.5) < 4 * np.sqrt(0.25 / 10 / 400)  # each of ten signs flipped with 1/2
    only = ch.sweep_nulls(sweep, 5, draws=400, seed=3, which=["signs"])
    assert list(only) == ["signs"] and [float(d["share_below_zero"]) for d in only["signs"].draws] == list(flipped)


@pytest.mark.parametrize(("sweep", "kw", "match"), [
    ({"members": [(0, 1, 2)], "improvement": [0.1]}, {}, "no column 'attribution_diversity'"),
    (_sweep(lambda c: 0.0, lambda c: 0.0), {"which": ["maps", "labels"]}, "Unknown sweep null 'labels'"),
    ({k: v[:-1] for k, v in _sweep(lambda c: float(c[0]), lambda c: 0.0).items()}, {},
     "every ensemble of their size"),
])
def test_sweep_nulls_refuse_a_sweep_they_cannot_read(sweep, kw, match):
    with pytest.raises(InvalidInputError, match=match):
        ch.sweep_nulls(sweep, 5, draws=5, seed=0, **kw)


def test_mean_gain_null_holds_the_mean_improvement_at_its_shift():
    """Gains constant on every image: each draw's mean improvement is exactly the shift; gains that vary: the
    draws' mean is the shift within four standard errors, and the estimate's replicates resample that draw."""
    flat = dt.mean_gain_null("flat", np.full((3, 20), 100.0), name="m", shift=0.04, draws=30, seed=0)
    assert [float(d["m"]) for d in flat.draws] == pytest.approx([0.04] * 30)
    rng = np.random.default_rng(1)
    gain = rng.choice([-100.0, 0.0, 100.0], size=(6, 300), p=[0.1, 0.7, 0.2])
    null = dt.mean_gain_null("centred", gain, name="m", shift=0.5, draws=300, seed=2)
    values = np.array([float(d["m"]) for d in null.draws])
    assert abs(values.mean() - 0.5) < 4 * values.std() / np.sqrt(300)
    assert null.draws[0]["m"].replicates.shape == (300,)


def test_gain_over_best_matches_a_loop_over_ensembles_and_images():
    torch.manual_seed(0)
    logits, labels = torch.randn(5, 40, 3), torch.randint(0, 3, (40,))
    combos = [(0, 1, 2), (1, 3, 4), (0, 2, 4)]
    out = dt.gain_over_best(logits, labels, combos)
    for e, c in enumerate(combos):
        acc = [float((logits[m].argmax(-1) == labels).float().mean()) for m in c]
        best = c[int(np.argmax(acc))]
        for n in range(40):
            ens = int(logits[list(c), n].mean(0).argmax() == labels[n])
            assert out[e, n] == 100 * (ens - int(logits[best, n].argmax() == labels[n]))


@pytest.mark.parametrize(("call", "match"), [
    (lambda: dt.gain_over_best(torch.zeros(3, 4, 2), torch.zeros(4, dtype=torch.long), [(0, 3)]), "below 3"),
    (lambda: dt.accuracy_spread(torch.zeros(3, 4, 2), torch.zeros(4, dtype=torch.long), []), "below 3"),
    (lambda: dt.mean_gain_null("x", np.zeros(5), name="m", shift=0.0, draws=3, seed=0), "one row per ensemble"),
])
def test_improvement_helpers_refuse_what_they_cannot_read(call, match):
    with pytest.raises(InvalidInputError, match=match):
        call()
