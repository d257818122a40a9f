"""SAT similarity matrices: N attacks, then all N² cross evaluations (attack-similarity §2, App. G).

For N models, :func:`sat_matrix` makes one set of adversarial images per model (the expensive part:
``steps`` forward+backward passes each), then evaluates every model on every set, one batched forward
pass per target over all N sources' images (N² cheap evaluations). From the resulting "fooled" tensor
it computes the two-side score of Eq. 1 for every pair and the one-side approximation of App. G.
:func:`sat_one_side` adds a new model to known ones without re-attacking them.

Caching: when the models are :class:`~ensdiv.Recipe` objects, each model's adversarial images are cached
(``ensdiv.store`` kind ``"sat-adv"``, keyed by the recipe's config, the evaluation set and the attack),
and so is the whole matrix (kind ``"sat-matrix"``); adding a model to a list re-attacks only that model.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
import torch.nn as nn

from ensdiv.attacks import PGD_DEFAULTS, run_attack
from ensdiv.data.paper.tensors import PipelineSets, by_pipeline
from ensdiv.data.registry import TensorSet, get_dataset
from ensdiv.errors import EnsdivError, UndefinedMetricWarning
from ensdiv.metrics.similarity import SAT_EPS, sat_score, sat_score_one_side
from ensdiv.models.input_spec import forward_pixels
from ensdiv.predict import dataset_fingerprint
from ensdiv.progress import bar
from ensdiv.shards import fan_out
from ensdiv.store import cached
from ensdiv.train.build import model_cache_config, train_recipe
from ensdiv.train.recipes import Recipe

__all__ = [
    "SatResult", "sat_matrix", "sat_by_source", "sat_one_side", "sat_from_fooled",
]


@dataclass
class SatResult:
    """Outcome of :func:`sat_matrix`.

    Attributes:
        names: model names, in order.
        scores: two-side SAT s(A, B) (Eq. 1), shape (N, N), symmetric; NaN where X_AB is empty.
        one_side: one-side score (App. G) of row = attacked source, column = target, shape (N, N).
        fooled: ``fooled[s, t, i]``: target t misclassifies source s's adversarial image i, (N, N, n).
        correct: ``correct[m, i]``: model m classifies clean image i correctly, (N, n).
    """

    names: list[str]
    scores: torch.Tensor
    one_side: torch.Tensor
    fooled: torch.Tensor
    correct: torch.Tensor

    def frame(self, which: str = "scores") -> pd.DataFrame:
        """The ``scores`` or ``one_side`` matrix as a labelled DataFrame."""
        return pd.DataFrame(getattr(self, which).numpy(), index=self.names, columns=self.names)

    @property
    def clean_accuracy(self) -> torch.Tensor:
        """Accuracy of each model on the clean subsample, (N,)."""
        return self.correct.float().mean(1)

    @property
    def self_success(self) -> torch.Tensor:
        """White-box attack success rate on each model's own correct images, (N,)."""
        d = torch.arange(len(self.names))
        f, c = self.fooled[d, d].float(), self.correct.float()
        return (f * c).sum(1) / c.sum(1).clamp_min(1)


def sat_from_fooled(fooled: torch.Tensor, correct: torch.Tensor, *, eps: float | None = None) -> tuple:
    """Two-side and one-side SAT matrices from fooled indicators, via :func:`ensdiv.metrics.sat_score`.

    s(A, B) = ln max(ε, 100 · ½ mean_{x ∈ X_AB} ([A(x_B) ≠ y] + [B(x_A) ≠ y])), X_AB = both correct (Eq. 1);
    one_side[s, t] = ln max(ε, 100 · mean_{X_st} [t(x_s) ≠ y]) (App. G: only the source's attack).

    Shape:
        fooled (N, N, n) bool, correct (N, n) bool → two (N, N) float tensors.
    """

    eps = SAT_EPS if eps is None else eps
    both = correct[:, None, :] & correct[None, :, :]
    # I_A[a, b] = A(x_B) ≠ y = fooled[b, a];  I_B[a, b] = B(x_A) ≠ y = fooled[a, b]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        two = sat_score(fooled.transpose(0, 1), fooled, both, eps=eps)
        one = sat_score_one_side(fooled, both, eps=eps)
    if caught:
        warnings.warn(
            "Some pairs of models have no image both classify correctly (X_AB is empty); their SAT is NaN.",
            UndefinedMetricWarning, stacklevel=2,
        )  # fmt: skip
    return torch.as_tensor(two, dtype=torch.float64), torch.as_tensor(one, dtype=torch.float64)


