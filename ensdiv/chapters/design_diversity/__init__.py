"""The design-diversity chapter, first half (Rosales, Munoz, Paulitsch, *Exploring Resiliency to Natural
Image Corruptions in Deep Learning using Design Diversity*): Table 1, Fig. 4-7 / B, Table i / Fig. A.

Models are the shared zoo's recipes at ``smoke`` / ``cpu`` (:mod:`ensdiv.chapters.zoo`; the ``dd/*``
entries are the cpu analogues of the paper's Table i) and pretrained timm ImageNet models at ``paper``
(:func:`ensdiv.models.paper_models`; weights from timm's local cache only). The six evaluation sets
are keyed ``clean``, ``v2`` (re-sampled clean, the ImageNetV2 analogue) and the four ImageNet-C̄
corruptions at the paper's strengths (``plasma`` 4.0, ``checkerboard`` 4.0, ``waterdrop`` 7.0,
``lines`` 1.6): the registered ``fmnist/test``, ``fmnist-v2`` and ``fmnist-cbar/...`` sets at cpu,
corrupted copies of a few test images at smoke, local ImageNet val / V2 / C̄ folders at paper.

Attributions (captum Saliency, |∂ logit_label / ∂x|, target = the true label) are computed once per
(model, set, image subset) and cached in the store (bfloat16); the 364 ensembles' Eq. 7 scores are
then one Gram matrix and a gather (:func:`ensdiv.metrics.ensemble_attribution_diversity`).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

import ensdiv as ed
from ensdiv.chapters._presets import add_dry_blocks, chapter_preset
from ensdiv.chapters.design_diversity.evidence import adjusted_r2 as _adjusted_r2
from ensdiv.chapters.design_diversity.evidence import (
    bootstrap_counts,
    deal_maps,
    mean_estimates,
    member_null,
    permute_rows,
    swap_within,
    sweep_estimates,
    sweep_nulls,
    weighted_null,
)
from ensdiv.chapters.design_diversity.paper import (
    PAPER_FIG_A,
    PAPER_TABLE1,
    PAPER_TABLE1_ZOO,
    PAPER_TABLE_I,
    PAPER_ZOO,
    PAPER_ZOO_STANDS_FOR,
)
from ensdiv.chapters.zoo import zoo_recipes
from ensdiv.data.paper.stream import stream_tensor_set
from ensdiv.data.registry import subset_indices
from ensdiv.errors import unknown_name
from ensdiv.predict import dataset_fingerprint
from ensdiv.report.uncertainty import member_resample
from ensdiv.shards import fan_out
from ensdiv.train import model_cache_config

SLUG = "design-diversity"

__all__ = [
    "SLUG", "PRESETS", "preset", "SET_KEYS", "SET_LABELS", "CPU_SETS", "CBAR_SETS", "PAPER_TABLE1", "PAPER_FIG_A",
    "PAPER_TABLE_I",
    "chapter_models", "model_name", "model_params", "subset_index", "eval_set", "eval_rows", "chapter_logits",
    "chapter_labels",
    "chapter_attributions", "accuracy_table", "diversity_sweep", "minmax", "arch_class", "training_approach",
    "adjusted_r2", "recipe_settings", "zoo_recipes", "eval_set_key", "member_module", "member_cache_config",
    "SMOKE_ZOO", "PAPER_ZOO", "PAPER_ZOO_STANDS_FOR", "table_i_id", "nan_estimate", "member_estimates", "pearson",
    "correct", "ensemble_correct", "bootstrap_counts", "mean_estimates", "member_null", "permute_rows",
    "swap_within", "weighted_null", "sweep_estimates", "sweep_nulls", "deal_maps", "training_recipe",
]  # fmt: skip

SET_KEYS = ("clean", "v2", "plasma", "checkerboard", "waterdrop", "lines")
SET_LABELS = {"clean": "clean", "v2": "re-sampled clean", "plasma": "Plasma 4.0", "checkerboard": "Checkerboard 4.0",
              "waterdrop": "Waterdrop 7.0", "lines": "Lines 1.6"}  # fmt: skip
_CBAR = {"plasma": ("plasma_noise", 4.0), "checkerboard": ("checkerboard_cutout", 4.0),
         "waterdrop": ("water_drop", 7.0), "lines": ("lines", 1.6)}  # fmt: skip
CPU_SETS = {"clean": "fmnist/test", "v2": "fmnist-v2",
            **{k: f"fmnist-cbar/{c}/{t:.1f}" for k, (c, t) in _CBAR.items()}}  # fmt: skip
#: the ImageNet-C̄ sets of the paper (and of a paper-scale run): set key -> (corruption, strength)
CBAR_SETS = dict(_CBAR)

# ---- architecture classes and training approaches (Table 1's first two columns) --------------------------
_ARCH_CLASS = {
    "mlp": "MLP", "mixer": "MLP", "resmlp": "MLP", "small_cnn": "CNN", "squeezenet": "CNN", "resnet": "CNN",
    "resnext": "CNN", "densenet": "CNN", "convnext": "CNN", "convmixer": "CNN", "mobilenetv3": "NAS",
    "efficientnet": "NAS", "tf_efficientnet": "NAS", "mnasnet": "NAS", "semnasnet": "NAS", "vit": "ViT",
    "deit": "ViT", "swin": "ViT", "swinv2": "ViT",
}  # fmt: skip


def arch_class(model_name: str) -> str:
    """CNN / NAS / ViT / MLP of a registered or timm model name (``test_resnet``, ``resnet50.tv_in1k``)."""
    base = model_name.split(".")[0].removeprefix("test_")
    for key in sorted(_ARCH_CLASS, key=len, reverse=True):
        if base.startswith(key) and base[len(key) : len(key) + 1] in ("", "_", *"0123456789"):
            return _ARCH_CLASS[key]
    return "other"


def training_approach(member: Any) -> str:
    """Superv. / Self-sup. / K. distill. of a zoo recipe (its method) or a timm model (its weights tag)."""
    if isinstance(member, ed.Recipe):
        kind = type(member.method).__name__
        return {"Pretrain": "Self-sup." if getattr(member.method, "objective", "") == "simclr" else "Pre-trained",
                "Distill": "K. distill."}.get(kind, "Superv.")  # fmt: skip
    name = model_name(member)
    if "dino" in name or "_ssl" in name or "swsl" in name:
        return "Self-sup."
    return "K. distill." if "distilled" in name else "Superv."  # DeiT's own weights are supervised


def training_recipe(member: Any) -> str:
    """The training recipe a model's class is confounded with in Table 1: its optimiser and training approach
    (``"adamw / Superv."``) for a zoo recipe; the training approach alone for a pretrained model (its optimiser
    is not in its name).

    >>> training_recipe(ed.Recipe.make(model="test_resnet", optimizer="adamw"))
    'adamw / Superv.'
    """
    approach = training_approach(member)
    return f"{member.optim.optimizer} / {approach}" if isinstance(member, ed.Recipe) else approach


# ---- models ------------------------------------------------------------------------------------------------
def chapter_models(cfg: Any, keys: Sequence[str] | None = None) -> list:
    """The models of a page: zoo recipes named by their key without the category (smoke, cpu; also zoo
    keys at paper), or pretrained timm models (paper: a name without ``/``), in the order given."""
    out: list = []
    for key in list(keys or cfg["zoo"]):
        if "/" in key or cfg["scale"] != "paper":
            out += [r.replace(name=k.split("/", 1)[-1]) for k, r in zoo_recipes(cfg["scale"], [key]).items()]
        else:
            out += ed.models.paper_models([key])
    return out


def model_name(member: Any) -> str:
    return member.name if isinstance(member, ed.Recipe) else str(getattr(member, "ensdiv_name", type(member).__name__))


def table_i_id(member: Any) -> str:
    """The id of Table i / Fig. A a member stands for: a zoo recipe's name, or the paper's model a paper-scale
    timm model stands for (:data:`PAPER_ZOO_STANDS_FOR`; its own name when it stands for none)."""
    name = model_name(member)
    return PAPER_ZOO_STANDS_FOR.get(name, name)


def member_module(member: Any) -> nn.Module:
    """The module of a member in eval mode: a zoo recipe's trained (cached) model, else the module itself."""
    return (ed.train_recipe(member) if isinstance(member, ed.Recipe) else member).eval()


