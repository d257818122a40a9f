"""The foundations chapter: the deep-ensemble primer, measuring diversity, corruptions, the zoo, benchmarks.

Holds the presets of the foundations pages (``foundations/<stem>``) and the deep ensemble the first
pages share (:func:`deep_ensemble`, evaluated on :func:`eval_set`); the shared model zoo is
:mod:`ensdiv.chapters.zoo`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

import ensdiv as ed
from ensdiv.chapters import zoo
from ensdiv.chapters._presets import add_dry_blocks, chapter_preset
from ensdiv.data.fashion import data_home
from ensdiv.data.paper.stream import stream_file_keys, stream_files, stream_tensor_set
from ensdiv.data.registry import subset_indices
from ensdiv.errors import unknown_name
from ensdiv.report import calibration

SLUG = "foundations"

PRESETS = {
    "foundations/deep_ensemble_basics": {
        # members copy the zoo's recipe of one architecture and differ only in their seed
        # n_ensembles: deep ensembles from disjoint seed groups (the first is seeds seed .. seed + M - 1, the members
        # shown and reused by measuring_diversity); n_singles: separately trained single models on the next seeds,
        # eight so that the A/A null compares four with four (with four, two against two: six splits in all)
        "common": {"seed": 0, "num_members": 4, "zoo_entry": "arch/small_cnn", "n_resamples": 1000,
                   "n_ensembles": 3, "n_singles": 8},
        "smoke": {"test_subset": 512, "n_resamples": 200, "n_ensembles": 2, "n_singles": 4},
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

_SHARED = ("seed", "num_members", "zoo_entry", "n_resamples")
PRESETS["foundations/measuring_diversity"] = {
    "common": {
        **{k: _BASE["common"][k] for k in _SHARED},
        "n_explain": 64,  # images explained with saliency / attacked with PGD
        "n_cka": 1000,  # images streamed through MinibatchCKA
        "cka_batch": 250,
        "pgd_steps": 50,  # as in attack-similarity §2
        "pgd_eps": 0.1,  # L∞ radius in [0, 1] pixel units (Fashion-MNIST needs more than 8/255)
        "ood": "inverted",  # synthetic OOD set: "inverted" (1 - x) or "noise" (uniform)
    },
    "smoke": {"test_subset": 512, "n_resamples": 200, "n_explain": 8, "n_cka": 128, "cka_batch": 64, "pgd_steps": 2},
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
        "data_root": "",  # folder holding imagenet/val and imagenet-cbar ("": $ENSDIV_DATA at paper, none below)
        "n_resamples": 1000,  # bootstrap resamples of the test images behind the claim's intervals
    },
    # paper: the claim's sets are ImageNet val and its shifts, read from $ENSDIV_DATA (shift_set_name), 5,000 images
    # each (50,000 at 224 px would not fit in memory); the CPU-scale sets are only shown, corrupted on the fly
    "smoke": {
        "eval_subset": 128,
        "n_resamples": 200,
        "build_sets": False,
        "damage_images": 2,
        "damage_size": 48,
    },
    "cpu": {},
    "paper": {"eval_subset": 5000, "build_sets": False},
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

# foundations/calibration: the verdict rule's rates on synthetic claims (ed.report.calibration), no training
PRESETS["foundations/calibration"] = {
    "common": {"seed": 0, "n_claims": 400, "n_power_claims": 100, "effects": [1.0, 2.0, 3.0, 6.0, 30.0],
               "resamples": 100},
    "smoke": {"n_claims": 20, "n_power_claims": 10, "effects": [3.0, 30.0]},
    "cpu": {},
    "paper": {"n_claims": 1000, "n_power_claims": 200},
    "dry": {"n_claims": 4, "n_power_claims": 2, "effects": [3.0]},
    "types": {"effects": list[float]},
}

#: The cells whose power curve the calibration page draws: ``(construction, replicates)``. Not "within": its
#: synthetic effect moves the difference from one edge of the tolerance through zero (about 2.4 SE at six seeds)
#: and out of the other edge, so its axis is not one of growing evidence for the claim.
POWER_CELLS = (("seed flips", 6), ("nested seed flips", 6), ("A/A halves", 6), ("model partitions", 6),
               ("permuted pairs", 12), ("non-inferiority", 6), ("model-weighted slope", 27),
               ("centred non-inferiority", 15))


def calibration_rates(cfg: Any) -> Any:
    """The verdicts' shares over synthetic claims (:func:`ensdiv.report.calibration.simulate`), cached: with no
    effect at every cell the book uses (``cfg.n_claims`` claims each), and for :data:`POWER_CELLS` at each effect
    of ``cfg.effects`` (``cfg.n_power_claims`` each). One row per cell and effect: ``construction``,
    ``replicates``, ``effect`` (standard errors), ``claims`` and each verdict's share."""

    def compute() -> dict[str, list[dict[str, Any]]]:
        rows = []
        cells = [(c, r, 0.0, cfg.n_claims) for c, r in calibration.BOOK_CELLS]
        cells += [(c, r, float(e), cfg.n_power_claims) for c, r in POWER_CELLS for e in cfg.effects]
        for i, (construction, replicates, effect, claims) in enumerate(cells):
            rates = calibration.simulate(construction, replicates=replicates, effect=effect, claims=claims,
                                         seed=cfg.seed + i, resamples=cfg.resamples)
            rows.append({"construction": construction, "replicates": replicates, "effect": effect, **rates})
        return {"rows": rows}

    conf = {"claims": cfg.n_claims, "power_claims": cfg.n_power_claims, "effects": [float(e) for e in cfg.effects],
            "resamples": cfg.resamples, "seed": cfg.seed}
    return pd.DataFrame(ed.cached("report-calibration", conf, compute)["rows"])


