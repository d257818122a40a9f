"""The SED chapter's pipeline (Rubinstein et al., *Scalable Ensemble Diversification for OOD
Generalization and Detection*): methods → Heads recipes over one frozen backbone → logits on cached
features → #unique, accuracy (oracle / ensemble / soup), detection AUROC (BMA / PDS).

The paper's setting in miniature: one frozen feature extractor (the zoo's ViT at cpu scale, DeiT3-B at
paper scale), its features cached once at the cut point "last block's MLP + final norm + head" on the
class token (:func:`ensdiv.models.stack.cut_features`, cut ``"block"``), with augmented passes of the
training split; only the head layers are trained per member. One initialisation policy: every member of every
method starts from the backbone's own head weights (a shared start, as the paper's deep-ensemble soup ≈ single
model implies), and a run's seed drives its data order (and SED's pair draws). The one exception is named:
naive A2D / DivDis train every member on the same batches with a loss symmetric in the members, so a shared
start is a fixed point (the members stay identical); their members start from distinct seeded random heads,
and the identical-start run is kept as a diagnostic (``naive_a2d_shared``, ``naive_divdis_shared``). A method
is trained with the seeds ``cfg["seeds"]`` (run ``s``; :mod:`ensdiv.chapters.sed.evidence`). Each method of
Tables 1-3 is one or more :class:`~ensdiv.Heads` recipes (:func:`method_recipes`); every notebook of
``notebooks/sed/`` goes through :func:`ensemble_logits`, so the same method and size map to the same cached
models.

Evaluation runs the trained heads on the cut features of each set, computed once per (backbone, set)
and cached (kind ``"sed-features"``): a frozen backbone makes that exact, and it avoids one backbone
pass per member and set.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy import stats
from torch import Tensor, nn

import ensdiv as ed
from ensdiv import metrics as mt
from ensdiv.chapters import zoo
from ensdiv.chapters._presets import add_dry_blocks, chapter_preset
from ensdiv.chapters.sed.cost import TIMED_LOSSES, fit_exponent, time_loss, time_steps, timing_head
from ensdiv.chapters.sed.images import ShownSet, shown_set
from ensdiv.chapters.sed.release import (
    NOT_TRANSFERABLE,
    RELEASED_CONFIGS,
    RELEASED_MODELS,
    STEP_FIELDS,
    released_hp,
    released_tables,
)
from ensdiv.errors import InvalidInputError, unknown_name
from ensdiv.models.stack import cut_features, vit_block_head
from ensdiv.train.stream import stream_backbone, stream_features

__all__ = [
    "SLUG", "METHODS", "METHOD_LABELS", "PRESETS", "preset", "backbone_recipe", "method_recipes", "set_features",
    "ensemble_logits", "soup_logits", "single_logits", "natural_hard", "evaluate", "detection", "summary",
    "released_tables", "RELEASED_MODELS", "RELEASED_CONFIGS", "NOT_TRANSFERABLE", "released_hp", "LARGE_METHODS",
    "ShownSet", "shown_set", "eval_set",
    "time_steps", "fit_exponent", "timing_head", "TIMED_LOSSES",
    "DIVERSE_HPS", "PAPER_TABLE1", "PAPER_TABLE2", "PAPER_TABLE3", "MEMBER_MARGIN", "ood_score", "pooled",
    "auroc_of", "member_accuracy", "committee_correct", "missing_estimate", "bootstrap", "DIAGNOSTIC_METHODS",
    "SHARED_START", "seeds", "per_seed", "nested", "seed_auroc", "seed_values", "flips", "member_gate",
    "chance_gate", "member_correct", "unique_per_image", "correct_per_image", "subset_means", "swap_null",
    "exponent_null", "start_head", "member_movement", "movement_rows", "trained_gate", "time_loss", "STEP_FIELDS",
]

SLUG = "sed"
#: the methods of the M = 5 tables; ``LARGE_METHODS`` those of Table 2's large ensembles
METHODS = ("deep_ensemble", "diverse_hp", "naive_divdis", "naive_a2d", "sed_gen", "sed_det", "sed_sem", "sed_text")
LARGE_METHODS = ("deep_ensemble", "diverse_hp", "sed_m50")
METHOD_LABELS = {
    "single": "Single model", "deep_ensemble": "Deep ensemble", "diverse_hp": "+Diverse HPs",
    "naive_divdis": "Naive DivDis", "naive_a2d": "Naive A2D", "sed_gen": "SED-A2D (released OOD_gen, λ 0)",
    "sed_det": "SED-A2D (released covariate config, λ 5)", "sed_sem": "SED-A2D (released semantic config, λ 0.5)",
    "sed_text": "SED-A2D (§4.1 text, λ 0.1)", "sed_m50": "SED-A2D (released 50_models, λ 0.0002)",
    "naive_a2d_shared": "Naive A2D, identical start (diagnostic)",
    "naive_divdis_shared": "Naive DivDis, identical start (diagnostic)",
}
#: the naive methods' identical-start runs, kept as a reported diagnostic (their members cannot separate)
DIAGNOSTIC_METHODS = ("naive_a2d_shared", "naive_divdis_shared")
#: the methods whose members share their start (the backbone's own head): a uniform soup of their weights is
#: meaningful, and soups are compared only among these (naive A2D / DivDis start from distinct random heads)
SHARED_START = ("deep_ensemble", "diverse_hp", "sed_gen", "sed_det", "sed_sem", "sed_text", "sed_m50",
                *DIAGNOSTIC_METHODS)
#: the diverse-hyper-parameter ensemble: member k uses entry k mod 5 (AdamW options over the base)
DIVERSE_HPS = (
    {"lr": 1e-3, "weight_decay": 0.01},
    {"lr": 3e-3, "weight_decay": 0.01},
    {"lr": 3e-4, "weight_decay": 0.05},
    {"lr": 1e-3, "weight_decay": 0.01, "label_smoothing": 0.1},
    {"lr": 1e-3, "weight_decay": 0.1, "batch_size": 32},
)

# ---- the paper's numbers (Tables 1-3) -------------------------------------------------------------------
PAPER_TABLE1 = {  # #unique, M = 5
    "deep_ensemble": {"C-1": 1.09, "C-5": 1.19, "iNat": 1.31, "OI": 1.23},
    "diverse_hp": {"C-1": 1.11, "C-5": 1.32, "iNat": 1.48, "OI": 1.33},
    "naive_divdis": {"C-1": 1.04, "C-5": 1.14, "iNat": 1.19, "OI": 1.16},
    "naive_a2d": {"C-1": 1.04, "C-5": 1.15, "iNat": 1.19, "OI": 1.91},
    "sed": {"C-1": 5.00, "C-5": 5.00, "iNat": 4.68, "OI": 4.11},
}
_T2_COLS = ("Val", "IN-A", "IN-R", "C-1", "C-5")
_T2 = {  # (method, M): oracle, prediction ensemble, uniform soup
    ("single", 1): ((85.4, 37.9, 44.7, 75.6, 38.5),) * 3,
    ("deep_ensemble", 5): (
        (85.4, 37.9, 44.9, 75.7, 38.6), (85.4, 39.9, 46.3, 75.7, 38.6), (85.3, 36.7, 44.6, 75.5, 38.3)),
    ("diverse_hp", 5): ((85.4, 38.5, 45.4, 77.4, 40.7), (85.4, 39.9, 46.5, 76.0, 39.0), (85.3, 35.3, 44.1, 75.9, 38.7)),
    ("naive_divdis", 5): (
        (85.2, 35.8, 40.8, 77.2, 40.2), (85.1, 36.3, 41.8, 77.2, 40.2), (84.8, 40.7, 42.5, 76.2, 38.9)),
    ("naive_a2d", 5): ((85.2, 36.6, 44.3, 77.3, 40.4), (85.1, 37.8, 45.2, 77.2, 40.3), (84.5, 39.3, 45.1, 75.5, 39.1)),
    ("sed", 5): ((85.1, 38.3, 45.3, 77.2, 40.4), (85.3, 42.4, 48.1, 77.3, 40.6), (85.3, 40.3, 46.1, 77.3, 40.6)),
    ("deep_ensemble", 50): (
        (85.5, 38.1, 45.2, 75.7, 38.6), (85.5, 38.8, 45.8, 75.6, 38.5), (85.4, 37.5, 45.0, 75.5, 38.4)),
    ("diverse_hp", 50): (
        (85.5, 38.5, 45.6, 77.5, 40.8), (85.5, 42.5, 48.5, 76.0, 39.0), (85.4, 36.4, 44.8, 75.9, 38.8)),
    ("sed", 50): ((82.6, 39.0, 45.8, 74.4, 38.3), (83.5, 50.9, 54.4, 75.8, 39.3), (83.5, 39.2, 46.5, 75.8, 39.3)),
}
PAPER_TABLE2 = {k: {agg: dict(zip(_T2_COLS, v, strict=True)) for agg, v in zip(("oracle", "ensemble", "soup"), vals,
                                                                              strict=True)}
                for k, vals in _T2.items()}
PAPER_TABLE3 = {  # AUROC, M = 5
    ("single", "BMA"): (0.615, 0.833, 0.958, 0.909), ("deep_ensemble", "BMA"): (0.619, 0.835, 0.958, 0.911),
    ("diverse_hp", "BMA"): (0.642, 0.861, 0.969, 0.923), ("naive_divdis", "BMA"): (0.598, 0.843, 0.966, 0.922),
    ("naive_a2d", "BMA"): (0.594, 0.835, 0.966, 0.916), ("sed", "BMA"): (0.641, 0.845, 0.960, 0.915),
    ("deep_ensemble", "PDS"): (0.565, 0.625, 0.592, 0.589), ("diverse_hp", "PDS"): (0.643, 0.849, 0.926, 0.889),
    ("naive_divdis", "PDS"): (0.600, 0.851, 0.969, 0.939), ("naive_a2d", "PDS"): (0.599, 0.850, 0.971, 0.939),
    ("sed", "PDS"): (0.686, 0.896, 0.977, 0.939),
}


# ---- presets --------------------------------------------------------------------------------------------
# Sets by role: ``val`` (ID test), ``c1`` / ``c5`` (corruption severity 1 / 5), ``r`` (renditions, IN-R),
# ``a`` (natural-hard, IN-A: built by natural_hard, not a registered name), ``inat`` / ``oi`` (semantic OOD).
_CPU_SETS = {"val": "fmnist/test", "c1": "fmnist-c/gaussian_noise/1", "c5": "fmnist-c/gaussian_noise/5",
             "r": "fmnist-r", "inat": "letters", "oi": "photos", "train_ood": "fmnist-r-train"}
# paper: stream sets read from $ENSDIV_DATA (ensdiv.data.paper.stream); IN-A / IN-R scored on their 200 classes
_PAPER_SETS = {"val": "imagenet/val", "c1": "imagenet-c/gaussian_noise/1", "c5": "imagenet-c/gaussian_noise/5",
               "r": "imagenet-r", "a": "imagenet-a", "inat": "inaturalist", "oi": "openimages-o",
               "train_ood": "imagenet-r"}
_COMMON = {
    "members": 5, "subset": 2, "lam_text": 0.1, "lam_naive": 1.0, "seed": 0,
    # lam_gen / lam_det / lam_sem / lam_m50: λ of the released configs (a notebook parameter may override one)
    **{f"lam_{k[4:]}": v["lam"] for k, v in RELEASED_CONFIGS.items()},
    "committee": ["arch/resnet", "arch/convnext", "arch/mixer"], "committee_wrong": 2,
    "n_resamples": 1000,  # paired-bootstrap resamples of the test images behind every interval (#27)
    # training runs of every compared method (#49): seeds are the unit of a method comparison; with seed flips
    # the smallest p-value is 2^-S, so a claim of one check needs 5 seeds and one of two checks 6
    "seeds": [0, 1, 2, 3, 4],
}
_SCALES = {
    "smoke": {"backbone": "arch/vit", "cut": "block", "epochs": 1, "batch_size": 64, "lr": 1e-3, "weight_decay": 0.01,
              "feature_passes": 1, "augment": "flip", "eval_subset": 300, "sets": _CPU_SETS,
              "committee": ["arch/resnet", "arch/mlp"], "committee_wrong": 1, "n_resamples": 200,
              "seeds": [0, 1]},
    "cpu": {"backbone": "arch/vit", "cut": "block", "epochs": 3, "batch_size": 64, "lr": 1e-3, "weight_decay": 0.01,
            "feature_passes": 1, "augment": "flipcrop", "eval_subset": 0, "sets": _CPU_SETS},
    # §4.1: AdamW, batch 16, lr 1e-3, wd 0.01, 10 epochs, λ 0.1, |I| = 2, DeiT3-B (IN-21k, fine-tuned IN-1k)
    "paper": {"backbone": "deit3_base_patch16_224.fb_in22k_ft_in1k", "cut": "block", "epochs": 10, "batch_size": 16,
              "lr": 1e-3, "weight_decay": 0.01, "feature_passes": 0, "augment": "none", "eval_subset": 0,
              "sets": _PAPER_SETS, "committee": [], "committee_wrong": 0, "seeds": [0, 1, 2, 3, 4]},
}


def _scaled(**extra: dict) -> dict:
    return {"common": {**_COMMON, **extra.pop("common", {})}, "types": {"committee": list[str], "seeds": list[int]},
            **{s: {**v, **extra.get(s, {})} for s, v in _SCALES.items()}}


#: six training runs at cpu: a claim of one or two seed-flip checks can decide (2^-6 <= 0.05 / 2, Holm's first step)
_CPU_RUNS = {"seeds": [0, 1, 2, 3, 4, 5]}

PRESETS = {
    "sed/tab01_unique": _scaled(cpu=_CPU_RUNS),
    # large_members: the release's 50_models.yaml (M 50) at paper scale; 20 at cpu (Fig. 4's largest size), where the
    # large ensembles are trained once and shown, not counted (#53's budget: 30 fewer heads per large method)
    "sed/tab02_generalisation": _scaled(common={"large_members": 50}, smoke={"large_members": 3},
                                        cpu={**_CPU_RUNS, "large_members": 20}),
    "sed/tab03_detection": _scaled(cpu=_CPU_RUNS),
    "sed/fig02_divergent_samples": _scaled(common={"shown": 5}, cpu=_CPU_RUNS),
    # fig_set: the shifted set of Figs. 3-4 — the paper's C-1 at paper scale; C-5 at the small scales, where C-1
    # is barely shifted (detection AUROCs 0.50-0.53 in the 25 Nov cpu records) and a comparison would be at chance
    "sed/fig03_lambda_sweep": _scaled(common={"lams": [0.0, 0.01, 0.1, 1.0, 5.0, 20.0], "fig_set": "c5"},
                                      smoke={"lams": [0.0, 0.1, 5.0]}, paper={"fig_set": "c1"}, cpu=_CPU_RUNS),
    "sed/fig04_ensemble_size": _scaled(common={"sizes": [2, 3, 5, 10, 20], "fig_set": "c5"},
                                       smoke={"sizes": [2, 3]}, paper={"fig_set": "c1"}, cpu=_CPU_RUNS),
    # the heads SED trains (cut "block": the last block's MLP branch + norms + classifier) at the width of the
    # scale's backbone: the cpu ViT (48, MLP 96, 10 classes), DeiT3-B at paper (768, MLP 3072, 1000 classes)
    # loss_sizes / loss_steps: the ensemble loss timed alone (its pair term), at sizes where pairs dominate
    "sed/cost_step_time": _scaled(common={"sizes": [2, 5, 10, 20, 50], "steps": 30, "repeats": 3, "head": "block",
                                          "dim": 48, "hidden": 96, "classes": 10, "bench_batch": 64,
                                          "loss_sizes": [20, 50, 100, 200], "loss_steps": 20},
                                  smoke={"sizes": [2, 5], "steps": 3, "repeats": 1, "loss_sizes": [2, 5],
                                         "loss_steps": 3},
                                  paper={"dim": 768, "hidden": 3072, "classes": 1000,
                                         "loss_sizes": [10, 20, 50, 100]}),
}

# a dry run of the paper presets (ensdiv run --dry-run): DeiT3-B's architecture (random weights), a few fake images
add_dry_blocks(PRESETS, {"epochs": 1, "batch_size": 8, "members": 3, "large_members": 3, "n_resamples": 200,
                         "lams": [0.0, 0.1], "sizes": [2, 3], "steps": 3, "repeats": 1, "seeds": [0, 1],
                         "loss_sizes": [10, 20], "loss_steps": 2})


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``sed/<stem>`` at ``scale`` (see :func:`ensdiv.config.resolve_preset`)."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)


# ---- recipes ----------------------------------------------------------------------------------------------
def backbone_recipe(cfg: dict) -> ed.Recipe:
    """The frozen feature extractor: a zoo recipe at smoke/cpu scale; at paper scale timm's pretrained model
    (local weights, used as built by :func:`ensdiv.train.stream.stream_backbone`, never trained), whose
    ``dataset`` ``"imagenet/train"`` becomes the heads' training set (read from ``$ENSDIV_DATA``)."""
    if cfg["scale"] == "paper":
        return ed.Recipe.make(model=cfg["backbone"], pretrained=True, dataset="imagenet/train", epochs=1,
                              name="deit3-b")
    return zoo.zoo_recipes(cfg["scale"], cfg["backbone"])[cfg["backbone"]]


