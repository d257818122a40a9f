"""The attack-similarity chapter (Hwang et al., *Similarity of Neural Architectures using Adversarial
Attack Transferability*, ECCV 2024): its recipes, evaluation set and SAT runs, the released data's
analyses (:mod:`~ensdiv.chapters.attack_similarity.release`), and its presets.

The SAT engine itself (attacks, transfer matrices) is library code: :func:`ensdiv.sat_matrix`,
:func:`ensdiv.sat_by_source`, :mod:`ensdiv.transfer`.

Deviations at paper scale (stated, not fixed):

* **Each model sees the images framed its own way; a target sees the source's framing.** At paper scale
  SAT reads ``imagenet/val-5k``'s 5,000 images once per distinct pipeline of the 69 pinned models
  (:func:`ensdiv.data.paper.imagenet_val_pipelines`: timm's evaluation transform of the model's data
  config, its size, ``crop_pct``, interpolation and crop mode, without the mean/std step, which the model
  applies). Each model's clean correctness is measured, and its attack made, on its own framing, so clean
  accuracies follow timm's evaluation. A target B evaluates source A's adversarial images as they are,
  resized to B's resolution (:func:`ensdiv.models.forward_pixels`): the paper says the attacked image is
  resized for the target and does not say how to re-frame it when A and B crop differently; we do not
  re-crop. ``X_AB`` is then "A right on A's framing and B right on B's framing" of the same image.
* :func:`~ensdiv.chapters.attack_similarity.release.compare_with_release` (Fig. D.2's page) measures how
  far the paper-scale SAT matrix is from the released one; the pipeline above is one candidate cause of
  a gap, not tested apart.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

import ensdiv as ed
from ensdiv.chapters._presets import add_dry_blocks, chapter_preset
from ensdiv.chapters.attack_similarity import components, evidence, intervals, release, within
from ensdiv.chapters.zoo import EVAL_SET, zoo_recipes

SLUG = "attack-similarity"

__all__ = [
    "SLUG",
    "PRESETS",
    "preset",
    "release",
    "intervals",
    "evidence",
    "components",
    "within",
    "chapter_recipes",
    "chapter_eval_set",
    "chapter_labels",
    "chapter_logits",
    "chapter_sat",
    "chapter_sat_one_side",
    "sat_eval_set",
    "chapter_variants",
    "sat_overview",
    "sat_clusters",
    "draw_cluster_ensembles",
    "cluster_ensemble_scores",
    "model_family",
    "zoo_recipes",
    "EVAL_SET",
]


def chapter_recipes(cfg: Any, keys: Sequence[str] | None = None) -> list:
    """The shared zoo's recipes (:func:`ensdiv.chapters.zoo.zoo_recipes`) for the keys/patterns ``keys`` (default
    ``cfg.zoo``) at ``cfg.scale``, named by their key without the category (``"arch/vit"`` → ``"vit"``).

    At ``paper`` scale a key without a category (``"sat69"``: the paper's 69 models; a SAT table or
    timm name) gives the paper's *pretrained* ImageNet models instead, as nn.Modules taking [0, 1]
    pixels (:func:`ensdiv.models.paper_models`); zoo keys (``"arch/vit"``) stay recipes.
    """
    if cfg["scale"] == "paper":
        out: list = []
        for key in list(keys or cfg["zoo"]):
            if "/" in key:
                out += [r.replace(name=k.split("/", 1)[-1]) for k, r in zoo_recipes("paper", [key]).items()]
            else:
                out += ed.models.paper_models(key)
        return out
    zoo = zoo_recipes(cfg["scale"], list(keys or cfg["zoo"]))
    return [r.replace(name=k.split("/", 1)[-1]) for k, r in zoo.items()]


def chapter_eval_set(cfg: Any) -> Any:
    """The zoo's evaluation set at ``cfg.scale`` (a name), subset to ``cfg.eval_subset`` when non-zero."""
    name = EVAL_SET[cfg["scale"]]
    if not cfg.get("eval_subset"):
        return name
    return ed.get_dataset(name).subset(cfg["eval_subset"], seed=cfg["seed"])


