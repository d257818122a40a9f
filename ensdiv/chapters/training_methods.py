"""The training-methods chapter (Gontijo-Lopes, Dauphin, Cubuk, *No One Representation to Rule Them All*,
ICLR 2022): its population bookkeeping, calibrated pairs with the base model, specialisation, greedy
ensembles, feature probes, the paper's Appendix tables, the paper-scale folder reader, and its presets.

**The analysis population** (§3.2). One base model, the zoo's ``arch/resnet`` (the analogue of the
paper's ResNet-50 + RandAugment), and every other model of the zoo's five categories ``reinit``,
``hparam``, ``arch``, ``framework`` (SimCLR + probe, distillation) and ``dataset`` (pre-trained on another
source + linear probe; :func:`chapter_recipes` adds ``dataset/resnet-glyphs``, pre-trained on
``pretrain/glyphs``). A model enters the main analysis only when its *validation* accuracy lies in the
band (``cfg.band``: points around the base's validation accuracy at smoke/cpu scale, the paper's
absolute 74-78 % at paper scale); a model outside it is excluded with a :class:`PopulationWarning`
naming it. Every model is temperature-scaled on the validation split (:func:`fit_temperatures` refuses
the test split) and ensembles average calibrated probabilities. The test split is used for reporting only.

The glyph model (``dataset/resnet-glyphs``), like every model of the analysis, is a recipe of the
shared zoo (:mod:`ensdiv.chapters.zoo`).
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy import stats
from scipy.stats import spearmanr

import ensdiv as ed
from ensdiv import metrics as mt
from ensdiv.chapters._presets import chapter_preset
from ensdiv.chapters.zoo import EVAL_SET, category_of, zoo_recipes
from ensdiv.data.fashion import data_home
from ensdiv.errors import DataNotFoundError, InvalidInputError
from ensdiv.train import probe

SLUG = "training-methods"
CATEGORIES = ("reinit", "hparam", "arch", "framework", "dataset")
CATEGORY_LABELS = {"reinit": "Reinit", "hparam": "HParam", "arch": "Arch", "framework": "Framework",
                   "dataset": "Dataset"}
BASE = "arch/resnet"
VAL_SET = "fmnist/val"

__all__ = [
    "SLUG", "PRESETS", "preset", "CATEGORIES", "CATEGORY_LABELS", "BASE", "VAL_SET", "PAPER_TABLE1",
    "PAPER_TABLE2", "PAPER_TABLE3", "PAPER_BASE_ACCURACY", "PAPER_FEATURES_NEEDED", "PAPER_TIMM", "PAPER_LAYOUT",
    "PopulationWarning", "Population", "Outputs", "chapter_recipes", "load_outputs", "fit_temperatures",
    "analysis_population", "model_table", "paper_model_table", "category_means", "category_trend",
    "paper_category_values", "representative", "pair_angles", "class_specialization", "greedy_with_low",
    "check_aligned", "probe_features", "concat_curve", "features_needed", "downstream_splits", "downstream_probes",
    "fig05_lists", "high_low_lists", "setup", "population", "calibrated_probs", "GROUPS", "load_paper_outputs",
    "NAN", "CATEGORY_COLUMNS", "DIVERSE_CATEGORIES", "pair_correct", "ensemble_correct", "category_estimates",
    "highest_of", "mean_of", "model_correlation", "category_correlation", "angle_gap_estimates", "class_spread",
    "class_share", "class_estimates", "first_additions", "combination_gains", "features_needed_estimates",
    "downstream_choices", "bootstrap", "base_category", "missing_estimate",
]


class PopulationWarning(UserWarning):
    """A model left out of the main analysis, or a category too small to average."""


# ---- the paper's Appendix tables (A.3) ----------------------------------------------------------------
# model | category | method | prediction head | calibration temperature | ImageNet acc (%) | error
# inconsistency with ResNet-50 | ensemble acc with ResNet-50 (%)
_T1 = """ResNet-50|reinit|Sup. / IN|Trained|1.10|76.20|0.0850|77.31
ResNet-101x0.5|hparam|Sup. / IN|Trained|1.00|74.27|0.0972|76.73
ResNet-50 (Dropout 0.1)|hparam|Sup. / IN|Trained|1.10|76.90|0.0853|77.23
ResNet-50 (Dropout 0.2)|hparam|Sup. / IN|Trained|1.10|75.85|0.0883|77.27
ResNet-50 (Dropout 0.3)|hparam|Sup. / IN|Trained|1.10|75.43|0.0910|77.12
ResNet-50 (Dropout 0.4)|hparam|Sup. / IN|Trained|1.10|75.37|0.0928|77.12
ResNet-50 (Dropout 0.5)|hparam|Sup. / IN|Trained|1.10|75.03|0.0965|77.06
ResNet-50 (Dropout 0.6)|hparam|Sup. / IN|Trained|1.10|74.72|0.1006|77.01
ResNet-50 (Dropout 0.7)|hparam|Sup. / IN|Trained|1.10|74.48|0.1058|76.89
ResNet-50 (Label Smoothing 0.1)|hparam|Sup. / IN|Trained|0.90|76.22|0.0877|77.30
ResNet-50 (Label Smoothing 0.2)|hparam|Sup. / IN|Trained|0.80|76.24|0.0911|77.44
ResNet-50 (Label Smoothing 0.3)|hparam|Sup. / IN|Trained|0.80|75.74|0.0969|77.26
ResNet-50 (Label Smoothing 0.4)|hparam|Sup. / IN|Trained|0.70|75.70|0.0996|77.31
ResNet-50 (Label Smoothing 0.5)|hparam|Sup. / IN|Trained|0.70|75.51|0.1030|77.26
ResNet-50 (Label Smoothing 0.6)|hparam|Sup. / IN|Trained|0.70|75.03|0.1063|77.00
ResNet-50 (Label Smoothing 0.7)|hparam|Sup. / IN|Trained|0.70|74.54|0.1071|76.80
ResNet-50 (Label Smoothing 0.8)|hparam|Sup. / IN|Trained|0.80|74.28|0.1130|76.98
ResNet-50 (DropBlock 34, 0.9)|hparam|Sup. / IN|Trained|1.00|74.98|0.0891|76.84
ResNet-50 (DropBlock 1234, 0.9)|hparam|Sup. / IN|Trained|1.00|74.87|0.0895|76.72
ResNet-50 (Learning Rate 0.05)|hparam|Sup. / IN|Trained|1.10|75.56|0.0871|77.10
ResNet-50 (Learning Rate 0.2)|hparam|Sup. / IN|Trained|1.10|76.07|0.0858|77.35
ResNet-50 (Weight Decay 0.00001)|hparam|Sup. / IN|Trained|1.20|74.13|0.1027|76.70
ResNet-50 (Weight Decay 0.00005)|hparam|Sup. / IN|Trained|1.10|75.87|0.0866|77.23
ResNet-50 (Weight Decay 0.0002)|hparam|Sup. / IN|Trained|1.10|75.79|0.0865|77.16
ResNet-50 (LR 0.05, WD 0.0002)|hparam|Sup. / IN|Trained|1.10|75.58|0.0856|77.08
ResNet-50 (LR 0.2, WD 0.00005)|hparam|Sup. / IN|Trained|1.10|76.36|0.0864|77.49
ResNet-50 (LR 1.0, WD 0.00001)|hparam|Sup. / IN|Trained|1.20|75.71|0.1011|77.53
EfficientNet-B0|arch|Sup. / IN|Trained|0.90|76.88|0.1136|78.65
SK-ResNet-34|arch|Sup. / IN|Trained|0.90|76.91|0.1099|78.52
MobileNet-V2|arch|Sup. / IN|Trained|0.90|77.29|0.1033|78.48
VGG19 BatchNorm|arch|Sup. / IN|Trained|1.10|74.22|0.1232|77.45
Legacy-SEResNet-34|arch|Sup. / IN|Trained|1.10|74.81|0.1206|77.70
Legacy-SEResNet-50|arch|Sup. / IN|Trained|0.90|77.64|0.1144|79.11
SEResNeXt-26d|arch|Sup. / IN|Trained|0.90|77.60|0.1187|79.25
DenseNet-Blur-121d|arch|Sup. / IN|Trained|0.90|76.58|0.1082|78.22
DenseNet-121|arch|Sup. / IN|Trained|0.80|75.57|0.1076|77.70
Inception-V3|arch|Sup. / IN|Trained|1.00|77.44|0.1270|79.49
TF-Inception-V3|arch|Sup. / IN|Trained|1.00|77.86|0.1259|79.65
Adv Inception-V3|arch|Sup. / IN|Trained|1.00|77.58|0.1252|79.41
HRNet-W18-Small|arch|Sup. / IN|Trained|1.00|75.13|0.1143|77.78
DPN-68|arch|Sup. / IN|Trained|1.20|76.31|0.1141|78.44
DLA-60|arch|Sup. / IN|Trained|1.10|77.02|0.1064|78.35
ESE-VoVNet|arch|Sup. / IN|Trained|0.80|76.80|0.1159|78.62
ViT-B/16|arch|Sup. / IN|Trained|1.70|74.55|0.1472|78.85
SimCLR|framework|Cont. / IN|Fine Tuned|1.00|75.60|0.1277|78.35
ViT-DeiT-Tiny|framework|Sup. / IN|Distilled|1.00|74.50|0.1247|77.93
ViT-S/16|dataset|Sup. / IN-21k|Trained|0.90|77.86|0.1249|79.73
ALIGN-ZS|dataset|Cont. / ALIGN|Zero Shot|0.30|75.50|0.2295|83.42
CLIP-S|dataset|Cont. / WIT|L-BFGS|0.90|75.67|0.1687|80.42
CLIP-L-ZS|dataset|Cont. / WIT|Zero Shot|1.10|76.57|0.2140|83.22"""
_T2 = """EfficientNet-B3|arch|Sup. / IN|Trained|0.90|80.89|0.1147|80.98
ALIGN|dataset|Cont. / ALIGN|L-BFGS|1.00|84.71|0.1684|85.50
ViT-H/14|dataset|Sup. / JFT|Trained|1.10|88.31|0.1646|87.48
ViT-G/14|dataset|Sup. / JFT|Trained|1.40|88.93|0.1801|88.40
MPL|dataset|Pseudo-Label / JFT|Trained|0.90|90.24|0.1741|88.97
CLIP-L|dataset|Cont. / WIT|L-BFGS|1.00|85.04|0.1638|85.36
BiT-1k|dataset|Sup. / JFT|Fine Tuned|1.20|82.85|0.1593|84.28"""
_T3 = """CLIP-S-ZS|dataset|Cont. / WIT|Zero Shot|0.01|63.25|0.2675|78.01
BiT-JFT|dataset|Sup. / JFT|Class Mapping|0.02|65.63|0.2744|77.93"""
_COLUMNS = ["model", "category", "method", "head", "temperature", "accuracy", "error_inconsistency",
            "ensemble_accuracy"]


def _paper_table(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text), sep="|", header=None, names=_COLUMNS)


#: Appendix Table 1 (the main analysis), Table 2 (high-accuracy models), Table 3 (low accuracy, very different)
PAPER_TABLE1 = _paper_table(_T1)
PAPER_TABLE2 = _paper_table(_T2)
PAPER_TABLE3 = _paper_table(_T3)
#: the base ResNet-50's ImageNet accuracy: 76.5 % in the abstract and §4.2 (§4.5 says 76.2 %)
PAPER_BASE_ACCURACY = 76.5
#: §4.6: features (multiples of 256) needed to reach 76 % ImageNet accuracy, per category
PAPER_FEATURES_NEEDED = {"reinit": 2304, "hparam": 2057, "arch": 1392, "dataset": 512}
#: timm names of the paper's models where timm has those weights (our mapping, by name and accuracy);
#: None: trained by the authors or not in timm (supply their logits and features yourself)
PAPER_TIMM = {
    "ResNet-50": "resnet50", "EfficientNet-B0": "efficientnet_b0", "SK-ResNet-34": "skresnet34",
    "MobileNet-V2": "mobilenetv2_120d", "VGG19 BatchNorm": "vgg19_bn", "Legacy-SEResNet-34": "legacy_seresnet34",
    "Legacy-SEResNet-50": "legacy_seresnet50", "SEResNeXt-26d": "seresnext26d_32x4d",
    "DenseNet-Blur-121d": "densenetblur121d", "DenseNet-121": "densenet121", "Inception-V3": "inception_v3",
    "TF-Inception-V3": "tf_inception_v3", "Adv Inception-V3": "adv_inception_v3",
    "HRNet-W18-Small": "hrnet_w18_small_v2", "DPN-68": "dpn68", "DLA-60": "dla60", "ESE-VoVNet": "ese_vovnet19b_dw",
    "ViT-DeiT-Tiny": "deit_tiny_distilled_patch16_224", "EfficientNet-B3": "efficientnet_b3",
    "ViT-B/16": None, "SimCLR": None, "ViT-S/16": None, "ALIGN-ZS": None, "CLIP-S": None, "CLIP-L-ZS": None,
    "ALIGN": None, "ViT-H/14": None, "ViT-G/14": None, "MPL": None, "CLIP-L": None, "BiT-1k": None,
    "CLIP-S-ZS": None, "BiT-JFT": None,
}  # fmt: skip
PAPER_LAYOUT = """<data_root>/                      (preset data_root, default $ENSDIV_DATA/training-methods)
  models.csv                      columns name,category,role[,timm]: category in reinit|hparam|arch|framework|
                                  dataset, role in base|main|high|low (exactly one base: ResNet-50 RandAugment)
  labels_<split>.npy              int labels, one per sample; splits: val (held out from ImageNet train:
                                  temperatures, selection, probe L2), test (ImageNet val: reporting),
                                  train (probe training features), down-train / down-val / down-test (Fig. 7)
  ids_<split>.txt                 optional: one sample id per line (the file name); checks the sample order
  <name>/logits_<split>.npy       (N, 1000) float logits of the model on val and test
  <name>/features_<split>.npy     (N, D) float pre-logit features (Fig. 6: train, val, test; Fig. 7: down-*)
  <name>/ids_<split>.txt          optional: must equal the root's ids_<split>.txt line by line"""


