"""Training recipes as data: what decides one trained model, in five parts, keying the cache.

A :class:`Recipe` is made of

* :class:`Arch` — the registered architecture name and its options (``ed.list_models()``);
* :class:`DataSpec` — the training set, the size of the subset trained on, the augmentation;
* :class:`Optim` — epochs, batch, optimiser, learning rate and schedule, regularisation;
* :class:`Seeds` — three separate seeds: initialisation, data order (with augmentation and dropout),
  and the draw of the training subset. training-methods' "Reinit" category changes ``init`` only;
  Packed-Ensembles' App. F separates ``init`` from ``order``; the subset seed stays fixed so that
  models which should see the same images do;
* a *method* — how the parameters are fitted: :class:`Supervised` (cross-entropy, or the model's own
  ``training_loss``), :class:`Distill` (from a teacher recipe), :class:`Pretrain` (pre-training on a
  source — supervised or SimCLR — then a linear probe), :class:`Joint` (M members trained together
  under an ensemble loss of :mod:`ensdiv.losses` with weight λ) and :class:`Heads` (M heads trained
  on the cached features of a frozen backbone recipe).

Flat names make recipes short to write and to vary::

    base = Recipe.make(model="resnet", epochs=4, lr=0.05, augment="flip", train_subset=10000)
    base.replace(seed=3)           # a re-initialised copy: init and data-order seeds 3
    base.replace(init_seed=3)      # only the initialisation differs
    base.replace(lr=0.01)          # one optimisation field

:meth:`Recipe.key` (every field of every part, defaults included, except the free ``name`` label) keys the
cache of the trained model and of its predictions; the code that trains it is recorded in the entry and
checked on load (:mod:`ensdiv.store`), so no version number is kept by hand.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import yaml

from ensdiv.errors import EnsdivError, InvalidInputError, unknown_name

__all__ = [
    "Recipe",
    "Arch",
    "DataSpec",
    "Optim",
    "Seeds",
    "Supervised",
    "Distill",
    "Pretrain",
    "Joint",
    "Heads",
    "METHODS",
    "OPTIMIZERS",
    "SCHEDULES",
    "AUGMENTATIONS",
]

OPTIMIZERS = ("sgd", "adamw", "rmsprop", "adabelief")
SCHEDULES = ("cosine", "step", "multistep", "constant")
AUGMENTATIONS = ("none", "flip", "crop", "flipcrop", "mixup", "cutmix", "erasing")
HEAD_CUTS = ("head", "block")
HEAD_INITS = ("copy", "seed")
#: what follows pre-training: a linear probe on the frozen backbone, or end-to-end fine-tuning
PRETRAIN_HEADS = ("probe", "finetune")


class _Part:
    """Shared behaviour of the recipe parts: typed fields checked on creation, dict round trip."""

    _positive: ClassVar[tuple[str, ...]] = ()
    _non_negative: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            hint = hints[f.name]
            if isinstance(value, int) and not isinstance(value, bool) and _allows(hint, float):
                object.__setattr__(self, f.name, float(value))
                continue
            if isinstance(value, Recipe) and _allows(hint, dict):
                object.__setattr__(self, f.name, value.to_dict())
                continue
            if not _matches(value, hint):
                raise InvalidInputError(
                    f"{type(self).__name__} field {f.name!r} must be {_type_name(hint)}, got the "
                    f"{type(value).__name__} {value!r}."
                )
        for key in self._positive:
            if getattr(self, key) <= 0:
                raise InvalidInputError(
                    f"{type(self).__name__} field {key!r} must be positive, got {getattr(self, key)}."
                )
        for key in self._non_negative:
            if getattr(self, key) < 0:
                raise InvalidInputError(
                    f"{type(self).__name__} field {key!r} must be zero or positive, got {getattr(self, key)}."
                )

    def replace(self, **changes: Any) -> Any:
        """``dataclasses.replace`` as a method."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain dicts and lists (defaults included: they are part of the cache key)."""
        return _plain(dataclasses.asdict(self))  # type: ignore[call-overload]


@dataclass(frozen=True)
class Arch(_Part):
    """The architecture: a registered model name (``ed.list_models()``), its options, dropout, and
    (for a timm ImageNet model) whether to start from locally cached pretrained weights."""

    name: str = "small_cnn"
    kwargs: dict = field(default_factory=dict)
    dropout: float = 0.0
    pretrained: bool = False
    _non_negative: ClassVar[tuple[str, ...]] = ("dropout",)


