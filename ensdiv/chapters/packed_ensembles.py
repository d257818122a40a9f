"""The Packed-Ensembles chapter's pipeline: methods → recipes → cached logits → Table-1 metrics.

Every notebook of ``notebooks/packed-ensembles/`` goes through these functions, so the same method,
scale and seed always map to the same :class:`~ensdiv.Recipe` and hence to the same cached model:
``tab01_efficient_ensembles`` trains them; ``tab02_imagenet_ood_shift``, ``fig01_accuracy_vs_speed``,
``appE_ood_criteria``, ``fig06_07_alpha_gamma`` and ``appF_sources_of_diversity`` read the cache.

Every compared quantity of a page's claim gets an interval through :func:`estimates` (over the training runs
when a method has at least :data:`MIN_SEEDS`, else a paired bootstrap over the evaluation images), and every
speed ratio through :func:`speed_table`'s rounds and :func:`speed_ratio` (timing repeats).

Methods (Table 1 of packed-ensembles): ``single``, ``batchensemble``, ``mimo``, ``masksembles``,
``packed`` (PE-(α, M, γ)) and ``deep_ensemble`` (M single models with consecutive seeds; member 0
is the ``single`` model of the same seed, as a Deep Ensemble is M trained single models).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

import ensdiv as ed
from ensdiv import metrics as mt
from ensdiv.chapters._presets import chapter_preset
from ensdiv.errors import InvalidInputError, unknown_name

__all__ = [
    "METHODS",
    "METHOD_LABELS",
    "OOD_CRITERIA",
    "model_name",
    "method_recipes",
    "method_logits",
    "method_cost",
    "build_method",
    "build_for",
    "data_shape",
    "timing_device",
    "ood_scores",
    "evaluate",
    "eval_set",
    "PRESETS",
    "preset",
    "base_recipe",
    "recipes_for",
    "compare_methods",
    "mean_std",
    "PAPER_BLOCKS",
    "TABLE1",
    "table1_paper",
    "BASELINES_AS_IMPLEMENTED",
    "baselines_table",
    "recipe_differences",
    "speed_table",
    "speed_summary",
    "speed_ratio",
    "MIN_SEEDS",
    "Measure",
    "estimates",
    "bootstrap",
    "TIMING_DTYPES",
    "deterministic_kernels",
    "sources_of_diversity",
    "disagreement_per_image",
]

SLUG = "packed-ensembles"
METHODS = ("single", "batchensemble", "mimo", "masksembles", "packed", "deep_ensemble")
METHOD_LABELS = {
    "single": "Single Model", "batchensemble": "BatchEnsemble", "mimo": "MIMO", "masksembles": "Masksembles",
    "packed": "Packed-Ensembles", "deep_ensemble": "Deep Ensembles",
}
OOD_CRITERIA = ("msp", "max_logit", "entropy", "mi")


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise unknown_name("method", method, METHODS)


def model_name(method: str, arch: str) -> str:
    """Registered model name of ``method`` on ``arch`` (``small``, ``resnet18``, ``resnet50``, ``test``)."""
    _check_method(method)
    base = {"deep_ensemble": "single"}.get(method, method)
    return f"test_{base}" if arch == "test" else f"{base}_{arch}"


def method_recipes(method: str, base: Any, *, arch: str, seed: int = 0, num_estimators: int = 4,
                   alpha: float = 2, gamma: int = 2, model_kwargs: dict | None = None) -> list[Any]:
    """The recipe(s) of one method for one seed.

    Args:
        method: one of :data:`METHODS`.
        base: an :class:`~ensdiv.Recipe` holding data, optimiser and schedule.
        arch: backbone (``small``, ``resnet18``, ``resnet50``, ``test``).
        seed: run index; a Deep Ensemble of run ``s`` uses seeds ``s·M … s·M+M-1`` and the single
            model of run ``s`` is its member 0 (seed ``s·M``).
        num_estimators: M. alpha, gamma: PE-(α, M, γ) (``packed`` only).
        model_kwargs: extra factory options (e.g. ``widths``).

    Returns:
        One recipe, or M recipes for ``deep_ensemble``.
    """
    _check_method(method)
    kw = dict(model_kwargs or {})
    name = model_name(method, arch)
    if method in ("single", "deep_ensemble"):
        n = num_estimators if method == "deep_ensemble" else 1
        return [base.replace(model=name, seed=seed * num_estimators + k, model_kwargs=kw,
                             name=f"{method}-s{seed}-m{k}") for k in range(n)]
    if method == "packed":
        kw.update(alpha=alpha, num_estimators=num_estimators, gamma=gamma)
    else:
        kw.update(num_estimators=num_estimators)
    return [base.replace(model=name, seed=seed, model_kwargs=kw, name=f"{method}-s{seed}")]


def method_logits(recipes: Sequence[Any], dataset: Any) -> Tensor:
    """Member logits ``(M, N, C)`` of a method's recipes on ``dataset`` (trained and cached on demand)."""

    outs = [ed.predict(r, dataset) for r in recipes]
    return torch.cat([o if o.dim() == 3 else o.unsqueeze(0) for o in outs])


def build_method(method: str, *, arch: str, num_classes: int = 10, in_chans: int = 1, img_size: int = 28,
                 num_estimators: int = 4, alpha: float = 2, gamma: int = 2, **kw: Any) -> nn.Module:
    """An untrained model of ``method`` (costs, speed); a Deep Ensemble is a :class:`~ensdiv.models.MemberStack`."""

    _check_method(method)
    name = model_name(method, arch)
    shape = {"num_classes": num_classes, "in_chans": in_chans, "img_size": img_size}
    if method in ("single", "deep_ensemble"):
        n = num_estimators if method == "deep_ensemble" else 1
        members = [ed.create_model(name, **shape, **kw) for _ in range(n)]
        return members[0] if n == 1 else ed.models.MemberStack(members)
    extra = {"alpha": alpha, "gamma": gamma} if method == "packed" else {}
    return ed.create_model(name, **shape, num_estimators=num_estimators, **extra, **kw)


def data_shape(data: Any) -> tuple[int, int, int]:
    """``(channels, height, width)`` of the images of a :class:`~ensdiv.TensorSet`."""
    return tuple(int(s) for s in data.x.shape[1:])


