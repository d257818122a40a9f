"""The second half's presets: one entry per page, at smoke, cpu and paper scale, and the dry-run sizes."""

from __future__ import annotations

from typing import Any

from ensdiv.chapters import design_diversity as dd
from ensdiv.chapters._presets import add_dry_blocks, chapter_preset

SLUG = dd.SLUG

_JOINT_CPU = {"member_model": "resnet", "member_kwargs": {"channels": [8, 16, 32, 64]}, "members": 3, "lam": 0.2,
              "train_set": "fmnist/train", "train_subset": 5000, "epochs": 3, "batch_size": 64, "lr": 1e-3,
              "augment": "flip", "schedule": "step", "milestones": [], "lr_decay": 0.0}  # fmt: skip
_JOINT_SMOKE = {**_JOINT_CPU, "member_model": "test_resnet", "member_kwargs": {}, "train_subset": 128, "epochs": 1}
# paper: ResNet-50 members, AdaBelief lr 1e-3, eps 1e-8, batch 64, 100 epochs, λ 0.2, the learning rate "decaying
# 10% every 30 epochs" (Sec. 4.3): ×0.9 at epochs 30, 60 and 90. Smoke and cpu keep the engine's step schedule
# (×0.1 at 50 % and 75 % of their few epochs; lr_decay 0 leaves the recipe's default factor).
_JOINT_PAPER = {**_JOINT_CPU, "member_model": "resnet50", "member_kwargs": {}, "train_set": "imagenet/train",
                "train_subset": 0, "epochs": 100, "augment": "flipcrop", "schedule": "multistep",
                "milestones": [30, 60, 90], "lr_decay": 0.9}  # fmt: skip
# member_kwargs: keyword arguments of the member model ({}: its defaults); milestones: the multistep schedule's epochs
_JOINT_TYPES = {"member_kwargs": dict[str, Any], "milestones": list[int]}
_MATCH_TYPES = {**_JOINT_TYPES, "hetero_budgets": list[list[int]]}
_ATTR = {"lams": [10.0, 1.0, 0.1, 0.01, 0.001], "attr_lam": 0.001}
_ATTR_CPU = {**_ATTR, "attr_train_subset": 2500, "attr_epochs": 2}
_ATTR_SMOKE = {**_ATTR, "attr_train_subset": 128, "attr_epochs": 1}
_ATTR_PAPER = {**_ATTR, "attr_train_subset": 0, "attr_epochs": 100}
_SN_CPU = {"supernet_model": "supernet", "supernet_subset": 10000, "supernet_epochs": [3, 1, 2], "supernet_lr": 0.05,
           "subnets": 11, "bn_images": 1500, "train_set": "fmnist/train", "batch_size": 64, "augment": "flip"}
_SN_SMOKE = {**_SN_CPU, "supernet_model": "test_supernet", "supernet_subset": 256, "supernet_epochs": [1, 1, 1],
             "bn_images": 128}  # fmt: skip
# paper: a ResNet-34-shaped super-network (BasicBlocks) from scratch on ImageNet; BootstrapNAS started from a
# pretrained ResNet-50 (bottlenecks), which this small super-network does not reproduce
_SN_PAPER = {**_SN_CPU, "supernet_model": "supernet_r34", "supernet_subset": 0, "supernet_epochs": [90, 25, 50],
             "supernet_lr": 0.1, "train_set": "imagenet/train", "batch_size": 256, "augment": "flipcrop"}
_COMMON = {"seed": 0, "eval_images": 0, "attr_images": 0, "attr_abs": True, "attr_batch": 250, "ensemble_size": 3,
           "ci": 0.90, "n_resamples": 1000}  # fmt: skip
_HETERO = ["dd/ResNext50_32_2", "dd/MNASNET_1", "dd/deit_tiny_p16_224"]
_HETERO_SMOKE = ["arch/resnext", "arch/mnasnet", "arch/vit"]  # the smoke zoo has no dd/* entries
_HETERO_PAPER = ["resnext50_32x4d.a1h_in1k", "mnasnet_100.rmsp_in1k", "deit_tiny_patch16_224.fb_in1k"]
_CKA = {"cka_images": 1000, "cka_batch": 250}
_FAMILY_SEEDS = [0, 1, 2, 3, 4, 5]
# hetero_budgets: (images, epochs) the heterogeneous members may train on, the first Sec. 4.3.1's (80 steps at cpu),
# then one epoch over fewer images (63 down to 40 steps); the one whose accuracy is closest to GNCL's is used
# (ch.hetero_match); match_images: the test images that accuracy is read on
_MATCH_CPU = {"hetero_budgets": [[2500, 2], [4000, 1], [3500, 1], [3000, 1], [2500, 1]], "match_images": 2000}
_MATCH_SMOKE = {"hetero_budgets": [[128, 1], [64, 1]], "match_images": 200}
_MATCH_PAPER = {"hetero_budgets": [[0, 100]], "match_images": 5000}  # pretrained stand-ins: nothing to match