def _resolve_models(models: Sequence[Any], names: Sequence[str] | None):
    if len(models) == 0:
        raise EnsdivError("sat_matrix needs at least one model (an nn.Module or an ed.Recipe).")
    recipes = [m if isinstance(m, Recipe) else None for m in models]
    for m in models:
        if not isinstance(m, Recipe | nn.Module):
            raise EnsdivError(f"SAT models must be nn.Modules or ed.Recipes, got a {type(m).__name__}.")
    if names is None:  # a recipe's name or model, a PixelModel's ensdiv_name, else the class and index
        names = [(r.name or r.model.name) if r is not None
                 else getattr(m, "ensdiv_name", None) or f"{type(m).__name__}_{k}"
                 for k, (m, r) in enumerate(zip(models, recipes, strict=True))]  # fmt: skip
    if len(names) != len(models):
        raise EnsdivError(f"Got {len(names)} names for {len(models)} models; give one name per model.")
    return list(recipes), list(names)


class _EvalSets:
    """The images each model is evaluated and attacked on: one set shared by every model (a name or a
    :class:`~ensdiv.data.TensorSet`), or each model's own framing of the same images (a
    :class:`~ensdiv.data.paper.PipelineSets`, chosen by the model's ``ensdiv_pipeline``; the last framing
    built is kept). ``y`` and ``n`` are the same for every framing (checked)."""

    def __init__(self, dataset: Any, subsample: int | None, seed: int):
        self.subsample, self.seed = subsample, seed
        self.pipelines: PipelineSets | None = None
        if isinstance(dataset, PipelineSets):
            self.pipelines, key, shared = dataset, dataset.name, None
        elif isinstance(dataset, str):
            key, shared = dataset, get_dataset(dataset)
        elif isinstance(dataset, TensorSet):
            key, shared = f"{dataset.name}#{dataset_fingerprint(dataset)[:16]}", dataset
        else:
            raise EnsdivError(
                "sat_matrix needs a dataset name, an ed.data.TensorSet or an ed.data.paper.PipelineSets, got a "
                f"{type(dataset).__name__}."
            )
        self.key = {"dataset": key, "subsample": int(subsample or 0), "subset_seed": int(seed)}
        self._last: tuple[Any, TensorSet] | None = None
        self._ref: TensorSet | None = None
        if shared is not None:
            self._ref = self._check(shared.subset(subsample, seed=seed))

    def _check(self, data: TensorSet) -> TensorSet:
        if len(data) == 0:
            raise EnsdivError("The evaluation set is empty; SAT needs at least one image.")
        if self._ref is not None and not torch.equal(data.y, self._ref.y):
            raise EnsdivError(f"The framings of {self.key['dataset']!r} do not hold the same labelled images.")
        return data

    def of(self, model: Any) -> TensorSet:
        """The images ``model`` sees (its own framing under a PipelineSets)."""
        if self.pipelines is None:
            return self._ref
        p = getattr(model, "ensdiv_pipeline", None)
        if self._last is None or self._last[0] != p:
            data = self._check(self.pipelines.for_model(model).subset(self.subsample, seed=self.seed))
            self._ref = self._ref if self._ref is not None else data
            self._last = (p, data)
        return self._last[1]

    @staticmethod
    def order(models: Sequence[Any]) -> list[int]:
        """Model indices grouped by framing (each framing is then built once)."""
        return by_pipeline(models)

    @property
    def y(self) -> torch.Tensor:
        return (self._ref if self._ref is not None else self.of(None)).y

    @property
    def n(self) -> int:
        return len(self.y)


def _load(model: Any, recipe: Any, store: Any = None) -> nn.Module:
    if recipe is None:
        return model.eval()

    model = train_recipe(recipe, store=store, progress=False).eval()
    return model.to("cuda") if torch.cuda.is_available() else model


@torch.no_grad()
def _logits(model: nn.Module, x: torch.Tensor, batch_size: int) -> torch.Tensor:
    device = next(model.parameters(), torch.empty(0)).device
    return torch.cat([forward_pixels(model, x[i : i + batch_size].to(device)).float().cpu()
                      for i in range(0, len(x), batch_size)])  # fmt: skip


def _attack_config(attack: str, attack_kwargs: dict | None, seed: int) -> dict:
    kw = dict(PGD_DEFAULTS) if attack == "pgd" else {}
    kw.update(attack_kwargs or {})
    kw.setdefault("seed", seed)
    return {"attack": attack, **kw}