def build_for(method: str, cfg: dict, data: Any, **extra: Any) -> nn.Module:
    """An untrained model of ``method`` with ``cfg``'s backbone, M, α, γ (and widths), shaped for ``data``
    (channels, image size and classes read from the set); ``extra`` overrides α / γ."""
    c, _, w = data_shape(data)
    kw = {"widths": list(cfg["widths"])} if cfg.get("widths") else {}
    kw.update(alpha=cfg["alpha"], gamma=cfg["gamma"])
    kw.update(extra)
    return build_method(method, arch=cfg["arch"], num_classes=data.num_classes, in_chans=c, img_size=w,
                        num_estimators=cfg["num_estimators"], **kw)


def timing_device() -> str:
    """Where the throughput pages time their models: the GPU when there is one, else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def method_cost(model: nn.Module, input_shape: tuple[int, int, int]) -> dict[str, float]:
    """Parameters (millions) and mult-adds (millions, per image) as in Table 1's last columns."""

    return {
        "params_M": ed.count_params(model) / 1e6,
        "mult_adds_M": ed.count_mult_adds(model, input_shape, convention="layers") / 1e6,
    }


def ood_scores(logits: Tensor, criterion: str = "msp") -> Tensor:
    """Per-sample OOD score (higher = more likely OOD) from member logits ``(M, N, C)`` (Appendix E).

    Args:
        logits: member logits, shape (M, N, C) (M = 1 for a single model).
        criterion: ``msp`` (minus the maximum of the mean softmax), ``max_logit`` (minus the
            maximum of the mean logits), ``entropy`` (entropy of the mean softmax) or ``mi``
            (mutual information between prediction and member; 0 for one member).

    Returns:
        Shape (N,).
    """

    if criterion not in OOD_CRITERIA:
        raise unknown_name("OOD criterion", criterion, OOD_CRITERIA)
    probs = logits.float().softmax(-1)
    if criterion == "msp":
        return -mt.max_softmax(probs)
    if criterion == "max_logit":
        return -mt.max_logit(logits.float())
    if criterion == "entropy":
        return mt.predictive_entropy(probs)
    if probs.shape[0] < 2:
        return torch.zeros(probs.shape[1])
    return mt.mutual_information(probs)


def evaluate(logits: Tensor, labels: Tensor, ood_logits: Tensor | None = None, *,
             criterion: str = "msp", n_bins: int = 15) -> dict[str, float]:
    """Table 1's metrics of an ensemble (softmax probabilities averaged over members, Eq. 4).

    Args:
        logits: in-distribution member logits (M, N, C).
        labels: (N,).
        ood_logits: OOD member logits (M, N_ood, C), or None (no OOD columns).
        criterion: OOD score (see :func:`ood_scores`).
        n_bins: ECE bins (15, as torch-uncertainty).

    Returns:
        ``acc``, ``aupr``, ``auroc``, ``fpr95`` in %, ``nll`` and ``ece`` as fractions.
    """

    probs = logits.float().softmax(-1).mean(0)
    out = {"acc": 100 * float(mt.accuracy(probs, labels)), "nll": float(mt.nll(probs, labels)),
           "ece": float(mt.ece(probs, labels, n_bins=n_bins))}
    if ood_logits is not None:
        s_id, s_ood = ood_scores(logits, criterion), ood_scores(ood_logits, criterion)
        out.update(aupr=100 * float(mt.aupr(s_id, s_ood)), auroc=100 * float(mt.auroc(s_id, s_ood)),
                   fpr95=100 * float(mt.fpr_at_tpr(s_id, s_ood, tpr=0.95)))
    return out


def eval_set(name: str, *, subset: int = 0) -> Any:
    """The registered evaluation set ``name`` (see ``ed.list_datasets()``), ``subset`` images drawn with seed 0.

    At cpu scale the chapter's sets are ``fmnist/test`` (in-distribution), ``digits`` (OOD, Table 1's
    SVHN), ``textures/frost`` (real texture photographs, Table 2's Textures) and ``fmnist-r``
    (renditions, Table 2's ImageNet-R); at paper scale ``cifar10/test``, ``svhn/test`` ... from ``$ENSDIV_DATA``.
    """

    data = ed.get_dataset(name)
    return data.subset(subset, seed=0) if subset else data


# ---- from a notebook's configuration ----------------------------------------------------------------
def base_recipe(cfg: dict) -> Any:
    """The training recipe shared by every method of the chapter at ``cfg``'s scale.

    A ``multistep`` schedule keeps only the milestones before the last epoch (as torch's MultiStepLR, a
    milestone after training never fires); with none left the learning rate is constant. ``nesterov``
    (SGD with Nesterov momentum) and ``lr_decay`` (the factor at each milestone) are read when present.
    """
    schedule, milestones = cfg["schedule"], [int(m) for m in cfg.get("milestones", [])]
    lr_decay = float(cfg.get("lr_decay", 0.1))
    if schedule == "multistep":
        milestones = [m for m in milestones if 0 < m < cfg["epochs"]]
        schedule = "multistep" if milestones else "constant"
    else:
        milestones = []
    if schedule not in ("step", "multistep"):
        lr_decay = 0.1  # no step to decay at: the default, so the recipe keeps its key
    return ed.Recipe.make(model=model_name("single", cfg["arch"]), dataset=cfg["dataset"], epochs=cfg["epochs"],
                  batch_size=cfg["batch_size"], lr=cfg["lr"], optimizer="sgd", momentum=0.9,
                  weight_decay=cfg["weight_decay"], schedule=schedule, milestones=milestones,
                  decay_all=bool(cfg.get("decay_all", False)), nesterov=bool(cfg.get("nesterov", False)),
                  lr_decay=lr_decay, augment=cfg["augment"],
                  crop_pad=int(cfg.get("crop_pad", 2)), train_subset=cfg["train_subset"])


def recipes_for(method: str, cfg: dict, seed: int, *, alpha: float | None = None,
                gamma: int | None = None, member_loss: str | None = None) -> list[Any]:
    """:func:`method_recipes` with the data, backbone and PE-(α, M, γ) of ``cfg``; ``member_loss="sum"``
    trains a ``packed`` model on the sum of its members' losses (the reference averages them).
    BatchEnsemble's fast weights start as ``cfg["fast_weight_init"]`` (``random_sign`` unless set; the
    option reaches the model, and hence the cache key, only when it is not the default)."""
    kw = {"widths": list(cfg["widths"])} if cfg.get("widths") else {}
    init = cfg.get("fast_weight_init", "random_sign")
    if method == "batchensemble" and init != "random_sign":
        kw["fast_weight_init"] = init
    if member_loss is not None and member_loss != "mean":
        if method != "packed":
            raise InvalidInputError(f"member_loss applies to the packed model only, not {method!r}.")
        kw["member_loss"] = member_loss
    alpha = cfg["alpha"] if alpha is None else alpha
    gamma = cfg["gamma"] if gamma is None else gamma
    return method_recipes(method, base_recipe(cfg), arch=cfg["arch"], seed=seed,
                          num_estimators=cfg["num_estimators"], alpha=alpha, gamma=gamma, model_kwargs=kw)


