"""Training recipes as data: a frozen dataclass that round-trips to dict / YAML and keys the cache.

A :class:`Recipe` says everything that decides a trained model: architecture, data, optimiser,
schedule, regularisation, augmentation, seed, and the training *framework* (plain supervised,
SimCLR-style contrastive pre-training + linear probe, knowledge distillation from a teacher recipe,
or supervised pre-training on another data source + linear probe). The five categories of
training-methods (Section 3 of that paper: reinit, hyper-parameters, architecture, framework, dataset)
are each one or two fields of this class, so a zoo is a list of ``dataclasses.replace`` calls.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any

from ensdiv.errors import EnsdivError, unknown_name

__all__ = ["Recipe", "OPTIMIZERS", "SCHEDULES", "AUGMENTATIONS", "FRAMEWORKS"]

OPTIMIZERS = ("sgd", "adamw", "rmsprop", "adabelief")
SCHEDULES = ("cosine", "step", "constant")
AUGMENTATIONS = ("none", "flip", "crop", "flipcrop", "mixup", "cutmix", "erasing")
FRAMEWORKS = ("supervised", "simclr", "distill", "pretrain")
RECIPE_VERSION = 1


@dataclass(frozen=True)
class Recipe:
    """Everything that decides one trained model.

    Attributes:
        model: registered model name (``ed.list_models()``), or at ``paper`` scale a timm name.
        scale: ``cpu`` (the registered small configuration) or ``paper`` (the paper's timm model).
        pretrained: paper scale: start from timm's locally cached pretrained weights.
        dataset: training set name (``ed.data.list_datasets()``).
        epochs: training epochs (the linear probe's epochs for ``simclr``/``pretrain``).
        batch_size: global batch size (split over DDP ranks).
        lr: peak learning rate.
        optimizer: one of ``sgd``, ``adamw``, ``rmsprop``, ``adabelief``.
        momentum: SGD / RMSprop momentum.
        weight_decay: decoupled for AdamW/AdaBelief, L2 for SGD/RMSprop.
        schedule: ``cosine`` (to 0), ``step`` (x0.1 at 50% and 75% of training) or ``constant``.
        warmup_epochs: linear warm-up epochs.
        dropout: ``drop_rate`` passed to the model (dropout before the classifier).
        label_smoothing: cross-entropy label smoothing.
        augment: ``+``-joined subset of ``flip``, ``crop`` (4-pixel padded random crop), ``flipcrop``,
            ``mixup``, ``cutmix``, ``erasing`` (random erasing), or ``none``.
        seed: seeds initialisation, data order, augmentation and dropout.
        train_subset: train on this many images (0 = all), drawn with ``subset_seed``.
        subset_seed: seed of the subset draw (kept apart from ``seed`` so reinit variants see the same data).
        model_kwargs: extra options of the model factory (widths, depths).
        framework: ``supervised``; ``simclr`` (contrastive pre-training for ``pretrain_epochs`` on
            ``pretrain_dataset`` or ``dataset``, then a linear probe); ``distill`` (from ``teacher``);
            ``pretrain`` (supervised pre-training on ``pretrain_dataset``, then a linear probe).
        teacher: the teacher recipe (as a dict) for ``distill``.
        distill: ``soft`` (KL to the teacher's tempered probabilities) or ``hard`` (teacher's argmax labels).
        distill_temperature: softmax temperature of soft distillation.
        distill_alpha: weight of the distillation term (1 - alpha on the true labels).
        pretrain_dataset: data source of ``simclr`` / ``pretrain``.
        pretrain_epochs: epochs of the pre-training phase.
        pretrain_lr: learning rate of the pre-training phase (0 = ``lr``).
        pretrain_seed: seed of the pre-training phase (-1 = ``seed``); two recipes with the same
            ``pretrain_seed`` and different ``seed`` share one backbone and differ in the probe.
        name: a free label (not part of the cache key).
    """

    model: str = "small_cnn"
    scale: str = "cpu"
    pretrained: bool = False
    dataset: str = "fmnist/train"
    epochs: int = 3
    batch_size: int = 128
    lr: float = 0.05
    optimizer: str = "sgd"
    momentum: float = 0.9
    weight_decay: float = 5e-4
    schedule: str = "cosine"
    warmup_epochs: int = 0
    dropout: float = 0.0
    label_smoothing: float = 0.0
    augment: str = "none"
    seed: int = 0
    train_subset: int = 0
    subset_seed: int = 0
    model_kwargs: dict = field(default_factory=dict)
    framework: str = "supervised"
    teacher: dict | None = None
    distill: str = "soft"
    distill_temperature: float = 4.0
    distill_alpha: float = 0.9
    pretrain_dataset: str | None = None
    pretrain_epochs: int = 0
    pretrain_lr: float = 0.0
    pretrain_seed: int = -1
    name: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.teacher, Recipe):
            object.__setattr__(self, "teacher", self.teacher.to_dict())
        hints = typing.get_type_hints(Recipe)
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int) and not isinstance(value, bool) and _allows(hints[f.name], float):
                object.__setattr__(self, f.name, float(value))
                continue
            if not _matches(value, hints[f.name]):
                raise EnsdivError(
                    f"Recipe field {f.name!r} must be {_type_name(hints[f.name])}, got the "
                    f"{type(value).__name__} {value!r}."
                )
        for key, valid in (
            ("scale", ("smoke", "cpu", "paper")),
            ("optimizer", OPTIMIZERS),
            ("schedule", SCHEDULES),
            ("framework", FRAMEWORKS),
            ("distill", ("soft", "hard")),
        ):
            if getattr(self, key) not in valid:
                raise unknown_name(f"Recipe {key}", getattr(self, key), valid)
        for part in self.augment.split("+"):
            if part not in AUGMENTATIONS:
                raise unknown_name("Recipe augmentation", part, AUGMENTATIONS)
        for key in ("epochs", "batch_size", "train_subset", "warmup_epochs", "pretrain_epochs"):
            if getattr(self, key) < (1 if key in ("epochs", "batch_size") else 0):
                raise EnsdivError(f"Recipe field {key!r} must be positive, got {getattr(self, key)}.")
        if self.framework == "distill" and self.teacher is None:
            raise EnsdivError(
                "A distill recipe needs a teacher recipe: Recipe(framework='distill', teacher=...)."
            )
        if self.framework == "pretrain" and not self.pretrain_dataset:
            raise EnsdivError(
                "A pretrain recipe needs pretrain_dataset (e.g. 'pretrain/shapes') and pretrain_epochs."
            )

    # ---- conversion -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """All fields as a plain dict (JSON/YAML-safe: tuples become lists)."""
        return _plain(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recipe:
        """Inverse of :meth:`to_dict`; unknown keys raise :class:`UnknownNameError`."""
        names = {f.name for f in fields(cls)}
        for key in data:
            if key not in names:
                raise unknown_name("Recipe field", key, names)
        return cls(**data)

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str) -> Recipe:
        import yaml

        return cls.from_dict(yaml.safe_load(text))

    def key(self) -> dict[str, Any]:
        """The cache key: every field except the free ``name`` label, plus the recipe version."""
        d = self.to_dict()
        d.pop("name")
        if d.get("teacher"):
            d["teacher"] = Recipe.from_dict(d["teacher"]).key()
        d["recipe_version"] = RECIPE_VERSION
        return d

    def replace(self, **changes: Any) -> Recipe:
        """``dataclasses.replace`` as a method."""
        return dataclasses.replace(self, **changes)

    @property
    def label(self) -> str:
        return self.name or f"{self.model}-s{self.seed}"


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


def _allows(hint: Any, typ: type) -> bool:
    if hint is typ:
        return True
    return isinstance(hint, types.UnionType) and typ in typing.get_args(hint)


def _matches(value: Any, hint: Any) -> bool:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_matches(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, float)
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    if isinstance(hint, types.UnionType):
        return " or ".join(_type_name(h) for h in typing.get_args(hint))
    if hint is type(None):
        return "None"
    return f"an {hint.__name__}" if hint.__name__[0] in "aeiou" else f"a {hint.__name__}"