def _adversarial(model, recipe, data, data_key, attack_cfg, store, batch_size):
    cfg_attack = {k: v for k, v in attack_cfg.items() if k != "attack"}

    def compute():
        x_adv = run_attack(attack_cfg["attack"], model, data.x, data.y, batch_size=batch_size, **cfg_attack)
        return {"x_adv": x_adv}

    if recipe is None:
        return compute()["x_adv"]

    key = {"model": model_cache_config(recipe), **data_key, "attack": attack_cfg}
    return cached("sat-adv", key, compute, store=store)["x_adv"]


def _load_and_score_clean(models, recipes, names, sets: _EvalSets, store, batch_size):
    """Load every model, check they share a label set, and return ``(loaded, correct (N_models, N))``: each
    model scored on the images it sees (its own framing under a PipelineSets)."""
    loaded = [_load(m, r, store) for m, r in zip(models, recipes, strict=True)]
    clean: list[torch.Tensor] = [torch.empty(0)] * len(loaded)
    for i in sets.order(loaded):
        clean[i] = _logits(loaded[i], sets.of(loaded[i]).x, batch_size)
    _check_classes(clean, names)
    return loaded, torch.stack([lg.argmax(-1) == sets.y for lg in clean])


def _check_classes(logits: list[torch.Tensor], names: list[str]) -> None:
    sizes = {n: lg.shape[-1] for n, lg in zip(names, logits, strict=True)}
    if len(set(sizes.values())) > 1:
        raise EnsdivError(
            "SAT compares models over the same label set, but they output different numbers of classes: "
            f"{sizes}."
        )


def sat_matrix(
    models: Sequence[Any],
    dataset: Any,
    *,
    subsample: int | None = 500,
    attack: str = "pgd",
    attack_kwargs: dict | None = None,
    names: Sequence[str] | None = None,
    seed: int = 0,
    eps: float | None = None,
    batch_size: int = 256,
    store: Any = None,
) -> SatResult:
    """Pairwise SAT similarity of N models (attack-similarity Eq. 1; one-side variant of App. G).

    Args:
        models: ``nn.Module`` classifiers or :class:`~ensdiv.Recipe` objects (trained/loaded through
            the cache); each applies its own input pipeline (:func:`ensdiv.models.input_spec`).
        dataset: a registered set name or a :class:`~ensdiv.data.TensorSet` of [0, 1] images (every model
            sees the same images), or a :class:`~ensdiv.data.paper.PipelineSets` (each model is scored and
            attacked on the images framed by its own evaluation pipeline, ``model.ensdiv_pipeline``; a target
            sees a source's adversarial images resized to its resolution).
        subsample: number of images (seeded random subset; the paper uses 5,000 ImageNet val images,
            10%); ``None``/0 = all.
        attack: ``"pgd"`` (default, the paper's), ``"apgd"`` or ``"mi_fgsm"``.
        attack_kwargs: options of the attack (default :data:`ensdiv.attacks.PGD_DEFAULTS` for PGD).
        names: one name per model (default: recipe name / model name).
        seed: seed of the subsample and of the attack's random start.
        eps: floor ε_s of the score in % (default :data:`ensdiv.metrics.similarity.SAT_EPS`).
        batch_size: images per forward pass.
        store: cache (default store); used only when every model is a Recipe.

    Returns:
        A :class:`SatResult`.

    Raises:
        EnsdivError: models with different numbers of classes; an empty evaluation set.
    """
    recipes, names = _resolve_models(models, names)
    sets = _EvalSets(dataset, subsample, seed)
    data_key = sets.key
    attack_cfg = _attack_config(attack, attack_kwargs, seed)
    all_recipes = all(r is not None for r in recipes)

    def compute() -> dict[str, torch.Tensor]:
        loaded, correct = _load_and_score_clean(models, recipes, names, sets, store, batch_size)
        advs: list[torch.Tensor] = [torch.empty(0)] * len(loaded)
        for i in sets.order(loaded):
            advs[i] = _adversarial(loaded[i], recipes[i], sets.of(loaded[i]), data_key, attack_cfg,
                                   store if all_recipes else None, batch_size)
        n, k = sets.n, len(loaded)
        fooled = torch.zeros(k, k, n, dtype=torch.bool)
        for t, target in enumerate(loaded):  # one batched pass per target over all sources' images
            same_size = len({a.shape[-1] for a in advs}) == 1
            if same_size:
                preds = _logits(target, torch.cat(advs), batch_size).argmax(-1).view(k, n)
            else:
                preds = torch.stack([_logits(target, a, batch_size).argmax(-1) for a in advs])
            fooled[:, t] = preds != sets.y
        return {"fooled": fooled, "correct": correct}

    if all_recipes:

        key = {"models": [model_cache_config(r) for r in recipes], **data_key,
               "attack": attack_cfg}  # fmt: skip
        out = cached("sat-matrix", key, compute, store=store)
    else:
        out = compute()
    two, one = sat_from_fooled(out["fooled"], out["correct"], eps=eps)
    return SatResult(names, two, one, out["fooled"], out["correct"])