def compare_methods(cfg: dict, *, methods: Sequence[str] = METHODS, ood_sets: Sequence[str] | None = None,
                    shift_sets: Sequence[str] = (), criteria: Sequence[str] = ("msp",),
                    extra: dict[str, dict] | None = None) -> Any:
    """Train (or load) every method for every seed of ``cfg`` and evaluate it: one row per
    (method, seed, OOD set, criterion), Table 1's columns plus shift columns ``rAcc``, ``rNLL``, ``rECE``.

    Args:
        cfg: a resolved preset (keys ``seeds``, ``test_set``, ``test_subset``, ``ood_set(s)``, ...).
        methods: which methods. ood_sets: OOD sets (default ``[cfg["ood_set"]]``).
        shift_sets: shifted in-distribution sets (labels = the test classes).
        criteria: OOD criteria (:data:`OOD_CRITERIA`).
        extra: more variants as ``{label: {"method": "packed", "alpha": 3, "gamma": 1}}``.

    Returns:
        A :class:`pandas.DataFrame`.
    """
    test = eval_set(cfg["test_set"], subset=cfg["test_subset"])
    oods = {n: eval_set(n, subset=cfg["ood_subset"]) for n in (ood_sets or [cfg["ood_set"]])}
    shifts = {n: eval_set(n, subset=cfg["test_subset"]) for n in shift_sets}
    variants = {m: {"method": m} for m in methods}
    variants.update(extra or {})
    rows = []
    for label, spec in variants.items():
        spec = dict(spec)
        method = spec.pop("method")
        for seed in cfg["seeds"]:
            recipes = recipes_for(method, cfg, seed, **spec)
            logits = method_logits(recipes, test)
            shift_cols: dict[str, float] = {}
            for sname, sdata in shifts.items():
                r = evaluate(method_logits(recipes, sdata), sdata.y)
                shift_cols.update({f"rAcc[{sname}]": r["acc"], f"rNLL[{sname}]": r["nll"],
                                   f"rECE[{sname}]": r["ece"]})
            for oname, odata in oods.items():
                ood_logits = method_logits(recipes, odata)
                for crit in criteria:
                    row = {"method": label, "seed": seed, "ood_set": oname, "criterion": crit,
                           **evaluate(logits, test.y, ood_logits, criterion=crit), **shift_cols}
                    rows.append(row)
    return pd.DataFrame(rows)


# ---- intervals of the compared quantities: training seeds, or a paired bootstrap over the evaluation images ----
#: With at least this many runs per method, a compared quantity's interval comes from the runs (Student-t over
#: the per-run values, paired by run); with fewer, from a paired bootstrap over the evaluation images.
MIN_SEEDS = 3
#: The quantities :func:`estimates` knows: Table 1's and Table 2's columns (``r*`` on a shifted set).
ESTIMATED_METRICS = ("acc", "nll", "ece", "aupr", "auroc", "fpr95", "rAcc", "rNLL", "rECE")
_GROUPS = itertools.count()


@dataclass(frozen=True)
class Measure:
    """One compared quantity of :func:`estimates`: ``metric`` of the variant ``label`` (a method of
    :data:`METHODS` or a label of ``compare_methods(extra=...)``), on ``ood_set`` with ``criterion`` for the
    OOD metrics (default: the preset's OOD set and ``msp``), on ``shift_set`` for ``rAcc``/``rNLL``/``rECE``."""

    label: str
    metric: str
    ood_set: str | None = None
    criterion: str | None = None
    shift_set: str | None = None

    def __post_init__(self) -> None:
        if self.metric not in ESTIMATED_METRICS:
            raise unknown_name("metric", self.metric, ESTIMATED_METRICS)
        if self.metric.startswith("r") and not self.shift_set:
            raise InvalidInputError(f"{self.metric} is measured on a shifted set: give shift_set.")
        if self.criterion is not None and self.criterion not in OOD_CRITERIA:
            raise unknown_name("OOD criterion", self.criterion, OOD_CRITERIA)

    @property
    def ood(self) -> bool:
        """Whether the metric scores OOD detection (it reads the test set and an OOD set)."""
        return self.metric in ("aupr", "auroc", "fpr95")


def estimates(cfg: dict, runs: Any, wanted: Mapping[str, Measure], *, variants: Mapping[str, dict] | None = None,
              n_resamples: int = 1000, seed: int = 0) -> tuple[dict[str, Any], str]:
    """Every quantity of ``wanted`` as an :class:`~ensdiv.report.Estimate`, and what its interval randomises.

    With at least :data:`MIN_SEEDS` runs (``cfg["seeds"]``) the replicates are the per-run values of
    ``runs`` (:func:`compare_methods`' table; the k-th run of every method is paired with the k-th of the
    others); with fewer, they come from one paired bootstrap over the evaluation images (:func:`bootstrap`),
    the trained models held fixed.

    Args:
        cfg: the resolved preset ``runs`` was computed with.
        runs: :func:`compare_methods`' table (method keys or labels as in ``wanted``, not display labels).
        wanted: ``{quantity name: Measure}``.
        variants: ``{label: {"method": ..., **options}}`` for labels that are not methods (as ``extra``).
        n_resamples, seed: the bootstrap's.

    Returns:
        ``({name: Estimate}, variance)``, ``variance`` one sentence for the claim record.
    """
    seeds = list(cfg["seeds"])
    if len(seeds) >= MIN_SEEDS:
        out = {}
        for name, q in wanted.items():
            rows = runs[runs["method"] == q.label]
            if q.ood:
                rows = rows[(rows["ood_set"] == (q.ood_set or _default_ood(cfg)))
                            & (rows["criterion"] == (q.criterion or "msp"))]
            col = f"{q.metric}[{q.shift_set}]" if q.shift_set else q.metric
            per_run = rows.groupby("seed")[col].first().reindex(seeds)
            if rows.empty or per_run.isna().any():
                raise InvalidInputError(f"runs has no {col!r} of {q.label!r} for every seed {seeds}.")
            out[name] = ed.report.from_seeds(per_run.to_numpy(dtype=float))
        return out, (f"training seeds: {len(seeds)} runs of every method, paired by run (Student-t); the finite "
                     "test set is not resampled")
    return bootstrap(cfg, wanted, variants=variants, n_resamples=n_resamples, seed=seed)


