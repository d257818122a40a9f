"""The Packed-Ensembles chapter's pipeline: methods → recipes → cached logits → Table-1 metrics.

Every notebook of ``notebooks/packed-ensembles/`` goes through these functions, so the same method,
scale and seed always map to the same :class:`~ensdiv.Recipe` and hence to the same cached model:
``tab01_efficient_ensembles`` trains them; ``tab02_imagenet_ood_shift``, ``fig01_accuracy_vs_speed``,
``appE_ood_criteria``, ``fig06_07_alpha_gamma`` and ``appF_sources_of_diversity`` read the cache.

Methods (Table 1 of packed-ensembles): ``single``, ``batchensemble``, ``mimo``, ``masksembles``,
``packed`` (PE-(α, M, γ)) and ``deep_ensemble`` (M single models with consecutive seeds; member 0
is the ``single`` model of the same seed, as a Deep Ensemble is M trained single models).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

import ensdiv as ed
from ensdiv import metrics as mt
from ensdiv.chapters._presets import chapter_preset
from ensdiv.errors import unknown_name

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
    """The training recipe shared by every method of the chapter at ``cfg``'s scale."""

    return ed.Recipe.make(model=model_name("single", cfg["arch"]), dataset=cfg["dataset"], epochs=cfg["epochs"],
                  batch_size=cfg["batch_size"], lr=cfg["lr"], optimizer="sgd", momentum=0.9,
                  weight_decay=cfg["weight_decay"], schedule=cfg["schedule"], augment=cfg["augment"],
                  train_subset=cfg["train_subset"])


def recipes_for(method: str, cfg: dict, seed: int, *, alpha: float | None = None,
                gamma: int | None = None) -> list[Any]:
    """:func:`method_recipes` with the data, backbone and PE-(α, M, γ) of ``cfg``."""
    kw = {"widths": list(cfg["widths"])} if cfg.get("widths") else {}
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


def mean_std(df: Any, *, by: Sequence[str] = ("method",), digits: int = 3) -> Any:
    """``mean ± std`` over seeds of every numeric column of :func:`compare_methods`' table."""
    skip = (*by, "seed", "ood_set", "criterion")
    num = [c for c in df.columns if c not in skip and df[c].dtype.kind in "fi"]
    g = df.groupby(list(by), sort=False)[num]
    mean, std = g.mean(), g.std(ddof=1).fillna(0.0)
    return mean.round(digits).astype(str) + " ± " + std.round(digits).astype(str)


# ---- presets ------------------------------------------------------------------------------------------
# Presets of the Packed-Ensembles chapter (slug ``packed-ensembles``).
#
# The training keys (``arch`` ... ``augment``) are identical in every notebook that evaluates the
# Table-1 methods (tab01_*, tab02_*, fig01_*, appE_*, fig06_07_*, appF_*), so they resolve to the same
# recipes and share the cached models: tab01_efficient_ensembles trains, the others read (App. F's
# "initialisation + order" ensemble is run 0's Deep Ensemble, its reference member run 0's single model).
#
# Paper scale: CIFAR-10 with a CIFAR-style ResNet-18 and SVHN as OOD (Table 1), ImageNet with a
# ResNet-50 (Table 2). The appendix table of hyper-parameters is not part of the paper text we have
# (the ORASIS version); the values below are those of the reference implementation's CIFAR-10
# ResNet-18 configuration (75 epochs, SGD lr 0.05, momentum 0.9, weight decay 5e-4, batch 128,
# random crop + flip). Its schedule divides the learning rate by 10 at epochs 25 and 50; the shared
# engine's ``step`` schedule does so at 50 % and 75 % of training, the closest available.