def chapter_logits(cfg: Any, models: Sequence[Any]) -> torch.Tensor:
    """Every model's logits on :func:`chapter_eval_set`, ``(M, N, C)``, cached. At ``paper`` scale each
    pretrained model sees the images framed by its own evaluation pipeline (as :func:`chapter_sat` scores
    it; :func:`sat_eval_set`); the labels are the same for every framing."""
    if cfg["scale"] != "paper" or not any(isinstance(m, nn.Module) for m in models):
        return ed.predict_many(list(models), chapter_eval_set(cfg))
    sets = sat_eval_set(cfg)
    out: list[torch.Tensor | None] = [None] * len(models)
    for i in ed.data.paper.by_pipeline(models):
        framed = sets.for_model(models[i])
        if cfg.get("eval_subset"):
            framed = framed.subset(cfg["eval_subset"], seed=cfg["seed"])
        out[i] = ed.predict(models[i], framed)
    return torch.stack(out)


def chapter_labels(cfg: Any) -> torch.Tensor:
    """The labels of :func:`chapter_eval_set`, shape (N,)."""
    ev = chapter_eval_set(cfg)
    return (ed.get_dataset(ev) if isinstance(ev, str) else ev).y


def _attack_kwargs(cfg: Any, attack: str, steps: int | None = None, attack_seed: int | None = None) -> dict:
    kw = {"eps": cfg["eps"]}
    if attack != "autoattack":  # AutoAttack's budget is fixed by its version, not a step count
        kw["steps"] = steps or cfg["steps"]
    if attack == "pgd":
        kw["alpha"] = cfg["alpha"]
    if attack_seed is not None:  # the attack's random start only; the attacked images stay those of cfg.seed
        kw["seed"] = int(attack_seed)
    return kw


def chapter_sat(cfg: Any, recipes: Sequence[Any], *, attack: str | None = None, steps: int | None = None,
                names: Sequence[str] | None = None, attack_seed: int | None = None) -> ed.SatResult:
    """:func:`sat_matrix` of ``recipes`` on the zoo evaluation set, attack set by a chapter preset.
    ``attack_seed``: another random start of the attack on the same images (default: ``cfg.seed``, which also
    picks the images)."""
    attack = attack or cfg["attack"]
    kw = _attack_kwargs(cfg, attack, steps, attack_seed)
    if cfg["scale"] == "paper" and any(isinstance(m, nn.Module) for m in recipes):
        return ed.sat_by_source(recipes, sat_eval_set(cfg), subsample=cfg["subsample"], attack=attack,
                             attack_kwargs=kw, names=names, seed=cfg["seed"])  # fmt: skip
    return ed.sat_matrix(recipes, sat_eval_set(cfg), subsample=cfg["subsample"], attack=attack,
                      attack_kwargs=kw, names=names, seed=cfg["seed"])


def sat_eval_set(cfg: Any) -> Any:
    """The images SAT evaluates and attacks: at ``paper`` scale ``imagenet/val-5k`` framed by each model's own
    evaluation pipeline (:func:`ensdiv.data.paper.imagenet_val_pipelines`: its size, crop fraction,
    interpolation), elsewhere the zoo's evaluation set (one framing for every model)."""
    if cfg["scale"] == "paper":
        return ed.data.paper.imagenet_val_pipelines()
    return EVAL_SET[cfg["scale"]]


def chapter_sat_one_side(cfg: Any, new_model: Any, models: Sequence[Any]) -> torch.Tensor:
    """:func:`ensdiv.sat_one_side` of ``new_model`` against ``models`` (App. G): only the new model is
    attacked, with the preset's attack, on the zoo evaluation set. Returns (N,) scores."""
    return ed.sat_one_side(new_model, models, sat_eval_set(cfg), subsample=cfg["subsample"], seed=cfg["seed"],
                           attack=cfg["attack"], attack_kwargs=_attack_kwargs(cfg, cfg["attack"]))


