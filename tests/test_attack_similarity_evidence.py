"""The attack-similarity chapter's evidence helpers against naive implementations (issue #50)."""

import itertools

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import adjusted_rand_score, silhouette_score

from ensdiv.chapters.attack_similarity import evidence as ev
from ensdiv.errors import InvalidInputError


def _naive_contrast(s, labels, idx):
    within, between = [], []
    for a, b in itertools.permutations(range(len(idx)), 2):
        if idx[a] == idx[b]:
            continue
        (within if labels[idx[a]] == labels[idx[b]] else between).append(s[idx[a], idx[b]])
    return np.mean(within) - np.mean(between)


def test_block_contrast_matches_a_loop_with_duplicates():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(8, 8))
    s = (s + s.T) / 2
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 0])
    idx = np.array([0, 0, 1, 3, 4, 4, 6, 7])
    assert ev.block_contrast(s, labels, idx) == pytest.approx(_naive_contrast(s, labels, idx))
    assert ev.block_contrast(s, labels) == pytest.approx(_naive_contrast(s, labels, np.arange(8)))


def test_pair_ari_equals_sklearn_without_duplicates_and_ignores_self_pairs():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 4, 30), rng.integers(0, 5, 30)
    assert ev.pair_ari(a, b) == pytest.approx(adjusted_rand_score(a, b))
    # identical labellings: 1 whether or not a resample repeats models
    assert ev.pair_ari(a, a, np.array([0, 0, 1, 2, 2, 5, 7, 9])) == pytest.approx(1.0)


def test_silhouette_equals_sklearn_without_duplicates():
    rng = np.random.default_rng(2)
    x, labels = rng.normal(size=(25, 3)), rng.integers(0, 3, 25)
    labels[0] = 7  # a group of one scores 0, as in sklearn
    assert ev.silhouette(x, labels) == pytest.approx(silhouette_score(x, labels))


def test_k_slope_holds_the_best_member_fixed_too():
    """Ensembles over more clusters mix less alike models, whose best member errs less at the same mean: a fit at
    equal mean member error alone credits k with that spread; at equal mean and best member error it does not."""
    rng = np.random.default_rng(3)
    n = 200
    t = pd.DataFrame({"N": rng.integers(2, 5, n), "k": rng.integers(1, 4, n),
                      "mean member error (%)": rng.uniform(10, 20, n)})
    t["best member error (%)"] = t["mean member error (%)"] - 1.0 * t["k"] - rng.uniform(0, 2, n)
    # error: 0.5 × mean + 0.4 × best member error − 1.5 per cluster + a size effect, no noise
    t["top-1 error (%)"] = (0.5 * t["mean member error (%)"] + 0.4 * t["best member error (%)"] - 1.5 * t["k"]
                            + 0.3 * t["N"] ** 2)
    assert ev.k_slope(t, "top-1 error (%)") == pytest.approx(-1.5)
    sizes = [(t["N"] == v).astype(float) for v in sorted(t["N"].unique())]
    mean_only = np.linalg.lstsq(np.column_stack([t["k"], t["mean member error (%)"], *sizes]),
                                t["top-1 error (%)"], rcond=None)[0][0]
    assert mean_only == pytest.approx(-1.9, abs=0.05)  # the best member's spread credited to k
    assert np.isnan(ev.k_slope(t.assign(k=1), "top-1 error (%)"))  # k never varies: not computable


def test_cluster_ensemble_table_by_hand():
    # three models, two images; model 0 right on both, model 1 wrong on image 0, model 2 wrong on image 1
    logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]])
    t = ev.cluster_ensemble_table(logits, torch.tensor([0, 1]), [1, 1, 2], max_members=2, n_draws=1, seed=0)
    one = t[t["k"] == 1].iloc[0]  # models 0 and 1: mean logits (1, 0.5) right, (0, 1) right
    assert one["top-1 error (%)"] == 0.0 and one["mean member error (%)"] == 25.0 and one["ERR (%)"] == 100.0
    assert one["best member error (%)"] == 0.0