def _default_ood(cfg: dict) -> str:
    return (cfg.get("ood_sets") or [cfg["ood_set"]])[0]


def _per_image(logits: Tensor, labels: Tensor) -> dict[str, np.ndarray]:
    """Per-image correctness and NLL of an ensemble's averaged softmax, and its probabilities."""
    probs = logits.float().softmax(-1).mean(0)
    p_true = probs.gather(1, labels.view(-1, 1)).squeeze(1)
    return {"correct": (probs.argmax(-1) == labels).double().numpy(),
            "nll": (-p_true.clamp_min(1e-12).log()).double().numpy(), "probs": probs}


def bootstrap(cfg: dict, wanted: Mapping[str, Measure], *, variants: Mapping[str, dict] | None = None,
              n_resamples: int = 1000, seed: int = 0) -> tuple[dict[str, Any], str]:
    """A paired bootstrap of ``wanted`` over the evaluation images, the models of ``cfg``'s runs held fixed.

    Each resample draws the test images, every OOD set and every shifted set anew, each set on its own (so an
    OOD metric keeps the OOD share of the data it was measured on); one draw serves every quantity, so the
    estimates are paired (two methods that agree on every image differ by exactly zero in every replicate).
    A quantity of several runs is the mean over the runs, as in the tables. Predictions come from the cache
    (``ed.predict``; trained on a miss).

    Returns:
        ``({name: Estimate}, variance)`` (see :func:`estimates`).
    """
    specs = {m: {"method": m} for m in METHODS}
    specs.update(variants or {})
    missing = sorted({q.label for q in wanted.values()} - set(specs))
    if missing:
        raise unknown_name("variant (give it in variants=)", missing[0], specs)
    sets: dict[str, Any] = {"test": eval_set(cfg["test_set"], subset=cfg["test_subset"])}
    for q in wanted.values():
        if q.ood:
            name = q.ood_set or _default_ood(cfg)
            sets.setdefault(f"ood:{name}", eval_set(name, subset=cfg["ood_subset"]))
        if q.shift_set:
            sets.setdefault(f"shift:{q.shift_set}", eval_set(q.shift_set, subset=cfg["test_subset"]))
    logits: dict[tuple[str, int, str], Tensor] = {}

    def member_logits(label: str, run: int, key: str) -> Tensor:
        if (label, run, key) not in logits:
            spec = dict(specs[label])
            method = spec.pop("method")
            logits[label, run, key] = method_logits(recipes_for(method, cfg, run, **spec), sets[key])
        return logits[label, run, key]

    labels = {k: d.y for k, d in sets.items()}
    funcs = {}
    for name, q in wanted.items():
        per_run = []
        for run in cfg["seeds"]:
            if q.ood:
                crit = q.criterion or "msp"
                s_id = ood_scores(member_logits(q.label, run, "test"), crit).double().numpy()
                s_ood = ood_scores(member_logits(q.label, run, f"ood:{q.ood_set or _default_ood(cfg)}"),
                                   crit).double().numpy()
                per_run.append((s_id, s_ood))
            else:
                key = f"shift:{q.shift_set}" if q.shift_set else "test"
                per_run.append((key, _per_image(member_logits(q.label, run, key), labels[key])))
        funcs[name] = _statistic(q, per_run, labels, cfg)
    rng = np.random.default_rng(seed)
    sizes = {k: len(d) for k, d in sets.items()}
    full = {k: np.arange(n) for k, n in sizes.items()}
    reps = np.empty((len(funcs), n_resamples))
    for r in range(n_resamples):
        idx = {k: rng.integers(0, n, n) for k, n in sizes.items()}
        for i, fn in enumerate(funcs.values()):
            reps[i, r] = fn(idx)
    group = f"packed-ensembles-{next(_GROUPS)}"
    out = {name: ed.report.Estimate(float(fn(full)), reps[i], "evaluation samples", "bootstrap", group)
           for i, (name, fn) in enumerate(funcs.items())}
    shown = ", ".join(f"{len(sets[k])} {k.split(':')[-1] if ':' in k else 'test'} images" for k in sets)
    n_runs = len(cfg["seeds"])
    return out, (f"evaluation images: {n_resamples} paired bootstrap resamples ({shown}, each set resampled on "
                 f"its own), the trained models held fixed ({n_runs} run{'s' if n_runs > 1 else ''}); training "
                 "seeds not covered")


def _statistic(q: Measure, per_run: list, labels: Mapping[str, Tensor], cfg: dict) -> Any:
    """``f(indices by set) -> float``: ``q``'s metric on a resample, averaged over the runs."""
    if q.ood:
        key = f"ood:{q.ood_set or _default_ood(cfg)}"
        metric = {"aupr": mt.aupr, "auroc": mt.auroc, "fpr95": functools.partial(mt.fpr_at_tpr, tpr=0.95)}[q.metric]

        def ood_stat(idx: Mapping[str, np.ndarray]) -> float:
            return float(np.mean([100 * float(metric(torch.from_numpy(s_id[idx["test"]]),
                                                     torch.from_numpy(s_ood[idx[key]]), validate_args=False))
                                  for s_id, s_ood in per_run]))
        return ood_stat
    key = per_run[0][0]
    base = q.metric.removeprefix("r").lower()
    if base in ("acc", "nll"):
        column = "correct" if base == "acc" else "nll"
        values = np.mean([d[column] for _, d in per_run], axis=0) * (100 if base == "acc" else 1)
        return lambda idx: float(values[idx[key]].mean())
    y = labels[key]

    def ece_stat(idx: Mapping[str, np.ndarray]) -> float:
        i = torch.from_numpy(idx[key])
        return float(np.mean([float(mt.ece(d["probs"][i], y[i], n_bins=15, validate_args=False))
                              for _, d in per_run]))
    return ece_stat


def mean_std(df: Any, *, by: Sequence[str] = ("method",), digits: int = 3) -> Any:
    """``mean ± std`` over seeds of every numeric column of :func:`compare_methods`' table."""
    skip = (*by, "seed", "ood_set", "criterion")
    num = [c for c in df.columns if c not in skip and df[c].dtype.kind in "fi"]
    g = df.groupby(list(by), sort=False)[num]
    mean, std = g.mean(), g.std(ddof=1).fillna(0.0)
    return mean.round(digits).astype(str) + " ± " + std.round(digits).astype(str)