# a dry run of the paper presets (ensdiv run --dry-run): the paper zoo's recipes (zoo.DRY_RECIPE_SIZES) on fake data
add_dry_blocks(PRESETS, {"test_subset": 16, "num_members": 2, "n_ensembles": 2, "n_singles": 4, "n_resamples": 200,
                         "n_explain": 4, "n_cka": 8,
                         "cka_batch": 4, "pgd_steps": 2, "eval_subset": 16, "damage_images": 2})


def deep_ensemble(scale: str, zoo_entry: str, seed: int, num_members: int) -> list[ed.Recipe]:
    """The members of the chapter's deep ensemble: the zoo recipe ``zoo_entry`` at ``scale`` with seeds
    ``seed, seed + 1, ...`` (initialisation and data order), everything else unchanged.

    Member 0 with ``seed=0`` is the zoo's own model, so the zoo page and every page asking for the same
    members reuse one cached training.
    """
    base = zoo.zoo_recipes(scale)[zoo_entry]
    return [base.replace(seed=seed + m, name=f"{zoo_entry}-s{seed + m}") for m in range(num_members)]


def seed_groups(scale: str, zoo_entry: str, seed: int, num_members: int, ensembles: int, singles: int
                ) -> tuple[list[list[ed.Recipe]], list[ed.Recipe]]:
    """Deep ensembles from disjoint seed groups and separately trained single models, all copies of one zoo recipe
    that differ only in their seed: ensemble ``g`` holds seeds ``seed + g M .. seed + (g + 1) M - 1`` (the first is
    :func:`deep_ensemble`'s, so nothing is trained twice), the singles the next ``singles`` seeds.

    >>> groups, single = seed_groups("smoke", "arch/small_cnn", 0, 2, 2, 3)
    >>> [[r.seeds.init for r in g] for g in groups], [r.seeds.init for r in single]
    ([[0, 1], [2, 3]], [4, 5, 6])
    """
    every = deep_ensemble(scale, zoo_entry, seed, num_members * ensembles + singles)
    groups = [every[g * num_members:(g + 1) * num_members] for g in range(ensembles)]
    return groups, every[ensembles * num_members:]