def test_partial_r_matches_the_textbook_formula():
    rng = np.random.default_rng(4)
    z = rng.normal(size=40)
    x, y = z + rng.normal(size=40), 2 * z + rng.normal(size=40) + 0.5 * rng.normal(size=40)
    r = np.corrcoef([x, y, z])
    expected = (r[0, 1] - r[0, 2] * r[1, 2]) / np.sqrt((1 - r[0, 2] ** 2) * (1 - r[1, 2] ** 2))
    assert ev.partial_r(x, y, z) == pytest.approx(expected)
    assert np.isnan(ev.partial_r(x[:4], y[:4], z[:4]))  # below MIN_PARTIAL


def test_dealt_null_keeps_the_group_sizes():
    labels = np.array(["a"] * 5 + ["b"] * 3)
    null = ev.dealt_null("dealt", labels, lambda lab: {"lab": lab}, draws=20, seed=0)
    assert all(sorted(d["lab"].tolist()) == sorted(labels.tolist()) for d in null.draws)
    assert any((d["lab"] != labels).any() for d in null.draws)


def test_model_estimates_keep_duplicates():
    est = ev.model_estimates(10, {"distinct": lambda i: float(len(set(i.tolist())))}, n_resamples=100, seed=0)
    assert est["distinct"].value == 10.0
    assert est["distinct"].replicates.mean() < 8  # about 10 × (1 − 1/e) ≈ 6.5 distinct models per resample


def _evidence_keys(notebook) -> list[str]:
    """The literal evidence keys of a notebook's code cells (``evidence="..."``, adjacent literals joined)."""
    import ast
    import json

    keys = []
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse("".join(cell["source"]))):
            if isinstance(node, ast.keyword) and node.arg == "evidence" and isinstance(node.value, ast.Constant):
                keys.append(node.value.value)
    return keys


def test_the_released_matrix_grouping_by_base_architecture_counts_on_one_page():
    """Fig. 1, C.1, D.2 and Tab. 2 read one 69×69 matrix: that its models group by base architecture is one fact,
    counted once (on the Fig. D.2 page, whose sentence is about it); C.1's silhouette and Tab. 2's ARI of it are
    shown, not counted. The pages that read only the release name their evidence by the data they read, so the
    build's clash check (``ed.report.evidence_clashes``) sees two pages counting one statistic of it. Before,
    four keys named four pages for the one fact."""
    from ensdiv.paths import project_root

    folder = project_root() / "notebooks" / "attack-similarity"
    pages = ("fig01_component_importance", "figC1_spectral_features", "figD2_similarity_matrix",
             "tab02_spectral_clusters")
    keys = {p: _evidence_keys(folder / f"{p}.ipynb") for p in pages}
    data = ("attack-similarity/released-matrix/", "attack-similarity/measured-matrix/")
    assert all(k.startswith(data) for ks in keys.values() for k in ks), keys
    grouping = [(p, k) for p, ks in keys.items() for k in ks if "base-architecture" in k and "important" not in k]
    assert grouping == [("figD2_similarity_matrix", "attack-similarity/released-matrix/base-architecture-blocks")]
    assert keys["figC1_spectral_features"] == []  # its one check is shown with the reason it restates D.2
    assert keys["tab02_spectral_clusters"] == ["attack-similarity/released-matrix/clusters-follow-stem-layer"]


def _shared_member_table(rng, *, n_models=8, n_ensembles=150, spread=2.0):
    """Ensembles of three of ``n_models`` models in two clusters, the ensemble's error its members' mean error
    plus a per-model effect (``spread`` × the members' mean of a standard normal) and small noise: no effect of
    k, but ensembles that share members share their effects."""
    u, e, cl = rng.normal(size=n_models), rng.uniform(10, 20, n_models), np.arange(n_models) % 2
    rows = []
    for _ in range(n_ensembles):
        m = rng.choice(n_models, 3, replace=False)
        rows.append({"N": 3, "k": len(set(cl[m])), "mean member error (%)": e[m].mean(),
                     "best member error (%)": e[m].min(), "members": tuple(int(i) for i in m),
                     "top-1 error (%)": e[m].mean() + spread * u[m].mean() + rng.normal(scale=0.2)})
    return pd.DataFrame(rows)