def sat_overview(sat: ed.SatResult) -> pd.DataFrame:
    """Per model: clean accuracy on the attacked images and white-box attack success rate."""
    return pd.DataFrame({"clean accuracy": sat.clean_accuracy.numpy(), "white-box success": sat.self_success.numpy()},
                        index=pd.Index(sat.names, name="model"))


def sat_clusters(sat: ed.SatResult | Any, n_clusters: int, *, n_init: int = 100, seed: int = 0) -> np.ndarray:
    """Spectral clusters (:func:`release.spectral_clusters`) of a measured SAT matrix, labels 1..K.

    Spectral clustering needs non-negative affinities: a SAT score below 0 (transfer rate under 1 %)
    counts as 0, and an undefined (NaN) score as 0.

    A model with no positive score to or from any other (its attacks transfer to none and none to it, or
    every score undefined: right on none of the attacked images) is a vertex the graph cannot place
    (:func:`release.spectral_features` needs a positive degree). It becomes a cluster of its own, numbered
    after the clusters of the others, and a warning names it; the others form ``min(n_clusters, their
    number)`` clusters. A dry run's randomly initialised models are all such models.
    """
    scores = sat.scores.numpy() if isinstance(sat, ed.SatResult) else np.asarray(sat, dtype=float)
    names = list(sat.names) if isinstance(sat, ed.SatResult) else [str(i) for i in range(len(scores))]
    affinity = np.nan_to_num(scores, nan=0.0).clip(min=0)
    graph = affinity + affinity.T
    np.fill_diagonal(graph, 0.0)
    placed = graph.sum(axis=1) > 0
    labels = np.zeros(len(affinity), dtype=int)
    k = min(n_clusters, int(placed.sum()))
    if placed.sum() > 1:
        labels[placed] = release.spectral_clusters(affinity[np.ix_(placed, placed)], n_clusters=k, n_init=n_init,
                                                   seed=seed)
    labels[placed & (labels == 0)] = 1  # one placed model: one cluster
    labels[~placed] = k + 1 + np.arange(int((~placed).sum()))
    if not placed.all():
        warnings.warn(f"{int((~placed).sum())} of {len(labels)} models share no positive SAT score with any "
                      f"other ({', '.join(n for n, p in zip(names, placed, strict=True) if not p)}): each is a "
                      "cluster of its own.", stacklevel=2)
    return labels


def chapter_variants(cfg: Any, base_key: str) -> tuple[list, list[str]]:
    """The within-architecture variants of Tab. D.1 / Fig. 4 for the zoo entry ``base_key``.

    ``cfg.variants[<base name>]`` maps a group (``init``, ``hparam``, ``regime``) to a list of flat
    recipe overrides (:meth:`ensdiv.Recipe.replace`). Returns ``(members, groups)``: the base recipe
    first (group ``"base"``), then one recipe per override, named ``"<base>:<group><i>"``.
    """
    base = chapter_recipes(cfg, [base_key])[0]
    members, groups = [base], ["base"]
    for group, overrides in cfg["variants"][base.name].items():
        for i, ov in enumerate(overrides):
            members.append(base.replace(name=f"{base.name}:{group}{i + 1}", **ov))
            groups.append(group)
    return members, groups


def model_family(recipe: ed.Recipe) -> str:
    """The family of a zoo recipe's architecture (:func:`ensdiv.model_info`): a paper-scale zoo recipe builds a
    timm model (``resnet18``), which takes the family of the zoo architecture it stands for
    (:data:`ensdiv.models.paper.PAPER_MODELS`: ``small_cnn`` → ``resnet18``).

    Raises:
        UnknownNameError: the architecture is neither registered nor a paper zoo model.
    """
    name = recipe.model.name
    if name in ed.list_models():
        return ed.model_info(name).family
    stands_for = {timm_name: zoo_name for zoo_name, timm_name in ed.models.paper.PAPER_MODELS.items()}
    if name not in stands_for:
        raise ed.errors.unknown_name("zoo architecture", name, [*ed.list_models(), *stands_for])
    return ed.model_info(stands_for[name]).family