def _heads_recipe(cfg: dict, name: str, *, members: int, loss: str = "independent", lam: float = 0.0,
                  subset: int = 0, ood: bool = False, seed: int = 0, pass_seed: int, hp: dict | None = None,
                  options: dict | None = None, init: str = "copy") -> ed.Recipe:
    bb = backbone_recipe(cfg)
    method = ed.Heads(backbone=bb.to_dict(), members=members, loss=loss, lam=float(lam), subset=subset,
                      cut=cfg["cut"], ood_set=cfg["sets"]["train_ood"] if ood else "",
                      feature_passes=cfg["feature_passes"], options=dict(options or {}), init=init,
                      pass_seed=pass_seed)
    optim = {"optimizer": "adamw", "lr": cfg["lr"], "weight_decay": cfg["weight_decay"], "epochs": cfg["epochs"],
             "batch_size": cfg["batch_size"], "schedule": "cosine", "warmup_epochs": 0, "label_smoothing": 0.0,
             "momentum": 0.9}
    optim.update(hp or {})
    return bb.replace(method=method, augment=cfg["augment"], seed=seed, name=name, **optim)


def method_recipes(cfg: dict, method: str, members: int | None = None, *, lam: float | None = None,
                   seed: int = 0) -> list[ed.Recipe]:
    """The recipe(s) of one method with ``members`` members (default ``cfg["members"]``), training run ``seed``.

    One initialisation policy (#49): every member starts as a copy of the backbone's own head (``Heads(init=
    "copy")``), the paper's reading where its deep-ensemble soup is about as accurate as the single model (Table 2:
    85.3 % against 85.4 % on IN-Val), which a soup of independently initialised heads would not be.
    Every method of training run ``seed`` trains on one augmented pass of the training images (``Heads.pass_seed``
    = ``cfg["seed"]`` + run), so the methods of a run see the same images and a deep ensemble's members differ
    only in data order (one pass per member cost a backbone pass each, 8 s at cpu: 45 of them for M = 50).
    ``deep_ensemble``: M one-head recipes with seeds ``100·seed + k`` (data order); ``diverse_hp``: M one-head
    recipes cycling :data:`DIVERSE_HPS` (seeds as the deep ensemble's); ``naive_a2d`` / ``naive_divdis``: one
    M-head recipe with the rendition set of training images as unlabeled OOD batches (all pairs, λ
    ``lam_naive``), whose members start from distinct seeded random heads (``Heads(init="seed")``): under a shared
    start, one batch stream and a loss symmetric in the members they would stay identical (the diagnostic runs
    ``naive_a2d_shared`` / ``naive_divdis_shared`` keep that start and show it);
    ``sed_gen`` / ``sed_det`` / ``sed_sem`` / ``sed_m50``: one M-head recipe mirroring, field by field, the
    released config behind the paper's SED rows (:data:`RELEASED_CONFIGS`: optimiser, learning rate, weight
    decay, batch, label smoothing, |I|, M, λ; at smoke and cpu the learning rate and batch are the scale's,
    :data:`~ensdiv.chapters.sed.release.STEP_FIELDS`; what does not transfer is in :data:`NOT_TRANSFERABLE`): OOD_gen
    (λ 0) for Table 2's M = 5 rows, the covariate (λ 5) and semantic (λ 0.5) configs for Tables 1 and 3, and
    50_models (M 50, λ 0.0002) for Table 2's large ensembles; λ = ``lam_gen`` / ``lam_det`` / ``lam_sem`` /
    ``lam_m50`` (the released values; ``lam`` overrides it, for the λ sweep). ``sed_text``: the §4.1 text's
    setting (λ ``lam_text`` = 0.1, the scale's optimiser settings), shown as a labelled variant.
    """
    m = int(members or cfg["members"])
    run = int(seed)
    one = {"pass_seed": cfg["seed"] + run}  # one augmented feature pass per training run, shared by every method
    if method == "deep_ensemble":
        return [_heads_recipe(cfg, f"de-{k}", members=1, seed=100 * run + k, **one) for k in range(m)]
    if method == "diverse_hp":
        return [_heads_recipe(cfg, f"hp-{k}", members=1, seed=100 * run + k, hp=DIVERSE_HPS[k % len(DIVERSE_HPS)],
                              **one) for k in range(m)]
    if method in ("naive_a2d", "naive_divdis", *DIAGNOSTIC_METHODS):
        loss = method.removesuffix("_shared")
        init = "copy" if method in DIAGNOSTIC_METHODS else "seed"
        return [_heads_recipe(cfg, f"{method}-m{m}", members=m, loss=loss, lam=cfg["lam_naive"], ood=True,
                              seed=cfg["seed"] + run, init=init, **one)]
    if method in RELEASED_CONFIGS:
        optim, heads = released_hp(method)
        if cfg["scale"] != "paper":  # the update budget is the scale's (NOT_TRANSFERABLE)
            optim.update({k: cfg[k] for k in STEP_FIELDS})
        if method == "sed_m50" and not members:
            m = heads["members"]
        lam_ = cfg[f"lam_{method[4:]}"] if lam is None else lam
        return [_heads_recipe(cfg, f"{method}-l{lam_:g}-m{m}", members=m, loss="sed", lam=lam_,
                              subset=heads["subset"], seed=cfg["seed"] + run, hp=optim, **one)]
    if method == "sed_text":
        lam_ = cfg["lam_text"] if lam is None else lam
        return [_heads_recipe(cfg, f"sed-l{lam_:g}-m{m}", members=m, loss="sed", lam=lam_, subset=cfg["subset"],
                              seed=cfg["seed"] + run, **one)]
    raise unknown_name("SED chapter method", method, [*METHODS, "sed_m50", *DIAGNOSTIC_METHODS])