def member_cache_config(member: Any) -> Any:
    """What keys a member's cached outputs (logits, attributions, CKA): a recipe's
    :func:`ensdiv.train.model_cache_config`, else the module's ``ensdiv_cache_id`` (what decides its weights),
    else its class name."""
    if isinstance(member, ed.Recipe):
        return model_cache_config(member)
    return getattr(member, "ensdiv_cache_id", None) or {"module": type(member).__name__}


def model_params(members: Sequence[Any]) -> list[int]:
    """Parameter count of each model (a recipe's trained model is loaded from the cache)."""
    return [ed.count_params(member_module(m)) for m in members]


# ---- evaluation sets ---------------------------------------------------------------------------------------
def subset_index(n_total: int, n: int, seed: int) -> torch.Tensor:
    """Sorted indices of a seeded subset of ``n`` of ``n_total`` samples (all when ``n`` is 0 or too large).

    The first ``n`` entries of one seeded permutation: a smaller subset (the attribution images) lies
    inside a larger one (the evaluation images) drawn with the same seed. The registry's draw
    (:func:`ensdiv.data.registry.subset_indices`), so a paper-scale folder set read with
    :func:`ensdiv.data.paper.stream.stream_tensor_set` takes the same rows.
    """
    return subset_indices(n_total, n, seed=int(seed))