_TRAIN = {
    "smoke": {
        "arch": "test", "widths": None, "dataset": "fmnist/train", "train_subset": 256, "epochs": 1,
        "batch_size": 64, "lr": 0.05, "weight_decay": 5e-4, "schedule": "cosine", "augment": "none",
        "num_estimators": 2, "alpha": 2, "gamma": 2, "seeds": [0],
        "test_set": "fmnist/test", "test_subset": 200, "ood_set": "digits", "ood_subset": 200,
    },
    "cpu": {
        # the zoo's data budget (10,000 images, 4 epochs) and the small ResNet's default widths 16-32-64,
        # so each PE-(2,4,2) member keeps 8-16-32 channels (at 8-16-32 the members had 4-8-16 and learnt little)
        "arch": "small", "widths": [16, 32, 64], "dataset": "fmnist/train", "train_subset": 10000, "epochs": 4,
        "batch_size": 128, "lr": 0.05, "weight_decay": 5e-4, "schedule": "cosine", "augment": "none",
        "num_estimators": 4, "alpha": 2, "gamma": 2, "seeds": [0, 1, 2],
        "test_set": "fmnist/test", "test_subset": 2000, "ood_set": "digits", "ood_subset": 0,
    },
    "paper": {
        "arch": "resnet18", "widths": None, "dataset": "cifar10/train", "train_subset": 0, "epochs": 75,
        "batch_size": 128, "lr": 0.05, "weight_decay": 5e-4, "schedule": "step", "augment": "flipcrop",
        "num_estimators": 4, "alpha": 2, "gamma": 2, "seeds": [0, 1, 2, 3, 4],
        "test_set": "cifar10/test", "test_subset": 0, "ood_set": "svhn/test", "ood_subset": 0,
    },
}


def _with_train(**extra_by_scale: dict) -> dict:
    out = {"common": extra_by_scale.pop("common", {})}
    for scale, train in _TRAIN.items():
        out[scale] = {**train, **extra_by_scale.get(scale, {})}
    return out


PRESETS = {
    "packed-ensembles/tab01_efficient_ensembles": _with_train(),
    "packed-ensembles/tab02_imagenet_ood_shift": _with_train(
        # cpu: the tab01 models (same recipes) judged on two OOD sets and a rendition-like shift.
        smoke={"ood_sets": ["digits", "textures/frost"], "shift_sets": ["fmnist-r"]},
        cpu={"ood_sets": ["digits", "textures/frost"], "shift_sets": ["fmnist-r"]},
        paper={"arch": "resnet50", "dataset": "imagenet/train", "test_set": "imagenet/val", "epochs": 90,
               "batch_size": 256, "lr": 0.1, "weight_decay": 1e-4, "augment": "flip", "alpha": 3, "gamma": 1,
               "seeds": [0], "ood_sets": ["imagenet-o", "textures"], "shift_sets": ["imagenet-r"]},
    ),
    "packed-ensembles/fig01_accuracy_vs_speed": _with_train(
        common={"throughput_batch": 128, "throughput_repeats": 3},
        smoke={"throughput_batch": 16, "throughput_repeats": 1},
    ),
    "packed-ensembles/fig06_07_alpha_gamma": _with_train(
        smoke={"alphas": [1, 2], "gammas": [1, 2], "seeds": [0]},
        cpu={"alphas": [1, 2, 3], "gammas": [1, 2, 4], "seeds": [0]},
        paper={"alphas": [1, 2, 3, 4], "gammas": [1, 2, 4], "seeds": [0, 1, 2]},
    ),
    "packed-ensembles/fig03_equivalent_forms": {
        "common": {"num_members": 3, "batch": 8, "seed": 0},
        "smoke": {}, "cpu": {}, "paper": {"batch": 64},
    },
    "packed-ensembles/appE_ood_criteria": _with_train(
        cpu={"ood_set": "digits"}, paper={"dataset": "cifar100/train", "test_set": "cifar100/test"},
    ),
    # App. F: members of the Table-1 single model whose initialisation and data-order seeds vary apart
    # (CIFAR-100 at paper scale, as the appendix); M = num_estimators.
    "packed-ensembles/appF_sources_of_diversity": _with_train(
        paper={"dataset": "cifar100/train", "test_set": "cifar100/test"},
    ),
    "packed-ensembles/appH_training_speed": {
        "common": {"num_estimators": 4, "archs": ["small", "resnet18"], "batch": 64, "train_batch": 32,
                   "repeats": 3, "train_steps": 2, "widths": [16, 32, 64]},
        "smoke": {"archs": ["test"], "batch": 8, "train_batch": 8, "repeats": 1, "train_steps": 1,
                  "widths": None},
        "cpu": {},
        "paper": {"archs": ["resnet18", "resnet50"], "batch": 256, "train_batch": 128, "repeats": 5,
                  "train_steps": 10, "widths": None},
    },
}


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``packed-ensembles/<stem>`` at ``scale`` (see :func:`ensdiv.config.resolve_preset`)."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)