# ---- evaluation sets and features ------------------------------------------------------------------------
def eval_set(cfg: Any, role: str = "val", *, n: int | None = None) -> ed.TensorSet:
    """The evaluation set ``role`` of a page (the chapters' one signature): a key of the preset's ``sets``
    (``"val"``, the shifted and OOD sets) or ``"a"`` (the natural-hard set, :func:`natural_hard`), ``n`` images
    drawn with seed 0 (default the preset's ``eval_subset``; 0: all; not for ``"a"``, which is defined by a
    committee's errors on the whole ``"val"`` set).

    Raises:
        UnknownNameError: a role that is neither ``"a"`` nor a key of ``sets``.
        InvalidInputError: ``n`` given for ``"a"``.
    """
    if role == "a":
        if n is not None:
            raise InvalidInputError("The natural-hard set 'a' is every validation image a committee gets wrong; it "
                                    "takes no image count n (set eval_subset to draw fewer validation images).")
        return natural_hard(cfg)
    if role not in cfg["sets"]:
        raise unknown_name("evaluation set", role, ["a", *cfg["sets"]])
    n = cfg["eval_subset"] if n is None else n
    data = ed.get_dataset(cfg["sets"][role])
    return data.subset(n, seed=0) if n else data


def natural_hard(cfg: dict) -> ed.TensorSet:
    """The IN-A analogue: ID test images that at least ``committee_wrong`` of an independent committee of zoo
    models (``committee``: architectures other than the backbone's, trained on their own) misclassify. Like
    ImageNet-A (images a ResNet-50 gets wrong), the set is defined by other models' errors; its labels are kept."""
    test = eval_set(cfg, "val")
    recipes = zoo.zoo_recipes(cfg["scale"], list(cfg["committee"]))
    wrong = torch.stack([ed.predict(r, test).argmax(-1) != test.y for r in recipes.values()]).sum(0)
    keep = torch.nonzero(wrong >= cfg["committee_wrong"]).flatten()
    return ed.TensorSet(test.x[keep], test.y[keep], f"{test.name}:natural-hard", test.classes,
                        description="test images the committee gets wrong (IN-A analogue)")