# ---- Table 1 of the paper, the baselines as implemented, the recipe's remaining differences ------------
_T1_COLS = ("acc", "nll", "ece", "aupr", "auroc", "fpr95", "params_M", "mult_adds_M")
#: Table 1 of packed-ensembles (five runs averaged), per (training set, backbone) block, rows in
#: :data:`METHODS` order; Params in millions, Mult-Adds in millions (the paper's G × 1000).
TABLE1 = {
    ("cifar10/train", "resnet18"): [(94.0, 0.238, 0.035, 94.0, 89.7, 33.8, 11.17, 560),
                                    (92.9, 0.257, 0.031, 92.4, 87.8, 32.1, 11.21, 2220),
                                    (94.0, 0.228, 0.033, 94.4, 90.2, 28.6, 11.19, 2240),
                                    (94.0, 0.188, 0.009, 93.6, 89.5, 27.8, 11.24, 2220),
                                    (94.3, 0.178, 0.007, 94.7, 91.3, 23.2, 8.18, 480),
                                    (95.1, 0.156, 0.008, 94.7, 91.3, 18.0, 44.70, 2220)],
    ("cifar10/train", "resnet50"): [(95.1, 0.211, 0.031, 95.2, 91.9, 23.6, 23.52, 1300),
                                    (93.9, 0.255, 0.033, 94.7, 91.3, 20.1, 23.63, 5190),
                                    (95.4, 0.197, 0.030, 95.1, 90.8, 26.0, 23.59, 5220),
                                    (95.3, 0.175, 0.019, 95.7, 92.2, 22.1, 23.81, 5190),
                                    (95.9, 0.137, 0.008, 97.3, 95.2, 14.4, 14.55, 1000),
                                    (96.0, 0.136, 0.008, 97.0, 94.7, 15.5, 94.08, 5190)],
    ("cifar100/train", "resnet18"): [(75.1, 1.016, 0.093, 88.6, 79.5, 55.0, 11.22, 560),
                                     (71.2, 1.236, 0.116, 86.0, 75.4, 60.2, 11.25, 2220),
                                     (75.3, 0.962, 0.069, 89.2, 80.7, 52.9, 11.36, 2240),
                                     (74.2, 1.054, 0.061, 86.7, 76.3, 59.8, 11.24, 2220),
                                     (76.4, 0.858, 0.041, 88.7, 79.8, 57.1, 8.18, 480),
                                     (78.2, 0.800, 0.018, 90.2, 82.4, 50.5, 44.88, 2220)],
    ("cifar100/train", "resnet50"): [(78.3, 0.905, 0.089, 87.4, 77.9, 57.6, 23.70, 1300),
                                     (66.6, 1.788, 0.182, 85.2, 74.6, 60.6, 23.81, 5190),
                                     (79.0, 0.876, 0.079, 87.5, 76.9, 64.7, 24.33, 5220),
                                     (78.5, 0.832, 0.046, 90.3, 81.9, 52.3, 23.81, 5190),
                                     (81.2, 0.703, 0.020, 90.0, 81.7, 56.5, 15.55, 1000),
                                     (80.9, 0.713, 0.026, 89.2, 80.8, 52.5, 94.82, 5190)],
}


def table1_paper(cfg: dict) -> pd.DataFrame:
    """The paper's Table-1 block of ``cfg`` (its training set and backbone) as a frame indexed by method label;
    at smoke and cpu scale the CIFAR-10 / ResNet-18 block, the one the cpu analogue stands for."""
    key = (cfg["dataset"], cfg["arch"]) if cfg["scale"] == "paper" else _EXACT_BLOCK
    if key not in TABLE1:
        raise unknown_name("Table 1 block (training set, backbone)", f"{key[0]}, {key[1]}",
                           [f"{d}, {a}" for d, a in TABLE1])
    return pd.DataFrame(TABLE1[key], columns=list(_T1_COLS), index=[METHOD_LABELS[m] for m in METHODS])


_REF = "torch-uncertainty (March 2023), the paper's code"
#: Every known difference between this book's models and the reference implementation (rows: method,
#: aspect, reference, here, consequence). ``tests/test_packed_fidelity.py`` checks the rows it can.
BASELINES_AS_IMPLEMENTED = [
    ("BatchEnsemble", "fast-weight initialisation", "r, s ~ N(1, 0.5²)",
     "paper scale: the same (fast_weight_init='normal'); cpu and smoke: random signs ±1 (BatchEnsemble's "
     "paper; the models already cached)", "at cpu scale members start further apart; not tuned either way"),
    ("BatchEnsemble", "bias initialisation", "U(±1/√fan_in) on the classifier's per-member bias", "zeros",
     "—; not measured"),
    ("BatchEnsemble", "biases", "per-member bias on the classifier only; convolutions have none",
     "a per-member bias on every convolution too", "+0.02 M parameters on ResNet-18 (11.23 M vs 11.21 M)"),
    ("BatchEnsemble", "shortcut 1×1 convolution (basic block)", "a plain shared convolution",
     "a BatchEnsemble convolution (own fast weights)", "slightly more per-member capacity"),
    ("BatchEnsemble", "batch", "repeated M times in training and test; BN statistics shared", "same", "—"),
    ("MIMO", "input sharing ρ, batch repetition", "ρ = 1, no repetition (Table 1)", "same (defaults)", "—"),
    ("MIMO", "first convolution", "one convolution of the channel-stacked inputs",
     "the same function written as M grouped convolutions summed", "identical outputs and parameter count"),
    ("Masksembles", "where the masks act", "input of every convolution after the stem and of the classifier",
     "same", "—"),
    ("Masksembles", "mask generator", "Masksembles' generator (overlap set by the scale, binary search)",
     "each mask keeps round(C / scale) channels drawn uniformly (seeded), every channel kept by one mask",
     "different overlap between masks"),
    ("Masksembles", "mask storage", "frozen parameters (counted in Table 1's 11.24 M)",
     "buffers (not counted: 11.17 M, the single model's)",
     "counted, our masks give 11.19 M; the other 0.05 M of the paper's count is unexplained"),
    ("Packed-Ensembles", "layout", "full first convolution, M heads, γ = 1 in each block's first convolution, "
     "≥ 64 channels per group", "same", "Table 1's counts reproduced on CIFAR-10"),
    ("all ensembles", "training loss", "cross-entropy averaged over members", "same (member_loss='mean')", "—"),
    ("all", "randomness", "one seed per run", "weights, fast weights and masks from the run's init seed; "
     "data order and MIMO shuffles from its order seed", "—"),
]