def _paper_set_name(key: str) -> str:
    """The stream set behind a paper-scale evaluation set key other than ``clean``: ImageNet-V2 or an ImageNet-C̄
    corruption at the paper's strength."""
    if key == "v2":
        return "imagenet-v2"
    corruption, strength = _CBAR[key]
    return f"imagenet-cbar/{corruption}/{strength:.1f}"


def eval_set(cfg: Any, role: str = "clean", *, n: int | None = None) -> ed.TensorSet:
    """The evaluation set ``role`` of a page (the chapters' one signature): one of ``SET_KEYS`` (``"clean"``, the
    re-collected ``"v2"`` and the four ImageNet-C̄ corruptions), ``n`` images (default ``cfg.eval_images``; 0 = all)
    drawn with ``cfg.seed``. :func:`eval_rows` also gives the registered set and the rows taken from it."""
    return eval_rows(cfg, role, n)[0]


def eval_rows(cfg: Any, key: str, n: int | None = None) -> tuple[ed.TensorSet, str, torch.Tensor | None]:
    """The evaluation set ``key`` of a page with where it comes from: ``(data, name, index)``.

    ``n`` images (default ``cfg.eval_images``; 0 = all) drawn with ``cfg.seed``. At cpu ``name`` is the
    registered set and ``index`` the rows taken from it (so cached full-set predictions can be sliced);
    at smoke and paper ``index`` is None and ``data`` is its own set.
    """
    if key not in SET_KEYS:
        raise unknown_name("evaluation set", key, SET_KEYS)
    n = cfg["eval_images"] if n is None else n
    seed, scale = cfg["seed"], cfg["scale"]
    if scale == "cpu":
        full = ed.get_dataset(CPU_SETS[key])
        idx = subset_index(len(full), n, seed)
        return (full if len(idx) == len(full) else ed.TensorSet(full.x[idx], full.y[idx], f"{full.name}[{n}@{seed}]",
                full.classes, full.description)), CPU_SETS[key], idx  # fmt: skip
    if scale == "smoke":  # a few test images, shifted by the set's own transform (no whole set is built)
        clean = ed.get_dataset("fmnist/test")
        idx = subset_index(len(clean), n, seed)
        x = clean.x[idx] if key == "clean" else ed.data.shift_images(CPU_SETS[key], clean.x[idx])
        return ed.TensorSet(x, clean.y[idx], f"{CPU_SETS[key]}[smoke {n}@{seed}]", clean.classes), CPU_SETS[key], None
    if key == "clean":
        full = ed.get_dataset("imagenet/val-5k")
        idx = subset_index(len(full), n, seed)
        sub = full if len(idx) == len(full) else ed.TensorSet(full.x[idx], full.y[idx], f"{full.name}[{n}@{seed}]",
                                                              full.classes)  # fmt: skip
        return sub, full.name, None
    # ImageNet-V2 / -C̄ from their folders: the seeded subset framed as every paper-scale evaluation set (resized to
    # 256, centre crop 224, [0, 1] pixels); labels index ImageNet-1k's 1000 classes, whichever a folder holds
    data = stream_tensor_set(_paper_set_name(key), int(n), seed=int(seed))
    return data, data.name, None