_PAPER: dict[str, dict[str, Tensor]] = {}


def _paper_set(cfg: dict, role: str) -> dict[str, Tensor]:
    """Paper scale: the streamed cut features of the set of ``role`` through the pretrained backbone
    (:func:`ensdiv.train.stream.stream_features`, cached as kind ``"sed-features"``), kept for the process."""
    backbone, bb_key = stream_backbone(backbone_recipe(cfg))
    memo = json.dumps([bb_key, cfg["sets"][role], cfg["cut"], cfg["eval_subset"],
                       os.environ.get("ENSDIV_DATA", ""), os.environ.get("ENSDIV_CACHE", "")], sort_keys=True)
    if memo not in _PAPER:
        _PAPER[memo] = stream_features(backbone, bb_key, cfg["sets"][role], cut=cfg["cut"], kind="sed-features",
                                       subset=cfg["eval_subset"])
    return _PAPER[memo]


def _restrict(cfg: dict, role: str, logits: Tensor) -> Tensor:
    """Paper scale: logits of IN-A / IN-R restricted to the set's 200 classes (``class_mask``), as the
    reference scores them; every other set's logits unchanged."""
    if cfg["scale"] != "paper":
        return logits
    mask = _paper_set(cfg, role)["class_mask"]
    return logits[..., mask] if len(mask) else logits