def cluster_ensemble_scores(logits: torch.Tensor, labels: torch.Tensor, combos: torch.Tensor) -> dict[str, float]:
    """Mean top-1 error, error reduction rate and "all wrong" ratio (in %) of the ensembles ``combos`` (Fig. 3-4).

    One row of :func:`ensdiv.metrics.ensemble_sweep` per ensemble (mean of logits); its ``err`` and
    ``all_wrong`` columns are averaged over the ensembles (ensembles whose members make no error have no
    ERR and are skipped in its mean).
    """
    sweep = ed.metrics.ensemble_sweep(logits, labels, combinations=combos)
    return {"top-1 error (%)": 100 * float((1 - sweep["accuracy"]).mean()), "ERR (%)": 100 * float(sweep["err"].mean()),
            "all wrong (%)": 100 * float(sweep["all_wrong"].mean())}


def draw_cluster_ensembles(labels: Any, size: int, n_clusters_used: int, *, n_draws: int, seed: int = 0):
    """Random ``size``-model ensembles whose members come from exactly ``n_clusters_used`` clusters (Fig. 3).

    Each draw picks ``n_clusters_used`` clusters at random (among those whose union holds at least
    ``size`` models), one model from each, then fills the ensemble from the union of the chosen
    clusters. Duplicate draws are kept (they are samples of the same distribution).

    Returns:
        Long tensor (K, size) of model indices, K ≤ n_draws (0 rows if no choice of clusters fits).
    """
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    clusters = sorted(set(labels.tolist()))
    if not 1 <= n_clusters_used <= min(size, len(clusters)):
        return torch.zeros(0, size, dtype=torch.long)
    rows = []
    for _ in range(n_draws * 20):
        if len(rows) == n_draws:
            break
        chosen = rng.choice(clusters, n_clusters_used, replace=False)
        pool = np.flatnonzero(np.isin(labels, chosen))
        if len(pool) < size:
            continue
        first = [rng.choice(np.flatnonzero(labels == c)) for c in chosen]
        rest = rng.choice(np.setdiff1d(pool, first), size - len(first), replace=False)
        rows.append(sorted([*first, *rest.tolist()]))
    return torch.tensor(rows, dtype=torch.long).reshape(-1, size)


# ---- presets ------------------------------------------------------------------------------------------
# Presets of the attack-similarity chapter (Hwang et al., SAT; paper file 002).
#
# Released-data notebooks (fig01, tab02, figC1, figD2, figD1a) run the paper's own 69×69 matrix at
# every scale; ``smoke`` only lowers the number of boosting stages, permutations and K-means restarts.
# n_resamples: bootstrap resamples of every interval (issue #27); 200 at smoke
_RELEASED = {"data_root": None, "seed": 0, "n_resamples": 1000}
_RELEASED_TYPES = {"data_root": str}  # None: book/data/sat; else the folder of the released CSVs
_SPECTRAL = {"n_clusters": 10}

PRESETS: dict = {
    "attack-similarity/fig01_component_importance": {
        # App. B: 500 stages, depth 12, min samples 4, lr 0.02, 10 permutations.
        "common": {**_RELEASED, "max_depth": 12, "min_samples_split": 4, "learning_rate": 0.02},
        "types": _RELEASED_TYPES,
        # no refit for a null: the margin's and the ratio's nulls sit at their bounds (the bootstrap, centred)
        "smoke": {"n_estimators": 20, "n_repeats": 2, "n_resamples": 200},
        "cpu": {"n_estimators": 500, "n_repeats": 10},
        "paper": {"n_estimators": 500, "n_repeats": 10},
    },
    "attack-similarity/tab02_spectral_clusters": {
        # App. C: normalised Laplacian, K = 10, K-means with 100 restarts, best final objective; we keep
        # the best of n_seeds × n_init restarts (release.DEFAULT_READING), and score every reading of App. C.
        "common": {**_RELEASED, **_SPECTRAL},
        "types": _RELEASED_TYPES,
        "smoke": {"n_init": 5, "n_seeds": 2, "n_resamples": 200},
        "cpu": {"n_init": 100, "n_seeds": 10},
        "paper": {"n_init": 100, "n_seeds": 10},
    },
    "attack-similarity/figC1_spectral_features": {
        "common": {**_RELEASED, **_SPECTRAL},
        "types": _RELEASED_TYPES,
        "smoke": {"n_init": 5, "n_seeds": 2, "n_resamples": 200},
        "cpu": {"n_init": 100, "n_seeds": 10},
        "paper": {"n_init": 100, "n_seeds": 10},
    },
    # measured: also measure the 69×69 matrix (paper scale only: the same 69 models; the SAT keys are
    # fig02's, so the measurement is shared) and compare it with the release (release.compare_with_release)
    "attack-similarity/figD2_similarity_matrix": {
        "common": {**_RELEASED, **_SPECTRAL},
        "types": _RELEASED_TYPES,
        "smoke": {"n_init": 5, "n_seeds": 2, "measured": False, "n_resamples": 200},
        "cpu": {"n_init": 100, "n_seeds": 10, "measured": False},
        "paper": {"n_init": 100, "n_seeds": 10, "measured": True},
    },
    "attack-similarity/figD1a_similarity_distribution": {
        "common": {**_RELEASED, "bins": 40},
        "types": _RELEASED_TYPES,
        "smoke": {"n_resamples": 200},
        "cpu": {},
        "paper": {},
    },
}