def eval_set_key(data: ed.TensorSet, name: str, idx: torch.Tensor | None) -> str:
    """The cache key of an evaluation set as :func:`eval_rows` returns it (``data``, its registered ``name``, the
    rows ``idx`` taken or ``None``): the name when every row is taken, the name and a hash of the rows for a
    subset, else (``idx`` is ``None``: a set built here) the set's name and a hash of its content."""
    if idx is None:
        return f"{data.name}#{dataset_fingerprint(data)[:16]}"
    if data.name == name:
        return name
    return f"{name}#rows-{hashlib.sha256(idx.numpy().astype(np.int64).tobytes()).hexdigest()[:16]}"


def chapter_labels(cfg: Any, key: str, n: int | None = None) -> torch.Tensor:
    """Labels of :func:`eval_set`, shape (N,)."""
    return eval_set(cfg, key, n=n).y


def chapter_logits(cfg: Any, members: Sequence[Any], key: str, n: int | None = None) -> torch.Tensor:
    """Logits (M, N, C) of every model on :func:`eval_set` ``key``, cached.

    At cpu, a model whose predictions on the whole registered set are cached (the zoo caches the test
    set) gets the rows of those; otherwise it runs on the subset (cached under the subset's key).
    Pretrained paper models are cached under their weights' identity.
    """
    data, name, idx = eval_rows(cfg, key, n)
    out = []
    for m in members:
        if isinstance(m, ed.Recipe):
            full = ed.cached_predictions(m, name) if idx is not None else None
            out.append(full[idx] if full is not None else ed.predict(m, data))
        else:
            conf = {"model": member_cache_config(m), "set": eval_set_key(data, name, idx)}
            out.append(ed.cached("dd-logits", conf, lambda m=m: {"logits": ed.predict(m, data)})["logits"])
    return torch.stack(out)


def chapter_attributions(cfg: Any, members: Sequence[Any], key: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Saliency maps (M, Na, C, H, W) of every model on ``cfg.attr_images`` images of set ``key``, and their labels.

    captum Saliency with respect to the logit of the true label, absolute values when ``cfg.attr_abs``
    (captum's and the paper's default). Computed once per (model, set, images) and cached in bfloat16.
    Under ``torchrun`` the members are split across the job's ranks (:func:`ensdiv.shards.fan_out`: each rank
    computes its share into the cache, then every rank reads all of them); a recipe member must be trained
    before (as :func:`chapter_logits` does on every rank), a training being every rank's collective.
    """
    data, name, idx = eval_rows(cfg, key, cfg["attr_images"])
    set_key = eval_set_key(data, name, idx)

    def member_maps(m: Any) -> torch.Tensor:
        conf = {"model": member_cache_config(m), "set": set_key, "method": "saliency",
                "abs": bool(cfg["attr_abs"]), "target": "label"}  # fmt: skip

        def compute() -> dict:
            net = member_module(m)
            for p in net.parameters():
                p.requires_grad_(False)  # gradients w.r.t. the input only
            a = ed.metrics.attributions(net, data.x, data.y, method="saliency", abs=bool(cfg["attr_abs"]),
                                        batch_size=cfg["attr_batch"])  # fmt: skip
            return {"maps": a.to(torch.bfloat16)}

        return ed.cached("dd-attributions", conf, compute)["maps"].float()

    return torch.stack(fan_out(members, member_maps, desc="attributions")), data.y


# ---- tables and sweeps -------------------------------------------------------------------------------------
def accuracy_table(logits: torch.Tensor, labels: torch.Tensor, ks: Sequence[int] = (1, 2, 5)) -> np.ndarray:
    """Top-k accuracy in % of each model: an (M, len(ks)) array."""
    return np.array([[100 * float(ed.metrics.topk_accuracy(z, labels, k=k)) for k in ks] for z in logits])


def minmax(values: Any) -> np.ndarray:
    """(v - min) / (max - min) over the ensembles: the paper's "normalized diversity metric" (our reading)."""
    v = np.asarray(values, dtype=float)
    span = np.nanmax(v) - np.nanmin(v)
    return (v - np.nanmin(v)) / span if span > 0 else np.zeros_like(v)