def set_features(cfg: dict, role: str) -> tuple[Tensor, Tensor]:
    """Cut-point features ``(N, D)`` of the backbone on the set of ``role`` and its labels (cached). At paper
    scale the set is streamed from ``$ENSDIV_DATA`` and IN-A / IN-R labels are positions in their class mask
    (the logits functions restrict those sets' logits to it)."""
    if cfg["scale"] == "paper":
        out = _paper_set(cfg, role)
        return out["features"], out["masked_labels"] if len(out["class_mask"]) else out["labels"]
    data = eval_set(cfg, role)
    bb = backbone_recipe(cfg)
    key = {"backbone": ed.train.model_cache_config(bb), "cut": cfg["cut"], "set": data.name, "n": len(data),
           "subset": cfg["eval_subset"], "fingerprint": ed.data.registry.tensor_fingerprint(data)[:16]}

    def compute() -> dict[str, Tensor]:
        model = ed.train_recipe(bb).eval()
        with torch.no_grad():
            f = torch.cat([cut_features(model, data.x[i : i + 512], cfg["cut"]).float()
                           for i in range(0, len(data), 512)])
        return {"features": f}

    return ed.cached("sed-features", key, compute)["features"], data.y


_HEADS: dict[str, list[nn.Module]] = {}


def _heads_of(recipe: ed.Recipe) -> list[nn.Module]:
    """The trained heads of a Heads recipe (loaded once per process)."""
    key = ed.store.config_key(ed.train.model_cache_config(recipe))
    if key not in _HEADS:
        model = ed.train_recipe(recipe)  # heads on a stream set (paper scale) go to ensdiv.train.stream
        _HEADS[key] = list(model.heads.members)
    return _HEADS[key]