def sat_one_side(
    new_model: Any,
    models: Sequence[Any],
    dataset: Any,
    *,
    subsample: int | None = 500,
    attack: str = "pgd",
    attack_kwargs: dict | None = None,
    seed: int = 0,
    eps: float | None = None,
    batch_size: int = 256,
    store: Any = None,
) -> torch.Tensor:
    """One-side SAT of a new model against known ones, attacking only the new model (App. G).

    score_j = ln max(ε, 100 · mean_{x ∈ X_new,j} [M_j(x_new) ≠ y]): the known models are evaluated on
    the new model's adversarial images; their own attacks are not needed.

    Returns:
        (N,) scores, one per known model, in order.
    """

    recipes, names = _resolve_models([new_model, *models], None)
    sets = _EvalSets(dataset, subsample, seed)
    attack_cfg = _attack_config(attack, attack_kwargs, seed)
    loaded, correct = _load_and_score_clean([new_model, *models], recipes, names, sets, store, batch_size)
    x_new = _adversarial(loaded[0], recipes[0], sets.of(loaded[0]), sets.key, attack_cfg,
                         store if recipes[0] is not None else None, batch_size)  # fmt: skip
    fooled = torch.stack([_logits(m, x_new, batch_size).argmax(-1) != sets.y for m in loaded[1:]])
    both = correct[:1] & correct[1:]
    scores = sat_score_one_side(fooled, both, eps=SAT_EPS if eps is None else eps)
    return torch.as_tensor(scores, dtype=torch.float64)


def sat_by_source(
    models: Sequence[Any],
    dataset: Any,
    *,
    subsample: int | None = 500,
    attack: str = "pgd",
    attack_kwargs: dict | None = None,
    names: Sequence[str] | None = None,
    seed: int = 0,
    eps: float | None = None,
    batch_size: int = 256,
    store: Any = None,
) -> SatResult:
    """:func:`sat_matrix` one source at a time: the same result, holding one adversarial set in memory.

    The paper's size (69 models × 5,000 images at 224 px and up) would keep > 200 GB of adversarial
    images alive in :func:`sat_matrix`; here each source is attacked, every target evaluated on its
    images, and only the predictions (int16) are kept. Each source's row is cached (kind ``"sat-row"``,
    keyed by the source, all targets, the set and the attack) when every model has a cache identity
    (a Recipe, or a :class:`~ensdiv.models.paper.PixelModel`'s ``ensdiv_cache_id``), so a long run
    resumes where it stopped; the rows are then split across the ranks of a ``torchrun`` job
    (:func:`ensdiv.shards.fan_out`: each rank attacks its share of the sources, every rank returns the whole
    matrix). Arguments as :func:`sat_matrix`.
    """


    recipes, names = _resolve_models(models, names)
    sets = _EvalSets(dataset, subsample, seed)
    data_key = sets.key
    attack_cfg = _attack_config(attack, attack_kwargs, seed)
    loaded, correct = _load_and_score_clean(models, recipes, names, sets, store, batch_size)
    ids = [model_cache_config(r) if r is not None else getattr(m, "ensdiv_cache_id", None)
           for m, r in zip(models, recipes, strict=True)]  # fmt: skip
    k, n = len(loaded), sets.n
    fooled = torch.zeros(k, k, n, dtype=torch.bool)

    def compute(s: int) -> dict:
        # the source attacked on its own framing (the row is cached)
        x_adv = _adversarial(loaded[s], None, sets.of(loaded[s]), data_key, attack_cfg, None, batch_size)
        preds = [_logits(t, x_adv, batch_size).argmax(-1).to(torch.int16) for t in loaded]
        return {"preds": torch.stack(preds)}

    def row(s: int) -> torch.Tensor:
        key = {"source": ids[s], "targets": ids, **data_key, "attack": attack_cfg}
        return cached("sat-row", key, lambda: compute(s), store=store)["preds"]

    order = sets.order(loaded)
    if all(i is not None for i in ids):  # cached rows: split across the ranks of a torchrun job (ensdiv.shards)
        rows = fan_out(order, row, desc="SAT sources")
    else:
        rows = [compute(s)["preds"] for s in bar(order, desc="SAT sources", disable=k < 2)]
    for s, preds in zip(order, rows, strict=True):
        fooled[s] = preds.long() != sets.y
    two, one = sat_from_fooled(fooled, correct, eps=eps)
    return SatResult(names, two, one, fooled, correct)