def run_replicates(probs: Any, labels: Any, *, n_resamples: int, seed: int, n_bins: int = 15
                   ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Accuracy (%), NLL and ECE of each of ``S`` runs' probabilities ``(S, N, C)`` on the test images, and each on
    ``n_resamples`` resamples of the images with replacement (one resampling per ``seed``: two calls with the same
    seed and ``N`` resample the same images, so their replicates pair image by image).

    The ECE is the top-label ECE of :func:`ensdiv.metrics.ece` (``n_bins`` equal-width bins ``[k/n, (k+1)/n)``),
    on a resample weighted by how often each image was drawn.

    Returns:
        ``{"acc" | "nll" | "ece": (points (S,), replicates (S, R))}``.
    """
    p = torch.as_tensor(probs).double().numpy()
    y = torch.as_tensor(labels).numpy()
    s, n, _ = p.shape
    w = ed.report.resample_counts(n, n_resamples=int(n_resamples), seed=[seed, 5])
    conf, right = p.max(-1), (p.argmax(-1) == y).astype(float)
    nll = -np.log(np.clip(np.take_along_axis(p, np.broadcast_to(y[None, :, None], (s, n, 1)), -1)[..., 0], 1e-12,
                          None))
    out = {k: (v.mean(1), v @ w.T / n) for k, v in (("acc", 100 * right), ("nll", nll))}
    bins = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    gaps = np.zeros((s, n, n_bins))
    np.put_along_axis(gaps, bins[..., None], (right - conf)[..., None], -1)  # (S, N, bins): acc - conf per image
    out["ece"] = (np.abs(gaps.sum(1)).sum(-1) / n, np.stack([np.abs(w @ g).sum(1) / n for g in gaps]))
    return out


def nested_estimate(points: np.ndarray, reps: np.ndarray, *, seed: int, group: str) -> ed.report.Estimate:
    """The mean over runs of a score, with replicates that resample the runs (with replacement) and, within them,
    the test images (``reps``: each run's image replicates, :func:`run_replicates`): the two-stage bootstrap of
    :func:`ensdiv.report.nested_bootstrap`, from precomputed image replicates."""
    s, r = reps.shape
    counts = ed.report.resample_counts(s, n_resamples=r, seed=[seed, 6])
    return ed.report.Estimate(float(np.mean(points)), np.einsum("rs,sr->r", counts, reps) / s,
                              "seeds × test images", "bootstrap", group)


def eval_set(cfg: Any, role: str = "test", *, n: int | None = None) -> ed.TensorSet:
    """The evaluation set ``role`` of a foundations page (the chapters' one signature): ``"test"``, the zoo's
    evaluation set at ``cfg``'s scale (``zoo.EVAL_SET``), a fixed seeded subset of ``n`` images (default the
    preset's ``test_subset``; 0: all).

    Raises:
        UnknownNameError: a role other than ``"test"``.
    """
    if role != "test":
        raise unknown_name("evaluation set", role, ["test"])
    n = cfg["test_subset"] if n is None else n
    return ed.get_dataset(zoo.EVAL_SET[cfg["scale"]]).subset(n, seed=0)


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``foundations/<stem>`` at ``scale`` (see :func:`ensdiv.config.resolve_preset`)."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)


# ---- the corruptions page: one model on the clean test set and its shifts ------------------------------------
def shift_roles() -> list[str]:
    """The evaluation sets of the corruptions page by role: ``clean``, ``v2`` (re-collected, ImageNetV2),
    ``r`` (renditions, ImageNet-R), ``cbar/<corruption>/<strength>`` (design-diversity's four ImageNet-C̄ sets)
    and ``c/<corruption>/<severity>`` (the 15 ImageNet-C corruptions at severities 1 and 5, SED's levels)."""
    return ["clean", "v2", "r", *(f"cbar/{c}/{t:.1f}" for c, t in ed.data.PAPER_CBAR.items()),
            *(f"c/{c}/{s}" for c in ed.list_corruptions("c") for s in (1, 5))]


def shift_set_name(role: str, scale: str) -> str:
    """The set a role names at ``scale``: the registered Fashion-MNIST analogue at smoke and cpu
    (``fmnist-c/fog/5``), the published ImageNet-family folder at paper (``imagenet-c/fog/5``, read from
    ``$ENSDIV_DATA`` by :mod:`ensdiv.data.paper.stream`).

    Raises:
        UnknownNameError: a role not in :func:`shift_roles`.
    """
    if role not in shift_roles():
        raise ed.errors.unknown_name("corruptions page role", role, shift_roles()[:5] + ["..."])
    family, _, rest = role.partition("/")
    if scale != "paper":
        return {"clean": "fmnist/test", "v2": "fmnist-v2", "r": "fmnist-r"}.get(role) or f"fmnist-{family}/{rest}"
    return {"clean": "imagenet/val", "v2": "imagenet-v2", "r": "imagenet-r"}.get(role) or f"imagenet-{family}/{rest}"


def published_root(cfg: Any) -> Path | None:
    """The folder holding ``imagenet/val`` and ``imagenet-cbar`` for the page's published-vs-ours comparison:
    ``data_root`` when given, else ``$ENSDIV_DATA`` at paper scale (the folders the claim's sets are read from),
    else ``None`` (nothing to compare)."""
    if cfg["data_root"]:
        return Path(cfg["data_root"])
    return data_home() if cfg["scale"] == "paper" else None


def shift_correct(model: Any, cfg: Any) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Whether ``model`` (a recipe, trained or read from the cache, or a module) is right on each image of every
    :func:`shift_roles` set, and the bootstrap sample each set belongs to.

    At smoke and cpu every shifted set is the clean test set transformed image by image (the cached sets, or
    with ``build_sets`` false the transform applied to the same ``eval_subset`` images), so all roles share
    the sample ``"clean"``; labels are checked to line up. At paper the clean set is ``eval_subset`` images
    of ImageNet val drawn with seed 0; an ImageNet-C / -C̄ set holding every one of those files (same class
    folder and file name) is evaluated on exactly them and joins the sample ``"clean"``; a set that does not
    (ImageNetV2 and -R never do: they are other images) is drawn on its own and is a sample of its own, so
    its interval resamples it independently (:func:`ensdiv.report.sample_bootstrap`). ImageNet-R is scored
    over its 200 classes only (the logits restricted to its ``class_mask``), as SED and the ImageNet-R paper do.

    Returns:
        ``(correct, sample)``: ``{role: (N_role,) float array of 0/1}`` and ``{role: sample name}``.

    Raises:
        InvalidInputError: a cpu set whose labels are not the clean test set's in the same order.
    """
    n, scale = int(cfg["eval_subset"]), cfg["scale"]
    correct: dict[str, np.ndarray] = {}
    sample: dict[str, str] = {}
    if scale != "paper":
        test = ed.load_fashion_mnist("test").subset(n, seed=0)
        for role in shift_roles():
            name = shift_set_name(role, scale)
            if role == "clean":
                data = test
            elif cfg["build_sets"]:
                data = ed.get_dataset(name).subset(n, seed=0)
            else:
                data = ed.TensorSet(ed.data.shift_images(name, test.x), test.y, name, test.classes)
            if not torch.equal(data.y, test.y):
                raise ed.errors.InvalidInputError(f"{name}: not the clean test images in the same order.")
            correct[role] = (ed.predict(model, data).argmax(-1) == data.y).double().numpy()
            sample[role] = "clean"
        return correct, sample
    clean_name = shift_set_name("clean", scale)
    clean_keys = stream_file_keys(clean_name)
    rows = subset_indices(len(clean_keys), n, seed=0).tolist()
    wanted = [clean_keys[r] for r in rows]
    for role in shift_roles():
        name = shift_set_name(role, scale)
        if role == "clean":
            data, sample[role] = stream_tensor_set(name, rows=rows), "clean"
        else:
            where = {k: i for i, k in enumerate(stream_file_keys(name))} if role.startswith("c") else {}
            if wanted and all(k in where for k in wanted):
                data, sample[role] = stream_tensor_set(name, rows=[where[k] for k in wanted]), "clean"
            else:
                data, sample[role] = stream_tensor_set(name, n, seed=0), role
        logits = ed.predict(model, data)
        mask = getattr(stream_files(name), "class_mask", None)
        if mask is not None:  # a 200-class subset: the argmax over its classes, as a 1000-class index
            pred = mask[logits[:, mask].argmax(-1)]
        else:
            pred = logits.argmax(-1)
        correct[role] = (pred == data.y).double().numpy()
    return correct, sample


def swap_null(a: Any, b: Any, clean: Any, *, names: tuple[str, str], paired: bool, draws: int, n_resamples: int,
              seed: int) -> ed.report.Null:
    """Null data for "top-1 on set A, relative to clean top-1, exceeds that on set B": the two sets made
    exchangeable. ``a`` and ``b`` hold per-image correctness (``b`` may be a mean over several sets of the same
    images), ``clean`` the clean set's. When ``paired`` (A's images are B's, transformed one by one) each image's
    A and B values are swapped at random; otherwise A's and B's values are pooled and dealt back at random into
    sets of their sizes. Each draw's two relative accuracies get replicates from one resampling of the images
    (the clean images and B's together, A's on their own unless paired), shared by every draw.

    >>> null = swap_null(np.ones(6), np.zeros(6), np.ones(6), names=("a", "b"), paired=True, draws=3,
    ...                  n_resamples=10, seed=0)
    >>> len(null.draws), sorted(null.draws[0])
    (3, ['a', 'b'])
    """
    a, b, clean = (np.asarray(v, dtype=float).ravel() for v in (a, b, clean))
    rng0 = np.random.default_rng([seed, 8])
    n = clean.size
    wc = ed.report.resample_counts(n, n_resamples=int(n_resamples), seed=rng0)
    wa = wc if paired else ed.report.resample_counts(a.size, n_resamples=int(n_resamples), seed=rng0)
    base = wc @ clean / n

    def make(rng: np.random.Generator) -> dict[str, ed.report.Estimate]:
        if paired:
            flip = rng.random(n) < 0.5
            a2, b2 = np.where(flip, b, a), np.where(flip, a, b)
        else:
            dealt = rng.permutation(np.concatenate([a, b]))
            a2, b2 = dealt[: a.size], dealt[a.size:]
        group = f"swap-{rng.integers(2**31)}"
        with np.errstate(divide="ignore", invalid="ignore"):
            return {names[0]: ed.report.Estimate(float(a2.mean() / clean.mean()), (wa @ a2 / a.size) / base,
                                                 "evaluation samples", "bootstrap", group),
                    names[1]: ed.report.Estimate(float(b2.mean() / clean.mean()), (wc @ b2 / n) / base,
                                                 "evaluation samples", "bootstrap", group)}

    how = "swapped at random image by image" if paired else "pooled and dealt back at random"
    return ed.report.null_draws(f"{names[0]} and {names[1]}: the two sets' images {how}", make, draws=draws,
                                seed=seed)


# ---- the zoo page: groups of Figure A's models -----------------------------------------------------------------
def model_replicates(correct: np.ndarray, *, n_resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Each model's top-1 (%) on the test images and on ``n_resamples`` resamples of them (one resampling for
    every model, so models pair image by image): ``correct`` is ``(models, N)`` right-or-wrong; returns
    ``(points (models,), replicates (models, R))``."""
    c = 100 * np.asarray(correct, dtype=float)
    n = c.shape[1]
    w = ed.report.resample_counts(n, n_resamples=int(n_resamples), seed=[seed, 9])
    return c.mean(1), c @ w.T / n


def group_means(points: np.ndarray, reps: np.ndarray, groups: dict[str, Any], *, group: str
                ) -> dict[str, ed.report.Estimate]:
    """``{f"{name}_mean": Estimate}``: each group's mean top-1 over its models (rows of ``points``/``reps``), its
    replicates from the shared image resampling (:func:`model_replicates`)."""
    return {f"{g}_mean": ed.report.Estimate(float(np.mean(points[rows])), reps[rows].mean(0), "evaluation samples",
                                            "bootstrap", group)
            for g, rows in groups.items() if len(rows)}


def swapped_groups_null(correct: np.ndarray, groups: dict[str, Any], *, n_resamples: int, draws: int, seed: int,
                        resample_seed: int = 0) -> ed.report.Null:
    """Null data for orderings of groups of *these* models, read on the test images: on every image the groups'
    mean correctness is shuffled among the groups (a paired permutation, image by image), so no group is better
    than another on average while the images, the models and how hard each image is stay. Each draw's group means
    carry replicates of the same image resampling as :func:`model_replicates` (``resample_seed``).

    ``correct``: ``(models, N)`` right-or-wrong; ``groups``: ``{name: model rows}`` (empty groups left out).

    >>> correct = np.array([[1, 1, 1, 1], [1, 1, 1, 0], [0, 0, 0, 0]])
    >>> null = swapped_groups_null(correct, {"a": [0, 1], "b": [2]}, n_resamples=5, draws=3, seed=0)
    >>> [round(d["a_mean"].value + d["b_mean"].value) for d in null.draws]  # the two groups' total is kept
    [88, 88, 88]
    """
    c = 100 * np.asarray(correct, dtype=float)
    names = [g for g, rows in groups.items() if len(rows)]
    per_image = np.stack([c[list(groups[g])].mean(0) for g in names])  # (G, N)
    n = per_image.shape[1]
    w = ed.report.resample_counts(n, n_resamples=int(n_resamples), seed=[resample_seed, 9])

    def make(rng: np.random.Generator) -> dict[str, ed.report.Estimate]:
        shuffled = np.take_along_axis(per_image, np.argsort(rng.random(per_image.shape), axis=0), axis=0)
        reps = shuffled @ w.T / n
        tag = f"swapped-{rng.integers(2**31)}"
        return {f"{g}_mean": ed.report.Estimate(float(shuffled[i].mean()), reps[i], "evaluation samples",
                                                "bootstrap", tag) for i, g in enumerate(names)}

    return ed.report.null_draws("the groups' mean correctness shuffled among the groups on every test image",
                                make, draws=draws, seed=seed)


def derangements(m: int) -> list[tuple[int, ...]]:
    """Every permutation of ``range(m)`` that moves every element (member ``i`` paired with another member
    ``p[i]``): the measuring-diversity page's null pairs each member with another's adversarial examples.

    >>> derangements(3), len(derangements(4))
    ([(1, 2, 0), (2, 0, 1)], 9)
    """
    import itertools

    return [p for p in itertools.permutations(range(m)) if all(i != j for i, j in enumerate(p))]
