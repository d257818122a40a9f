"""The SAT paper's released data: a 69×69 similarity matrix and the 13 components of each model.

Hwang et al. (attack-similarity, file 002) release ``SAT_release.csv`` (the similarity s(A, B) of
Eq. 1 between 69 timm ImageNet classifiers) and ``model_features_release.csv`` (13 architectural
components per model, Tab. 1 / Tab. B.2). The book ships both under ``book/data/sat/``. This module
loads and validates them and runs the paper's two analyses on them:

* Sec. 3.1 "feature importance": a gradient-boosting regressor from the per-component Hamming
  differences of a pair of models to their similarity, then permutation importance (Fig. 1);
* Sec. 3.1 "clustering": spectral clustering of the similarity graph (normalised Laplacian, K = 10,
  K-means with 100 restarts; App. C) with top-5 TF-IDF keywords per cluster (Tab. 2, Fig. C.1, D.2).
  App. C leaves the graph's diagonal, the Laplacian's normalisation and the eigenvectors' scaling
  open; :func:`spectral_readings` scores every reading and the default (:data:`DEFAULT_READING`) is
  the one that recovers the legible clusters 7–10 from the released matrix.

:func:`compare_with_release` measures how closely a SAT matrix measured here (paper scale: the same 69
models) reproduces the released one: correlations over the off-diagonal pairs, means and diagonals.

The paper's own Table 2 is only partly legible in our text copy: the order of the 69 models by
cluster (the axis of Fig. C.1 / D.2) and the members of clusters 7–10 (23 models) are verbatim; the
boundaries between clusters 1–6 are *reconstructed* from that order and the cluster descriptions in
Sec. 3.1 (see :data:`PAPER_CLUSTERS` and :data:`PAPER_CLUSTERS_VERBATIM`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ensdiv.errors import DataNotFoundError, EnsdivError, InvalidInputError

__all__ = [
    "COMPONENTS",
    "PAPER_ORDER",
    "PAPER_CLUSTERS",
    "PAPER_CLUSTERS_VERBATIM",
    "PAPER_KEYWORDS",
    "keyword_matches",
    "default_sat_root",
    "load_sat_release",
    "paper_cluster_labels",
    "component_differences",
    "component_importance",
    "spectral_features",
    "spectral_clusters",
    "spectral_readings",
    "READING_OPTIONS",
    "DEFAULT_READING",
    "cluster_keywords",
    "cluster_table",
    "compare_with_release",
]

#: The 13 architectural components of Tab. 1 (column names of ``model_features_release.csv``).
COMPONENTS = [
    "Base architecture", "Hierarchical structure", "Stem layer", "Input resolution", "Normalization",
    "Activation", "Pooling (stem)", "Pooling (final)", "2D SA", "CW attention",
    "Location of CW attention", "DW conv", "Group conv",
]  # fmt: skip

#: Row/column order of Fig. C.1 and D.2 ("sorted by the clustering index in Tab. 2"), verbatim.
PAPER_ORDER = (
    "convit_base crossvit_base_240 deit_base_patch16_224 gmlp_s16_224 vit_small_patch16_224 "
    "deit_small_patch16_224 resmlp_24_224 twins_pcpvt_base coat_lite_small convnext_tiny twins_svt_small "
    "jx_nest_tiny swin_s3_tiny_224 swin_tiny_patch4_window7_224 resmlp_big_24_224 xcit_medium_24_p16_224 "
    "pit_b_224 visformer_small tnt_s_patch16_224 haloregnetz_b pit_s_224 xcit_tiny_12_p8_224 halonet50ts "
    "lambda_resnet50ts botnet26t_256 gcresnext50ts eca_halonext26ts eca_botnext26ts_256 "
    "lamhalobotnet50ts_256 sebotnet33ts_256 sehalonet33ts halo2botnet50ts_256 gcresnet50t eca_resnet33ts "
    "wide_resnet50_2 seresnext50_32x4d resnext50_32x4d resnetv2_50 resnet50 seresnet50 dpn107 resnetblur50 "
    "resnetv2_101 resnet101 gluon_xception65 resnet50_gn regnety_032 fbnetv3_g efficientnet_b2 mixnet_xl "
    "rexnet_150 nf_regnet_b1 nfnet_l0 eca_nfnet_l0 resnetv2_50d_evos resnest50d convmixer_1536_20 "
    "poolformer_m48 vit_base_patch32_224 vit_small_r26_s32_224 regnetx_320 hrnet_w64 dla102x2 "
    "ese_vovnet39b gluon_resnet101_v1c nf_resnet50 cspdarknet53 cspresnext50 cspresnet50"
).split()

# Cluster sizes along PAPER_ORDER. 7–10 are verbatim in Tab. 2 of our copy (6, 6, 7, 4 models); 1–6
# follow Sec. 3.1: non-hierarchical Transformers (1), hierarchical nets with a patchified stem (2),
# hierarchical Transformers (3), CNNs with 2D self-attention (4, 5), ResNet-based (6).
_PAPER_SIZES = [7, 8, 7, 6, 6, 12, 6, 6, 7, 4]
#: Tab. 2 cluster (1–10) of each model, reconstructed as described above.
PAPER_CLUSTERS: dict[str, int] = {
    name: k + 1 for k, size in enumerate(_PAPER_SIZES) for name in PAPER_ORDER[sum(_PAPER_SIZES[:k]) :][:size]
}
#: Clusters whose member lists are legible verbatim in our copy of Tab. 2.
PAPER_CLUSTERS_VERBATIM = (7, 8, 9, 10)
#: Top-5 keywords of Tab. 2 where legible (clusters 7–10; cluster 7 shows four), each as
#: (the paper's words, our component, the value prefix it names or ``None`` for "any value").
PAPER_KEYWORDS: dict[int, list[tuple[str, str, str | None]]] = {
    7: [("Stem layer: 3x3 conv w/ s2", "Stem layer", "3s2"),
        ("CWA: middle of blocks", "Location of CW attention", "Middle"),
        ("CWA", "CW attention", "Yes"), ("DW Conv", "DW conv", "Yes")],
    8: [("Input resolution: 224", "Input resolution", "224"),
        ("Stem layer: stack of 3x3 convs", "Stem layer", "3s2/"),
        ("Group Conv", "Group conv", None), ("Final GAP", "Pooling (final)", "GAP"),
        ("2D SA", "2D SA", None)],
    9: [("ReLU", "Activation", "ReLU"), ("Input resolution: 224", "Input resolution", "224"),
        ("DW Conv", "DW conv", None), ("BN", "Normalization", "BN"), ("2D self-attention", "2D SA", None)],
    10: [("ReLU + Leaky ReLU", "Activation", None), ("InRes: 256", "Input resolution", "256"),
         ("Stem layer: 7x7 conv", "Stem layer", "7s"), ("CNN", "Base architecture", "CNN"),
         ("Pooling at stem", "Pooling (stem)", "Yes")],
}  # fmt: skip


def keyword_matches(paper_keywords: list[tuple[str, str, str | None]], ours: list[str]) -> list[bool]:
    """For each of the paper's keywords, whether one of our "component: value" keywords names it."""
    out = []
    for _, comp, prefix in paper_keywords:
        out.append(any(k.startswith(f"{comp}: {prefix or ''}") for k in ours))
    return out