def diversity_sweep(logits: torch.Tensor, labels: torch.Tensor, attr: torch.Tensor, *, how: str, size: int = 3,
                    params: Sequence[int] | None = None, names: Sequence[str] | None = None, seed: int = 0
                    ) -> pd.DataFrame:  # fmt: skip
    """Every ``size``-member ensemble: accuracy, improvement over the best member, disagreement (Eq. 4)
    and attribution diversity (Eq. 7, raw and per-map L2-normalised), with min-max normalised copies.

    ``attr`` may cover fewer images than ``logits`` (a subset): Eq. 7 is a mean over samples.
    Accuracies and improvements are in %.
    """
    df = ed.metrics.ensemble_sweep(logits, labels, size=size, how=how, params=params, names=names, seed=seed)
    combos = torch.tensor(df["members"].tolist())
    gram = ed.metrics.attribution_gram(attr)
    gram_l2 = ed.metrics.attribution_gram(ed.metrics.normalize_attributions(attr))
    df["attribution_diversity"] = ed.metrics.ensemble_attribution_diversity(gram, combos, gram=True).numpy()
    df["attribution_diversity_l2"] = ed.metrics.ensemble_attribution_diversity(gram_l2, combos, gram=True).numpy()
    for col in ("accuracy", "best_member_accuracy", "mean_member_accuracy", "improvement"):
        df[col] = 100 * df[col]
    for col in ("attribution_diversity", "attribution_diversity_l2", "oracle_disagreement", "mean_member_accuracy"):
        df[col + " (norm.)"] = minmax(df[col])
    return df


def adjusted_r2(y: Any, groups: Any = None, x: Any = None) -> float:
    """Adjusted R² of ``y`` explained by a categorical ``groups`` (one-way ANOVA) or a numeric ``x`` (OLS), by
    ordinary least squares (:func:`ensdiv.chapters.design_diversity.evidence.adjusted_r2`)."""
    return _adjusted_r2(y, groups=groups, x=x)


def recipe_settings(member: Any) -> dict:
    """A zoo recipe's training settings in the columns of the paper's Table i."""
    r = member
    arch = r.model.name + (f" {r.model.kwargs}" if getattr(r.model, "kwargs", None) else "")
    if r.model.dropout:
        arch += f", dropout {r.model.dropout}"
    o = r.optim
    opt = f"{o.optimizer} lr {o.lr:g} wd {o.weight_decay:g}"
    method = type(r.method).__name__
    epochs = f"{o.epochs}"
    if method == "Pretrain":
        epochs = f"{r.method.epochs} ({r.method.objective}) + {o.epochs} probe"
    return {"architecture": arch, "optimizer": opt, "scheduler": o.schedule, "epochs": epochs,
            "batch": o.batch_size, "method": method}


# ---- intervals for the claims (ed.report estimates) ------------------------------------------------------------
_GROUPS = itertools.count()


def nan_estimate(source: str = "evaluation samples") -> ed.report.Estimate:
    """An estimate this run cannot compute (too few points, a model the scale lacks): not testable, and the
    check it feeds still carries an interval once computable."""
    return ed.report.Estimate(float("nan"), np.array([]), source, "bootstrap")