@torch.no_grad()
def _apply(heads: Sequence[nn.Module], feats: Tensor) -> Tensor:
    return torch.stack([h.eval()(feats) for h in heads]).float()


def ensemble_logits(cfg: dict, method: str, role: str, members: int | None = None, *, lam: float | None = None,
                    seed: int = 0) -> Tensor:
    """Member logits ``(M, N, C)`` of ``method`` (training run ``seed``) on the set of ``role`` (models trained
    once and cached)."""
    feats, _ = set_features(cfg, role)
    heads = [h for r in method_recipes(cfg, method, members, lam=lam, seed=seed) for h in _heads_of(r)]
    return _restrict(cfg, role, _apply(heads, feats))


def start_head(cfg: dict) -> nn.Module:
    """The backbone's own head at the scale's cut (a copy): the single model's head, and the shared start of the
    members of every method in :data:`SHARED_START`."""
    bb = backbone_recipe(cfg)
    model = stream_backbone(bb)[0] if cfg["scale"] == "paper" else ed.train_recipe(bb)
    return vit_block_head(model) if cfg["cut"] == "block" else copy.deepcopy(model.get_classifier())


def single_logits(cfg: dict, role: str) -> Tensor:
    """The backbone's own prediction (the "single model" row), ``(1, N, C)``."""
    feats, _ = set_features(cfg, role)
    return _restrict(cfg, role, _apply([start_head(cfg)], feats))


