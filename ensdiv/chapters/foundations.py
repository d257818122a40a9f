"""The foundations chapter: the deep-ensemble primer, measuring diversity, corruptions, the zoo, benchmarks.

Holds the presets of the foundations pages (``foundations/<stem>``) and the deep ensemble the first
pages share (:func:`deep_ensemble`, evaluated on :func:`eval_set`); the shared model zoo is
:mod:`ensdiv.chapters.zoo`.
"""

from __future__ import annotations

from typing import Any

import ensdiv as ed
from ensdiv.chapters import zoo
from ensdiv.chapters._presets import add_dry_blocks, chapter_preset

SLUG = "foundations"

PRESETS = {
    "foundations/deep_ensemble_basics": {
        # members copy the zoo's recipe of one architecture and differ only in their seed
        "common": {"seed": 0, "num_members": 4, "zoo_entry": "arch/small_cnn", "n_resamples": 1000},
        "smoke": {"test_subset": 512, "n_resamples": 200},
        "cpu": {"test_subset": 0},
        # the foundations page has no paper-scale data of its own: at paper scale it uses the paper zoo
        # (ImageNet) entry of the same name; packed-ensembles/tab01_efficient_ensembles holds the CIFAR comparison.
        "paper": {"test_subset": 0},
    },
}

PRESETS["foundations/benchmarks"] = {
    "common": {"results_folder": ""},
    "smoke": {},
    "cpu": {},
    "paper": {},
}

# "Measuring diversity" reuses the deep ensemble of deep_ensemble_basics (same members): it trains nothing new.
_BASE = PRESETS["foundations/deep_ensemble_basics"]

PRESETS["foundations/measuring_diversity"] = {
    "common": {
        **_BASE["common"],
        "n_explain": 64,  # images explained with saliency / attacked with PGD
        "n_cka": 1000,  # images streamed through MinibatchCKA
        "cka_batch": 250,
        "pgd_steps": 50,  # as in attack-similarity §2
        "pgd_eps": 0.1,  # L∞ radius in [0, 1] pixel units (Fashion-MNIST needs more than 8/255)
        "ood": "inverted",  # synthetic OOD set: "inverted" (1 - x) or "noise" (uniform)
    },
    "smoke": {**_BASE["smoke"], "n_explain": 8, "n_cka": 128, "cka_batch": 64, "pgd_steps": 2},
    "cpu": {**_BASE["cpu"]},
    "paper": {**_BASE["paper"]},
}

PRESETS["foundations/corruptions"] = {
    "common": {
        "seed": 0,  # seed of the corruptions drawn for the grids
        "image_index": 0,  # Fashion-MNIST test image shown in the grids
        # the model evaluated under shift: member 0 of foundations/deep_ensemble_basics (reused from the cache)
        "zoo_entry": _BASE["common"]["zoo_entry"],
        "member_seed": _BASE["common"]["seed"],
        "eval_subset": 0,  # images per evaluation set (0: all 10,000)
        "build_sets": True,  # read the cached CPU-scale sets (built on first use)
        "damage_images": 8,  # images used to measure pixel damage per corruption and level
        "damage_size": 224,  # the resolution compared with 28 px in the damage table
        "data_root": "",  # paper scale: folder holding imagenet/val and ImageNet-C-bar
        "n_resamples": 1000,  # bootstrap resamples of the test images behind the claim's intervals
    },
    "smoke": {
        "eval_subset": 128,
        "n_resamples": 200,
        "build_sets": False,
        "damage_images": 2,
        "damage_size": 48,
    },
    "cpu": {},
    "paper": {},
}

PRESETS["foundations/zoo"] = {
    # only: keys or glob patterns of ensdiv.chapters.zoo.ZOO[scale];
    # train: build missing models (False: show what is cached)
    # workers: training processes, one torch thread each. cpu: 2 on the 2-core machine, and the whole zoo
    # (every chapter's zoo models are then trained here, two at a time). benchmarks/bench_contention.py: one
    # SqueezeNet step runs at 1,636 img/s with one thread and 2,507 with two on an idle machine, but with
    # another process busy on the second core two threads fall to 686 while one thread keeps 1,693 (ResNet:
    # 2,146 / 3,241 idle, 2,037 / 891 contended); two one-thread workers measured as fast as one two-thread
    # process on idle cores (37.9 s vs 36.6 s for four recipes) and do not collapse when anything else runs.
    # n_resamples: bootstrap resamples (test images, and models for the rank correlation) behind the claim
    "common": {"only": ["arch/*", "dd/*"], "train": True, "workers": 1, "n_resamples": 1000},
    "smoke": {"only": ["arch/mlp", "arch/small_cnn", "arch/resnet", "arch/vit"], "n_resamples": 200},
    "cpu": {"only": [], "workers": 2},
    # paper scale needs ImageNet (see ensdiv.chapters.zoo); with train=False the table lists what is cached.
    "paper": {"train": False},
    "ranges": {"workers": (1, 64)},
    "types": {"only": list[str]},  # cpu: [] = the whole zoo
}

# a dry run of the paper presets (ensdiv run --dry-run): the paper zoo's recipes (zoo.DRY_RECIPE_SIZES) on fake data
add_dry_blocks(PRESETS, {"test_subset": 16, "num_members": 2, "n_resamples": 200, "n_explain": 4, "n_cka": 8,
                         "cka_batch": 4, "pgd_steps": 2, "eval_subset": 16, "damage_images": 2})


def deep_ensemble(scale: str, zoo_entry: str, seed: int, num_members: int) -> list[ed.Recipe]:
    """The members of the chapter's deep ensemble: the zoo recipe ``zoo_entry`` at ``scale`` with seeds
    ``seed, seed + 1, ...`` (initialisation and data order), everything else unchanged.

    Member 0 with ``seed=0`` is the zoo's own model, so the zoo page and every page asking for the same
    members reuse one cached training.
    """
    base = zoo.zoo_recipes(scale)[zoo_entry]
    return [base.replace(seed=seed + m, name=f"{zoo_entry}-s{seed + m}") for m in range(num_members)]


def eval_set(scale: str, n: int = 0) -> ed.TensorSet:
    """The zoo's evaluation set at ``scale`` (``zoo.EVAL_SET``), a fixed seeded subset of ``n`` images (0: all)."""
    return ed.get_dataset(zoo.EVAL_SET[scale]).subset(n, seed=0)


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``foundations/<stem>`` at ``scale`` (see :func:`ensdiv.config.resolve_preset`)."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)
