"""The Packed-Ensembles chapter's methods: recipes, cached logits, Table-1 metrics and OOD scores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

import ensdiv as ed
from ensdiv import metrics as mt
from ensdiv.data.paper.stream import is_stream_set, stream_tensor_set
from ensdiv.errors import InvalidInputError, unknown_name

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


def eval_set(cfg: Any, role: str = "test", *, n: int | None = None) -> Any:
    """The evaluation set ``role`` of a page (the chapters' one signature): ``"test"``, the preset's ``test_set``,
    or the registered name of any other set (see ``ed.list_datasets()``: an OOD set, a shifted set), ``n`` images
    drawn with seed 0 (default the preset's ``test_subset``; 0: all; a page passes ``cfg.ood_subset`` for an OOD
    set).

    At cpu scale the chapter's sets are ``fmnist/test`` (in-distribution), ``digits`` (OOD, Table 1's
    SVHN), ``textures/frost`` (real texture photographs, Table 2's Textures) and ``fmnist-r``
    (renditions, Table 2's ImageNet-R); at paper scale ``cifar10/test``, ``svhn/test`` ... from ``$ENSDIV_DATA``,
    and Table 2's ImageNet sets (``imagenet/val``, ``imagenet-o``, ``textures``, ``imagenet-r``), read from their
    folders into memory (:func:`ensdiv.data.paper.stream.stream_tensor_set`: 224 px centre crops, [0, 1]).
    ImageNet-R is scored 1000-way, as a model trained on ImageNet-1k is used (our reading: the paper's rAcc does
    not say it restricts the logits to ImageNet-R's 200 classes).
    """
    name = cfg["test_set"] if role == "test" else role
    n = cfg["test_subset"] if n is None else n
    if is_stream_set(name):
        return stream_tensor_set(name, n, seed=0)
    data = ed.get_dataset(name)
    return data.subset(n, seed=0) if n else data


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
        lr_decay = 0.1  # no step to decay at: the default, so recipes that differ only there share a model
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
    test = eval_set(cfg)
    oods = {name: eval_set(cfg, name, n=cfg["ood_subset"]) for name in (ood_sets or [cfg["ood_set"]])}
    shifts = {name: eval_set(cfg, name) for name in shift_sets}
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

def mean_std(df: Any, *, by: Sequence[str] = ("method",), digits: int = 3) -> Any:
    """``mean ± std`` over seeds of every numeric column of :func:`compare_methods`' table; a group of one
    run shows its value alone (a spread of one run is not zero, it is unknown)."""
    skip = (*by, "seed", "ood_set", "criterion")
    num = [c for c in df.columns if c not in skip and df[c].dtype.kind in "fi"]
    g = df.groupby(list(by), sort=False)[num]
    mean, std, n = g.mean(), g.std(ddof=1), g.count()
    text = mean.round(digits).astype(str) + " ± " + std.round(digits).astype(str)
    return text.where(n > 1, mean.round(digits).astype(str))


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
