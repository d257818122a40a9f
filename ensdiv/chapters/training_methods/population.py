"""The training-methods chapter's models, their cached outputs and the analysis population."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr

import ensdiv as ed
from ensdiv import metrics as mt
from ensdiv.chapters.training_methods.band import BAND_MODES, error_ratio_band
from ensdiv.chapters.training_methods.paper import (
    BASE,
    CATEGORIES,
    CATEGORY_LABELS,
    PAPER_BASE_ACCURACY,
    PAPER_LAYOUT,
    PAPER_TABLE1,
    VAL_SET,
    PopulationWarning,
)
from ensdiv.chapters.zoo import EVAL_SET, category_of, zoo_recipes
from ensdiv.data.fashion import data_home
from ensdiv.errors import DataNotFoundError, InvalidInputError


# ---- models and their outputs ---------------------------------------------------------------------------
def chapter_recipes(scale: str, keys: Sequence[str] | None = None) -> dict[str, ed.Recipe]:
    """The zoo's recipes of the five categories at ``scale``, base first.

    Left out: a model distilled from the base itself (the zoo's ``framework/deit-distill-hard``, which
    design-diversity uses): trained on the base's outputs, it copies the base's errors, whereas the paper's
    distilled DeiT learnt from another network (a RegNet). The Dataset models of the paper's kind are the
    ``*-ft`` ones: pre-trained on 52,000 letters or 60,000 shapes (more images than the base's 30,000), then
    fine-tuned end to end like the base; the linear probes on small sources stay in the table.
    """
    zoo = {k: v for k, v in zoo_recipes(scale).items() if category_of(k) in CATEGORIES}
    res = zoo[BASE]
    zoo = {k: v for k, v in zoo.items() if not _distilled_from(v, res)}
    out = {BASE: res, **{k: v for k, v in zoo.items() if k != BASE}}
    if keys is None:
        return out
    missing = [k for k in keys if k not in out]
    if missing:
        raise InvalidInputError(f"Unknown model(s) {missing} for the {scale} chapter zoo; known: {sorted(out)}.")
    return {k: out[k] for k in [BASE, *[k for k in keys if k != BASE]]}


def _distilled_from(recipe: ed.Recipe, teacher: ed.Recipe) -> bool:
    """Whether ``recipe`` is distilled from ``teacher`` (same recipe, whatever its name)."""
    method = recipe.method
    if not isinstance(method, ed.Distill):
        return False
    return ed.Recipe.from_dict(method.teacher).key() == teacher.key()


@dataclass
class Outputs:
    """Logits (and, on demand, features) of the chapter's models on each split.

    Attributes:
        keys: model keys, the base first.
        category: key -> category (the base's is ``"base"``).
        labels: split -> labels (N,); splits ``val`` and ``test``.
        logits: split -> logits (M, N, C) in the order of ``keys``.
        classes: class names.
        recipes: key -> recipe (smoke/cpu), empty at paper scale.
        root: the paper-scale folder (None at smoke/cpu).
        roles: key -> ``base`` / ``main`` / ``high`` / ``low`` (paper scale: models.csv; empty otherwise).
    """

    keys: list[str]
    category: dict[str, str]
    labels: dict[str, torch.Tensor]
    logits: dict[str, torch.Tensor]
    classes: list[str] = field(default_factory=list)
    recipes: dict[str, Any] = field(default_factory=dict)
    root: Path | None = None
    roles: dict[str, str] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return self.keys[0]

    def index(self, key: str) -> int:
        return self.keys.index(key)


def _paper_root(cfg: Any) -> Path:
    root = Path(cfg["data_root"]) if cfg.get("data_root") else data_home() / "training-methods"
    if not (root / "models.csv").exists():
        raise DataNotFoundError(
            f"No training-methods logits folder at {root} (models.csv missing). Write the paper's models' outputs "
            f"there in this layout (nothing is downloaded):\n{PAPER_LAYOUT}")
    return root


def _read_ids(path: Path) -> list[str] | None:
    return path.read_text().split() if path.exists() else None


def _load_array(path: Path, what: str) -> torch.Tensor:
    if not path.exists():
        raise DataNotFoundError(f"Missing {what}: {path} (expected layout:\n{PAPER_LAYOUT})")
    return torch.from_numpy(np.load(path, allow_pickle=False))


def load_paper_outputs(root: Path, splits: Sequence[str] = ("val", "test")) -> Outputs:
    """The paper-scale :class:`Outputs` read from ``root`` (layout :data:`PAPER_LAYOUT`); checks lengths and ids."""
    table = pd.read_csv(root / "models.csv")
    for col in ("name", "category", "role"):
        if col not in table:
            raise InvalidInputError(f"{root / 'models.csv'} needs a column {col!r}; it has {list(table.columns)}.")
    bases = table[table.role == "base"]
    if len(bases) != 1:
        raise InvalidInputError(f"{root / 'models.csv'} must mark exactly one model with role 'base', "
                                f"got {len(bases)}.")
    bad = sorted(set(table.category) - set(CATEGORIES))
    if bad:
        raise InvalidInputError(f"Unknown categories {bad} in models.csv; valid: {', '.join(CATEGORIES)}.")
    keys = [bases.name.iloc[0], *[n for n in table.name if n != bases.name.iloc[0]]]
    category = {n: ("base" if n == keys[0] else c) for n, c in zip(table.name, table.category, strict=True)}
    labels, logits = {}, {}
    for split in splits:
        labels[split] = _load_array(root / f"labels_{split}.npy", f"{split} labels").long()
        per_model = {k: _load_array(root / k / f"logits_{split}.npy", f"{k} {split} logits").float() for k in keys}
        check_aligned(per_model, ids=_split_ids(root, keys, split), n=len(labels[split]), what=f"{split} logits")
        logits[split] = torch.stack([per_model[k] for k in keys])
    roles = {n: r for n, r in zip(table.name, table.role, strict=True)}
    return Outputs(keys, category, labels, logits, root=root, roles=roles)


def _split_ids(root: Path, keys: Sequence[str], split: str) -> dict[str, list[str] | None]:
    ref = _read_ids(root / f"ids_{split}.txt")
    return {"(labels)": ref, **{k: _read_ids(root / k / f"ids_{split}.txt") for k in keys}}


def check_aligned(arrays: Mapping[str, torch.Tensor], *, ids: Mapping[str, list[str] | None] | None = None,
                  n: int | None = None, what: str = "features") -> None:
    """Refuse arrays of different lengths, or whose sample ids (where given) differ in content or order.

    Raises:
        InvalidInputError: one sentence naming the first array that does not line up.
    """
    lengths = {k: int(v.shape[0]) for k, v in arrays.items()}
    want = n if n is not None else next(iter(lengths.values()), 0)
    for k, length in lengths.items():
        if length != want:
            raise InvalidInputError(f"The {what} of {k!r} hold {length} samples but {want} are expected: every model "
                                    "must be evaluated on the same samples in the same order.")
    if ids:
        given = {k: v for k, v in ids.items() if v is not None}
        if given:
            ref_key, ref = next(iter(given.items()))
            for k, v in given.items():
                if v != ref:
                    how = "other samples" if sorted(v) != sorted(ref) else "the same samples in another order"
                    raise InvalidInputError(f"The {what} of {k!r} list {how} than {ref_key!r}; re-export them in "
                                            "one sample order.")


def load_outputs(cfg: Any) -> Outputs:
    """The chapter's logits on the validation and test splits: the zoo's cached predictions (smoke/cpu; a
    missing model is trained once and cached) or the paper-scale folder."""
    if cfg["scale"] == "paper":
        return load_paper_outputs(_paper_root(cfg))
    recipes = chapter_recipes(cfg["scale"])
    keys = list(recipes)
    test = EVAL_SET[cfg["scale"]]
    labels = {"val": ed.get_dataset(VAL_SET).y, "test": ed.get_dataset(test).y}
    logits = {"val": ed.predict_many(list(recipes.values()), VAL_SET),
              "test": ed.predict_many(list(recipes.values()), test)}
    category = {k: ("base" if k == BASE else category_of(k)) for k in keys}
    return Outputs(keys, category, labels, logits, list(ed.get_dataset(test).classes), recipes)


def fit_temperatures(logits: torch.Tensor, labels: torch.Tensor, *, split: str) -> torch.Tensor:
    """One temperature per model (:func:`ensdiv.ensembles.fit_temperature`), fitted on ``split``.

    Raises:
        InvalidInputError: ``split`` is a test split: temperatures are fitted on validation data only.
    """
    if split == "test" or split.rsplit("/", 1)[-1].startswith("test") or split in EVAL_SET.values():
        raise InvalidInputError(f"Refusing to fit temperatures on the test split {split!r}: the test split is for "
                                "reporting only; fit them on the validation split ('val').")
    return ed.ensembles.fit_temperature(logits, labels)


# ---- the analysis population ------------------------------------------------------------------------------
@dataclass
class Population:
    """The base model, the models inside the accuracy band (the main analysis), and what was left out.

    Attributes:
        base: the base model's key.
        members: keys inside the band, by category then name (the base excluded).
        excluded: key -> the sentence that excluded it.
        band: absolute bounds (fractions) on validation accuracy.
        accuracy: key -> validation accuracy of every model considered (base included).
        category: key -> category.
    """

    base: str
    members: list[str]
    excluded: dict[str, str]
    band: tuple[float, float]
    accuracy: dict[str, float]
    category: dict[str, str]

    def by_category(self) -> dict[str, list[str]]:
        """Category -> its members in the band (every category, possibly empty), in the paper's order."""
        return {c: [k for k in self.members if self.category[k] == c] for c in CATEGORIES}

    def describe(self) -> str:
        lo, hi = self.band
        text = (f"Base {self.base} (validation accuracy {100 * self.accuracy[self.base]:.2f} %); band "
                f"[{100 * lo:.2f}, {100 * hi:.2f}] % on validation accuracy; {len(self.members)} models in the band, "
                f"{len(self.excluded)} excluded.")
        counts = ", ".join(f"{CATEGORY_LABELS[c]} {len(v)}" for c, v in self.by_category().items())
        return f"{text}\nIn the band by category: {counts}."


def analysis_population(accuracy: Mapping[str, float], category: Mapping[str, str], *, base: str,
                        band: Sequence[float], mode: str = "points", requested: Sequence[str] | None = None,
                        min_per_category: int = 3) -> Population:
    """Apply the accuracy band of §3.2: who enters the main analysis.

    Args:
        accuracy: key -> validation accuracy (fraction) of every available model, the base included.
        category: key -> one of :data:`CATEGORIES` (the base's entry is ignored).
        base: the base model's key.
        band: ``(low, high)`` in %: with ``mode="points"`` offsets in accuracy points from the base's accuracy;
            ``"absolute"`` accuracies (the paper: ``(74, 78)``); ``"error_ratio"`` the paper's absolute band,
            carried to this base as a ratio of errors (:func:`error_ratio_band`).
        mode: one of :data:`BAND_MODES`.
        requested: the models asked into the analysis (default: every model but the base).
        min_per_category: fewer in-band models than this in a category draws a warning naming it.

    Returns:
        The :class:`Population`. A requested model outside the band, and a category with fewer than
        ``min_per_category`` models in the band, each draw one :class:`PopulationWarning` sentence.
    """
    if base not in accuracy:
        raise InvalidInputError(f"The base model {base!r} has no accuracy; available: {sorted(accuracy)}.")
    lo_pt, hi_pt = (float(b) for b in band)
    if lo_pt > hi_pt:
        raise InvalidInputError(f"The band must be (low, high) with low <= high, got {tuple(band)}.")
    if mode not in BAND_MODES:
        raise InvalidInputError(f"Unknown band mode {mode!r}; valid: {', '.join(BAND_MODES)}.")
    if mode == "error_ratio":
        lo, hi = error_ratio_band(float(accuracy[base]), band=(lo_pt, hi_pt))
    else:
        ref = 100 * accuracy[base] if mode == "points" else 0.0
        lo, hi = max((ref + lo_pt) / 100, 0.0), min((ref + hi_pt) / 100, 1.0)
    asked = [k for k in (requested if requested is not None else accuracy) if k != base]
    unknown = [k for k in asked if k not in accuracy]
    if unknown:
        raise InvalidInputError(f"No outputs for requested model(s) {unknown}; available: {sorted(accuracy)}.")
    bad = sorted({category[k] for k in asked} - set(CATEGORIES))
    if bad:
        raise InvalidInputError(f"Unknown categories {bad}; valid: {', '.join(CATEGORIES)}.")
    members, excluded = [], {}
    for k in asked:
        acc = accuracy[k]
        if lo <= acc <= hi:
            members.append(k)
            continue
        why = (f"{k} ({CATEGORY_LABELS[category[k]]}, validation accuracy {100 * acc:.2f} %) is outside the band "
               f"[{100 * lo:.2f}, {100 * hi:.2f}] % and is excluded from the main analysis.")
        excluded[k] = why
        warnings.warn(why, PopulationWarning, stacklevel=2)
    order = {c: i for i, c in enumerate(CATEGORIES)}
    members.sort(key=lambda k: (order[category[k]], k))
    pop = Population(base, members, excluded, (lo, hi), {k: float(v) for k, v in accuracy.items()},
                     {k: category[k] for k in accuracy})
    for c, keys in pop.by_category().items():
        if len(keys) < min_per_category:
            named = f" ({', '.join(keys)})" if keys else ""
            warnings.warn(f"Category {CATEGORY_LABELS[c]} has {len(keys)} model(s) in the band{named}, fewer than "
                          f"{min_per_category}: its mean is {'one model' if keys else 'missing'} and its spread "
                          "unknown.", PopulationWarning, stacklevel=2)
    return pop


def population(cfg: Any, out: Outputs, temps: torch.Tensor | None = None) -> Population:
    """:func:`analysis_population` of ``out`` with the preset's band (validation accuracy)."""
    acc = (out.logits["val"].argmax(-1) == out.labels["val"]).double().mean(1)
    accuracy = {k: float(a) for k, a in zip(out.keys, acc, strict=True)}
    return analysis_population(accuracy, out.category, base=out.base, band=cfg["band"], mode=cfg["band_mode"],
                               requested=cfg.get("models") or None)


def calibrated_probs(out: Outputs, temps: torch.Tensor, split: str) -> torch.Tensor:
    """Temperature-scaled probabilities (M, N, C) on ``split``."""
    return torch.softmax(out.logits[split].double() / temps.double()[:, None, None], -1)


def model_table(out: Outputs, temps: torch.Tensor, pop: Population) -> pd.DataFrame:
    """Every model against the base on the test split, calibrated: the columns of App. Table 1 and more.

    Columns: category, in_band, temperature, val_acc, test_acc, error_inconsistency, error_consistency
    (κ), ensemble_acc (mean of the two calibrated probability vectors), ensemble_rel (minus the mean of
    the two members' accuracies), ensemble_gain_best (minus the better member), conversion_rate, and the
    pair counts n11 / n10 / n01 / n00 as fractions (1 = right, first index = base).
    """
    probs = calibrated_probs(out, temps, "test")
    y = out.labels["test"]
    preds = probs.argmax(-1)
    b = out.index(out.base)
    counts = mt.pair_counts(preds, y)
    n = len(y)
    rows = []
    for i, k in enumerate(out.keys):
        ens = (probs[b] + probs[i]).argmax(-1)
        acc_i, acc_b = float((preds[i] == y).double().mean()), float((preds[b] == y).double().mean())
        ens_acc = float((ens == y).double().mean())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the base with itself: no inconsistent sample
            conv = float(mt.conversion_rate(ens, preds[b], preds[i], y))
            kappa = float(mt.error_consistency(preds[b], preds[i], y))
        rows.append({
            "key": k, "category": out.category[k], "in_band": k == pop.base or k in pop.members,
            "temperature": float(temps[i]), "val_acc": pop.accuracy.get(k, float("nan")), "test_acc": acc_i,
            "error_inconsistency": float(mt.error_inconsistency(preds[b], preds[i], y)), "error_consistency": kappa,
            "ensemble_acc": ens_acc, "ensemble_rel": ens_acc - (acc_i + acc_b) / 2,
            "ensemble_gain_best": ens_acc - max(acc_i, acc_b), "conversion_rate": conv,
            **{c: float(counts[c][b, i]) / n for c in ("n11", "n10", "n01", "n00")},
        })
    return pd.DataFrame(rows).set_index("key")


def paper_model_table(table: pd.DataFrame = PAPER_TABLE1, base_accuracy: float = PAPER_BASE_ACCURACY
                      ) -> pd.DataFrame:
    """The paper's Appendix table with the quantities it implies: with the base's accuracy a and the model's
    b (fractions), the pair counts both right n11 = (a + b - EI) / 2 and both wrong n00 = 1 - n11 - EI, the
    ensemble's gain over the members' mean, and the error consistency κ = (c_obs - c_exp) / (1 - c_exp) with
    c_obs = 1 - EI and c_exp = a b + (1 - a)(1 - b)."""
    t = table.copy()
    a, b = base_accuracy / 100, t["accuracy"] / 100
    t["n11"] = (a + b - t["error_inconsistency"]) / 2
    t["n00"] = 1 - t["n11"] - t["error_inconsistency"]
    t["ensemble_rel"] = t["ensemble_accuracy"] / 100 - (a + b) / 2
    c_exp = a * b + (1 - a) * (1 - b)
    t["error_consistency"] = (1 - t["error_inconsistency"] - c_exp) / (1 - c_exp)
    return t


def category_means(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """Mean, standard error and count of ``column`` per category (in the paper's order; empty ones kept)."""
    rows = []
    for c in CATEGORIES:
        v = table.loc[table["category"] == c, column].astype(float).dropna()
        sem = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")
        rows.append({"category": CATEGORY_LABELS[c], "mean": float(v.mean()) if len(v) else float("nan"),
                     "sem": sem, "n": len(v)})
    return pd.DataFrame(rows).set_index("category")


def category_trend(table: pd.DataFrame, column: str) -> dict[str, float]:
    """Spearman's ρ (and p) between the category's rank (Reinit 1 ... Dataset 5) and ``column`` over models."""
    t = table[table["category"].isin(CATEGORIES)]
    rank = t["category"].map({c: i for i, c in enumerate(CATEGORIES)})
    if len(t) < 3 or rank.nunique() < 2:
        return {"rho": float("nan"), "p": float("nan"), "n": len(t)}
    res = spearmanr(rank, t[column].astype(float))
    return {"rho": float(res.statistic), "p": float(res.pvalue), "n": len(t)}


def paper_category_values(columns: Sequence[str], *, prefix: str = "") -> dict[str, float]:
    """The paper's App. Table 1 category means of ``columns``, keyed ``"<prefix><column> <Category>"``."""
    t = paper_model_table()
    return {f"{prefix}{col} {CATEGORY_LABELS[c]}": float(t.loc[t.category == c, col].mean())
            for col in columns for c in CATEGORIES}


def representative(table: pd.DataFrame, pop: Population, category: str, prefer: str | None = None, *,
                   outside_band: bool = False) -> str | None:
    """The pair of ``category`` to show: ``prefer`` when it is in the band (or, with ``outside_band``, whenever it
    has outputs and that category: the paper's own pairs, such as EfficientNet-B3 at 80.9 %, lie outside its
    74-78 % band), else the in-band model with the largest error inconsistency; None when the category has no
    model in the band."""
    keys = pop.by_category()[category]
    if prefer in keys:
        return prefer
    if outside_band and prefer in table.index and table.loc[prefer, "category"] == category:
        return prefer
    if prefer:
        warnings.warn(f"{prefer} is not in the band; showing another {CATEGORY_LABELS[category]} model.",
                      PopulationWarning, stacklevel=2)
    if not keys:
        return None
    return str(table.loc[keys, "error_inconsistency"].idxmax())