def default_sat_root() -> Path:
    """``book/data/sat`` of the checkout this package lives in."""
    return Path(__file__).resolve().parents[3] / "book" / "data" / "sat"


def _read_csv(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise DataNotFoundError(
            f"The SAT release file {path} is missing; copy SAT_release.csv and model_features_release.csv "
            "from the authors' repository J-H-Hwang/SAT into that folder or pass data_root=."
        )
    return pd.read_csv(path, index_col=0)


def load_sat_release(
    data_root: str | Path | None = None,
    *,
    similarity_file: str = "SAT_release.csv",
    features_file: str = "model_features_release.csv",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Load and validate the released similarity matrix and component table.

    Args:
        data_root: folder with the two CSV files (default :func:`default_sat_root`).
        similarity_file: name of the N×N similarity CSV (first column = row names).
        features_file: name of the component CSV (first column = model name, then 13 components).

    Returns:
        ``(similarity, components)``: an N×N DataFrame with the same model order on both axes and an
        N×13 DataFrame of component strings in that order.

    Raises:
        DataNotFoundError: a file is missing.
        EnsdivError: a file with missing rows or columns, non-numeric or missing similarities.
    """
    root = Path(data_root) if data_root is not None else default_sat_root()
    sim = _read_csv(root / similarity_file)
    feats = _read_csv(root / features_file)
    rows, cols = [str(r) for r in sim.index], [str(c) for c in sim.columns]
    if set(rows) != set(cols) or len(rows) != len(cols):
        only_r, only_c = sorted(set(rows) - set(cols)), sorted(set(cols) - set(rows))
        raise EnsdivError(
            f"{similarity_file} must be a square matrix with the same models as rows and columns, but it has "
            f"{len(rows)} rows and {len(cols)} columns (rows only: {only_r[:3]}, columns only: {only_c[:3]})."
        )
    sim = sim.loc[rows, rows].apply(pd.to_numeric, errors="coerce")
    if sim.isna().to_numpy().any():
        bad = sim.isna().any(axis=1)
        raise EnsdivError(
            f"{similarity_file} has missing or non-numeric similarities in the rows of "
            f"{list(sim.index[bad])[:3]}; restore the original file."
        )
    missing_cols = [c for c in COMPONENTS if c not in feats.columns]
    if missing_cols:
        raise EnsdivError(
            f"{features_file} lacks the component columns {missing_cols}; restore the original file."
        )
    missing_rows = sorted(set(rows) - set(feats.index))
    if missing_rows:
        raise EnsdivError(
            f"{features_file} has no row for {len(missing_rows)} models of the similarity matrix "
            f"(e.g. {missing_rows[:3]}); restore the original file."
        )
    feats = feats.loc[rows, COMPONENTS].fillna("~").astype(str)
    return sim, feats


def paper_cluster_labels(names: list[str]) -> np.ndarray:
    """Tab. 2 cluster (1–10) of each model name (0 for a name not in the paper's 69)."""
    return np.array([PAPER_CLUSTERS.get(n, 0) for n in names])


def component_differences(components: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per-component Hamming distance between the one-hot codes of every pair of models.

    Each component is one-hot encoded over its distinct values; for a pair (i, j), i < j, the
    difference of component k is the Hamming distance of the two one-hot vectors: 0 if equal, 2 if not.

    Args:
        components: N×K DataFrame of component strings.

    Returns:
        ``(pairs, diffs)``: pairs (P, 2) int indices with P = N(N−1)/2 in row-major upper-triangle
        order, and diffs (P, K) float.
    """
    n = len(components)
    i, j = np.triu_indices(n, k=1)
    diffs = np.empty((len(i), components.shape[1]))
    for k, col in enumerate(components.columns):
        codes = pd.get_dummies(components[col]).to_numpy(dtype=float)  # (N, values) one-hot
        diffs[:, k] = np.abs(codes[i] - codes[j]).sum(axis=1)
    return np.stack([i, j], axis=1), diffs


def component_importance(
    similarity: pd.DataFrame,
    components: pd.DataFrame,
    *,
    n_estimators: int = 500,
    max_depth: int = 12,
    min_samples_split: int = 4,
    learning_rate: float = 0.02,
    n_repeats: int = 10,
    seed: int = 0,
) -> pd.DataFrame:
    """Permutation importance of each component for predicting similarity (Sec. 3.1, Fig. 1, App. B).

    A :class:`sklearn.ensemble.GradientBoostingRegressor` maps the component differences of a pair
    (:func:`component_differences`) to its similarity; each component's importance is the mean drop
    of R² when that column is permuted ``n_repeats`` times. App. B gives 500 stages, depth 12,
    "minimum number of samples" 4 (we read it as ``min_samples_split``) and learning rate 0.02; it
    does not say whether importance is measured on held-out pairs, so we use all pairs, as Fig. 1's
    "how the trained regression model changes the predicted similarity" suggests.

    The permutations are drawn here (not by :func:`sklearn.inspection.permutation_importance`, whose
    definition they follow) so that each pair's contribution is kept: the drop of R² is the mean over pairs
    of each pair's increase of squared error divided by the variance of the similarities, and
    ``table.attrs["per_pair"]`` holds that (P, K) array (mean over the permutations, columns in the order of
    ``components``), for a bootstrap over the pairs (Fig. 1's page).

    Returns:
        DataFrame indexed by component with ``importance`` (mean), ``std`` (over the permutations) and
        ``rank`` (1 = most), sorted; ``attrs``: ``r2`` and ``per_pair``.
    """
    from sklearn.ensemble import GradientBoostingRegressor

    pairs, x = component_differences(components)
    s = similarity.to_numpy()
    y = s[pairs[:, 0], pairs[:, 1]]
    reg = GradientBoostingRegressor(
        n_estimators=n_estimators, max_depth=max_depth, min_samples_split=min_samples_split,
        learning_rate=learning_rate, random_state=seed,
    ).fit(x, y)  # fmt: skip
    rng = np.random.default_rng(seed)
    n_pairs, n_comp = x.shape
    permuted = np.repeat(x[None], n_comp * n_repeats, axis=0)  # (K·R, P, K): the permutations, drawn k-major
    for k in range(n_comp):
        for r in range(n_repeats):
            permuted[k * n_repeats + r, :, k] = x[rng.permutation(n_pairs), k]
    # the differences take few values (539 distinct rows of 2,346 in the release): predicting each distinct row of
    # the original and every permuted copy once gives the same predictions about 100 times faster
    rows, where = np.unique(np.concatenate([x, permuted.reshape(-1, n_comp)]), axis=0, return_inverse=True)
    predicted = reg.predict(rows)[where.reshape(-1)]
    base_sq = (predicted[:n_pairs] - y) ** 2
    sq = (predicted[n_pairs:].reshape(n_comp, n_repeats, n_pairs) - y) ** 2
    total = float(np.mean((y - y.mean()) ** 2))
    inc = (sq - base_sq) / total  # (K, R, P): each pair's increase of squared error / var(y)
    per_pair = inc.mean(1).T  # (P, K)
    drops = inc.mean(2)  # (K, R)
    table = pd.DataFrame(
        {"importance": drops.mean(1), "std": drops.std(1)}, index=list(components.columns)
    ).sort_values("importance", ascending=False)
    table["rank"] = np.arange(1, len(table) + 1)
    table.attrs["r2"] = float(reg.score(x, y))
    table.attrs["per_pair"] = per_pair
    return table


#: The options of App. C's spectral clustering that the paper leaves open, and the values we explored
#: (:func:`spectral_readings`). The first value of each is the default, the reading that recovers
#: the legible clusters 7–10 of Tab. 2 from the released matrix.
READING_OPTIONS: dict[str, tuple] = {
    "affinity": ("similarity", "shifted", "exp"),
    "self_loops": (False, True),
    "laplacian": ("sym", "rw", "unnormalised"),
    "eigenvectors": ("smallest", "largest"),
    "row_normalise": (False, True),
}
#: The default reading of App. C (the first value of each option of :data:`READING_OPTIONS`).
DEFAULT_READING = {k: v[0] for k, v in READING_OPTIONS.items()}


def _affinity(similarity: pd.DataFrame | np.ndarray, *, affinity: str = "similarity",
              self_loops: bool = False) -> np.ndarray:
    """The graph of App. C: ``similarity`` symmetrised, transformed by ``affinity`` and, unless
    ``self_loops``, with a zero diagonal (``"shifted"``: minus its smallest off-diagonal value;
    ``"exp"``: e^s / 100, the mean cross-attack success rate itself)."""
    a = np.asarray(similarity, dtype=float)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise EnsdivError(f"A similarity matrix must be square, got shape {a.shape}.")
    a = (a + a.T) / 2
    off = ~np.eye(len(a), dtype=bool)
    if affinity == "shifted":
        a = a - (a[off].min() if off.any() else 0.0)
    elif affinity == "exp":
        a = np.exp(a) / 100
    elif affinity != "similarity":
        raise EnsdivError(f"affinity must be one of {READING_OPTIONS['affinity']}, got {affinity!r}.")
    if (a < 0).any():
        raise EnsdivError(
            "Spectral clustering needs non-negative similarities; shift or exponentiate them first "
            "(affinity='shifted' or 'exp')."
        )
    if not self_loops:
        np.fill_diagonal(a, 0.0)
    return a


def spectral_features(
    similarity: pd.DataFrame | np.ndarray,
    *,
    n_components: int = 10,
    affinity: str = "similarity",
    self_loops: bool = False,
    laplacian: str = "sym",
    eigenvectors: str = "smallest",
    row_normalise: bool = False,
) -> np.ndarray:
    """Eigenvectors of the normalised graph Laplacian of the similarity graph (Fig. C.1, App. C).

    Default reading: the graph A is the released similarity itself without self-loops (zero diagonal);
    L_sym = I − D^{-1/2} A D^{-1/2} with D_ii = Σ_j A_ij ("we use the normalized Laplacian", App. C);
    the features are the unit eigenvectors of its K smallest eigenvalues, i.e. the K largest of
    D^{-1/2} A D^{-1/2} (our reading of the paper's "K-largest eigenvectors of L"), not rescaled.

    The other readings (:data:`READING_OPTIONS`): ``laplacian="rw"`` solves L v = λ D v (the
    random-walk Laplacian; its eigenvectors are D^{-1/2} times those of L_sym, which is what
    :func:`sklearn.manifold.spectral_embedding` returns), ``"unnormalised"`` uses L = D − A as Sec. 3.1
    writes it; ``eigenvectors="largest"`` takes the largest eigenvalues of L literally;
    ``row_normalise`` scales each row to unit length (Ng et al. 2001's step 4).

    Shape:
        (N, n_components).
    """
    from scipy.linalg import eigh

    a = _affinity(similarity, affinity=affinity, self_loops=self_loops)
    d = a.sum(axis=1)
    if (d <= 0).any():
        raise EnsdivError("Every model needs a positive total similarity to the others (an isolated vertex).")
    if laplacian == "sym":
        vals, vecs = eigh(np.eye(len(a)) - a / np.sqrt(np.outer(d, d)))
    elif laplacian == "rw":
        vals, vecs = eigh(np.diag(d) - a, np.diag(d))
    elif laplacian == "unnormalised":
        vals, vecs = eigh(np.diag(d) - a)
    else:
        raise EnsdivError(f"laplacian must be one of {READING_OPTIONS['laplacian']}, got {laplacian!r}.")
    if eigenvectors not in READING_OPTIONS["eigenvectors"]:
        raise EnsdivError(f"eigenvectors must be one of {READING_OPTIONS['eigenvectors']}, got {eigenvectors!r}.")
    order = np.argsort(vals, kind="stable")
    order = order[:n_components] if eigenvectors == "smallest" else order[::-1][:n_components]
    feats = vecs[:, order]
    feats = feats / np.linalg.norm(feats, axis=0, keepdims=True)
    if row_normalise:
        feats = feats / np.linalg.norm(feats, axis=1, keepdims=True).clip(min=1e-12)
    return feats


def spectral_clusters(
    similarity: pd.DataFrame | np.ndarray,
    *,
    n_clusters: int = 10,
    n_init: int = 100,
    seed: int = 0,
    n_seeds: int = 1,
    **reading: Any,
) -> np.ndarray:
    """Spectral clustering of the similarity graph (Sec. 3.1, App. C); labels 1..K ordered by first member.

    K-means (:class:`sklearn.cluster.KMeans`) runs ``n_init`` times on :func:`spectral_features` with
    each of the seeds ``seed, …, seed + n_seeds − 1`` and keeps the solution of lowest inertia ("run
    K-means 100 times and choose the result with the best final objective", App. C). ``reading``:
    keyword options of :func:`spectral_features` (default: :data:`DEFAULT_READING`). Labels are
    renumbered so that clusters appear in order of their first row in ``similarity``.

    Shape:
        (N,) int in 1..n_clusters.
    """
    return min(_seeded_fits(similarity, n_clusters, n_init, seed, n_seeds, reading), key=lambda f: f[0])[1]


def _seeded_fits(similarity: Any, n_clusters: int, n_init: int, seed: int, n_seeds: int,
                 reading: dict[str, Any]) -> list[tuple[float, np.ndarray]]:
    """(inertia, labels 1..K by first member) of K-means with each seed ``seed, …, seed + n_seeds − 1``, in
    that order (:func:`spectral_clusters` keeps the first of lowest inertia)."""
    from sklearn.cluster import KMeans

    n = np.asarray(similarity).shape[0]
    if not 1 <= n_clusters <= n:
        raise EnsdivError(f"n_clusters must be between 1 and the number of models ({n}), got {n_clusters}.")
    if n_init < 1 or n_seeds < 1:
        raise EnsdivError(f"n_init and n_seeds must be at least 1, got {n_init} and {n_seeds}.")
    feats = spectral_features(similarity, n_components=n_clusters, **reading)
    out = []
    for k in range(n_seeds):
        fit = KMeans(n_clusters, n_init=n_init, random_state=seed + k).fit(feats)
        first = {lab: i + 1 for i, lab in enumerate(dict.fromkeys(fit.labels_.tolist()))}
        out.append((float(fit.inertia_), np.array([first[r] for r in fit.labels_])))
    return out


def spectral_readings(
    similarity: pd.DataFrame | np.ndarray,
    reference: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    n_clusters: int = 10,
    n_init: int = 100,
    n_seeds: int = 10,
    seed: int = 0,
    options: dict[str, tuple] | None = None,
) -> pd.DataFrame:
    """Every reading of App. C (the product of ``options``, default :data:`READING_OPTIONS`) scored
    against a reference clustering by the adjusted Rand index (:func:`sklearn.metrics.adjusted_rand_score`).

    For each reading: ``ARI best`` of the lowest-inertia solution over ``n_seeds`` seeds of ``n_init``
    restarts each, and the lowest/highest ARI of the single-seed solutions, all on the models where
    ``mask`` is true (default all); ``ARI all`` of the best solution on every model. The columns
    ``inertia per seed``, ``ARI per seed`` and ``ARI all per seed`` keep each seed's solution (arrays of
    ``n_seeds``), for an interval over the K-means seeds (:func:`~ensdiv.chapters.attack_similarity.intervals.
    reading_seed_bootstrap`); a displayed table drops them.

    Returns:
        One row per reading (the options as columns), sorted by ``ARI best`` then by simplicity
        (how many options differ from :data:`DEFAULT_READING`).
    """
    import itertools

    from sklearn.metrics import adjusted_rand_score

    options = READING_OPTIONS if options is None else options
    reference = np.asarray(reference)
    mask = np.ones(len(reference), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    rows = []
    for values in itertools.product(*options.values()):
        reading = dict(zip(options, values, strict=True))
        # each seed's solution, and the best over the seeds as spectral_clusters(n_seeds=...) picks it
        fits = _seeded_fits(similarity, n_clusters, n_init, seed, n_seeds, reading)
        singles = [labels for _, labels in fits]
        best = min(fits, key=lambda f: f[0])[1]
        aris = [adjusted_rand_score(reference[mask], lab[mask]) for lab in singles]
        rows.append({**reading, "ARI best": adjusted_rand_score(reference[mask], best[mask]),
                     "ARI lowest seed": min(aris), "ARI highest seed": max(aris),
                     "ARI all": adjusted_rand_score(reference, best),
                     "changes from default": sum(reading[k] != DEFAULT_READING.get(k) for k in reading),
                     "inertia per seed": np.array([inertia for inertia, _ in fits]), "ARI per seed": np.array(aris),
                     "ARI all per seed": np.array([adjusted_rand_score(reference, lab) for lab in singles]),
                     })  # fmt: skip
    table = pd.DataFrame(rows)
    return table.sort_values(["ARI best", "changes from default"], ascending=[False, True]).reset_index(drop=True)


def _tokens(components: pd.DataFrame) -> list[list[str]]:
    return [[f"{c}: {v}" for c, v in row.items()] for _, row in components.iterrows()]


def cluster_keywords(components: pd.DataFrame, labels: np.ndarray, *, top_k: int = 5) -> dict[int, list[str]]:
    """Top-k TF-IDF keywords per cluster (Sec. 3.1, Tab. 2).

    Each "component: value" string is a word and each model a document
    (:class:`sklearn.feature_extraction.text.TfidfVectorizer`, default smooth IDF and L2 row norm);
    a cluster's keyword score is the mean TF-IDF over its models. Ties break alphabetically.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(analyzer=lambda doc: doc, lowercase=False)
    tfidf = vec.fit_transform(_tokens(components)).toarray()
    vocab = np.array(vec.get_feature_names_out())
    labels = np.asarray(labels)
    out: dict[int, list[str]] = {}
    for lab in sorted(set(labels.tolist())):
        mean = tfidf[labels == lab].mean(axis=0)
        order = sorted(range(len(vocab)), key=lambda t: (-round(float(mean[t]), 12), vocab[t]))
        out[int(lab)] = [str(vocab[t]) for t in order[:top_k]]
    return out


def cluster_table(components: pd.DataFrame, labels: np.ndarray, *, top_k: int = 5) -> pd.DataFrame:
    """Tab. 2: one row per cluster with its size, top-k keywords and member models."""
    kw = cluster_keywords(components, labels, top_k=top_k)
    names = np.array(components.index)
    rows = [
        {"cluster": k, "size": int((labels == k).sum()), "keywords": "; ".join(kw[k]),
         "models": ", ".join(names[labels == k])}
        for k in kw
    ]  # fmt: skip
    return pd.DataFrame(rows).set_index("cluster")


# ---- a measured matrix against the released one ------------------------------------------------------------
def compare_with_release(measured: pd.DataFrame | np.ndarray, *, names: list[str] | None = None,
                         release: pd.DataFrame | None = None, data_root: str | Path | None = None) -> dict[str, float]:
    """How closely a measured SAT matrix (Eq. 1) reproduces the released one, on the models both cover.

    The released matrix is exactly symmetric (s(A, B) of Eq. 1 averages both attack directions); a
    measured one is symmetrised as ``(S + Sᵀ) / 2`` (a no-op for :attr:`ensdiv.SatResult.scores`), so
    each unordered pair {A, B} counts once: the pairs are the upper triangle (i < j) in the release's
    model order, N(N − 1)/2 of them (2,346 for the 69 models). Pairs whose measured score is undefined
    (NaN: no image both models classify correctly) are left out and counted.

    Args:
        measured: an N×N matrix: a DataFrame with the model names on both axes, or an array with ``names``.
        names: the model names of an array's rows and columns (as in the release, e.g. ``resnet50``).
        release: the released matrix (default: :func:`load_sat_release` from ``data_root``).
        data_root: folder of the released CSVs when ``release`` is not given.

    Returns:
        ``models`` (common to both), ``models_not_measured`` (of the release), ``pairs`` (off-diagonal
        unordered pairs compared), ``pairs_undefined`` (NaN in the measured matrix), ``pearson`` and
        ``spearman`` (rank correlation with average ranks for ties) over those pairs, the mean
        off-diagonal score of each (``mean_measured``, ``mean_released``), the mean diagonal of each
        (``diagonal_measured``, ``diagonal_released``; the paper: close to ln 100 ≈ 4.6) and
        ``asymmetry_measured`` (the largest |S − Sᵀ| before symmetrising).

    Raises:
        InvalidInputError: a non-square matrix, names that are missing, repeated, of the wrong length
            or not in the release, or fewer than 3 models in common (fewer than 3 pairs).

    Example:
        >>> rel = pd.DataFrame([[4.6, 2.0, 1.0], [2.0, 4.6, 3.0], [1.0, 3.0, 4.6]], index=list("abc"),
        ...                    columns=list("abc"))
        >>> out = compare_with_release(rel * 0.5, release=rel)
        >>> round(out["pearson"], 6), round(out["spearman"], 6), out["pairs"], out["diagonal_measured"]
        (1.0, 1.0, 3, 2.3)
    """
    if release is None:
        release = load_sat_release(data_root)[0]
    scores, labels = _named_square(measured, names)
    unknown = [n for n in labels if n not in release.index]
    if unknown:
        raise InvalidInputError(f"{len(unknown)} measured models are not in the released matrix (e.g. "
                                f"{unknown[:3]}); use the release's names, e.g. {list(release.index[:2])}.")
    common = [n for n in release.index if n in set(labels)]
    if len(common) < 3:
        raise InvalidInputError(f"Comparing with the release needs at least 3 models in common, got {len(common)}.")
    pos = {n: k for k, n in enumerate(labels)}
    idx = [pos[n] for n in common]
    ours = scores[np.ix_(idx, idx)]
    asym = float(np.nanmax(np.abs(ours - ours.T))) if np.isfinite(ours).any() else float("nan")
    ours = (ours + ours.T) / 2
    theirs = release.loc[common, common].to_numpy(dtype=float)
    theirs = (theirs + theirs.T) / 2
    i, j = np.triu_indices(len(common), k=1)
    a, b = ours[i, j], theirs[i, j]
    ok = np.isfinite(a)
    a, b = a[ok], b[ok]
    return {
        "models": len(common), "models_not_measured": len(release) - len(common),
        "pairs": int(ok.sum()), "pairs_undefined": int((~ok).sum()),
        "pearson": _pearson(a, b), "spearman": _pearson(_ranks(a), _ranks(b)),
        "mean_measured": float(a.mean()) if len(a) else float("nan"), "mean_released": float(b.mean()),
        "diagonal_measured": float(np.nanmean(np.diag(ours))), "diagonal_released": float(np.diag(theirs).mean()),
        "asymmetry_measured": asym,
    }


def _named_square(measured: pd.DataFrame | np.ndarray, names: list[str] | None) -> tuple[np.ndarray, list[str]]:
    """The measured matrix as a float array and its model names, validated."""
    if isinstance(measured, pd.DataFrame):
        if names is not None:
            raise InvalidInputError("Pass names only with an array; a DataFrame carries its own names.")
        if [str(c) for c in measured.columns] != [str(r) for r in measured.index]:
            raise InvalidInputError("The measured DataFrame needs the same models, in the same order, as rows "
                                    "and columns.")
        names, measured = [str(r) for r in measured.index], measured.to_numpy(dtype=float)
    scores = np.asarray(measured, dtype=float)
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
        raise InvalidInputError(f"The measured SAT matrix must be square (N, N), got shape {scores.shape}.")
    if names is None:
        raise InvalidInputError("Name the rows of a measured array: compare_with_release(array, names=[...]).")
    names = [str(n) for n in names]
    if len(names) != len(scores) or len(set(names)) != len(names):
        raise InvalidInputError(f"names must be {len(scores)} distinct model names, one per row, got "
                                f"{len(names)} ({len(set(names))} distinct).")
    return scores, names


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their positions), as Spearman's ρ needs."""
    return pd.Series(x).rank(method="average").to_numpy()


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's r; NaN when fewer than 2 values or either side is constant."""
    if len(a) < 2:
        return float("nan")
    a, b = a - a.mean(), b - b.mean()
    denom = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denom) if denom > 0 else float("nan")