def test_k_slopes_resamples_models_not_drawn_ensembles():
    """The interval is over the models: its replicates are weighted fits whose weights are the products of the
    members' draw counts (recomputed here by a loop over a naive weighted least squares), and it is wider than a
    bootstrap over the drawn ensembles, which holds the models fixed."""
    t = _shared_member_table(np.random.default_rng(4))
    est = ev.k_slopes(t, ["top-1 error (%)"], n_resamples=40, seed=3)["top-1 error (%)"]
    assert est.source == "models" and est.value == pytest.approx(ev.k_slope(t, "top-1 error (%)"))
    from ensdiv import report
    w = report.member_weights(t["members"].tolist(), n_boot=40, seed=3)
    x = np.column_stack([t["k"], t["mean member error (%)"], t["best member error (%)"], np.ones(len(t))])
    y = t["top-1 error (%)"].to_numpy()
    for r in range(40):
        keep = w[r] > 0
        if np.linalg.matrix_rank(x[keep]) < x.shape[1]:  # k (or a covariate) does not vary: not computable
            assert np.isnan(est.replicates[r])
            continue
        sw = np.sqrt(w[r][keep])
        naive = np.linalg.lstsq(x[keep] * sw[:, None], y[keep] * sw, rcond=None)[0][0]
        assert est.replicates[r] == pytest.approx(naive)
    rng = np.random.default_rng(5)
    rows = [ev.k_slope(t.iloc[rng.integers(0, len(t), len(t))].reset_index(drop=True), "top-1 error (%)")
            for _ in range(200)]
    assert np.nanstd(est.replicates) > 2 * np.std(rows)


def test_k_slopes_refuses_a_table_without_members():
    t = _shared_member_table(np.random.default_rng(0)).drop(columns="members")
    with pytest.raises(InvalidInputError, match="'members' column"):
        ev.k_slopes(t, ["top-1 error (%)"], n_resamples=10, seed=0)


def test_pair_matrices_with_the_gap_regressed_out_give_the_textbook_partial_correlation_and_refuse_bad_shapes():
    from ensdiv.chapters.attack_similarity.intervals import partial_out

    rng = np.random.default_rng(5)
    m = 9
    acc = rng.uniform(80, 95, m)
    gap = np.abs(acc[:, None] - acc[None, :])
    sim = rng.normal(size=(m, m)) - 0.3 * gap
    gain = rng.normal(size=(m, m)) - 0.5 * gap
    sim, gain = (sim + sim.T) / 2, (gain + gain.T) / 2
    a, b = np.triu_indices(m, 1)
    r = np.corrcoef([sim[a, b], gain[a, b], gap[a, b]])  # r_xy.z from the three pairwise correlations
    textbook = (r[0, 1] - r[0, 2] * r[1, 2]) / np.sqrt((1 - r[0, 2] ** 2) * (1 - r[1, 2] ** 2))
    ours = np.corrcoef(partial_out(sim, gap)[a, b], partial_out(gain, gap)[a, b])[0, 1]
    assert ours == pytest.approx(textbook)
    with pytest.raises(InvalidInputError, match="pair matrices of one shape"):
        partial_out(sim, gap[:-1, :-1])
    with pytest.raises(InvalidInputError, match="pair matrices of one shape"):
        partial_out(sim[:, :-1], gap[:, :-1])
    with pytest.raises(InvalidInputError, match="M >= 3"):
        partial_out(sim[:2, :2], gap[:2, :2])