def baselines_table() -> pd.DataFrame:
    """:data:`BASELINES_AS_IMPLEMENTED` as a frame."""
    return pd.DataFrame(BASELINES_AS_IMPLEMENTED,
                        columns=["method", "aspect", "reference: " + _REF, "this book", "consequence"])


def recipe_differences(cfg: dict) -> list[str]:
    """What still differs between ``cfg``'s training recipe and the reference implementation's."""
    out = []
    if cfg["scale"] != "paper":
        return [f"{cfg['scale']} scale: a CPU analogue (Fashion-MNIST, the {cfg['arch']} backbone, "
                f"{cfg['epochs']} epochs on {cfg['train_subset'] or 'all'} images, {cfg['schedule']} schedule), "
                "not the reference recipe, which the paper scale runs."]
    block = PAPER_BLOCKS.get((cfg["dataset"], cfg["arch"]))
    if block is not None:
        mine = {k: cfg.get(k) for k in block}
        changed = [f"{k} {mine[k]} (reference: {v})" for k, v in block.items() if mine[k] != v]
        if changed:
            out.append("overridden from the reference recipe of this block: " + ", ".join(changed))
    out += [
        "on a GPU the engine trains in bf16 mixed precision (the reference: fp32)",
        "the model kept is the last epoch's (the paper keeps the epoch of highest validation accuracy)",
        "images are in [0, 1] without the reference's per-channel mean/std normalisation",
    ]
    return out


# ---- timing (Fig. 1, App. H) ---------------------------------------------------------------------------------
TIMING_DTYPES = ("float32", "float16", "bfloat16")


def speed_table(models: dict[str, nn.Module], shape: tuple[int, int, int], *, device: str, batch_size: int,
                repeats: int, dtypes: Sequence[str] = ("float32",), train_batch: int = 0, train_steps: int = 0,
                num_classes: int = 10) -> pd.DataFrame:
    """Inference (and optionally training) throughput of each model on ``device``: one row per (round, model,
    dtype), ``repeats`` rounds.

    Every round times every model once, one after the other (``ed.models.inference_throughput`` with one
    timed run, and ``training_throughput``), so the k-th timings of two models are taken side by side and a
    ratio of two models is paired by round (:func:`speed_ratio`). Every model is timed on the same seeded
    batch; the timers move it to ``device``, cast it to the dtype and synchronise CUDA. Training is timed in
    float32 only (``train_steps`` > 0). The rounds say how much the timings move within this process, not
    between processes or machines.
    """
    for dt in dtypes:
        if dt not in TIMING_DTYPES:
            raise unknown_name("timing dtype", dt, TIMING_DTYPES)
    inputs = torch.randn(batch_size, *shape, generator=torch.Generator().manual_seed(0))
    rows = []
    for rnd in range(repeats):
        for label, net in models.items():
            for dt in dtypes:
                row = {"model": label, "dtype": dt, "device": str(device), "round": rnd,
                       "inference images/s": ed.models.inference_throughput(
                           net, shape, batch_size=batch_size, repeats=1, inputs=inputs, device=device,
                           dtype=getattr(torch, dt))}
                if train_steps and dt == "float32":
                    row["training images/s"] = ed.models.training_throughput(
                        net.float(), shape, num_classes=num_classes, batch_size=train_batch, steps=train_steps,
                        device=device)
                rows.append(row)
    for net in models.values():
        net.float().cpu()
    return pd.DataFrame(rows)


def speed_summary(speeds: pd.DataFrame) -> pd.DataFrame:
    """:func:`speed_table`'s rounds averaged: one row per (model, dtype), the mean images/s and its rounds."""
    cols = [c for c in ("inference images/s", "training images/s") if c in speeds]
    g = speeds.groupby(["model", "dtype"], sort=False)
    return g[cols].mean().join(g["round"].count().rename("rounds")).reset_index()


def speed_ratio(speeds: pd.DataFrame, a: str, b: str, *, column: str = "inference images/s",
                dtype: str = "float32") -> Any:
    """The throughput of model ``a`` over model ``b`` (``column``, ``dtype``), round by round: an
    :class:`~ensdiv.report.Estimate` whose replicates are the per-round ratios (source ``timing repeats``;
    its interval covers the spread of the timings within this process)."""
    rows = speeds[speeds["dtype"] == dtype].pivot(index="round", columns="model", values=column)
    for name in (a, b):
        if name not in rows:
            raise unknown_name("timed model", name, list(rows.columns))
    return ed.report.from_seeds((rows[a] / rows[b]).to_numpy(dtype=float), source="timing repeats")


# ---- App. F: sources of diversity ---------------------------------------------------------------------------
@contextlib.contextmanager
def deterministic_kernels(enabled: bool = True) -> Iterator[bool]:
    """Deterministic CUDA kernels inside the block (``torch.use_deterministic_algorithms`` and cuBLAS's
    ``CUBLAS_WORKSPACE_CONFIG=:4096:8``); yields whether anything changed. On a machine without CUDA it
    changes nothing: CPU kernels are deterministic already."""
    if not (enabled and torch.cuda.is_available()):
        yield False
        return
    was, env = torch.are_deterministic_algorithms_enabled(), os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    bench = torch.backends.cudnn.benchmark
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    try:
        yield True
    finally:
        torch.use_deterministic_algorithms(was)
        torch.backends.cudnn.benchmark = bench
        if env is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        else:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = env


def sources_of_diversity(cfg: dict, test: Any, *, deterministic: bool = False,
                         scratch: Any = None) -> tuple[dict[str, Tensor], bool]:
    """App. F's ensembles: M members of ``cfg``'s single model differing by chosen sources of randomness,
    and the M members of one PE-(α, M, γ) model; member logits ``(M, N, C)`` per condition.

    The models are built for ``cfg``'s training set (channels, size, classes read from it by the engine).
    With ``deterministic`` (and CUDA), the seed conditions are trained with deterministic kernels into
    a cache of their own (``<cache>/deterministic-kernels``), so that they carry no kernel noise and do
    not mix with the models other pages trained; "non-determinism only" is always trained without.

    Args:
        cfg: a resolved App.-F preset. test: the evaluation set.
        deterministic: see above. scratch: a :class:`~ensdiv.Store` factory for the throw-away retrains
            (default: a temporary folder each).

    Returns:
        ``(conditions, retrains_identical)``: whether every retrain equals the reference bit for bit.
    """
    (reference,) = recipes_for("single", cfg, 0)  # init seed 0, order seed 0
    m = cfg["num_estimators"]
    with deterministic_kernels(deterministic) as det:
        store = ed.Store(ed.default_store().root / "deterministic-kernels") if det else None

        def member(init: int, order: int) -> Tensor:
            return ed.predict(reference.replace(init_seed=init, order_seed=order), test, store=store)

        ref = member(0, 0)
        seeds = {"initialisation only": [member(i, 0) for i in range(m)],
                 "batch order only": [member(0, o) for o in range(m)],
                 "initialisation + order": [member(i, i) for i in range(m)]}

    def retrained() -> Tensor:
        if scratch is not None:
            return ed.predict(reference, test, store=scratch())
        with tempfile.TemporaryDirectory() as tmp:
            return ed.predict(reference, test, store=ed.Store(tmp))

    plain_ref = ed.predict(reference, test)  # the reference as the other pages trained it
    retrains = [retrained() for _ in range(m - 1)]
    conditions = {"nothing varies (one model, M times)": torch.stack([ref] * m),
                  "non-determinism only": torch.stack([plain_ref, *retrains]),
                  **{k: torch.stack(v) for k, v in seeds.items()},
                  "Packed-Ensembles members (one model)": method_logits(recipes_for("packed", cfg, 0), test)}
    return conditions, all(torch.equal(r, plain_ref) for r in retrains)