# ---- our own SAT measurements on the shared zoo (ensdiv.chapters.zoo) ------------------------------------------
# Models are the zoo's recipes (``zoo``: keys or patterns of ensdiv.chapters.zoo.ZOO[scale]), so they are trained
# once for the whole book. PGD: the paper gives 50 steps only; ε = 0.1 is the usual Fashion-MNIST radius
# (8/255 leaves small models partly correct), α = ε/4; cpu uses 10 steps on 200 test images to stay
# affordable on 2 cores (15 attacks ≈ 30k forward+backward image passes).
_ZOO = {
    "common": {"seed": 0, "attack": "pgd", "eps": 0.1, "alpha": 0.025, "zoo": ["arch/*"], "n_resamples": 1000},
    "smoke": {"zoo": ["arch/small_cnn", "arch/vit", "arch/mlp"], "subsample": 48, "steps": 3,
              "eval_subset": 300, "n_resamples": 200},
    "cpu": {"subsample": 200, "steps": 10, "eval_subset": 0},
    # paper: the paper's 69 pretrained timm ImageNet models ("sat69", ensdiv.models.paper_models)
    # on imagenet/val-5k (10 % of val, 5 per class), PGD 50 steps at ε = 8/255, α = 2/255 (our choice).
    "paper": {"zoo": ["sat69"], "subsample": 5000, "steps": 50, "eps": 8 / 255, "alpha": 2 / 255,
              "eval_subset": 0},
}


def _zoo(**extra_by_scale):
    out = {k: dict(v) for k, v in _ZOO.items()}
    for scale, extra in extra_by_scale.items():
        out[scale].update(extra)
    return out


