"""The Packed-Ensembles chapter's pipeline: methods → recipes → cached logits → Table-1 metrics.

Every notebook of ``notebooks/packed-ensembles/`` goes through these functions, so the same method,
scale and seed always map to the same :class:`~ensdiv.Recipe` and hence to the same cached model:
``tab01`` trains them, ``tab02``, ``fig01``, ``appE`` and ``fig06_07`` only read the cache.

Methods (Table 1 of packed-ensembles): ``single``, ``batchensemble``, ``mimo``, ``masksembles``,
``packed`` (PE-(α, M, γ)) and ``deep_ensemble`` (M single models with consecutive seeds; member 0
is the ``single`` model of the same seed, as a Deep Ensemble is M trained single models).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import ensdiv.models.efficient  # noqa: F401  (registers the chapter's models)
from ensdiv.errors import EnsdivError, unknown_name

__all__ = [
    "METHODS",
    "METHOD_LABELS",
    "OOD_CRITERIA",
    "model_name",
    "method_recipes",
    "method_logits",
    "method_cost",
    "build_method",
    "ood_scores",
    "evaluate",
    "eval_set",
    "SequentialEnsemble",
    "inference_throughput",
    "training_throughput",
    "base_recipe",
    "recipes_for",
    "compare_methods",
    "mean_std",
]

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
    from ensdiv.predict import predict

    outs = [predict(r, dataset) for r in recipes]
    return torch.cat([o if o.dim() == 3 else o.unsqueeze(0) for o in outs])


def build_method(method: str, *, arch: str, num_classes: int = 10, in_chans: int = 1, img_size: int = 28,
                 num_estimators: int = 4, alpha: float = 2, gamma: int = 2, **kw: Any) -> nn.Module:
    """An untrained model of ``method`` (costs, speed); a Deep Ensemble is a :class:`SequentialEnsemble`."""
    from ensdiv.models.registry import create_model

    _check_method(method)
    name = model_name(method, arch)
    shape = {"num_classes": num_classes, "in_chans": in_chans, "img_size": img_size}
    if method in ("single", "deep_ensemble"):
        n = num_estimators if method == "deep_ensemble" else 1
        members = [create_model(name, **shape, **kw) for _ in range(n)]
        return members[0] if n == 1 else SequentialEnsemble(members)
    extra = {"alpha": alpha, "gamma": gamma} if method == "packed" else {}
    return create_model(name, **shape, num_estimators=num_estimators, **extra, **kw)


def method_cost(model: nn.Module, input_shape: tuple[int, int, int]) -> dict[str, float]:
    """Parameters (millions) and mult-adds (millions, per image) as in Table 1's last columns."""
    from ensdiv.packed import count_mult_adds, count_params

    return {"params_M": count_params(model) / 1e6, "mult_adds_M": count_mult_adds(model, input_shape) / 1e6}


class SequentialEnsemble(nn.Module):
    """M independent networks run one after the other (Deep Ensembles, form (a) of Figure 3).

    Shape: ``(B, ...) -> (M, B, C)``.
    """

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, x: Tensor) -> Tensor:
        return torch.stack([m(x) for m in self.members])

    def training_loss(self, x: Tensor, y: Tensor) -> Tensor:
        return sum(F.cross_entropy(m(x), y) for m in self.members) / len(self.members)


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
    from ensdiv import metrics as mt

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
    from ensdiv import metrics as mt

    probs = logits.float().softmax(-1).mean(0)
    out = {"acc": 100 * mt.accuracy(probs, labels), "nll": mt.nll(probs, labels),
           "ece": mt.ece(probs, labels, n_bins=n_bins)}
    if ood_logits is not None:
        s_id, s_ood = ood_scores(logits, criterion), ood_scores(ood_logits, criterion)
        out.update(aupr=100 * mt.aupr(s_id, s_ood), auroc=100 * mt.auroc(s_id, s_ood),
                   fpr95=100 * mt.fpr_at_tpr(s_id, s_ood, tpr=0.95))
    return out


def eval_set(name: str, *, subset: int = 0) -> Any:
    """The registered evaluation set ``name`` (see ``ed.list_datasets()``), ``subset`` images drawn with seed 0.

    At cpu scale the chapter's sets are ``fmnist/test`` (in-distribution), ``digits`` (OOD, Table 1's
    SVHN), ``textures/frost`` (real texture photographs, Table 2's Textures) and ``fmnist-r``
    (renditions, Table 2's ImageNet-R); at paper scale ``cifar10/test``, ``svhn/test`` ... from ``$ENSDIV_DATA``.
    """
    from ensdiv.data.registry import get_dataset

    data = get_dataset(name)
    return data.subset(subset, seed=0) if subset else data


@torch.no_grad()
def inference_throughput(model: nn.Module, input_shape: tuple[int, ...], *, batch_size: int = 256,
                         repeats: int = 5, warmup: int = 1, min_time: float = 0.2,
                         inputs: Tensor | None = None) -> float:
    """Images per second of ``model`` in eval mode (median over ``repeats`` timed runs).

    Each timed run repeats the forward pass until ``min_time`` seconds have passed. ``inputs``
    (default: a seeded random batch of ``batch_size``) lets several models be timed on one batch.
    """
    if repeats < 1 or batch_size < 1:
        raise EnsdivError("inference_throughput needs repeats >= 1 and batch_size >= 1.")
    model.eval()
    x = inputs if inputs is not None else torch.randn(batch_size, *input_shape,
                                                      generator=torch.Generator().manual_seed(0))
    batch_size = x.shape[0]
    for _ in range(warmup):
        model(x)
    rates = []
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        while True:
            model(x)
            n += 1
            dt = time.perf_counter() - t0
            if dt >= min_time:
                break
        rates.append(n * batch_size / dt)
    return float(sorted(rates)[len(rates) // 2])


def training_throughput(model: nn.Module, input_shape: tuple[int, ...], *, num_classes: int = 10,
                        batch_size: int = 128, steps: int = 5, warmup: int = 1) -> float:
    """Images per second of SGD steps (forward, ``training_loss`` or cross-entropy, backward, step)."""
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch_size, *input_shape, generator=g)
    y = torch.randint(0, num_classes, (batch_size,), generator=g)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = model.training_loss(x, y) if hasattr(model, "training_loss") else F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * batch_size / (time.perf_counter() - t0)


# ---- from a notebook's configuration ----------------------------------------------------------------
def base_recipe(cfg: dict) -> Any:
    """The training recipe shared by every method of the chapter at ``cfg``'s scale."""
    from ensdiv.recipes import Recipe

    return Recipe(model=model_name("single", cfg["arch"]), dataset=cfg["dataset"], epochs=cfg["epochs"],
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
    import pandas as pd

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