def soup_logits(cfg: dict, method: str, role: str, members: int | None = None, *, seed: int = 0) -> Tensor:
    """Logits ``(1, N, C)`` of the uniform soup (Wortsman et al.) of the method's heads (training run ``seed``):
    their weights averaged. Meaningful only where the members share their start (:data:`SHARED_START`)."""
    feats, _ = set_features(cfg, role)
    heads = [h for r in method_recipes(cfg, method, members, seed=seed) for h in _heads_of(r)]
    soup = copy.deepcopy(heads[0])
    soup.load_state_dict(ed.ensembles.uniform_soup([h.state_dict() for h in heads]))
    return _restrict(cfg, role, _apply([soup], feats))


def weight_spread(cfg: dict, method: str, members: int | None = None) -> float:
    """Largest absolute difference between any two members' head weights, entry by entry (0.0: the trained
    members are the same function). A method whose members share their start and whose training treats them
    symmetrically (same batches, a loss symmetric in the members) and runs deterministically keeps them
    identical (the naive methods' identical-start diagnostic runs); this measures whether it did."""
    heads = [h for r in method_recipes(cfg, method, members) for h in _heads_of(r)]
    flat = torch.stack([torch.cat([p.detach().flatten() for p in h.parameters()]) for h in heads])
    return float((flat.max(0).values - flat.min(0).values).max())


def evaluate(logits: Tensor, labels: Tensor | None = None) -> dict[str, float]:
    """#unique, mean PDS (Eq. 8, with 1/C) and, with labels, member / oracle / ensemble accuracy (%)."""
    probs = logits.softmax(-1)
    out = {"unique": float(mt.num_unique(logits.argmax(-1)).mean()), "pds": float(mt.pds(probs).mean())}
    if labels is not None and len(labels) and labels.min() >= 0:
        acc = (logits.argmax(-1) == labels).float().mean(1) * 100
        out.update(member_acc=float(acc.mean()), oracle_acc=float(acc.max()),
                   ensemble_acc=float((logits.mean(0).argmax(-1) == labels).float().mean() * 100))
    return out


def detection(id_logits: Tensor, ood_logits: Tensor) -> dict[str, float]:
    """OOD-detection AUROC of the BMA confidence (Eq. 7, negated) and of PDS (Eq. 8), ID = clean test set."""
    p_id, p_ood = id_logits.softmax(-1), ood_logits.softmax(-1)
    return {"BMA": float(mt.auroc(-mt.bma_confidence(p_id), -mt.bma_confidence(p_ood))),
            "PDS": float(mt.auroc(mt.pds(p_id), mt.pds(p_ood)))}


def summary(cfg: dict, methods: Sequence[str], roles: Sequence[str], members: int | None = None) -> pd.DataFrame:
    """One row per (method, set): #unique, PDS, member / oracle / ensemble accuracy and, for OOD roles,
    detection AUROC against the clean test set."""
    rows = []
    for method in methods:
        id_logits = ensemble_logits(cfg, method, "val", members)
        for role in roles:
            logits = id_logits if role == "val" else ensemble_logits(cfg, method, role, members)
            row = {"method": method, "set": role, **evaluate(logits, set_features(cfg, role)[1])}
            if role != "val":
                row.update({f"auroc_{k}": v for k, v in detection(id_logits, logits).items()})
            rows.append(row)
    return pd.DataFrame(rows)