# Within-architecture variants (Tab. D.1 / Fig. 4): overrides of an architecture's zoo recipe, by group, four per
# group and base (the paper has 7 to 28; two gave a bootstrap over each group's units few distinct resamples).
# init: the initialisation alone (App. D: "initializing each network with different random seeds"; the data order is
# the base's, as the zoo's reinit/); hparam: learning rate and weight decay (App. D's optimisation hyper-parameters);
# regime: "different learning techniques (augmentation methods, types of supervision)": augmentations, and for the
# ResNet label smoothing (soft targets) and dropout. Every ResNet variant is a zoo entry (reinit/resnet-s1..s4,
# hparam/resnet-*; the name does not enter the cache key), so only the ViT's twelve are trained for these pages.
_VARIANTS = {
    "resnet": {"init": [{"init_seed": s} for s in (1, 2, 3, 4)],
               "hparam": [{"lr": 0.01}, {"lr": 0.2}, {"weight_decay": 0.0}, {"weight_decay": 5e-3}],
               "regime": [{"augment": "flip+mixup"}, {"augment": "flipcrop"}, {"label_smoothing": 0.1},
                          {"dropout": 0.3}]},
    "vit": {"init": [{"init_seed": s} for s in (1, 2, 3, 4)],
            "hparam": [{"lr": 0.001}, {"lr": 0.004}, {"weight_decay": 0.01}, {"weight_decay": 0.2}],
            "regime": [{"augment": "flip+mixup"}, {"augment": "flipcrop"}, {"augment": "flip+cutmix"},
                       {"augment": "flip+erasing"}]},
}  # fmt: skip
# paper: the zoo's ImageNet recipes already flip and crop, so each regime adds to that (flip + crop alone would be the
# base model again)
_PAPER_VARIANTS = {
    "resnet": {**_VARIANTS["resnet"],
               "regime": [{"augment": "flipcrop+mixup"}, {"augment": "flipcrop+cutmix"}, {"label_smoothing": 0.1},
                          {"dropout": 0.3}]},
    "vit": {**_VARIANTS["vit"],
            "regime": [{"augment": "flipcrop+mixup"}, {"augment": "flipcrop+cutmix"}, {"augment": "flipcrop+erasing"},
                       {"label_smoothing": 0.1}]},
}  # fmt: skip
# smoke: two variants per group, so that every group has the two units a bootstrap over them needs
_SMOKE_VARIANTS = {"mlp": {"init": [{"init_seed": 1}, {"init_seed": 2}],
                           "hparam": [{"lr": 0.01}, {"weight_decay": 0.0}],
                           "regime": [{"augment": "flipcrop"}, {"augment": "flip+mixup"}]}}  # fmt: skip
_WITHIN = {"smoke": {"base_models": ["arch/mlp"], "variants": _SMOKE_VARIANTS},
           "cpu": {"base_models": ["arch/resnet", "arch/vit"], "variants": _VARIANTS},
           "paper": {"base_models": ["arch/resnet", "arch/vit"], "variants": _PAPER_VARIANTS}}  # fmt: skip

PRESETS["attack-similarity/figD2_similarity_matrix"]["paper"].update(
    {k: v for k, v in {**_ZOO["common"], **_ZOO["paper"]}.items() if k != "seed"})