def pearson(x: Any, y: Any) -> float:
    """Pearson's r of two series (NaN when either is constant or fewer than 3 values)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def member_estimates(members: Sequence[Sequence[int]], columns: dict[str, Any], statistics: dict[str, Any], *,
                     n_boot: int, seed: int, source: str = "ensemble members") -> dict[str, ed.report.Estimate]:
    """Statistics over ensembles (one value of each column per ensemble) with intervals from a bootstrap over
    their *members* (:func:`ensdiv.report.uncertainty.member_resample`): ensembles that share a member move
    together. Every statistic sees the same columns, seed and members, so they are resampled alike and their
    estimates are paired (one group). ``statistics`` maps a name to ``f(columns) -> float``."""
    group = f"dd-members-{next(_GROUPS)}"
    out = {}
    for name, fn in statistics.items():
        r = member_resample(columns, [tuple(m) for m in members], fn, n_boot=n_boot, ci=ed.report.LEVEL, seed=seed)
        out[name] = ed.report.Estimate(r["rho"], np.asarray(r["replicates"], dtype=float), source, "bootstrap", group)
    return out


def correct(logits: torch.Tensor, labels: torch.Tensor) -> np.ndarray:
    """Per-image top-1 correctness (0/1) of each model: ``(M, N)`` logits -> ``(M, N)`` array."""
    return (logits.argmax(-1) == labels).numpy().astype(float)


def ensemble_correct(logits: torch.Tensor, labels: torch.Tensor, combos: Any = None) -> np.ndarray:
    """Per-image correctness of logit-averaged ensembles: of all members (``combos`` None, ``(N,)``) or of each
    member tuple of ``combos`` (``(E, N)``)."""
    if combos is None:
        return (logits.float().mean(0).argmax(-1) == labels).numpy().astype(float)
    combos = torch.as_tensor(np.asarray([list(c) for c in combos]), dtype=torch.long)
    return np.stack([(logits[c].float().mean(0).argmax(-1) == labels).numpy() for c in combos]).astype(float)


# ---- presets ------------------------------------------------------------------------------------------------
#: smoke scale: the zoo entries standing for Table i's models (the smoke zoo has no ``dd/*`` entries)
SMOKE_ZOO = ["arch/small_cnn", "arch/mlp", "arch/resnet", "arch/vit", "arch/squeezenet"]
_COMMON = {"seed": 0, "eval_images": 0, "attr_images": 0, "attr_abs": True, "attr_batch": 250, "ensemble_size": 3,
           "ci": 0.90, "n_resamples": 1000}  # fmt: skip

PRESETS: dict = {
    "design-diversity/tab01_architecture_resiliency": {
        "common": _COMMON,
        "smoke": {"zoo": ["arch/small_cnn", "arch/mlp", "arch/resnet", "arch/vit", "framework/resnet-simclr"],
                  "eval_images": 200},
        # cpu: every architecture of the zoo + its self-supervised and distilled models; Lines on 5,000 images
        "cpu": {"zoo": ["arch/*", "framework/resnet-simclr", "framework/deit-distill-hard", "dd/dino_deit_tiny1"],
                "eval_images": 5000},
        "paper": {"zoo": PAPER_TABLE1_ZOO, "eval_images": 5000},
    },
    "design-diversity/fig04_baseline_corruptions": {
        "common": {**_COMMON, "baseline": "arch/resnet"},
        "smoke": {"eval_images": 200},
        "cpu": {"eval_images": 0},
        "paper": {"baseline": "resnet50.tv_in1k", "eval_images": 5000},
    },
    "design-diversity/fig05_06_ensemble_diversity": {
        "common": _COMMON,
        "smoke": {"zoo": SMOKE_ZOO, "eval_images": 200, "attr_images": 64},
        # cpu: the 14 dd/* models; accuracy on the whole test set (cached by the zoo), saliency on 1,000 images
        "cpu": {"zoo": ["dd/*"], "eval_images": 0, "attr_images": 1000},
        "paper": {"zoo": PAPER_ZOO, "eval_images": 5000, "attr_images": 250, "attr_batch": 25},
    },
    "design-diversity/fig07_trend_lines": {
        "common": {**_COMMON, "sets": ["v2", "plasma", "checkerboard", "waterdrop", "lines"]},
        "smoke": {"zoo": SMOKE_ZOO, "eval_images": 200, "attr_images": 64},
        "cpu": {"zoo": ["dd/*"], "eval_images": 5000, "attr_images": 1000},
        "paper": {"zoo": PAPER_ZOO, "eval_images": 5000, "attr_images": 250, "attr_batch": 25},
    },
    "design-diversity/tabA_zoo_training": {
        "common": _COMMON,
        "smoke": {"zoo": SMOKE_ZOO},
        "cpu": {"zoo": ["dd/*"]},
        "paper": {"zoo": PAPER_ZOO, "eval_images": 5000},
    },
}

for _spec in PRESETS.values():  # bootstrap resamples of the claims' intervals: fewer at smoke (code path only)
    _spec["smoke"] = {**_spec["smoke"], "n_resamples": 200}
#: a dry run's sizes (ensdiv run --dry-run: the paper presets on a few fake images, random weights)
DRY_SIZES = {"eval_images": 8, "attr_images": 4, "attr_batch": 4, "n_resamples": 200}
#: a dry run's models: the smallest of each paper list (tiny DeiT, the small NAS nets, a ResNet-50, Swin-T)
DRY_ZOO = ["mnasnet_small.lamb_in1k", "semnasnet_075.rmsp_in1k", "deit_tiny_patch16_224.fb_in1k", "resnet50.tv_in1k",
           "swin_tiny_patch4_window7_224.ms_in1k"]
add_dry_blocks(PRESETS, DRY_SIZES, pick={"zoo": DRY_ZOO})


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``design-diversity/<stem>`` at ``scale`` (see :func:`ensdiv.config.resolve_preset`)."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)