@dataclass(frozen=True)
class DataSpec(_Part):
    """The training data: a registered set, a subset size (0 = all) and the augmentation
    (``+``-joined subset of ``flip``, ``crop``, ``flipcrop``, ``mixup``, ``cutmix``, ``erasing``; or ``none``);
    ``crop_pad`` is the zero padding of the random crop (2 pixels on 28x28; 4 on CIFAR's 32x32)."""

    dataset: str = "fmnist/train"
    subset: int = 0
    augment: str = "none"
    crop_pad: int = 2
    _non_negative: ClassVar[tuple[str, ...]] = ("subset", "crop_pad")

    def __post_init__(self) -> None:
        super().__post_init__()
        for part in self.augment.split("+"):
            if part not in AUGMENTATIONS:
                raise unknown_name("augmentation", part, AUGMENTATIONS)


@dataclass(frozen=True)
class Optim(_Part):
    """Optimisation: epochs, global batch, optimiser (``sgd``, ``adamw``, ``rmsprop``, ``adabelief``;
    ``eps`` is Adam/AdaBelief's epsilon; ``nesterov`` makes SGD's momentum Nesterov's, as
    ``torch.optim.SGD(nesterov=True)``, instead of heavy-ball), peak learning rate, schedule (``cosine``
    to 0, ``step`` ×``lr_decay`` at 50 % and 75 %, ``multistep`` ×``lr_decay`` at each epoch of
    ``milestones``, ``constant``; ``lr_decay`` is 0.1 unless set, as torch's ``MultiStepLR`` ``gamma``)
    with linear warm-up, weight decay (decoupled for AdamW/AdaBelief; on weights only, as timm does, or
    on every parameter with ``decay_all``, as torch's optimisers and the Packed-Ensembles reference do),
    label smoothing.

    Every field, at its default too, is part of the cache key: changing a default changes the key of every
    recipe that uses it.
    """

    epochs: int = 3
    batch_size: int = 128
    lr: float = 0.05
    optimizer: str = "sgd"
    momentum: float = 0.9
    weight_decay: float = 5e-4
    eps: float = 1e-8
    schedule: str = "cosine"
    milestones: list = field(default_factory=list)
    warmup_epochs: int = 0
    label_smoothing: float = 0.0
    decay_all: bool = False
    nesterov: bool = False
    lr_decay: float = 0.1
    _positive: ClassVar[tuple[str, ...]] = ("epochs", "batch_size", "eps")
    _non_negative: ClassVar[tuple[str, ...]] = ("lr", "weight_decay", "warmup_epochs", "label_smoothing")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.optimizer not in OPTIMIZERS:
            raise unknown_name("optimizer", self.optimizer, OPTIMIZERS)
        if self.schedule not in SCHEDULES:
            raise unknown_name("schedule", self.schedule, SCHEDULES)
        if self.schedule == "multistep" and not self.milestones:
            raise InvalidInputError("A multistep schedule needs milestones (epochs), e.g. Optim(milestones=[25, 50]).")
        if any(isinstance(m, bool) or not isinstance(m, int) or not 0 < m < self.epochs for m in self.milestones):
            raise InvalidInputError(
                f"Optim milestones must be epochs between 1 and {self.epochs - 1}, got {self.milestones}."
            )
        if not 0 < self.lr_decay <= 1:
            raise InvalidInputError(f"Optim lr_decay (the learning-rate factor at each step) must be in (0, 1], "
                                    f"got {self.lr_decay}.")
        if self.lr_decay != 0.1 and self.schedule not in ("step", "multistep"):
            raise InvalidInputError(f"Optim lr_decay applies to the step and multistep schedules only, not to "
                                    f"{self.schedule!r}.")
        if self.nesterov and (self.optimizer != "sgd" or self.momentum <= 0):
            raise InvalidInputError(f"Nesterov momentum needs optimizer 'sgd' with momentum > 0, got "
                                    f"{self.optimizer!r} with momentum {self.momentum}.")


@dataclass(frozen=True)
class Seeds(_Part):
    """Three independent seeds: ``init`` (weights), ``order`` (data order, augmentation, dropout) and
    ``subset`` (which images a ``DataSpec.subset`` keeps)."""

    init: int = 0
    order: int = 0
    subset: int = 0

    @classmethod
    def of(cls, seed: int, *, subset: int = 0) -> Seeds:
        """Initialisation and data order from one seed; the subset seed apart (default 0)."""
        return cls(init=seed, order=seed, subset=subset)