# ---- models and their outputs ---------------------------------------------------------------------------
def chapter_recipes(scale: str, keys: Sequence[str] | None = None) -> dict[str, ed.Recipe]:
    """The zoo's recipes of the five categories at ``scale``, base first.

    The zoo's ``dataset/resnet-glyphs`` is this chapter's real different-source model: the base ResNet
    recipe, its backbone pre-trained (supervised, 62 classes) on ``pretrain/glyphs`` for 2x the base's
    epochs at lr 0.1, then a linear probe on the base's Fashion-MNIST subset (as ``dataset/resnet-shapes``).
    """
    zoo = {k: v for k, v in zoo_recipes(scale).items() if category_of(k) in CATEGORIES}
    res = zoo[BASE]
    out = {BASE: res, **{k: v for k, v in zoo.items() if k != BASE}}
    if keys is None:
        return out
    missing = [k for k in keys if k not in out]
    if missing:
        raise InvalidInputError(f"Unknown model(s) {missing} for the {scale} chapter zoo; known: {sorted(out)}.")
    return {k: out[k] for k in [BASE, *[k for k in keys if k != BASE]]}


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
                        band: Sequence[float], relative: bool = True, requested: Sequence[str] | None = None,
                        min_per_category: int = 2) -> Population:
    """Apply the accuracy band of §3.2: who enters the main analysis.

    Args:
        accuracy: key -> validation accuracy (fraction) of every available model, the base included.
        category: key -> one of :data:`CATEGORIES` (the base's entry is ignored).
        base: the base model's key.
        band: ``(low, high)`` in accuracy points: offsets from the base's accuracy when ``relative``,
            else absolute percentages (the paper: ``(74, 78)``).
        relative: see ``band``.
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
    ref = 100 * accuracy[base] if relative else 0.0
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
    return analysis_population(accuracy, out.category, base=out.base, band=cfg["band"],
                               relative=cfg["band_relative"], requested=cfg.get("models") or None)


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


def representative(table: pd.DataFrame, pop: Population, category: str, prefer: str | None = None) -> str | None:
    """The pair of ``category`` to show: ``prefer`` when it is in the band, else the in-band model with the
    largest error inconsistency; None when the category has no model in the band."""
    keys = pop.by_category()[category]
    if prefer in keys:
        return prefer
    if prefer:
        warnings.warn(f"{prefer} is not in the band; showing another {CATEGORY_LABELS[category]} model.",
                      PopulationWarning, stacklevel=2)
    if not keys:
        return None
    return str(table.loc[keys, "error_inconsistency"].idxmax())


# ---- specialisation (Fig. 3, 4) ---------------------------------------------------------------------------
GROUPS = ("both correct", "only base correct", "only other correct", "both wrong")


def pair_angles(out: Outputs, temps: torch.Tensor, other: str, split: str = "test") -> pd.DataFrame:
    """Per sample: θ = atan2(conf_base, conf_other) in degrees (:func:`ensdiv.metrics.specialization_angle`;
    high = the base more confident), each model's confidence being its calibrated maximum softmax
    probability, the correctness group (:data:`GROUPS`) and the label."""
    probs = calibrated_probs(out, temps, split)
    y = out.labels[split]
    pb, po = probs[out.index(out.base)], probs[out.index(other)]
    theta = mt.specialization_angle(pb.max(-1).values, po.max(-1).values)
    cb, co = pb.argmax(-1) == y, po.argmax(-1) == y
    group = np.select([(cb & co).numpy(), (cb & ~co).numpy(), (~cb & co).numpy()], GROUPS[:3], GROUPS[3])
    return pd.DataFrame({"theta": theta.numpy(), "group": group, "label": y.numpy()})


def class_specialization(angles: pd.DataFrame, num_classes: int, *, n_perm: int = 1000, seed: int = 0
                         ) -> tuple[pd.DataFrame, float, float]:
    """Per-class specialisation (Fig. 4): the mean of θ − 45° over each class's samples (> 0: the base is
    the more confident on that class), its spread across classes (standard deviation), and the
    permutation p-value of that spread (class labels shuffled across samples ``n_perm`` times).

    Returns:
        ``(per_class, spread, p)``.
    """
    d = torch.tensor(angles["theta"].to_numpy() - 45.0, dtype=torch.float64)
    y = torch.tensor(angles["label"].to_numpy(), dtype=torch.long)

    def spread_of(labels: torch.Tensor) -> torch.Tensor:
        sums = torch.zeros(num_classes, dtype=torch.float64).index_add_(0, labels, d)
        cnt = torch.bincount(labels, minlength=num_classes).double().clamp_min(1)
        return (sums / cnt).std()

    g = torch.Generator().manual_seed(seed)
    observed = float(spread_of(y))
    null = torch.stack([spread_of(y[torch.randperm(len(y), generator=g)]) for _ in range(n_perm)])
    p = float(((null >= observed).sum() + 1) / (n_perm + 1))
    per = angles.assign(dtheta=d.numpy()).groupby("label").agg(
        mean_dtheta=("dtheta", "mean"), n=("dtheta", "size"),
        only_base=("group", lambda s: float((s == GROUPS[1]).mean())),
        only_other=("group", lambda s: float((s == GROUPS[2]).mean())))
    return per, observed, p


# ---- greedy ensembles of a high-accuracy model with lower-accuracy ones (Fig. 5) ---------------------------
def high_low_lists(accuracy: Mapping[str, float], *, n_high: int, low_gap: float) -> tuple[list[str], list[str]]:
    """The ``n_high`` most accurate models (validation), and every model at least ``low_gap`` points below
    the least accurate of them."""
    ranked = sorted(accuracy, key=lambda k: -accuracy[k])
    high = ranked[:n_high]
    floor = min(accuracy[k] for k in high) - low_gap / 100
    low = [k for k in ranked if k not in high and accuracy[k] < floor]
    if not low:
        raise InvalidInputError(f"No model is {low_gap} points below the high-accuracy models {high}; lower low_gap.")
    return high, low


def greedy_with_low(out: Outputs, temps: torch.Tensor, high: Sequence[str], low: Sequence[str], *,
                    max_size: int) -> pd.DataFrame:
    """Greedy selection (:func:`ensdiv.ensembles.greedy_select`, mean of calibrated probabilities) on the
    validation split, starting from each high-accuracy model and adding only low-accuracy ones; the
    chosen ensemble is then scored on the test split."""
    zval = out.logits["val"] / temps[:, None, None]
    ptest = calibrated_probs(out, temps, "test")
    ytest = out.labels["test"]
    cand = [out.index(k) for k in low]
    rows = []
    for h in high:
        chosen, path = ed.ensembles.greedy_select(zval, out.labels["val"], start=out.index(h), candidates=cand,
                                                  max_size=max_size, how="mean_probs")
        acc = lambda idx: float((ptest[idx].mean(0).argmax(-1) == ytest).double().mean())  # noqa: E731
        keys = [out.keys[i] for i in chosen]
        rows.append({"high": h, "high_test_acc": acc([chosen[0]]), "added": keys[1:],
                     "added_categories": [out.category[k] for k in keys[1:]],
                     "max_added_test_acc": max((acc([i]) for i in chosen[1:]), default=float("nan")),
                     "val_acc_path": [round(float(v), 4) for v in path], "ensemble_test_acc": acc(chosen),
                     "gain": acc(chosen) - acc([chosen[0]])})
    return pd.DataFrame(rows).set_index("high")


# ---- features and linear probes (Fig. 6, 7) -------------------------------------------------------------
def _feature_set(cfg: Any, split: str) -> ed.TensorSet:
    seed = cfg["seed"]
    if split == "train":
        return ed.get_dataset("fmnist/train").subset(cfg["probe_train"], seed=seed)
    if split == "val":
        return ed.get_dataset(VAL_SET).subset(cfg["probe_val"], seed=seed)
    if split == "test":
        return ed.get_dataset(EVAL_SET[cfg["scale"]]).subset(cfg["probe_test"], seed=seed)
    if split == "down":
        return ed.get_dataset(cfg["downstream_set"])
    raise InvalidInputError(f"Unknown feature split {split!r}; valid: train, val, test, down.")


def probe_features(cfg: Any, out: Outputs, keys: Sequence[str], split: str) -> tuple[dict[str, torch.Tensor],
                                                                                      torch.Tensor]:
    """Normalised pre-logit features (``cfg.normalize``, :func:`ensdiv.train.probe.normalize_features`) of
    ``keys`` on ``split`` and its labels; lengths and (at paper scale) sample ids checked."""
    if out.root is not None:
        feats = {k: _load_array(out.root / k / f"features_{split}.npy", f"{k} {split} features").float()
                 for k in keys}
        labels = _load_array(out.root / f"labels_{split}.npy", f"{split} labels").long()
        check_aligned(feats, ids=_split_ids(out.root, keys, split), n=len(labels), what=f"{split} features")
    else:
        data = _feature_set(cfg, split)
        feats = {k: ed.predict(out.recipes[k], data, features=True)[1].float() for k in keys}
        labels = data.y
        check_aligned(feats, n=len(labels), what=f"{split} features")
    if cfg["normalize"] == "standardize":
        raise InvalidInputError("normalize='standardize' needs the training split's statistics; this chapter "
                                "normalises per sample ('l2') or not at all ('none').")
    return {k: probe.normalize_features(v, cfg["normalize"]) for k, v in feats.items()}, labels


def _probe(cfg: Any, tr: tuple, va: tuple, te: tuple) -> tuple[float, float, float, np.ndarray]:
    """A probe with λ chosen on ``va``: its best validation accuracy, its test accuracy, λ, and its per-sample
    test correctness (N_test,) bool (for the intervals of the claims)."""
    p = probe.linear_probe(tr[0], tr[1], va[0], va[1], l2_grid=cfg["l2_grid"], max_iter=cfg["probe_iter"],
                           dtype=getattr(torch, cfg["probe_dtype"]))
    right = (p.logits(te[0]).argmax(1).cpu() == te[1].cpu()).numpy()
    return float(p.val_accuracy.max()), float(right.mean()), p.l2, right


def concat_curve(cfg: Any, a: str, b: str, splits: Mapping[str, tuple[dict, torch.Tensor]]) -> pd.DataFrame:
    """Fig. 6 centre: probes on ``frac`` of A's dimensions and ``1 - frac`` of B's, random dimensions
    (:func:`ensdiv.train.probe.subsample_concat`), for every ``cfg.fractions`` and ``cfg.draws`` seeds.

    Columns: other, frac_base, draw, dims, val_acc, test_acc, l2, and ``test_correct`` (each probe's per-sample
    test correctness, an (N_test,) bool array, for :func:`combination_gains`)."""
    rows = []
    da, db = splits["train"][0][a].shape[1], splits["train"][0][b].shape[1]
    for frac in cfg["fractions"]:
        for s in range(1 if frac in (0.0, 1.0) else cfg["draws"]):
            ia, ib = probe.subsample_concat(da, db, frac, seed=cfg["seed"] + s)
            pick = {sp: (torch.cat([f[a][:, ia], f[b][:, ib]], 1), y) for sp, (f, y) in splits.items()}
            val, test, lam, right = _probe(cfg, pick["train"], pick["val"], pick["test"])
            rows.append({"other": b, "frac_base": frac, "draw": s, "dims": len(ia) + len(ib), "val_acc": val,
                         "test_acc": test, "l2": lam, "test_correct": right})
    return pd.DataFrame(rows)


def features_needed(cfg: Any, a: str, b: str, splits: Mapping[str, tuple[dict, torch.Tensor]], *, target: float,
                    by: str, full: bool = False) -> tuple[pd.DataFrame, float]:
    """Fig. 6 right: probes on the ``k`` most diverse dimensions of the concatenation ([A, B], ranked on
    the training split by :func:`ensdiv.train.probe.rank_dimensions` ``by``), k = ``cfg.k_step``,
    2·k_step, ..., every dimension; λ is chosen on the validation split and the accuracy read on the test
    split. Stops at the first k whose test accuracy reaches ``target`` unless ``full`` (every k is probed:
    what :func:`features_needed_estimates` resamples).

    Returns:
        ``(curve, k_needed)``: the curve (columns other, ranking, k, total, val_acc, test_acc, test_correct)
        and the first k reaching ``target`` (NaN when none does).
    """
    order = probe.rank_dimensions(splits["train"][0][a], splits["train"][0][b], by=by)
    total = len(order)
    rows, needed = [], float("nan")
    for k in [*range(cfg["k_step"], total, cfg["k_step"]), total]:
        idx = order[:k]
        pick = {sp: (torch.cat([f[a], f[b]], 1)[:, idx], y) for sp, (f, y) in splits.items()}
        val, test, _, right = _probe(cfg, pick["train"], pick["val"], pick["test"])
        rows.append({"other": b, "ranking": by, "k": k, "total": total, "val_acc": val, "test_acc": test,
                     "test_correct": right})
        if test >= target and math.isnan(needed):
            needed = float(k)
            if not full:
                break
    return pd.DataFrame(rows), needed


def downstream_splits(cfg: Any, out: Outputs, keys: Sequence[str]) -> dict[str, tuple[dict, torch.Tensor]]:
    """Fig. 7's downstream task: normalised features of ``keys`` on train / val / test splits of it.

    smoke/cpu: ``cfg.downstream_set`` (scikit-learn's digits) cut 60/20/20 with ``cfg.seed``; paper: the
    folder's ``down-train``, ``down-val`` and ``down-test`` features.
    """
    if out.root is not None:
        return {s: probe_features(cfg, out, keys, f"down-{s}") for s in ("train", "val", "test")}
    feats, labels = probe_features(cfg, out, keys, "down")
    n = len(labels)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(cfg["seed"]))
    cut = {"train": perm[: int(0.6 * n)], "val": perm[int(0.6 * n): int(0.8 * n)], "test": perm[int(0.8 * n):]}
    return {s: ({k: v[i] for k, v in feats.items()}, labels[i]) for s, i in cut.items()}


def downstream_probes(cfg: Any, splits: Mapping[str, tuple[dict, torch.Tensor]]) -> pd.DataFrame:
    """Fig. 7: a linear probe on each single representation and on each pairwise concatenation (stacked
    generalisation, full dimensions of both), λ chosen on the downstream validation split.

    Columns: models, kind (single / pair), dims, val_acc, test_acc and ``test_correct`` (the probe's
    per-sample test correctness, an (N_test,) bool array)."""
    keys = list(splits["train"][0])
    rows = []
    for combo in [(k,) for k in keys] + list(combinations(keys, 2)):
        sp = {s: (torch.cat([f[k] for k in combo], 1), y) for s, (f, y) in splits.items()}
        val, test, _, right = _probe(cfg, sp["train"], sp["val"], sp["test"])
        rows.append({"models": " + ".join(combo), "kind": "single" if len(combo) == 1 else "pair",
                     "dims": sp["train"][0].shape[1], "val_acc": val, "test_acc": test, "test_correct": right})
    return pd.DataFrame(rows)


def fig05_lists(cfg: Any, out: Outputs) -> tuple[list[str], list[str]]:
    """High- and low-accuracy lists of Fig. 5: the folder's roles at paper scale (high: App. Table 2; low:
    Tables 1 and 3), else :func:`high_low_lists` on validation accuracy."""
    if out.roles:
        high = [k for k in out.keys if out.roles[k] == "high"]
        low = [k for k in out.keys if out.roles[k] in ("main", "low", "base")]
        return high, low
    acc = (out.logits["val"].argmax(-1) == out.labels["val"]).double().mean(1)
    return high_low_lists(dict(zip(out.keys, acc.tolist(), strict=True)), n_high=cfg["n_high"],
                          low_gap=cfg["low_gap"])


# ---- intervals for the "Paper vs this run" claims ----------------------------------------------------------
# Every quantity a claim of this chapter compares is an ed.report.Estimate: a paired bootstrap over the test
# images (one resample of image indices serves every quantity of a page, so differences are paired), or a
# bootstrap over the models (ed.report.correlation) for a trend across the population. A quantity that cannot
# be computed (a category without models in the band, too few models) is a NaN estimate, so its check shows as not
# computable instead of vanishing.
NAN = float("nan")
#: per-model quantities :func:`category_estimates` averages over a category's models
CATEGORY_COLUMNS = ("error_inconsistency", "error_consistency", "ensemble_accuracy", "conversion_rate", "n11", "n00")
#: the models trained with another loss or on other data than the base (Fig. 5's "different loss and/or dataset")
DIVERSE_CATEGORIES = ("framework", "dataset")


def missing_estimate(source: str = "evaluation samples") -> Any:
    """A quantity that would carry an interval but cannot be computed on this run (a category without models, too
    few models): a NaN :class:`ed.report.Estimate`, so its check shows as not computable and is still judged as
    built from estimates."""
    return ed.report.Estimate(NAN, np.array([]), source, "bootstrap")


def bootstrap(per: Mapping[str, Any], statistic: Mapping[str, Any] | None = None, *, n_resamples: int,
               seed: int) -> dict[str, Any]:
    """:func:`ed.report.paired_bootstrap`, quiet about scipy's own (unused) confidence interval when a statistic
    is degenerate or NaN on some resamples (the report's intervals come from the replicates)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=stats.DegenerateDataWarning)
        warnings.filterwarnings("ignore", message="Mean of empty slice", category=RuntimeWarning)
        return ed.report.paired_bootstrap(per, statistic=statistic, n_resamples=n_resamples, seed=seed)


def pair_correct(out: Outputs, temps: torch.Tensor, keys: Sequence[str], split: str = "test"
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per sample of ``split``: whether the base is right (N,), whether each of ``keys`` is right (N, M), and
    whether each one's ensemble with the base is right (N, M) (mean of the two calibrated probability vectors,
    as in :func:`model_table`); all bool."""
    probs = calibrated_probs(out, temps, split)
    y = out.labels[split]
    b, idx = out.index(out.base), [out.index(k) for k in keys]
    base = (probs[b].argmax(-1) == y).numpy()
    other = (probs[idx].argmax(-1) == y).numpy().T.reshape(len(y), len(idx))
    ens = ((probs[idx] + probs[b]).argmax(-1) == y).numpy().T.reshape(len(y), len(idx))
    return base, other, ens


def ensemble_correct(out: Outputs, temps: torch.Tensor, keys: Sequence[str], split: str = "test") -> np.ndarray:
    """Per sample of ``split``: whether the ensemble of ``keys`` (mean of calibrated probabilities) is right."""
    probs = calibrated_probs(out, temps, split)[[out.index(k) for k in keys]].mean(0)
    return (probs.argmax(-1) == out.labels[split]).numpy()


def _kappa_mean(base: np.ndarray, other: np.ndarray) -> float:
    """Mean over the columns of ``other`` of Cohen's κ between the base's and that model's correctness
    (:func:`ensdiv.metrics.error_consistency`); a model with undefined κ is skipped."""
    b, o = base[:, None].astype(float), other.astype(float)
    pa, pb = b.mean(0), o.mean(0)
    c_exp = pa * pb + (1 - pa) * (1 - pb)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(c_exp < 1 - 1e-12, ((b == o).mean(0) - c_exp) / (1 - c_exp), np.nan)
    return float(np.nanmean(k)) if np.isfinite(k).any() else NAN


def _conversion_mean(base: np.ndarray, other: np.ndarray, ens: np.ndarray) -> float:
    """Mean over models of the conversion rate (:func:`ensdiv.metrics.conversion_rate`); a model without an
    inconsistent sample is skipped."""
    incons = base[:, None] != other
    n = incons.sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(n > 0, (incons & ens).sum(0) / np.maximum(n, 1), np.nan)
    return float(np.nanmean(rate)) if np.isfinite(rate).any() else NAN


def category_estimates(out: Outputs, temps: torch.Tensor, pop: Population, columns: Sequence[str], *,
                       n_resamples: int, seed: int, split: str = "test") -> dict[str, Any]:
    """Category means of per-model quantities with the base, from one paired bootstrap over the samples of
    ``split``, keyed ``"<column> <Category>"`` (the keys of :func:`paper_category_values`).

    Columns (:data:`CATEGORY_COLUMNS`): ``error_inconsistency``, ``n11``, ``n00`` (fractions of samples),
    ``ensemble_accuracy`` (% of samples the base + model ensemble gets right), ``error_consistency`` (κ of
    Geirhos et al., mean over the category's models) and ``conversion_rate`` (mean over its models). A mean of
    per-sample fractions is a per-sample mean, so the bootstrap resamples the samples once for every model and
    category: differences between categories are paired. A category without models in the band is a NaN
    estimate (:func:`missing_estimate`).

    Returns:
        ``{name: Estimate}``.
    """
    bad = sorted(set(columns) - set(CATEGORY_COLUMNS))
    if bad:
        raise InvalidInputError(f"Unknown column(s) {bad}; valid: {', '.join(CATEGORY_COLUMNS)}.")
    base, other, ens = pair_correct(out, temps, pop.members, split)
    result: dict[str, Any] = {}
    per: dict[str, Any] = {}
    stat: dict[str, Any] = {}
    for c in CATEGORIES:
        cols = [i for i, k in enumerate(pop.members) if pop.category[k] == c]
        for col in columns:
            name = f"{col} {CATEGORY_LABELS[c]}"
            result[name] = missing_estimate()
            if not cols:
                continue
            o, e = other[:, cols], ens[:, cols]
            if col == "error_inconsistency":
                per[name] = (base[:, None] != o).mean(1)
            elif col == "n11":
                per[name] = (base[:, None] & o).mean(1)
            elif col == "n00":
                per[name] = (~base[:, None] & ~o).mean(1)
            elif col == "ensemble_accuracy":
                per[name] = 100 * e.mean(1)
            elif col == "error_consistency":
                per[name], stat[name] = (base, o), _kappa_mean
            else:
                per[name], stat[name] = (base, o, e), _conversion_mean
    if per:
        result.update(bootstrap(per, stat, n_resamples=n_resamples, seed=seed))
    return result


def _same_group(estimates: Mapping[str, Any], names: Sequence[str], what: str) -> list[Any] | None:
    """The estimates named, all of one paired bootstrap; None when one of them is missing or NaN."""
    ests = [estimates.get(n) for n in names]
    if not ests or not all(isinstance(e, ed.report.Estimate) and math.isfinite(e.value) for e in ests):
        return None
    if len({e.group for e in ests}) != 1 or any(e.kind != "bootstrap" for e in ests):
        raise InvalidInputError(f"{what}() needs estimates of one paired_bootstrap call.")
    return ests


def highest_of(estimates: Mapping[str, Any], names: Sequence[str]) -> Any:
    """The largest of several estimates of one paired bootstrap, taken replicate by replicate (which one is
    largest may change between resamples: the bootstrap of a maximum, not of one chosen beforehand). A NaN
    estimate (:func:`missing_estimate`) when any of them is missing or NaN (a comparison with "every other
    category" needs every category)."""
    ests = _same_group(estimates, names, "highest_of")
    if ests is None:
        return missing_estimate()
    reps = np.max(np.stack([np.asarray(e.replicates, dtype=float) for e in ests]), axis=0)
    return ed.report.Estimate(max(e.value for e in ests), reps, ests[0].source, "bootstrap", ests[0].group)


def mean_of(estimates: Mapping[str, Any], names: Sequence[str]) -> Any:
    """The mean of several estimates of one paired bootstrap, replicate by replicate (a category's mean over its
    pairs); a NaN estimate when ``names`` is empty or any of them is missing or NaN."""
    ests = _same_group(estimates, names, "mean_of")
    if ests is None:
        return missing_estimate()
    reps = np.mean(np.stack([np.asarray(e.replicates, dtype=float) for e in ests]), axis=0)
    return ed.report.Estimate(float(np.mean([e.value for e in ests])), reps, ests[0].source, "bootstrap",
                              ests[0].group)


def model_correlation(x: Any, y: Any, *, seed: int, n_resamples: int, method: str = "spearman",
                      min_models: int = 4) -> Any:
    """:func:`ed.report.correlation` of ``x`` and ``y`` over models (a bootstrap over the models), or a NaN
    estimate when fewer than ``min_models`` models have both values or either series is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < min_models or np.ptp(x) == 0 or np.ptp(y) == 0:
        return missing_estimate()
    with warnings.catch_warnings():  # a resample with a constant series gives NaN, left out of the interval
        warnings.simplefilter("ignore")
        return ed.report.correlation(x, y, method=method, seed=seed, n_resamples=n_resamples)


def category_correlation(table: pd.DataFrame, column: str, *, seed: int, n_resamples: int,
                         min_categories: int = 3) -> Any:
    """Spearman's ρ between the category's rank (Reinit 1 ... Dataset 5) and ``column`` over the models of
    ``table``, with a bootstrap over the models (:func:`model_correlation`); a NaN estimate when fewer than
    ``min_categories`` categories or 4 models are present (a trend over two categories is one comparison)."""
    t = table[table["category"].isin(CATEGORIES)]
    if t["category"].nunique() < min_categories:
        return missing_estimate()
    rank = t["category"].map({c: i for i, c in enumerate(CATEGORIES)})
    return model_correlation(rank, t[column], seed=seed, n_resamples=n_resamples)


def _angle_gap(theta: np.ndarray, only_base: np.ndarray, only_other: np.ndarray) -> float:
    if not only_base.any() or not only_other.any():
        return NAN
    return float(theta[only_base].mean() - theta[only_other].mean())


def angle_gap_estimates(angles: Mapping[str, pd.DataFrame | None], *, n_resamples: int, seed: int) -> dict[str, Any]:
    """Fig. 3: per category's pair (``{category: pair_angles(...) or None}``), ``"gap <Category>"`` = mean θ
    where only the base is right minus mean θ where only the other model is right (degrees), from one paired
    bootstrap over the test samples (every pair is scored on the same samples); a NaN estimate for a missing pair."""
    result: dict[str, Any] = {f"gap {CATEGORY_LABELS[c]}": missing_estimate() for c in angles}
    per = {f"gap {CATEGORY_LABELS[c]}": (a["theta"].to_numpy(float), (a["group"] == GROUPS[1]).to_numpy(),
                                          (a["group"] == GROUPS[2]).to_numpy())
           for c, a in angles.items() if a is not None}
    if per:
        result.update(bootstrap(per, dict.fromkeys(per, _angle_gap), n_resamples=n_resamples, seed=seed))
    return result


def _class_means(d: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    counts = np.bincount(y)
    present = counts > 0
    return np.bincount(y, weights=d)[present] / counts[present], counts[present]


def class_spread(dtheta: np.ndarray, labels: np.ndarray) -> float:
    """Standard deviation across classes of the per-class mean of θ − 45° (Fig. 4's bars; classes present)."""
    means, _ = _class_means(dtheta, labels)
    return float(means.std(ddof=1)) if len(means) > 1 else NAN


def class_share(dtheta: np.ndarray, labels: np.ndarray) -> float:
    """η²: the share of the variance of θ over samples that the class explains (between-class sum of squares
    over the total). Unlike :func:`class_spread` it does not grow when θ is merely noisier. NaN when θ does not
    vary (a standard deviation below 1e-6 degrees: a share of rounding errors means nothing)."""
    if len(dtheta) < 2 or float(np.std(dtheta)) < 1e-6:
        return NAN
    means, counts = _class_means(dtheta, labels)
    total = float(((dtheta - dtheta.mean()) ** 2).sum())
    return float((counts * (means - dtheta.mean()) ** 2).sum() / total)


def class_estimates(angles: Mapping[str, pd.DataFrame | None], *, n_resamples: int, seed: int) -> dict[str, Any]:
    """Fig. 4: per category's pair, ``"class spread <Category>"`` (:func:`class_spread`) and ``"class share
    <Category>"`` (:func:`class_share`), from one paired bootstrap over the test samples; a NaN estimate for a
    missing pair."""
    names = [f"class {w} {CATEGORY_LABELS[c]}" for c in angles for w in ("spread", "share")]
    result: dict[str, Any] = {name: missing_estimate() for name in names}
    per, stat = {}, {}
    for c, a in angles.items():
        if a is None:
            continue
        arrays = (a["theta"].to_numpy(float) - 45.0, a["label"].to_numpy(int))
        for w, fn in (("spread", class_spread), ("share", class_share)):
            per[f"class {w} {CATEGORY_LABELS[c]}"], stat[f"class {w} {CATEGORY_LABELS[c]}"] = arrays, fn
    if per:
        result.update(bootstrap(per, stat, n_resamples=n_resamples, seed=seed))
    return result


def first_additions(out: Outputs, temps: torch.Tensor, high: Sequence[str], low: Sequence[str]) -> pd.DataFrame:
    """Fig. 5, the most useful first addition by kind: for each high-accuracy model, the low-accuracy model
    whose two-model ensemble with it is the most accurate on the *validation* split, among the models trained
    with another loss or on other data (:data:`DIVERSE_CATEGORIES`, column ``diverse``) and among the others
    (``similar``); None when a kind has no candidate."""
    zval = calibrated_probs(out, temps, "val")
    y = out.labels["val"]
    rows = []
    for h in high:
        row: dict[str, Any] = {"high": h}
        for kind, pool in (("diverse", [k for k in low if out.category[k] in DIVERSE_CATEGORIES]),
                           ("similar", [k for k in low if out.category[k] not in DIVERSE_CATEGORIES])):
            accs = {k: float(((zval[out.index(h)] + zval[out.index(k)]).argmax(-1) == y).double().mean())
                    for k in pool if k != h}
            row[kind] = max(accs, key=accs.get) if accs else None  # ties: the first in ``low``
            row[f"{kind}_val_acc"] = accs[row[kind]] if accs else NAN
        rows.append(row)
    return pd.DataFrame(rows).set_index("high")


def combination_gains(curves: pd.DataFrame, *, n_resamples: int, seed: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Fig. 6 centre, with every choice made on the validation split: per pair (``other``), the mixing fraction
    0 < p < 1 with the best validation accuracy (mean over draws) and the better single representation
    (p = 0 or 1) by validation accuracy; the gain is the chosen mix's test accuracy minus the chosen single's
    (points), with a paired bootstrap over the probes' test samples (per-sample correctness averaged over draws).

    Returns:
        ``(table, {other: Estimate})`` (a NaN estimate for a pair without a mix or a single representation).
    """
    rows, per = [], {}
    for other, g in curves.groupby("other", sort=False):
        val = g.groupby("frac_base")["val_acc"].mean()
        mixes, ends = val[(val.index > 0) & (val.index < 1)], val[val.index.isin([0.0, 1.0])]
        if mixes.empty or ends.empty:
            rows.append({"other": other, "mix": NAN, "single": NAN, "gain (points)": NAN})
            continue
        fm, fe = float(mixes.idxmax()), float(ends.idxmax())

        def right(f: float, g: pd.DataFrame = g) -> np.ndarray:
            return np.stack(g.loc[g["frac_base"] == f, "test_correct"].tolist()).astype(float).mean(0)

        per[other] = 100 * (right(fm) - right(fe))
        rows.append({"other": other, "mix": fm, "single": fe, "gain (points)": float(per[other].mean())})
    est: dict[str, Any] = {other: missing_estimate() for other in curves["other"].unique()}
    if per:
        est.update(bootstrap(per, n_resamples=n_resamples, seed=seed))
    return pd.DataFrame(rows).set_index("other"), est


def _first_reaching(ks: np.ndarray, censored: float, gap: float):
    def stat(target: np.ndarray, curve: np.ndarray) -> float:
        reached = np.flatnonzero(curve.mean(0) >= target.mean() - gap)
        return float(ks[reached[0]]) if reached.size else censored
    return stat


def features_needed_estimates(curves: Mapping[str, pd.DataFrame], target_correct: np.ndarray, *,
                              target_gap: float = 0.0, n_resamples: int, seed: int) -> dict[str, Any]:
    """Fig. 6 right: per pair (``{other: full curve of features_needed(..., full=True)}``), the first k whose
    test accuracy reaches the target (the test accuracy of ``target_correct``, the base's full-representation
    probe, minus ``target_gap`` points), recomputed on every resample of one paired bootstrap over the test
    samples (target and curves resampled together). A pair that never reaches it counts as needing one step
    more than all its dimensions (``total + k_step``)."""
    per, stat = {}, {}
    for other, c in curves.items():
        ks = c["k"].to_numpy(float)
        per[other] = (np.asarray(target_correct, dtype=float), np.stack(c["test_correct"].tolist(), 1).astype(float))
        stat[other] = _first_reaching(ks, float(c["total"].iloc[0] + ks[0]), target_gap / 100)
    return bootstrap(per, stat, n_resamples=n_resamples, seed=seed) if per else {}


def base_category(out: Outputs) -> str:
    """The base model's own category (its zoo key's at smoke/cpu, its models.csv row at paper scale), for
    grouping it with other models (Fig. 7); the analysis elsewhere labels it ``"base"``."""
    if out.root is not None:
        table = pd.read_csv(out.root / "models.csv")
        return str(table.loc[table["name"] == out.base, "category"].iloc[0])
    return category_of(out.base)


def downstream_choices(res: pd.DataFrame, category: Mapping[str, str], top: str) -> dict[str, str | None]:
    """Fig. 7's selections, each the row with the best downstream *validation* accuracy among: every single
    model (``best single``); ``top`` alone (the best upstream model); the pairs without ``top`` and the pairs
    with it; the pairs joining two categories and the pairs within one. None where a set is empty."""
    def best(mask: pd.Series) -> str | None:
        rows = res[mask]
        return None if rows.empty else str(rows.loc[rows["val_acc"].idxmax(), "models"])

    members = res["models"].str.split(" + ", regex=False)
    pair = res["kind"] == "pair"
    with_top = members.apply(lambda m: top in m)
    mixed = members.apply(lambda m: len({category[k] for k in m}) > 1)
    return {"best single": best(res["kind"] == "single"), "top upstream model": best(res["models"] == top),
            "best pair without the top upstream model": best(pair & ~with_top),
            "best pair with the top upstream model": best(pair & with_top),
            "best pair across categories": best(pair & mixed), "best pair within a category": best(pair & ~mixed)}


# ---- presets -------------------------------------------------------------------------------------------
# band: (low, high) points around the base's validation accuracy (smoke, cpu) or absolute % (paper: 74-78).
# cpu: +-5 points, wider than the paper's -2.2/+1.8 around 76.2 %: our small, briefly trained models spread
# more; the Table-A page lists every model and each page warns about every model the band leaves out.
# n_resamples: bootstrap resamples of every interval of the pages' claims (over test images, or over models)
_COMMON = {
    "common": {"seed": 0, "models": [], "data_root": "", "band_relative": True, "n_resamples": 1000},
    "smoke": {"band": [-15.0, 15.0], "n_resamples": 200},
    "cpu": {"band": [-5.0, 5.0]},
    "paper": {"band": [74.0, 78.0], "band_relative": False},
    "types": {"models": list[str]},  # []: every model of models.csv
}
_PAIRS = {"prefer_reinit": "reinit/resnet-s1", "prefer_arch": "arch/efficientnet",
          "prefer_dataset": "dataset/resnet-glyphs"}
_PROBE = {
    "common": {"normalize": "l2", "fractions": [0.0, 0.25, 0.5, 0.75, 1.0], "target_gap": 0.0},
    "smoke": {"probe_train": 400, "probe_val": 200, "probe_test": 400, "l2_grid": [1e-2, 1e-4], "probe_iter": 20,
              "probe_dtype": "float32", "draws": 1, "k_step": 4, "per_category": 1},
    "cpu": {"probe_train": 5000, "probe_val": 2000, "probe_test": 0, "l2_grid": [1e-2, 1e-3, 1e-4, 1e-5, 1e-6],
            "probe_iter": 50, "probe_dtype": "float32", "draws": 2, "k_step": 32, "per_category": 1},
    # paper: Kornblith et al.'s grid has 45 values; 10 (one per decade) here, multiples of 256 dimensions (§4.6)
    "paper": {"probe_train": 0, "probe_val": 0, "probe_test": 0, "l2_grid": list(probe.DEFAULT_L2_GRID),
              "probe_iter": 100, "probe_dtype": "float32", "draws": 3, "k_step": 256, "per_category": 0},
}


def _merge(*specs: dict) -> dict:
    out: dict = {s: {} for s in ("common", "smoke", "cpu", "paper", "types")}
    for spec in specs:
        for s, v in spec.items():
            out[s].update(v)
    return out


_DOWN_MODELS = [BASE, "arch/vit", "framework/resnet-simclr", "dataset/resnet-glyphs", "dataset/resnet-shapes"]
PRESETS: dict = {
    f"{SLUG}/fig01_error_inconsistency": _merge(_COMMON),
    f"{SLUG}/fig02_ensemble_accuracy": _merge(_COMMON, {"common": {"ci": 0.90}}),
    f"{SLUG}/fig03_specialization_angles": _merge(_COMMON, {"common": {**_PAIRS, "bins": 30}}),
    f"{SLUG}/fig04_per_class_specialization": _merge(_COMMON, {"common": {**_PAIRS, "n_perm": 1000},
                                                               "smoke": {"n_perm": 50}}),
    f"{SLUG}/fig05_greedy_low_accuracy": _merge(_COMMON, {"common": {"n_high": 3, "low_gap": 1.0, "max_size": 5},
                                                          "smoke": {"n_high": 2, "low_gap": 0.0}}),
    f"{SLUG}/fig06_feature_overlap": _merge(_COMMON, _PROBE, {"common": _PAIRS}),
    f"{SLUG}/fig07_downstream_transfer": _merge(_COMMON, _PROBE, {
        "common": {"downstream_set": "pretrain/digits", "down_models": _DOWN_MODELS},
        "paper": {"down_models": []},  # paper: every model with role 'high' in models.csv
        "types": {"down_models": list[str]}}),
    f"{SLUG}/fig08_pair_counts": _merge(_COMMON),
    f"{SLUG}/tabA_model_table": _merge(_COMMON),
}


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``training-methods/<stem>`` at ``scale`` (see :func:`ensdiv.config.resolve_preset`)."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)


def setup(cfg: Any) -> tuple[Outputs, torch.Tensor, Population]:
    """What every page starts from: the outputs, the temperatures (fitted on the validation split) and the
    analysis population (warnings name every model the band leaves out)."""
    out = load_outputs(cfg)
    temps = fit_temperatures(out.logits["val"], out.labels["val"], split="val")
    pop = population(cfg, out)
    print(pop.describe())
    return out, temps, pop
