"""Intervals for the training-methods claims: paired bootstraps over test images, model bootstraps."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy import stats

import ensdiv as ed
from ensdiv.chapters.training_methods.analysis import GROUPS, other_loss_or_data, pair_angles
from ensdiv.chapters.training_methods.groups import group_p, same_size_groupings
from ensdiv.chapters.training_methods.paper import CATEGORIES, CATEGORY_LABELS
from ensdiv.chapters.training_methods.population import Outputs, Population, calibrated_probs
from ensdiv.chapters.zoo import category_of
from ensdiv.errors import InvalidInputError

# ---- intervals for the "Paper vs this run" claims ----------------------------------------------------------
# Every quantity a claim of this chapter compares is an ed.report.Estimate: a paired bootstrap over the test
# images (one resample of image indices serves every quantity of a page, so differences are paired), or a
# bootstrap over the models (ed.report.correlation) for a trend across the population. A quantity that cannot
# be computed (a category without models in the band, too few models) is a NaN estimate, so its check shows as not
# computable instead of vanishing.
NAN = float("nan")
#: per-model quantities :func:`category_estimates` averages over a category's models
CATEGORY_COLUMNS = ("error_inconsistency", "error_consistency", "ensemble_accuracy", "conversion_rate", "n11", "n00")
#: the models trained with another loss or on other data than the base (Fig. 5's "different loss and/or dataset")
DIVERSE_CATEGORIES = ("framework", "dataset")


def missing_estimate(source: str = "evaluation samples") -> Any:
    """A quantity that would carry an interval but cannot be computed on this run (a category without models, too
    few models): a NaN :class:`ed.report.Estimate`, so its check shows as not computable and is still judged as
    built from estimates."""
    return ed.report.Estimate(NAN, np.array([]), source, "bootstrap")


def bootstrap(per: Mapping[str, Any], statistic: Mapping[str, Any] | None = None, *, n_resamples: int,
               seed: int) -> dict[str, Any]:
    """:func:`ed.report.paired_bootstrap`, quiet about scipy's own (unused) confidence interval when a statistic
    is degenerate or NaN on some resamples (the report's intervals come from the replicates)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=stats.DegenerateDataWarning)
        warnings.filterwarnings("ignore", message="Mean of empty slice", category=RuntimeWarning)
        return ed.report.paired_bootstrap(per, statistic=statistic, n_resamples=n_resamples, seed=seed)


def pair_correct(out: Outputs, temps: torch.Tensor, keys: Sequence[str], split: str = "test"
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per sample of ``split``: whether the base is right (N,), whether each of ``keys`` is right (N, M), and
    whether each one's ensemble with the base is right (N, M) (mean of the two calibrated probability vectors,
    as in :func:`model_table`); all bool."""
    probs = calibrated_probs(out, temps, split)
    y = out.labels[split]
    b, idx = out.index(out.base), [out.index(k) for k in keys]
    base = (probs[b].argmax(-1) == y).numpy()
    other = (probs[idx].argmax(-1) == y).numpy().T.reshape(len(y), len(idx))
    ens = ((probs[idx] + probs[b]).argmax(-1) == y).numpy().T.reshape(len(y), len(idx))
    return base, other, ens


def ensemble_correct(out: Outputs, temps: torch.Tensor, keys: Sequence[str], split: str = "test") -> np.ndarray:
    """Per sample of ``split``: whether the ensemble of ``keys`` (mean of calibrated probabilities) is right."""
    probs = calibrated_probs(out, temps, split)[[out.index(k) for k in keys]].mean(0)
    return (probs.argmax(-1) == out.labels[split]).numpy()


def _kappa_mean(base: np.ndarray, other: np.ndarray) -> float:
    """Mean over the columns of ``other`` of Cohen's κ between the base's and that model's correctness
    (:func:`ensdiv.metrics.error_consistency`); a model with undefined κ is skipped."""
    b, o = base[:, None].astype(float), other.astype(float)
    pa, pb = b.mean(0), o.mean(0)
    c_exp = pa * pb + (1 - pa) * (1 - pb)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(c_exp < 1 - 1e-12, ((b == o).mean(0) - c_exp) / (1 - c_exp), np.nan)
    return float(np.nanmean(k)) if np.isfinite(k).any() else NAN


def _conversion_mean(base: np.ndarray, other: np.ndarray, ens: np.ndarray) -> float:
    """Mean over models of the conversion rate (:func:`ensdiv.metrics.conversion_rate`); a model without an
    inconsistent sample is skipped."""
    incons = base[:, None] != other
    n = incons.sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(n > 0, (incons & ens).sum(0) / np.maximum(n, 1), np.nan)
    return float(np.nanmean(rate)) if np.isfinite(rate).any() else NAN


def category_estimates(out: Outputs, temps: torch.Tensor, pop: Population, columns: Sequence[str], *,
                       n_resamples: int, seed: int, split: str = "test") -> dict[str, Any]:
    """Category means of per-model quantities with the base, from one paired bootstrap over the samples of
    ``split``, keyed ``"<column> <Category>"`` (the keys of :func:`paper_category_values`).

    Columns (:data:`CATEGORY_COLUMNS`): ``error_inconsistency``, ``n11``, ``n00`` (fractions of samples),
    ``ensemble_accuracy`` (% of samples the base + model ensemble gets right), ``error_consistency`` (κ of
    Geirhos et al., mean over the category's models) and ``conversion_rate`` (mean over its models). A mean of
    per-sample fractions is a per-sample mean, so the bootstrap resamples the samples once for every model and
    category: differences between categories are paired. A category without models in the band is a NaN
    estimate (:func:`missing_estimate`).

    Returns:
        ``{name: Estimate}``.
    """
    bad = sorted(set(columns) - set(CATEGORY_COLUMNS))
    if bad:
        raise InvalidInputError(f"Unknown column(s) {bad}; valid: {', '.join(CATEGORY_COLUMNS)}.")
    base, other, ens = pair_correct(out, temps, pop.members, split)
    result: dict[str, Any] = {}
    per: dict[str, Any] = {}
    stat: dict[str, Any] = {}
    for c in CATEGORIES:
        cols = [i for i, k in enumerate(pop.members) if pop.category[k] == c]
        for col in columns:
            name = f"{col} {CATEGORY_LABELS[c]}"
            result[name] = missing_estimate()
            if not cols:
                continue
            o, e = other[:, cols], ens[:, cols]
            if col == "error_inconsistency":
                per[name] = (base[:, None] != o).mean(1)
            elif col == "n11":
                per[name] = (base[:, None] & o).mean(1)
            elif col == "n00":
                per[name] = (~base[:, None] & ~o).mean(1)
            elif col == "ensemble_accuracy":
                per[name] = 100 * e.mean(1)
            elif col == "error_consistency":
                per[name], stat[name] = (base, o), _kappa_mean
            else:
                per[name], stat[name] = (base, o, e), _conversion_mean
    if per:
        result.update(bootstrap(per, stat, n_resamples=n_resamples, seed=seed))
    return result


def _same_group(estimates: Mapping[str, Any], names: Sequence[str], what: str) -> list[Any] | None:
    """The estimates named, all of one paired bootstrap; None when one of them is missing or NaN."""
    ests = [estimates.get(n) for n in names]
    if not ests or not all(isinstance(e, ed.report.Estimate) and math.isfinite(e.value) for e in ests):
        return None
    if len({e.group for e in ests}) != 1 or any(e.kind != "bootstrap" for e in ests):
        raise InvalidInputError(f"{what}() needs estimates of one paired_bootstrap call.")
    return ests


def highest_of(estimates: Mapping[str, Any], names: Sequence[str]) -> Any:
    """The largest of several estimates of one paired bootstrap, taken replicate by replicate (which one is
    largest may change between resamples: the bootstrap of a maximum, not of one chosen beforehand). A NaN
    estimate (:func:`missing_estimate`) when any of them is missing or NaN (a comparison with "every other
    category" needs every category). The replicates are moved so that their mean is the estimate
    (:func:`ed.report.extreme_of`: the bootstrap of a maximum sits above the sample's maximum)."""
    ests = _same_group(estimates, names, "highest_of")
    if ests is None:
        return missing_estimate()
    return ed.report.extreme_of(dict(zip(names, ests, strict=True)), names)


def mean_of(estimates: Mapping[str, Any], names: Sequence[str]) -> Any:
    """The mean of several estimates of one paired bootstrap, replicate by replicate (a category's mean over its
    pairs); a NaN estimate when ``names`` is empty or any of them is missing or NaN."""
    ests = _same_group(estimates, names, "mean_of")
    if ests is None:
        return missing_estimate()
    reps = np.mean(np.stack([np.asarray(e.replicates, dtype=float) for e in ests]), axis=0)
    return ed.report.Estimate(float(np.mean([e.value for e in ests])), reps, ests[0].source, "bootstrap",
                              ests[0].group)


def model_correlation(x: Any, y: Any, *, seed: int, n_resamples: int, method: str = "spearman",
                      min_models: int = 4) -> Any:
    """:func:`ed.report.correlation` of ``x`` and ``y`` over models (a bootstrap over the models), or a NaN
    estimate when fewer than ``min_models`` models have both values or either series is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < min_models or np.ptp(x) == 0 or np.ptp(y) == 0:
        return missing_estimate()
    with warnings.catch_warnings():  # a resample with a constant series gives NaN, left out of the interval
        warnings.simplefilter("ignore")
        return ed.report.correlation(x, y, method=method, seed=seed, n_resamples=n_resamples, source="models")


def category_correlation(table: pd.DataFrame, column: str, *, seed: int, n_resamples: int,
                         min_categories: int = 3) -> Any:
    """Spearman's ρ between the category's rank (Reinit 1 ... Dataset 5) and ``column`` over the models of
    ``table``, with a bootstrap over the models (:func:`model_correlation`); a NaN estimate when fewer than
    ``min_categories`` categories or 4 models are present (a trend over two categories is one comparison)."""
    t = table[table["category"].isin(CATEGORIES)]
    if t["category"].nunique() < min_categories:
        return missing_estimate()
    rank = t["category"].map({c: i for i, c in enumerate(CATEGORIES)})
    return model_correlation(rank, t[column], seed=seed, n_resamples=n_resamples)


def _angle_gap(theta: np.ndarray, only_base: np.ndarray, only_other: np.ndarray) -> float:
    if not only_base.any() or not only_other.any():
        return NAN
    return float(theta[only_base].mean() - theta[only_other].mean())


def angle_gap_estimates(angles: Mapping[str, pd.DataFrame | None], *, n_resamples: int, seed: int) -> dict[str, Any]:
    """Fig. 3: per category's pair (``{category: pair_angles(...) or None}``), ``"gap <Category>"`` = mean θ
    where only the base is right minus mean θ where only the other model is right (degrees), from one paired
    bootstrap over the test samples (every pair is scored on the same samples); a NaN estimate for a missing pair."""
    result: dict[str, Any] = {f"gap {CATEGORY_LABELS[c]}": missing_estimate() for c in angles}
    per = {f"gap {CATEGORY_LABELS[c]}": (a["theta"].to_numpy(float), (a["group"] == GROUPS[1]).to_numpy(),
                                          (a["group"] == GROUPS[2]).to_numpy())
           for c, a in angles.items() if a is not None}
    if per:
        result.update(bootstrap(per, dict.fromkeys(per, _angle_gap), n_resamples=n_resamples, seed=seed))
    return result


def pair_gap(angles: pd.DataFrame) -> float:
    """Fig. 3's gap of one pair (a :func:`pair_angles` frame): mean θ where only the base is right minus mean θ
    where only the other model is right (degrees); NaN when either set is empty."""
    return _angle_gap(angles["theta"].to_numpy(float), (angles["group"] == GROUPS[1]).to_numpy(),
                      (angles["group"] == GROUPS[2]).to_numpy())


def pair_share(angles: pd.DataFrame) -> float:
    """Fig. 4's class share of one pair (a :func:`pair_angles` frame): η² of θ − 45° by class."""
    return class_share(angles["theta"].to_numpy(float) - 45.0, angles["label"].to_numpy(int))


def per_model(out: Outputs, temps: torch.Tensor, keys: Sequence[str], statistic: Any, *, name: str) -> pd.Series:
    """``statistic`` (:func:`pair_gap`, :func:`pair_share`) of every model of ``keys`` paired with the base, one
    number per model: what a claim about categories of models compares (:func:`group_estimates` resamples the
    models), where one pair per category would speak for that pair only."""
    probs = calibrated_probs(out, temps, "test")  # once for every pair
    return pd.Series({k: float(statistic(pair_angles(out, temps, k, probs=probs))) for k in keys}, name=name,
                     dtype=float)


def _class_means(d: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    counts = np.bincount(y)
    present = counts > 0
    return np.bincount(y, weights=d)[present] / counts[present], counts[present]


def class_spread(dtheta: np.ndarray, labels: np.ndarray) -> float:
    """Standard deviation across classes of the per-class mean of θ − 45° (Fig. 4's bars; classes present)."""
    means, _ = _class_means(dtheta, labels)
    return float(means.std(ddof=1)) if len(means) > 1 else NAN


def class_share(dtheta: np.ndarray, labels: np.ndarray) -> float:
    """η²: the share of the variance of θ over samples that the class explains (between-class sum of squares
    over the total). Unlike :func:`class_spread` it does not grow when θ is merely noisier. NaN when θ does not
    vary (a standard deviation below 1e-6 degrees: a share of rounding errors means nothing)."""
    if len(dtheta) < 2 or float(np.std(dtheta)) < 1e-6:
        return NAN
    means, counts = _class_means(dtheta, labels)
    total = float(((dtheta - dtheta.mean()) ** 2).sum())
    return float((counts * (means - dtheta.mean()) ** 2).sum() / total)


def group_share(dtheta: np.ndarray, labels: np.ndarray, groups: np.ndarray) -> float:
    """η² of the class *groups* (``groups[c]`` is class c's group): :func:`class_share` with each sample labelled
    by its class's group."""
    return class_share(dtheta, np.asarray(groups)[labels])


def class_estimates(angles: Mapping[str, pd.DataFrame | None], *, n_resamples: int, seed: int,
                    groups: np.ndarray | None = None) -> dict[str, Any]:
    """Fig. 4: per category's pair, ``"class spread <Category>"`` (:func:`class_spread`), ``"class share
    <Category>"`` (:func:`class_share`) and, with ``groups`` (:func:`class_groups`), ``"group share <Category>"``
    (:func:`group_share`) and ``"group p <Category>"`` (:func:`group_p`, the permutation p over groupings, its
    interval over test-image resamples), from one paired bootstrap over the test samples; a NaN estimate for a
    missing pair or missing groups."""
    kinds = ("class spread", "class share", "group share", "group p")
    result: dict[str, Any] = {f"{w} {CATEGORY_LABELS[c]}": missing_estimate() for c in angles for w in kinds}
    fns: dict[str, Any] = {"class spread": class_spread, "class share": class_share}
    if groups is not None:
        groupings = same_size_groupings(groups)
        fns["group share"] = lambda d, y: group_share(d, y, groups)
        fns["group p"] = lambda d, y: group_p(d, y, groups, groupings)
    per, stat = {}, {}
    for c, a in angles.items():
        if a is None:
            continue
        arrays = (a["theta"].to_numpy(float) - 45.0, a["label"].to_numpy(int))
        for w, fn in fns.items():
            per[f"{w} {CATEGORY_LABELS[c]}"], stat[f"{w} {CATEGORY_LABELS[c]}"] = arrays, fn
    if per:
        result.update(bootstrap(per, stat, n_resamples=n_resamples, seed=seed))
    return result


def first_additions(out: Outputs, temps: torch.Tensor, high: Sequence[str], low: Sequence[str]) -> pd.DataFrame:
    """Fig. 5, the most useful first addition by kind: for each high-accuracy model, the low-accuracy model
    whose two-model ensemble with it is the most accurate on the *validation* split, among the models trained
    with another loss or on other data than the high model (:func:`other_loss_or_data`, column ``diverse``) and
    among the others (``similar``); None when a kind has no candidate."""
    zval = calibrated_probs(out, temps, "val")
    y = out.labels["val"]
    rows = []
    for h in high:
        row: dict[str, Any] = {"high": h}
        other = [k for k in low if other_loss_or_data(out, h, k)]
        for kind, pool in (("diverse", other), ("similar", [k for k in low if k not in other])):
            accs = {k: float(((zval[out.index(h)] + zval[out.index(k)]).argmax(-1) == y).double().mean())
                    for k in pool if k != h}
            row[kind] = max(accs, key=accs.get) if accs else None  # ties: the first in ``low``
            row[f"{kind}_val_acc"] = accs[row[kind]] if accs else NAN
        rows.append(row)
    return pd.DataFrame(rows).set_index("high")


def combination_gain_images(curves: pd.DataFrame) -> dict[str, np.ndarray]:
    """Fig. 6 centre, per pair: the per-test-image gain (points) of the mix chosen on validation over the single
    representation chosen on validation (what :func:`combination_gains` bootstraps); pairs without a mix or a
    single representation are left out."""
    per = {}
    for other, g in curves.groupby("other", sort=False):
        val = g.groupby("frac_base")["val_acc"].mean()
        mixes, ends = val[(val.index > 0) & (val.index < 1)], val[val.index.isin([0.0, 1.0])]
        if mixes.empty or ends.empty:
            continue
        fm, fe = float(mixes.idxmax()), float(ends.idxmax())

        def right(f: float, g: pd.DataFrame = g) -> np.ndarray:
            return np.stack(g.loc[g["frac_base"] == f, "test_correct"].tolist()).astype(float).mean(0)

        per[other] = 100 * (right(fm) - right(fe))
    return per


def combination_gains(curves: pd.DataFrame, *, n_resamples: int, seed: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Fig. 6 centre, with every choice made on the validation split: per pair (``other``), the mixing fraction
    0 < p < 1 with the best validation accuracy (mean over draws) and the better single representation
    (p = 0 or 1) by validation accuracy; the gain is the chosen mix's test accuracy minus the chosen single's
    (points), with a paired bootstrap over the probes' test samples (per-sample correctness averaged over draws).

    Returns:
        ``(table, {other: Estimate})`` (a NaN estimate for a pair without a mix or a single representation).
    """
    rows, per = [], {}
    for other, g in curves.groupby("other", sort=False):
        val = g.groupby("frac_base")["val_acc"].mean()
        mixes, ends = val[(val.index > 0) & (val.index < 1)], val[val.index.isin([0.0, 1.0])]
        if mixes.empty or ends.empty:
            rows.append({"other": other, "mix": NAN, "single": NAN, "gain (points)": NAN})
            continue
        fm, fe = float(mixes.idxmax()), float(ends.idxmax())

        def right(f: float, g: pd.DataFrame = g) -> np.ndarray:
            return np.stack(g.loc[g["frac_base"] == f, "test_correct"].tolist()).astype(float).mean(0)

        per[other] = 100 * (right(fm) - right(fe))
        rows.append({"other": other, "mix": fm, "single": fe, "gain (points)": float(per[other].mean())})
    est: dict[str, Any] = {other: missing_estimate() for other in curves["other"].unique()}
    if per:
        est.update(bootstrap(per, n_resamples=n_resamples, seed=seed))
    return pd.DataFrame(rows).set_index("other"), est


def _first_reaching(ks: np.ndarray, censored: float, gap: float):
    def stat(target: np.ndarray, curve: np.ndarray) -> float:
        reached = np.flatnonzero(curve.mean(0) >= target.mean() - gap)
        if reached.size and reached[0] == 0:
            return NAN  # reached at the grid's smallest k: censored below, no number to compare
        return float(ks[reached[0]]) if reached.size else censored
    return stat


def features_needed_estimates(curves: Mapping[str, pd.DataFrame], target_correct: np.ndarray, *,
                              target_gap: float = 0.0, n_resamples: int, seed: int) -> dict[str, Any]:
    """Fig. 6 right: per pair (``{other: full curve of features_needed(..., full=True)}``), the first k whose
    test accuracy reaches the target (the test accuracy of ``target_correct``, the base's full-representation
    probe, minus ``target_gap`` points), recomputed on every resample of one paired bootstrap over the test
    samples (target and curves resampled together). A pair that never reaches it counts as needing one step
    more than all its dimensions (``total`` plus the smallest k); one that reaches it at the grid's smallest k
    is censored below (NaN on that resample: not computable, never a tie)."""
    per, stat = {}, {}
    for other, c in curves.items():
        ks = c["k"].to_numpy(float)
        per[other] = (np.asarray(target_correct, dtype=float), np.stack(c["test_correct"].tolist(), 1).astype(float))
        stat[other] = _first_reaching(ks, float(c["total"].iloc[0] + ks[0]), target_gap / 100)
    return bootstrap(per, stat, n_resamples=n_resamples, seed=seed) if per else {}


def base_category(out: Outputs) -> str:
    """The base model's own category (its zoo key's at smoke/cpu, its models.csv row at paper scale), for
    grouping it with other models (Fig. 7); the analysis elsewhere labels it ``"base"``."""
    if out.root is not None:
        table = pd.read_csv(out.root / "models.csv")
        return str(table.loc[table["name"] == out.base, "category"].iloc[0])
    return category_of(out.base)


def downstream_estimates(res: pd.DataFrame, choice: Mapping[str, str | None], *, n_resamples: int, seed: int
                         ) -> dict[str, Any]:
    """Fig. 7's quantities: the test score (%) of each chosen row of :func:`downstream_choices`, from one paired
    bootstrap over the downstream test images: accuracy from the per-sample correctness, or, for multi-label
    rows (``test_correct`` = ``(scores, targets)``, VOC at paper scale), the 11-point mAP of each resample; a NaN
    estimate where nothing was chosen."""
    rows = res.set_index("models")
    per: dict[str, Any] = {}
    stat: dict[str, Any] = {}
    for name, m in choice.items():
        if m is None:
            continue
        value = rows.loc[m, "test_correct"]
        if isinstance(value, tuple):
            per[name] = value
            stat[name] = _map11_percent
        else:
            per[name] = 100 * np.asarray(value, dtype=float)
    return {name: missing_estimate() for name in choice} | (
        bootstrap(per, stat, n_resamples=n_resamples, seed=seed) if per else {})


def _map11_percent(scores: np.ndarray, targets: np.ndarray) -> float:
    """11-point mAP (%) over the classes with a positive (a resample may leave a rare class without one)."""
    keep = targets.sum(0) > 0
    if not keep.any():
        return NAN
    return 100 * float(ed.metrics.mean_average_precision_11pt(torch.as_tensor(scores[:, keep]),
                                                              torch.as_tensor(targets[:, keep]), validate_args=False))


def downstream_choices(res: pd.DataFrame, category: Mapping[str, str], top: str) -> dict[str, str | None]:
    """Fig. 7's selections, each the row with the best downstream *validation* accuracy among: every single
    model (``best single``); ``top`` alone (the best upstream model); the pairs without ``top`` and the pairs
    with it; the pairs joining two categories and the pairs within one. None where a set is empty."""
    def best(mask: pd.Series) -> str | None:
        rows = res[mask]
        return None if rows.empty else str(rows.loc[rows["val_acc"].idxmax(), "models"])

    members = res["models"].str.split(" + ", regex=False)
    pair = res["kind"] == "pair"
    with_top = members.apply(lambda m: top in m)
    mixed = members.apply(lambda m: len({category[k] for k in m}) > 1)
    return {"best single": best(res["kind"] == "single"), "top upstream model": best(res["models"] == top),
            "best pair without the top upstream model": best(pair & ~with_top),
            "best pair with the top upstream model": best(pair & with_top),
            "best pair across categories": best(pair & mixed), "best pair within a category": best(pair & ~mixed)}