# ---- methods ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Supervised(_Part):
    """Cross-entropy on the labels (or the model's own ``training_loss``, e.g. Packed-Ensembles)."""

    kind: ClassVar[str] = "supervised"


@dataclass(frozen=True)
class Distill(_Part):
    """Knowledge distillation from ``teacher`` (a recipe, stored as its dict): ``soft`` (KL to the
    teacher's tempered probabilities, weight ``alpha``) or ``hard`` (the teacher's argmax labels)."""

    teacher: dict = field(default_factory=dict)
    mode: str = "soft"
    temperature: float = 4.0
    alpha: float = 0.9
    kind: ClassVar[str] = "distill"
    _positive: ClassVar[tuple[str, ...]] = ("temperature",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.teacher:
            raise InvalidInputError("Distill needs a teacher recipe: Distill(teacher=Recipe.make(...)).")
        if self.mode not in ("soft", "hard"):
            raise unknown_name("distillation mode", self.mode, ("soft", "hard"))


@dataclass(frozen=True)
class Pretrain(_Part):
    """Pre-train the backbone on ``dataset`` (``None`` = the recipe's own training images) with
    ``objective`` ``supervised`` or ``simclr`` for ``epochs`` (learning rate ``lr``; 0 = the recipe's),
    then train on the recipe's data with the recipe's :class:`Optim`: ``head="probe"`` fits a linear
    probe on the frozen backbone, ``head="finetune"`` trains the whole network end to end from the
    pre-trained weights and a fresh classifier (training-methods' BiT, SimCLR fine-tuned). The backbone
    is seeded with ``seed`` (-1 = the recipe's init seed): recipes with the same pre-training share one
    cached backbone, whatever their ``head`` and head seed.

    ``source_size`` is the number of source images pre-trained on: 0 (the default) draws as many as the
    recipe's training subset (an equal image budget); ``n`` draws ``n`` (every image when the source has
    fewer), so a source can be *larger* than the downstream set, as JFT is for ImageNet.
    """

    dataset: str | None = None
    objective: str = "supervised"
    epochs: int = 1
    lr: float = 0.0
    seed: int = -1
    head: str = "probe"
    source_size: int = 0
    kind: ClassVar[str] = "pretrain"
    _positive: ClassVar[tuple[str, ...]] = ("epochs",)
    _non_negative: ClassVar[tuple[str, ...]] = ("source_size",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.objective not in ("supervised", "simclr"):
            raise unknown_name("pre-training objective", self.objective, ("supervised", "simclr"))
        if self.head not in PRETRAIN_HEADS:
            raise unknown_name("head after pre-training", self.head, PRETRAIN_HEADS)
        if self.objective == "supervised" and not self.dataset:
            raise InvalidInputError(
                "Supervised pre-training needs a source: Pretrain(dataset='pretrain/shapes', epochs=...)."
            )


@dataclass(frozen=True)
class Joint(_Part):
    """``members`` copies of the architecture (initialised from ``Seeds.init`` + member index) trained
    together on one loss of :mod:`ensdiv.losses` (``loss``, weight ``lam``, extra ``options``) applied
    to their stacked ``(M, B, C)`` logits."""

    members: int = 3
    loss: str = "independent"
    lam: float = 0.0
    options: dict = field(default_factory=dict)
    kind: ClassVar[str] = "joint"
    _positive: ClassVar[tuple[str, ...]] = ("members",)


@dataclass(frozen=True)
class Heads(_Part):
    """``members`` classifier heads trained on the cached penultimate features of the frozen
    ``backbone`` recipe (its own head's weights as every member's start, as SED's members start from
    one pretrained model), jointly under ``loss`` / ``lam`` of :mod:`ensdiv.losses`."""

    backbone: dict = field(default_factory=dict)
    members: int = 1
    loss: str = "independent"
    lam: float = 0.0
    options: dict = field(default_factory=dict)
    #: the number of members trained on each batch (SED's stochastic subset I; 0 = all); the others get no update
    subset: int = 0
    #: the cut point of the frozen backbone, ``head`` (the classifier on the penultimate features) or, for
    #: a ViT, ``block`` (the last block's MLP + final norm + classifier on the cached class token)
    cut: str = "head"
    #: unlabeled OOD set fed after each labelled batch to the losses of ``ensdiv.losses.UNLABELED_LOSSES``
    ood_set: str = ""
    #: augmented passes of the training images (``DataSpec.augment``) cached next to the clean features
    feature_passes: int = 0
    #: how each head starts: ``copy`` — the backbone's own last layer(s) (SED's members start from one
    #: pretrained model); ``seed`` — that layout re-initialised at random from the recipe's initialisation seed
    #: (a deep ensemble whose seeds control the initial weights, SED §4.1)
    init: str = "copy"
    #: the seed of the augmented feature passes (``feature_passes``); None: the recipe's data-order seed. Recipes
    #: that give one seed share one cached pass: a deep ensemble of one-head recipes then trains every member on
    #: the same augmented images, as a joint M-head recipe of that seed does, instead of one pass per member
    pass_seed: int | None = None
    kind: ClassVar[str] = "heads"
    _positive: ClassVar[tuple[str, ...]] = ("members",)
    _non_negative: ClassVar[tuple[str, ...]] = ("subset", "feature_passes")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.backbone:
            raise InvalidInputError("Heads needs a backbone recipe: Heads(backbone=Recipe.make(...)).")
        if self.cut not in HEAD_CUTS:
            raise unknown_name("Heads cut point", self.cut, HEAD_CUTS)
        if self.init not in HEAD_INITS:
            raise unknown_name("Heads init", self.init, HEAD_INITS)
        if self.pass_seed is not None and self.pass_seed < 0:
            raise InvalidInputError(f"Heads field 'pass_seed' must be None or zero or positive, got {self.pass_seed}.")


METHODS: dict[str, type] = {m.kind: m for m in (Supervised, Distill, Pretrain, Joint, Heads)}
Method = Supervised | Distill | Pretrain | Joint | Heads

# flat names accepted by Recipe.make / Recipe.replace -> (part, field)
_FLAT = {
    "model": ("model", "name"),
    "model_kwargs": ("model", "kwargs"),
    "dropout": ("model", "dropout"),
    "pretrained": ("model", "pretrained"),
    "dataset": ("data", "dataset"),
    "train_subset": ("data", "subset"),
    "augment": ("data", "augment"),
    "crop_pad": ("data", "crop_pad"),
    **{f.name: ("optim", f.name) for f in fields(Optim)},
    "init_seed": ("seeds", "init"),
    "order_seed": ("seeds", "order"),
    "subset_seed": ("seeds", "subset"),
}


@dataclass(frozen=True, eq=True)
class Recipe:
    """Everything that decides one trained model (see the module docstring).

    Attributes:
        model: the :class:`Arch`.
        data: the :class:`DataSpec`.
        optim: the :class:`Optim`.
        seeds: the :class:`Seeds`.
        method: one of :class:`Supervised`, :class:`Distill`, :class:`Pretrain`, :class:`Joint`,
            :class:`Heads`.
        name: a free label (not part of the cache key).
    """

    model: Arch = field(default_factory=Arch)
    data: DataSpec = field(default_factory=DataSpec)
    optim: Optim = field(default_factory=Optim)
    seeds: Seeds = field(default_factory=Seeds)
    method: Method = field(default_factory=Supervised)
    name: str = ""

    def __post_init__(self) -> None:
        for attr, cls in (("model", Arch), ("data", DataSpec), ("optim", Optim), ("seeds", Seeds)):
            if not isinstance(getattr(self, attr), cls):
                raise InvalidInputError(
                    f"Recipe.{attr} must be an ed.{cls.__name__}, got a {type(getattr(self, attr)).__name__}; "
                    "use Recipe.make(...) for flat field names."
                )
        if not isinstance(self.method, tuple(METHODS.values())):
            raise InvalidInputError(
                f"Recipe.method must be one of {', '.join(c.__name__ for c in METHODS.values())}, got a "
                f"{type(self.method).__name__}."
            )
        if not isinstance(self.name, str):
            raise InvalidInputError(f"Recipe.name must be a str, got a {type(self.name).__name__}.")

    # ---- construction ------------------------------------------------------------------------------
    @classmethod
    def make(cls, **flat: Any) -> Recipe:
        """A recipe from flat names (``model``, ``epochs``, ``lr``, ``seed``, ...) over the defaults."""
        return cls().replace(**flat)

    def replace(self, **changes: Any) -> Recipe:
        """A copy with some parts or flat fields changed.

        Accepts the parts (``model=Arch(...)``, ``method=Joint(...)``), ``name``, the flat names of
        the parts' fields (``model`` as a string is the architecture name, ``train_subset``,
        ``model_kwargs``, every :class:`Optim` field, ``init_seed`` / ``order_seed`` / ``subset_seed``)
        and ``seed`` (initialisation and data order together).
        """
        top: dict[str, Any] = {}
        parts: dict[str, dict[str, Any]] = {}
        for key, value in changes.items():
            if key == "seed":
                parts.setdefault("seeds", {}).update(init=value, order=value)
            elif key == "model" and isinstance(value, str):
                parts.setdefault("model", {})["name"] = value
            elif key in ("model", "data", "optim", "seeds", "method", "name"):
                top[key] = value
            elif key in _FLAT:
                part, name = _FLAT[key]
                parts.setdefault(part, {})[name] = value
            else:
                raise unknown_name("Recipe field", key, [*_FLAT, "seed", "method", "name"])
        for part, values in parts.items():
            top[part] = (top.get(part) or getattr(self, part)).replace(**values)
        return dataclasses.replace(self, **top)

    # ---- conversion --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """All parts as plain dicts (JSON/YAML-safe); the method carries its ``kind``."""
        return {
            "model": self.model.to_dict(),
            "data": self.data.to_dict(),
            "optim": self.optim.to_dict(),
            "seeds": self.seeds.to_dict(),
            "method": {"kind": self.method.kind, **self.method.to_dict()},
            "name": self.name,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recipe:
        """Inverse of :meth:`to_dict`; unknown keys raise :class:`UnknownNameError`."""
        if not isinstance(data, dict):
            raise InvalidInputError(f"Recipe.from_dict needs a dict, got a {type(data).__name__}.")
        parts = {"model": Arch, "data": DataSpec, "optim": Optim, "seeds": Seeds}
        for key in data:
            if key not in (*parts, "method", "name"):
                raise unknown_name("Recipe part", key, [*parts, "method", "name"])
        kwargs: dict[str, Any] = {"name": data.get("name", "")}
        for key, part in parts.items():
            kwargs[key] = _part_from_dict(part, data.get(key, {}))
        method = dict(data.get("method") or {"kind": "supervised"})
        kind = method.pop("kind", "supervised")
        if kind not in METHODS:
            raise unknown_name("training method", kind, METHODS)
        kwargs["method"] = _part_from_dict(METHODS[kind], method)
        return cls(**kwargs)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str) -> Recipe:
        return cls.from_dict(yaml.safe_load(text))

    def key(self) -> dict[str, Any]:
        """The cache key: every part except the free ``name`` label (also inside a teacher or
        backbone recipe)."""
        d = self.to_dict()
        d.pop("name")
        for inner in ("teacher", "backbone"):
            if d["method"].get(inner):
                d["method"][inner] = Recipe.from_dict(d["method"][inner]).key()
        return d

    def __hash__(self) -> int:  # the parts hold dicts: hash the canonical form, so recipes can key dicts
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    # ---- shorthands ----------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        return self.name or f"{self.model.name}-s{self.seeds.init}"

    @property
    def teacher(self) -> Recipe | None:
        """The teacher recipe of a :class:`Distill` method (else ``None``)."""
        return Recipe.from_dict(self.method.teacher) if isinstance(self.method, Distill) else None

    @property
    def backbone(self) -> Recipe | None:
        """The backbone recipe of a :class:`Heads` method (else ``None``)."""
        return Recipe.from_dict(self.method.backbone) if isinstance(self.method, Heads) else None


def _part_from_dict(cls: type, data: dict[str, Any]) -> Any:
    if not isinstance(data, dict):
        raise InvalidInputError(f"{cls.__name__} needs a dict, got a {type(data).__name__}.")
    names = {f.name for f in fields(cls)}
    for key in data:
        if key not in names:
            raise unknown_name(f"{cls.__name__} field", key, names)
    return cls(**data)


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


def check_recipe(recipe: Any) -> Recipe:
    """``recipe`` if it is a :class:`Recipe`, else one sentence saying what was passed."""
    if not isinstance(recipe, Recipe):
        raise EnsdivError(f"Expected an ed.Recipe, got a {type(recipe).__name__}.")
    return recipe