PRESETS.update({
    "attack-similarity/tabD1_within_architecture": _zoo(**_WITHIN),
    "attack-similarity/fig02_similarity_vs_err": _zoo(common={"ci": 0.90}),
    # null_draws: draws of the dealt-clusters null (each draws the ensembles anew); cpu 100 (about 2 s a draw: 200
    # were 6 of the page's minutes; #53's budget), which still resolves a tail share of 1 % (1/101)
    "attack-similarity/fig03_cluster_ensembles": _zoo(
        common={"n_draws": 50, "null_draws": 200},
        smoke={"n_clusters": 2, "max_members": 3, "null_draws": 50},
        cpu={"n_clusters": 4, "max_members": 6, "null_draws": 100},
        paper={"n_clusters": 10, "max_members": 8},  # §3: K = 10 clusters of the 69 models
    ),
    # n_draws: architecture ensembles per size; null_draws: draws of the regime check's null (variants dealt among
    # the groups of their base; the architecture check reads its own model bootstrap centred at 0)
    "attack-similarity/fig04_training_vs_architecture": _zoo(
        common={"n_draws": 50, "null_draws": 200},
        smoke={**_WITHIN["smoke"], "n_clusters": 2},
        cpu={**_WITHIN["cpu"], "n_clusters": 4},
        paper={**_WITHIN["paper"], "n_clusters": 10},
    ),
    "attack-similarity/fig05_distillation": _zoo(
        # hard-label distillation (DeiT, as the paper) of a small ViT student from each other zoo model
        # students: whether the students (and the baseline student without distillation) are trained;
        # student_epochs: their epochs (0: the zoo recipe's own). cpu trains none: with 4 Transformer teachers a
        # partial r is not computable and the teachers span 19 accuracy points, not a narrow band, so neither
        # 1-epoch students (9 minutes of a cold book) nor full ones (23) can decide a check there
        common={"student": "arch/vit", "distill": "hard", "distill_alpha": 0.5, "student_epochs": 0,
                "students": True},
        smoke={"student": "arch/mlp", "zoo": ["arch/small_cnn", "arch/vit", "arch/mixer"]},
        # cpu: 11 teachers, 4 of them Transformers (a correlation needs 4 points): DeiT, Swin, DeiT re-seeded and
        # a DeiT pre-trained with SimCLR then linear-probed (the zoo's dd/ models: no new teacher is trained)
        cpu={"zoo": ["arch/vit", "arch/small_cnn", "arch/resnet", "arch/resnext", "arch/densenet",
                     "arch/efficientnet", "arch/convnext", "arch/deit", "arch/swin", "arch/mixer",
                     "dd/deit_tiny_p16_224", "dd/dino_deit_tiny1"], "student_epochs": 1, "students": False},
        # paper: students distil from zoo recipes (a Recipe's teacher must be a Recipe), not pretrained models
        paper={"zoo": ["arch/*"]},
    ),
    "attack-similarity/figG1_attack_choice": _zoo(
        # The paper's Fig. G.1 uses AutoAttack. From torchattacks: APGD-CE (AutoAttack's first attack) at
        # smoke/cpu, the standard AutoAttack at paper; "apgd" (ours) and "mi_fgsm" also work.
        # reruns: PGD re-run with other random starts on the same images (the noise ceiling of r). The data where
        # the attack does not matter are the orderings of PGD's runs in the three roles: two re-runs give 6, whose
        # smallest p-value (1/7) cannot decide; three give 24 (1/25)
        common={"second_attack": "apgd_ce", "second_steps": 10, "reruns": 3},
        smoke={"second_steps": 3, "reruns": 2},
        # App. G: "We sample 8 models among 69 models for testing the effect of Autoattack": ViT-S, CoaT-Lite
        # Small, ResNet-101, LamHaloBotNet50, ReXNet-150, NFNet-L0, Swin-T and Twins-pcpvt (SAT table names)
        paper={"second_attack": "autoattack",
               "zoo": ["vit_small_patch16_224", "coat_lite_small", "resnet101", "lamhalobotnet50ts_256",
                       "rexnet_150", "nfnet_l0", "swin_tiny_patch4_window7_224", "twins_pcpvt_base"]},
    ),
    # n_clusters: the K of the spectral clusters whose members are checked (paper: K = 10, Tab. 2)
    # new_model (paper scale): App. G's new model, Gluon's ResNeXt-50 (below paper: the twin's architecture
    # trained with another recipe, built by the page)
    "attack-similarity/figG2_one_side": _zoo(common={"new_model": ""}, smoke={"n_clusters": 2},
                                             cpu={"n_clusters": 4},
                                             paper={"n_clusters": 10, "new_model": "gluon_resnext50_32x4d"}),
})


#: what a dry run of the paper presets (:mod:`ensdiv.book.dry`) changes: sizes, and its models. Of the SAT table
#: (``"sat69"``), four with three input pipelines (224 px at two crop fractions, 256 px), ResNeXt-50 among them,
#: the twin of App. G's new model; of App. G's eight (Fig. G.1), three; of the zoo (Fig. 5's teachers,
#: ``"arch/*"``), the smallest CNNs and Transformers
DRY_SIZES = {"subsample": 8, "steps": 2, "second_steps": 2, "n_estimators": 10, "n_repeats": 2, "n_init": 3,
             "n_seeds": 2, "n_resamples": 200, "n_draws": 5, "n_clusters": 2, "max_members": 3,
             "null_draws": 20}
DRY_ZOO = ["resnext50_32x4d", "vit_small_patch16_224", "botnet26t_256", "rexnet_150", "arch/small_cnn", "arch/mnasnet",
           "arch/mobilenetv3", "arch/deit", "arch/swin", "arch/mlp"]
PRESETS["attack-similarity/figG1_attack_choice"]["dry"] = {
    "zoo": ["vit_small_patch16_224", "rexnet_150", "swin_tiny_patch4_window7_224"]}
add_dry_blocks(PRESETS, DRY_SIZES, pick={"zoo": DRY_ZOO})


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``attack-similarity/<stem>`` at ``scale`` (see :func:`ensdiv.config.resolve_preset`)."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)