def disagreement_per_image(logits: Tensor) -> np.ndarray:
    """Per test image, the fraction of member pairs that predict different classes, from member logits
    ``(M, N, C)`` (M >= 2); its mean over the images is ``ed.metrics.disagreement`` of the predictions."""
    preds = logits.argmax(-1)
    m = preds.shape[0]
    if m < 2:
        raise InvalidInputError(f"Disagreement needs at least two members, got {m}.")
    pairs = [(preds[i] != preds[j]).double() for i in range(m) for j in range(i + 1, m)]
    return torch.stack(pairs).mean(0).numpy()


# ---- presets ------------------------------------------------------------------------------------------
# Presets of the Packed-Ensembles chapter (slug ``packed-ensembles``).
#
# The training keys (``arch`` ... ``augment``) are identical in every notebook that evaluates the
# Table-1 methods (tab01_*, tab02_*, fig01_*, appE_*, fig06_07_*, appF_*), so they resolve to the same
# recipes and share the cached models: tab01_efficient_ensembles trains, the others read (App. F's
# "initialisation + order" ensemble is run 0's Deep Ensemble, its reference member run 0's single model).
#
# Paper scale: CIFAR-10/100 with a CIFAR-style ResNet-18/50 and SVHN as OOD (Table 1), ImageNet with a
# ResNet-50 (Table 2). The paper's table of hyper-parameters (its Table 4) is not in the text we have
# (the ORASIS version), so every paper-scale recipe is the reference implementation's (torch-uncertainty,
# March 2023, ``optimization_procedures.py``): SGD with momentum 0.9, weight decay on every parameter,
# batch 128, random crop (4 px padding) + horizontal flip, the learning rate ×0.1 at epochs 25 and 50 of
# 75 (CIFAR-10 / ResNet-18). :data:`PAPER_BLOCKS` holds one recipe per (dataset, backbone) block of
# Table 1; :func:`recipe_differences` lists what still differs.

#: Table 1's (training set, backbone) blocks and the reference implementation's recipe of each: the
#: CIFAR-10 / ResNet-18 block uses heavy-ball momentum and ×0.1 at epochs 25/50 of 75, the other three
#: Nesterov momentum and ×0.2 at epochs 60/120/160 (200 epochs, read from the last milestone).
PAPER_BLOCKS = {
    ("cifar10/train", "resnet18"): {"epochs": 75, "lr": 0.05, "weight_decay": 5e-4, "milestones": [25, 50],
                                    "nesterov": False, "lr_decay": 0.1},
    ("cifar10/train", "resnet50"): {"epochs": 200, "lr": 0.1, "weight_decay": 5e-4, "milestones": [60, 120, 160],
                                    "nesterov": True, "lr_decay": 0.2},
    ("cifar100/train", "resnet18"): {"epochs": 200, "lr": 0.1, "weight_decay": 1e-4, "milestones": [60, 120, 160],
                                     "nesterov": True, "lr_decay": 0.2},
    ("cifar100/train", "resnet50"): {"epochs": 200, "lr": 0.1, "weight_decay": 5e-4, "milestones": [60, 120, 160],
                                     "nesterov": True, "lr_decay": 0.2},
}
_EXACT_BLOCK = ("cifar10/train", "resnet18")  # the block the cpu analogue stands for


def _paper_train(dataset: str = "cifar10/train", arch: str = "resnet18") -> dict:
    """The paper-scale training keys of one Table-1 block."""
    if (dataset, arch) not in PAPER_BLOCKS:
        raise unknown_name("Table 1 block (training set, backbone)", f"{dataset}, {arch}",
                           [f"{d}, {a}" for d, a in PAPER_BLOCKS])
    return {
        "arch": arch, "widths": None, "dataset": dataset, "train_subset": 0, "batch_size": 128,
        "schedule": "multistep", "decay_all": True, "augment": "flipcrop", "crop_pad": 4,
        "num_estimators": 4, "alpha": 2, "gamma": 2, "seeds": [0, 1, 2, 3, 4], "fast_weight_init": "normal",
        "test_set": dataset.replace("/train", "/test"), "test_subset": 0, "ood_set": "svhn/test", "ood_subset": 0,
        **PAPER_BLOCKS[(dataset, arch)],
    }


# same recipe keys as before (nesterov / lr_decay at their defaults drop out of the key): caches kept
_CPU_LIKE = {"milestones": [], "decay_all": False, "crop_pad": 2, "nesterov": False, "lr_decay": 0.1,
             "fast_weight_init": "random_sign"}
_TRAIN = {
    "smoke": {
        "arch": "test", "widths": None, "dataset": "fmnist/train", "train_subset": 256, "epochs": 1,
        "batch_size": 64, "lr": 0.05, "weight_decay": 5e-4, "schedule": "cosine", "augment": "none",
        "num_estimators": 2, "alpha": 2, "gamma": 2, "seeds": [0], **_CPU_LIKE,
        "test_set": "fmnist/test", "test_subset": 200, "ood_set": "digits", "ood_subset": 200,
    },
    "cpu": {
        # the zoo's data budget (10,000 images, 4 epochs) and the small ResNet's default widths 16-32-64,
        # so each PE-(2,4,2) member keeps 8-16-32 channels (at 8-16-32 the members had 4-8-16 and learnt little)
        "arch": "small", "widths": [16, 32, 64], "dataset": "fmnist/train", "train_subset": 10000, "epochs": 4,
        "batch_size": 128, "lr": 0.05, "weight_decay": 5e-4, "schedule": "cosine", "augment": "none",
        "num_estimators": 4, "alpha": 2, "gamma": 2, "seeds": [0, 1, 2], **_CPU_LIKE,
        "test_set": "fmnist/test", "test_subset": 2000, "ood_set": "digits", "ood_subset": 0,
    },
    "paper": _paper_train(),
}


