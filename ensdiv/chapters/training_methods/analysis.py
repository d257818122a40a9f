"""Specialisation, greedy ensembles and linear probes of the training-methods chapter (Figs. 3-7)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
import torch

import ensdiv as ed
from ensdiv import metrics as mt
from ensdiv.chapters.training_methods.paper import VAL_SET
from ensdiv.chapters.training_methods.population import (
    Outputs,
    _load_array,
    _split_ids,
    calibrated_probs,
    check_aligned,
)
from ensdiv.chapters.zoo import EVAL_SET
from ensdiv.errors import InvalidInputError
from ensdiv.train import probe

# ---- specialisation (Fig. 3, 4) ---------------------------------------------------------------------------
GROUPS = ("both correct", "only base correct", "only other correct", "both wrong")


def pair_angles(out: Outputs, temps: torch.Tensor, other: str, split: str = "test", *,
                probs: torch.Tensor | None = None) -> pd.DataFrame:
    """Per sample: θ = atan2(conf_base, conf_other) in degrees (:func:`ensdiv.metrics.specialization_angle`;
    high = the base more confident), each model's confidence being its calibrated maximum softmax
    probability, the correctness group (:data:`GROUPS`) and the label. ``probs``: the calibrated probabilities
    of ``split`` when the caller already has them (one model after another: computed once)."""
    probs = calibrated_probs(out, temps, split) if probs is None else probs
    y = out.labels[split]
    pb, po = probs[out.index(out.base)], probs[out.index(other)]
    theta = mt.specialization_angle(pb.max(-1).values, po.max(-1).values)
    cb, co = pb.argmax(-1) == y, po.argmax(-1) == y
    group = np.select([(cb & co).numpy(), (cb & ~co).numpy(), (~cb & co).numpy()], GROUPS[:3], GROUPS[3])
    return pd.DataFrame({"theta": theta.numpy(), "group": group, "label": y.numpy()})


def class_specialization(angles: pd.DataFrame, num_classes: int, *, n_perm: int = 1000, seed: int = 0
                         ) -> tuple[pd.DataFrame, float, float]:
    """Per-class specialisation (Fig. 4): the mean of θ − 45° over each class's samples (> 0: the base is
    the more confident on that class), its spread across classes (standard deviation), and the
    permutation p-value of that spread (class labels shuffled across samples ``n_perm`` times).

    Returns:
        ``(per_class, spread, p)``.
    """
    d = torch.tensor(angles["theta"].to_numpy() - 45.0, dtype=torch.float64)
    y = torch.tensor(angles["label"].to_numpy(), dtype=torch.long)

    def spread_of(labels: torch.Tensor) -> torch.Tensor:
        sums = torch.zeros(num_classes, dtype=torch.float64).index_add_(0, labels, d)
        cnt = torch.bincount(labels, minlength=num_classes).double().clamp_min(1)
        return (sums / cnt).std()

    g = torch.Generator().manual_seed(seed)
    observed = float(spread_of(y))
    null = torch.stack([spread_of(y[torch.randperm(len(y), generator=g)]) for _ in range(n_perm)])
    p = float(((null >= observed).sum() + 1) / (n_perm + 1))
    per = angles.assign(dtheta=d.numpy()).groupby("label").agg(
        mean_dtheta=("dtheta", "mean"), n=("dtheta", "size"),
        only_base=("group", lambda s: float((s == GROUPS[1]).mean())),
        only_other=("group", lambda s: float((s == GROUPS[2]).mean())))
    return per, observed, p


# ---- greedy ensembles of a high-accuracy model with lower-accuracy ones (Fig. 5) ---------------------------
def high_low_lists(accuracy: Mapping[str, float], *, n_high: int, low_gap: float, mode: str = "points"
                   ) -> tuple[list[str], list[str]]:
    """The ``n_high`` most accurate models (validation), and every lower-accuracy model: with ``mode="points"``
    at least ``low_gap`` points below the least accurate of them; with ``mode="error_ratio"`` making at least
    ``low_gap`` times its errors (the paper's Fig. 5 gap carried over as a ratio of errors:
    :data:`PAPER_LOW_ERROR_RATIO`, 1.315, from BiT-1k's 82.85 % and the best low model's 77.44 %)."""
    if mode not in ("points", "error_ratio"):
        raise InvalidInputError(f"Unknown low-accuracy rule {mode!r}; valid: points, error_ratio.")
    ranked = sorted(accuracy, key=lambda k: -accuracy[k])
    high = ranked[:n_high]
    least = min(accuracy[k] for k in high)
    floor = least - low_gap / 100 if mode == "points" else 1 - low_gap * (1 - least)
    low = [k for k in ranked if k not in high and accuracy[k] < floor]
    if not low:
        raise InvalidInputError(f"No model is below {100 * floor:.2f} % ({low_gap:g} {mode.replace('_', ' ')} from "
                                f"the high-accuracy models {high}); lower low_gap.")
    return high, low


def greedy_with_low(out: Outputs, temps: torch.Tensor, high: Sequence[str], low: Sequence[str], *,
                    max_size: int) -> pd.DataFrame:
    """Greedy selection (:func:`ensdiv.ensembles.greedy_select`, mean of calibrated probabilities) on the
    validation split, starting from each high-accuracy model and adding only low-accuracy ones; the
    chosen ensemble is then scored on the test split."""
    zval = out.logits["val"] / temps[:, None, None]
    ptest = calibrated_probs(out, temps, "test")
    ytest = out.labels["test"]
    cand = [out.index(k) for k in low]
    rows = []
    for h in high:
        chosen, path = ed.ensembles.greedy_select(zval, out.labels["val"], start=out.index(h), candidates=cand,
                                                  max_size=max_size, how="mean_probs")
        acc = lambda idx: float((ptest[idx].mean(0).argmax(-1) == ytest).double().mean())  # noqa: E731
        keys = [out.keys[i] for i in chosen]
        rows.append({"high": h, "high_test_acc": acc([chosen[0]]), "added": keys[1:],
                     "added_categories": [out.category[k] for k in keys[1:]],
                     "max_added_test_acc": max((acc([i]) for i in chosen[1:]), default=float("nan")),
                     "val_acc_path": [round(float(v), 4) for v in path], "ensemble_test_acc": acc(chosen),
                     "gain": acc(chosen) - acc([chosen[0]])})
    return pd.DataFrame(rows).set_index("high")


# ---- features and linear probes (Fig. 6, 7) -------------------------------------------------------------
def _feature_set(cfg: Any, split: str) -> ed.TensorSet:
    seed = cfg["seed"]
    if split == "train":
        return ed.get_dataset("fmnist/train").subset(cfg["probe_train"], seed=seed)
    if split == "val":
        return ed.get_dataset(VAL_SET).subset(cfg["probe_val"], seed=seed)
    if split == "test":
        return ed.get_dataset(EVAL_SET[cfg["scale"]]).subset(cfg["probe_test"], seed=seed)
    if split == "down":
        return ed.get_dataset(cfg["downstream_set"])
    raise InvalidInputError(f"Unknown feature split {split!r}; valid: train, val, test, down.")


def probe_features(cfg: Any, out: Outputs, keys: Sequence[str], split: str) -> tuple[dict[str, torch.Tensor],
                                                                                      torch.Tensor]:
    """Normalised pre-logit features (``cfg.normalize``, :func:`ensdiv.train.probe.normalize_features`) of
    ``keys`` on ``split`` and its labels; lengths and (at paper scale) sample ids checked."""
    if out.root is not None:
        feats = {k: _load_array(out.root / k / f"features_{split}.npy", f"{k} {split} features").float()
                 for k in keys}
        labels = _load_array(out.root / f"labels_{split}.npy", f"{split} labels").long()
        check_aligned(feats, ids=_split_ids(out.root, keys, split), n=len(labels), what=f"{split} features")
    else:
        data = _feature_set(cfg, split)
        feats = {k: ed.predict(out.recipes[k], data, features=True)[1].float() for k in keys}
        labels = data.y
        check_aligned(feats, n=len(labels), what=f"{split} features")
    if cfg["normalize"] == "standardize":
        raise InvalidInputError("normalize='standardize' needs the training split's statistics; this chapter "
                                "normalises per sample ('l2') or not at all ('none').")
    return {k: probe.normalize_features(v, cfg["normalize"]) for k, v in feats.items()}, labels


def probe_device(cfg: Any) -> torch.device:
    """Where the probes run: ``cfg.probe_device`` (``"cpu"``, ``"cuda"``, or ``"auto"``: the GPU when there is one;
    the paper preset's ImageNet features, 1.28 M x 2,048, are fit on the training device).

    Raises:
        InvalidInputError: ``"cuda"`` asked for on a machine without one, or an unknown name."""
    want = cfg.get("probe_device", "cpu")
    if want == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if want not in ("cpu", "cuda"):
        raise InvalidInputError(f"Unknown probe_device {want!r}; valid: auto, cpu, cuda.")
    if want == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError("probe_device='cuda' but this machine has no CUDA device; use 'auto' or 'cpu'.")
    return torch.device(want)


def _probe_multilabel(cfg: Any, tr: tuple, va: tuple, te: tuple) -> tuple[float, float, float, tuple]:
    """:func:`_probe` for multi-label targets (N, C) 0/1 (Pascal VOC at paper scale): one sigmoid per class
    (:func:`ensdiv.train.probe.fit_logistic_multilabel`), the λ grid walked from the strongest with warm starts
    and λ chosen by validation 11-point mAP (:func:`ensdiv.metrics.mean_average_precision_11pt`, VOC's metric).
    Returns the validation and test mAP, λ, and ``(test scores (N, C), test targets (N, C))`` as numpy arrays."""
    dev, dtype = probe_device(cfg), getattr(torch, cfg["probe_dtype"])
    (tx, ty), (vx, vy), (sx, sy) = ((a.to(dev), b.to(dev)) for a, b in (tr, va, te))
    best: tuple[float, float, tuple] | None = None
    params = None
    for lam in sorted((float(v) for v in cfg["l2_grid"]), reverse=True):
        params = probe.fit_logistic_multilabel(tx, ty, l2=lam, max_iter=cfg["probe_iter"], init=params, dtype=dtype)
        w, b = params
        score = float(mt.mean_average_precision_11pt((vx.to(w) @ w.T + b).cpu(), vy.cpu()))
        if best is None or score > best[0]:
            best = (score, lam, params)
    assert best is not None
    w, b = best[2]
    scores = (sx.to(w) @ w.T + b).cpu()
    test = float(mt.mean_average_precision_11pt(scores, sy.cpu()))
    return best[0], test, best[1], (scores.numpy(), sy.cpu().numpy())


def _probe(cfg: Any, tr: tuple, va: tuple, te: tuple) -> tuple[float, float, float, Any]:
    """A probe with λ chosen on ``va``: its best validation accuracy, its test accuracy, λ, and its per-sample
    test correctness (N_test,) bool (for the intervals of the claims). Multi-label targets (N, C): the
    validation and test 11-point mAP, λ, and ``(test scores, test targets)`` (:func:`_probe_multilabel`)."""
    if tr[1].ndim == 2:
        return _probe_multilabel(cfg, tr, va, te)
    dev = probe_device(cfg)
    p = probe.linear_probe(tr[0].to(dev), tr[1].to(dev), va[0].to(dev), va[1].to(dev), l2_grid=cfg["l2_grid"],
                           max_iter=cfg["probe_iter"], dtype=getattr(torch, cfg["probe_dtype"]))
    right = (p.logits(te[0].to(dev)).argmax(1).cpu() == te[1].cpu()).numpy()
    return float(p.val_accuracy.max()), float(right.mean()), p.l2, right


def concat_curve(cfg: Any, a: str, b: str, splits: Mapping[str, tuple[dict, torch.Tensor]]) -> pd.DataFrame:
    """Fig. 6 centre: probes on ``frac`` of A's dimensions and ``1 - frac`` of B's, random dimensions
    (:func:`ensdiv.train.probe.subsample_concat`), for every ``cfg.fractions`` and ``cfg.draws`` seeds.

    Columns: other, frac_base, draw, dims, val_acc, test_acc, l2, and ``test_correct`` (each probe's per-sample
    test correctness, an (N_test,) bool array, for :func:`combination_gains`)."""
    rows = []
    da, db = splits["train"][0][a].shape[1], splits["train"][0][b].shape[1]
    for frac in cfg["fractions"]:
        for s in range(1 if frac in (0.0, 1.0) else cfg["draws"]):
            ia, ib = probe.subsample_concat(da, db, frac, seed=cfg["seed"] + s)
            pick = {sp: (torch.cat([f[a][:, ia], f[b][:, ib]], 1), y) for sp, (f, y) in splits.items()}
            val, test, lam, right = _probe(cfg, pick["train"], pick["val"], pick["test"])
            rows.append({"other": b, "frac_base": frac, "draw": s, "dims": len(ia) + len(ib), "val_acc": val,
                         "test_acc": test, "l2": lam, "test_correct": right})
    return pd.DataFrame(rows)


def k_grid(k_step: int, total: int) -> list[int]:
    """The numbers of dimensions Fig. 6 right probes: doubling from 1 below ``k_step`` (so that a pair reaching
    the target early is not stopped at the grid's floor), then every multiple of ``k_step``, then ``total``.

    >>> k_grid(32, 100)
    [1, 2, 4, 8, 16, 32, 64, 96, 100]
    """
    low = [2 ** i for i in range(max(int(k_step), 1).bit_length()) if 2 ** i < min(k_step, total)]
    return sorted({*low, *range(int(k_step), total, int(k_step)), total})


def features_needed(cfg: Any, a: str, b: str, splits: Mapping[str, tuple[dict, torch.Tensor]], *, target: float,
                    by: str, full: bool = False) -> tuple[pd.DataFrame, float]:
    """Fig. 6 right: probes on the ``k`` most diverse dimensions of the concatenation ([A, B], ranked on
    the training split by :func:`ensdiv.train.probe.rank_dimensions` ``by``), k on :func:`k_grid` (1, 2, 4,
    … below ``cfg.k_step``, then k_step, 2·k_step, ..., every dimension); λ is chosen on the validation split
    and the accuracy read on the test split. Stops at the first k whose test accuracy reaches ``target`` unless
    ``full`` (every k is probed: what :func:`features_needed_estimates` resamples).

    Returns:
        ``(curve, k_needed)``: the curve (columns other, ranking, k, total, val_acc, test_acc, test_correct)
        and the first k reaching ``target`` (NaN when none does).
    """
    order = probe.rank_dimensions(splits["train"][0][a], splits["train"][0][b], by=by)
    total = len(order)
    rows, needed = [], float("nan")
    for k in k_grid(cfg["k_step"], total):
        idx = order[:k]
        pick = {sp: (torch.cat([f[a], f[b]], 1)[:, idx], y) for sp, (f, y) in splits.items()}
        val, test, _, right = _probe(cfg, pick["train"], pick["val"], pick["test"])
        rows.append({"other": b, "ranking": by, "k": k, "total": total, "val_acc": val, "test_acc": test,
                     "test_correct": right})
        if test >= target and math.isnan(needed):
            needed = float(k)
            if not full:
                break
    return pd.DataFrame(rows), needed


def training_sets(recipe: ed.Recipe) -> list[str]:
    """Every registered set a recipe's model learnt from: its own training set, a pre-training source, and the
    sets its teacher or frozen backbone learnt from (recursively), each once, in that order."""
    sets = [recipe.data.dataset]
    method = recipe.method
    if isinstance(method, ed.Pretrain) and method.dataset:
        sets.append(method.dataset)
    for sub in (getattr(method, "teacher", None), getattr(method, "backbone", None)):
        if sub:
            sets += training_sets(sub if isinstance(sub, ed.Recipe) else ed.Recipe.from_dict(sub))
    return list(dict.fromkeys(sets))


def leaked_classes(recipe: ed.Recipe, downstream: ed.TensorSet) -> list[str]:
    """The classes of ``downstream`` that a set the recipe's model learnt from (:func:`training_sets`) also
    has, by class name: a model that was trained on the downstream task's labels has seen them, so its
    downstream accuracy is not transfer (Fig. 7; the glyph source renders the ten digits, for instance)."""
    down = set(downstream.classes)
    seen = {c for name in training_sets(recipe) for c in ed.get_dataset(name).classes}
    return sorted(down & seen)


def transfer_candidates(cfg: Any, out: Outputs, keys: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """``keys`` without the models that learnt a class of Fig. 7's downstream task (:func:`leaked_classes`):
    ``(kept, {excluded key: the downstream classes it learnt})``. At paper scale (no recipes: the models'
    features come from a folder) nothing is excluded; the paper's ImageNet models and VOC share no label set."""
    if not out.recipes:
        return list(keys), {}
    down = _feature_set(cfg, "down")
    leaked = {k: leaked_classes(out.recipes[k], down) for k in keys if k in out.recipes}
    return [k for k in keys if not leaked.get(k)], {k: v for k, v in leaked.items() if v}


def downstream_splits(cfg: Any, out: Outputs, keys: Sequence[str]) -> dict[str, tuple[dict, torch.Tensor]]:
    """Fig. 7's downstream task: normalised features of ``keys`` on train / val / test splits of it.

    smoke/cpu: ``cfg.downstream_set`` (scikit-learn's digits) cut 60/20/20 with ``cfg.seed``; paper: the
    folder's ``down-train``, ``down-val`` and ``down-test`` features.
    """
    if out.root is not None:
        return {s: probe_features(cfg, out, keys, f"down-{s}") for s in ("train", "val", "test")}
    feats, labels = probe_features(cfg, out, keys, "down")
    n = len(labels)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(cfg["seed"]))
    cut = {"train": perm[: int(0.6 * n)], "val": perm[int(0.6 * n): int(0.8 * n)], "test": perm[int(0.8 * n):]}
    return {s: ({k: v[i] for k, v in feats.items()}, labels[i]) for s, i in cut.items()}


def downstream_probes(cfg: Any, splits: Mapping[str, tuple[dict, torch.Tensor]]) -> pd.DataFrame:
    """Fig. 7: a linear probe on each single representation and on each pairwise concatenation (stacked
    generalisation, full dimensions of both), λ chosen on the downstream validation split.

    Columns: models, kind (single / pair), dims, val_acc, test_acc and ``test_correct`` (the probe's
    per-sample test correctness, an (N_test,) bool array). With multi-label downstream targets (VOC at paper
    scale) ``val_acc`` / ``test_acc`` are 11-point mAP and ``test_correct`` is ``(test scores, test targets)``."""
    keys = list(splits["train"][0])
    rows = []
    for combo in [(k,) for k in keys] + list(combinations(keys, 2)):
        sp = {s: (torch.cat([f[k] for k in combo], 1), y) for s, (f, y) in splits.items()}
        val, test, _, right = _probe(cfg, sp["train"], sp["val"], sp["test"])
        rows.append({"models": " + ".join(combo), "kind": "single" if len(combo) == 1 else "pair",
                     "dims": sp["train"][0].shape[1], "val_acc": val, "test_acc": test, "test_correct": right})
    return pd.DataFrame(rows)


def fig05_lists(cfg: Any, out: Outputs) -> tuple[list[str], list[str]]:
    """High- and low-accuracy lists of Fig. 5: the folder's roles at paper scale (high: App. Table 2; low:
    Tables 1 and 3), else :func:`high_low_lists` on validation accuracy."""
    if out.roles:
        high = [k for k in out.keys if out.roles[k] == "high"]
        low = [k for k in out.keys if out.roles[k] in ("main", "low", "base")]
        return high, low
    acc = (out.logits["val"].argmax(-1) == out.labels["val"]).double().mean(1)
    return high_low_lists(dict(zip(out.keys, acc.tolist(), strict=True)), n_high=cfg["n_high"],
                          low_gap=cfg["low_gap"], mode=cfg["low_mode"])


def loss_and_data(recipe: ed.Recipe) -> tuple[str, tuple[str, ...]]:
    """What Fig. 5's table compares between a high model and the model added to it: the training loss (plain
    supervised, distillation, or pre-training with its objective) and the sets the model learnt from
    (:func:`training_sets`). Hyper-parameters and the architecture are neither."""
    method = recipe.method
    loss = f"pretrain-{method.objective}" if isinstance(method, ed.Pretrain) else method.kind
    return loss, tuple(sorted(training_sets(recipe)))


def other_loss_or_data(out: Outputs, high: str, key: str) -> bool:
    """Whether ``key`` was trained with another loss or on other data than the *high* model ``high`` (§4.5:
    "trained with a different loss and/or dataset"); without recipes (paper scale) by category: a Framework or
    Dataset model added to a model of another category."""
    if high in out.recipes and key in out.recipes:
        (la, da), (lb, db) = loss_and_data(out.recipes[high]), loss_and_data(out.recipes[key])
        return la != lb or da != db
    diverse = ("framework", "dataset")
    return out.category[key] in diverse and out.category[key] != out.category[high]