# ---- intervals over the test images (#27) -----------------------------------------------------------------
#: Member-quality margin (percentage points) of the chapter's gates: a diversified run's mean member accuracy on
#: the clean test set may trail its reference's (the deep ensemble's, or the same config at λ = 0) by at most
#: this much, or its diversity and detection checks are *not meaningful*. The book's guard, not a number of the
#: paper (whose Table 1 and 3 models report no member accuracy; its released covariate model, best member 0.57 %
#: on ImageNet, would fail it); 5 points allows for short head training and still fails members at chance.
MEMBER_MARGIN = 5.0


def missing_estimate() -> ed.report.Estimate:
    """A quantity this run cannot compute (a set without samples, no committee): NaN, so a check reading it is
    not computable, but still an estimate (its check is built to get an interval)."""
    return ed.report.Estimate(math.nan, np.full(2, math.nan))


def bootstrap(cfg: dict, per_sample: dict, statistic: dict | None = None) -> dict[str, ed.report.Estimate]:
    """:func:`ensdiv.report.paired_bootstrap` over the evaluation samples with the page's ``n_resamples`` and
    ``seed``; every quantity is :func:`missing_estimate` when the set has fewer than two samples."""
    sizes = {len(v[0] if isinstance(v, tuple) else v) for v in per_sample.values()}
    if min(sizes) < 2:
        return {k: missing_estimate() for k in per_sample}
    return ed.report.paired_bootstrap(per_sample, statistic=statistic, n_resamples=int(cfg["n_resamples"]),
                                      seed=int(cfg["seed"]))


def ood_score(logits: Tensor, kind: str) -> np.ndarray:
    """Per-sample OOD score of an ensemble's logits ``(M, N, C)``: ``"BMA"`` (negated BMA confidence, Eq. 7) or
    ``"PDS"`` (Eq. 8); higher = more OOD."""
    probs = logits.softmax(-1)
    score = -mt.bma_confidence(probs) if kind == "BMA" else mt.pds(probs) if kind == "PDS" else None
    if score is None:
        raise unknown_name("OOD score", kind, ("BMA", "PDS"))
    return score.double().numpy()


def pooled(id_score: Any, ood_score_: Any) -> tuple[np.ndarray, np.ndarray]:
    """The ID and OOD samples as one evaluation set: concatenated scores and the OOD indicator (for a paired
    bootstrap over both sets' images)."""
    a, b = np.asarray(id_score, dtype=float), np.asarray(ood_score_, dtype=float)
    return np.concatenate([a, b], axis=0), np.concatenate([np.zeros(len(a), bool), np.ones(len(b), bool)])


def auroc_of(score: np.ndarray, is_ood: np.ndarray) -> float:
    """AUROC of ``score`` for OOD (positive) against ID samples, ties one half (as :func:`ensdiv.metrics.auroc`);
    NaN when one side is empty. Numpy, for bootstrap statistics."""
    pos = np.asarray(is_ood, bool)
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        return math.nan
    ranks = stats.rankdata(score)
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def member_accuracy(cfg: dict, runs: dict[str, str]) -> dict[str, ed.report.Estimate]:
    """Mean member accuracy (%) on the clean test set of each method (``{label: method}``), one paired bootstrap
    over the test images: ``{"mean member acc <label> (val, %)": Estimate}``."""
    labels = set_features(cfg, "val")[1]
    per_image = {f"mean member acc {label} (val, %)":
                 100 * (ensemble_logits(cfg, method, "val").argmax(-1) == labels).double().mean(0).numpy()
                 for label, method in runs.items()}
    return bootstrap(cfg, per_image)


def committee_correct(cfg: dict, role: str) -> Tensor | None:
    """Correctness ``(K, N)`` of the independent committee (``committee``: zoo models of other architectures,
    trained on their own, as for :func:`natural_hard`) on the set of ``role``; None without a committee (paper
    scale)."""
    if cfg["scale"] == "paper" or not cfg["committee"]:
        return None
    data = eval_set(cfg, role)
    recipes = zoo.zoo_recipes(cfg["scale"], list(cfg["committee"]))
    return torch.stack([ed.predict(r, data).argmax(-1) == data.y for r in recipes.values()])


# ---- cost --------------------------------------------------------------------------------------------------


from ensdiv.chapters.sed.evidence import (  # noqa: E402  (they call the functions above)
    chance_gate,
    correct_per_image,
    exponent_null,
    flips,
    member_correct,
    member_gate,
    member_movement,
    movement_rows,
    nested,
    per_seed,
    seed_auroc,
    seed_values,
    seeds,
    subset_means,
    swap_null,
    trained_gate,
    unique_per_image,
)