# widths None: the backbone's default widths; milestones []: no step decay
_TRAIN_TYPES = {"widths": list[int], "milestones": list[int]}


# n_resamples: the paired bootstrap over the evaluation images (pages with fewer than MIN_SEEDS runs)
_RESAMPLES = {"smoke": 200, "cpu": 1000, "paper": 1000}


def _with_train(**extra_by_scale: dict) -> dict:
    out = {"common": extra_by_scale.pop("common", {}), "types": _TRAIN_TYPES}
    for scale, train in _TRAIN.items():
        out[scale] = {**train, "n_resamples": _RESAMPLES[scale], **extra_by_scale.get(scale, {})}
    return out


PRESETS = {
    "packed-ensembles/tab01_efficient_ensembles": _with_train(
        # member_loss_ablation: one more PE model (first seed) trained on the sum of its members' losses;
        # quality_reference: the zoo model whose accuracy tells whether the budget trains to the zoo's quality
        smoke={"member_loss_ablation": True, "quality_reference": "arch/resnet"},
        cpu={"member_loss_ablation": True, "quality_reference": "arch/resnet"},
        paper={"member_loss_ablation": False, "quality_reference": ""},
    ),
    "packed-ensembles/tab02_imagenet_ood_shift": _with_train(
        # cpu: the tab01 models (same recipes) judged on two OOD sets and a rendition-like shift.
        smoke={"ood_sets": ["digits", "textures/frost"], "shift_sets": ["fmnist-r"]},
        cpu={"ood_sets": ["digits", "textures/frost"], "shift_sets": ["fmnist-r"]},
        paper={"arch": "resnet50", "dataset": "imagenet/train", "test_set": "imagenet/val", "epochs": 90,
               "batch_size": 256, "lr": 0.1, "weight_decay": 1e-4, "augment": "flip", "alpha": 3, "gamma": 1,
               "schedule": "cosine", "milestones": [], "crop_pad": 2,
               "seeds": [0], "ood_sets": ["imagenet-o", "textures"], "shift_sets": ["imagenet-r"]},
    ),
    # throughput_repeats: timing rounds, every model once per round (at least 2: the ratios need an interval)
    "packed-ensembles/fig01_accuracy_vs_speed": {**_with_train(
        common={"throughput_batch": 128, "throughput_repeats": 5, "dtype": "float32"},
        smoke={"throughput_batch": 16, "throughput_repeats": 3},
    ), "ranges": {"throughput_repeats": (2, None)}},
    "packed-ensembles/fig06_07_alpha_gamma": _with_train(
        smoke={"alphas": [1, 2], "gammas": [1, 2], "seeds": [0]},
        cpu={"alphas": [1, 2, 3], "gammas": [1, 2, 4], "seeds": [0]},
        paper={"alphas": [1, 2, 3, 4], "gammas": [1, 2, 4], "seeds": [0, 1, 2]},
    ),
    # timing_batch / timing_repeats: the three forms timed on one batch, every form once per round
    "packed-ensembles/fig03_equivalent_forms": {
        "common": {"num_members": 3, "batch": 8, "seed": 0, "timing_batch": 128, "timing_repeats": 5},
        "smoke": {"timing_batch": 16, "timing_repeats": 3}, "cpu": {}, "paper": {"batch": 64},
        "ranges": {"timing_repeats": (2, None)},
    },
    "packed-ensembles/appE_ood_criteria": _with_train(
        cpu={"ood_set": "digits"}, paper=_paper_train("cifar100/train", "resnet18"),
    ),
    # App. F: members of the Table-1 single model whose initialisation and data-order seeds vary apart
    # (CIFAR-100 / ResNet-18 at paper scale, as the appendix); M = num_estimators. deterministic: train the
    # seed conditions with deterministic kernels (CUDA only; CPU kernels already are).
    "packed-ensembles/appF_sources_of_diversity": _with_train(
        common={"deterministic": False},
        paper={**_paper_train("cifar100/train", "resnet18"), "deterministic": True},
    ),
    # App. H: dtypes are the inference precisions timed (the appendix times 16-bit floats on a GPU; on a
    # CPU 16-bit kernels are emulated and slow, so cpu times float32 only; smoke runs both to test the path).
    "packed-ensembles/appH_training_speed": {
        # repeats: timing rounds, every model once per round (at least 2: the ratios need an interval)
        "common": {"num_estimators": 4, "archs": ["small", "resnet18"], "batch": 64, "train_batch": 32,
                   "repeats": 5, "train_steps": 2, "widths": [16, 32, 64], "dtypes": ["float32"]},
        "smoke": {"archs": ["test"], "batch": 8, "train_batch": 8, "repeats": 3, "train_steps": 1,
                  "widths": None, "dtypes": ["float32", "float16"]},
        "cpu": {},
        "paper": {"archs": ["resnet18", "resnet50"], "batch": 256, "train_batch": 128, "repeats": 5,
                  "train_steps": 10, "widths": None, "dtypes": ["float32", "float16"]},
        "types": {"widths": list[int]}, "ranges": {"repeats": (2, None)},
    },
}


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``packed-ensembles/<stem>`` at ``scale`` (see :func:`ensdiv.config.resolve_preset`).

    At paper scale, choosing ``dataset`` and/or ``arch`` selects that Table-1 block's reference recipe
    (:data:`PAPER_BLOCKS`: epochs, learning rate, weight decay, milestones, momentum kind, decay factor, test
    set); other explicit
    overrides still win.
    """
    name = stem if "/" in stem else f"{SLUG}/{stem}"
    if scale == "paper" and (overrides.get("dataset") or overrides.get("arch")) and name in PRESETS \
            and "arch" in PRESETS[name].get("paper", {}):
        base = chapter_preset(SLUG, PRESETS, stem, scale, verbose=False)
        block = _paper_train(overrides.get("dataset") or base["dataset"], overrides.get("arch") or base["arch"])
        keys = ("epochs", "lr", "weight_decay", "milestones", "nesterov", "lr_decay", "test_set", "dataset", "arch")
        overrides = {**{k: block[k] for k in keys}, **{k: v for k, v in overrides.items() if v is not None}}
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)