PRESETS: dict = {
    "design-diversity/fig08_supernet_ensembles": {
        "common": {**_COMMON, "zoo": ["dd/*"]},
        "smoke": {**_SN_SMOKE, "eval_images": 200, "attr_images": 64, "zoo": dd.SMOKE_ZOO},
        "cpu": {**_SN_CPU, "eval_images": 5000, "attr_images": 1000},
        "paper": {**_SN_PAPER, "eval_images": 5000, "attr_images": 250, "attr_batch": 25, "zoo": dd.PAPER_ZOO},
    },
    "design-diversity/fig09_saliency_vs_ig": {
        # pair_models: the paper compares six sub-networks; cpu and paper take all eleven, so that the bootstrap
        # over them does not rest on about four distinct sub-networks per resample (smoke keeps six)
        "common": {**_COMMON, "pair_models": 11, "ig_steps": [1, 2, 10, 50]},
        "smoke": {**_SN_SMOKE, "fig9_images": 16, "ig_steps": [1, 2, 10], "pair_models": 6},
        "cpu": {**_SN_CPU, "fig9_images": 100},
        "paper": {**_SN_PAPER, "fig9_images": 100, "attr_batch": 10},
    },
    # seeds: every heuristic trained once per seed (initialisation and data order), the accuracies averaged
    "design-diversity/fig10_ncl_heuristics": {
        # seeds: six, so that each of the page's three paired checks can reach Holm's 5 % (2**-6 = 1/64)
        "common": {**_COMMON, "sets": ["clean", "plasma", "checkerboard", "waterdrop", "lines"],
                   "seeds": [0, 1, 2, 3, 4, 5]},
        "smoke": {**_JOINT_SMOKE, "eval_images": 200, "seeds": [0]},
        "types": _JOINT_TYPES,
        "cpu": {**_JOINT_CPU, "eval_images": 2000},
        "paper": {**_JOINT_PAPER, "eval_images": 5000},
    },
    # seeds: the family of Sec. 4.3.1, Table 2, Fig. 11 and 12 trained once per seed (initialisation and data order;
    # the same training images), six so that Holm over a page's two checks can reach 5 % with 2**-6 = 1/64
    "design-diversity/sec431_attribution_penalty": {
        "common": {**_COMMON, "seeds": _FAMILY_SEEDS},
        "smoke": {**_JOINT_SMOKE, **_ATTR_SMOKE, "eval_images": 200, "seeds": [0]},
        "types": _JOINT_TYPES,
        "cpu": {**_JOINT_CPU, **_ATTR_CPU, "eval_images": 2000},
        "paper": {**_JOINT_PAPER, **_ATTR_PAPER, "eval_images": 5000},
    },
    "design-diversity/tab02_equitability": {
        "common": {**_COMMON, "hetero": _HETERO, "seeds": _FAMILY_SEEDS},
        "smoke": {**_JOINT_SMOKE, **_ATTR_SMOKE, **_MATCH_SMOKE, "hetero": _HETERO_SMOKE, "eval_images": 200,
                  "seeds": [0]},
        "types": _MATCH_TYPES,
        "cpu": {**_JOINT_CPU, **_ATTR_CPU, **_MATCH_CPU, "eval_images": 2000},
        "paper": {**_JOINT_PAPER, **_ATTR_PAPER, **_MATCH_PAPER, "eval_images": 5000, "hetero": _HETERO_PAPER},
    },
    "design-diversity/fig11_attribution_maps": {
        "common": {**_COMMON, "hetero": _HETERO, "show": 8, "seeds": _FAMILY_SEEDS},
        "smoke": {**_JOINT_SMOKE, **_ATTR_SMOKE, **_MATCH_SMOKE, "hetero": _HETERO_SMOKE, "attr_images": 32,
                  "seeds": [0]},
        "types": _MATCH_TYPES,
        "cpu": {**_JOINT_CPU, **_ATTR_CPU, **_MATCH_CPU, "attr_images": 500},
        "paper": {**_JOINT_PAPER, **_ATTR_PAPER, **_MATCH_PAPER, "attr_images": 100, "attr_batch": 25,
                  "hetero": _HETERO_PAPER},
    },
    "design-diversity/fig12_cka_layers": {
        "common": {**_COMMON, **_CKA, "hetero": _HETERO, "seeds": _FAMILY_SEEDS},
        "smoke": {**_JOINT_SMOKE, **_ATTR_SMOKE, **_MATCH_SMOKE, "hetero": _HETERO_SMOKE, "cka_images": 64,
                  "cka_batch": 32, "seeds": [0]},
        "types": _MATCH_TYPES,
        "cpu": {**_JOINT_CPU, **_ATTR_CPU, **_MATCH_CPU},
        "paper": {**_JOINT_PAPER, **_ATTR_PAPER, **_MATCH_PAPER, "cka_images": 2000, "cka_batch": 100,
                  "hetero": _HETERO_PAPER},
    },
}

for _spec in PRESETS.values():  # bootstrap resamples of the claims' intervals: fewer at smoke (code path only)
    _spec["smoke"] = {**_spec["smoke"], "n_resamples": 200}
# a dry run of the paper presets (ensdiv run --dry-run): the paper's models and recipes on a few fake images
add_dry_blocks(PRESETS, {**dd.DRY_SIZES, "fig9_images": 4, "cka_images": 8, "cka_batch": 4,
                         "supernet_epochs": [1, 1, 1], "batch_size": 8, "bn_images": 8, "subnets": 3, "epochs": 2,
                         "milestones": [1], "attr_epochs": 2, "lams": [1.0, 0.001], "seeds": [0], "ig_steps": [1, 2],
                         "pair_models": 2, "train_subset": 8, "attr_train_subset": 8, "match_images": 4},
               pick={"zoo": dd.DRY_ZOO})


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``design-diversity/<stem>`` of the second half at ``scale``."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)
