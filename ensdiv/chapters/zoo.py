"""The model zoo every chapter shares: the recipes each scale needs, built once into the cache.

``ZOO[scale]`` maps a key ``"<category>/<name>"`` to a :class:`~ensdiv.Recipe`. Categories follow
training-methods (Section 3): ``arch`` (one model per architecture family, also design-diversity's
heterogeneous zoo), ``reinit`` (seeds), ``hparam`` (learning rate, weight decay, dropout, label
smoothing, optimiser, augmentation), ``framework`` (SimCLR + linear probe, soft and hard
distillation) and ``dataset`` (pre-training on another source + linear probe); ``dd`` holds the
cpu-scale analogues of design-diversity's Table i (ResNeXt, MNASNet, SqueezeNet, NAS sub-networks,
DeiT, DINO models). The base model of the comparisons is ``arch/resnet``.

``zoo_build(scale)`` trains what is missing (overall tqdm bar with ETA weighted by each recipe's
cost) and caches test-set predictions; ``zoo_list(scale)`` reports what is cached.

cpu scale choices: every model sees a fixed 30,000-image subset of Fashion-MNIST train for 4 epochs
(120k images, batch 64). ``benchmarks/bench_zoo_recipes.py`` measured the base ResNet's test accuracy
over nine budgets (``results/zoo_recipes.json``): 85.0 % with the former 10k x 4, 87.8 % with 20k x 4,
89.4 % with 30k x 4 (the cheapest measured budget at >= 89 %), 90.4 % with 55k x 4; every architecture
gets the same data budget so that the heterogeneous comparisons stay fair. At that budget the same
script compared each SGD convnet's step and weight decay (rows ``30k-4-lr2-wd4``, ``30k-4-lr4``): lr 0.1
with weight decay 2e-3 (twice the step and four times the decay of the first recipe, lr 0.05 / 5e-4)
lifted six of the eight SGD families to >= 89 % (ResNet 89.4 -> 89.8, SmallCNN 88.3 -> 89.1, MobileNetV3
88.96 -> 90.05, EfficientNet 88.8 -> 89.7, MNASNet 88.9 -> 89.7, DenseNet 89.4 -> 89.7; ResNeXt 87.8 ->
88.8, SqueezeNet 87.6 -> 87.8), so it is the cpu base. The same change on the AdamW convnets (lr 4e-3,
wd 0.2) gave ConvMixer 87.4 -> 88.0 and ConvNeXt 85.6 -> 86.1: gains within the seed-to-seed spread of one
recipe (the ResNet and its three ``reinit/`` seeds span 0.4 points) and neither reaches 89 %, so the AdamW
recipe is kept. Architectures are sized to 0.2-5 M mult-adds per image (:mod:`ensdiv.models.cpu`); the
convnets use SGD (lr 0.1, weight decay 2e-3, cosine, horizontal flips), the transformers, mixers, ConvNeXt
and ConvMixer AdamW (lr 2e-3, wd 0.05, one warm-up epoch).
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable
from typing import Any

import pandas as pd
import torch

from ensdiv import Distill, Pretrain, Recipe, Store, cached_predictions, default_store, get_dataset
from ensdiv.config import dry_run
from ensdiv.data.glyphs import LETTERS_SIZE, SHAPES_LARGE_SIZE
from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.models import PAPER_MODELS
from ensdiv.store import config_key
from ensdiv.train import model_cache_config
from ensdiv.workers import build_many

__all__ = ["ZOO", "EVAL_SET", "zoo_recipes", "zoo_build", "zoo_list", "estimate_seconds", "images_seen",
           "category_of"]

_ADAMW = {"optimizer": "adamw", "lr": 2e-3, "weight_decay": 0.05, "warmup_epochs": 1}
_ADAMW_ARCHS = {"vit", "deit", "swin", "mixer", "convnext", "convmixer"}
ARCHS = [
    "mlp",
    "small_cnn",
    "squeezenet",
    "resnet",
    "resnext",
    "densenet",
    "mobilenetv3",
    "efficientnet",
    "mnasnet",
    "convnext",
    "convmixer",
    "vit",
    "deit",
    "swin",
    "mixer",
]
EVAL_SET = {"smoke": "fmnist/test", "cpu": "fmnist/test", "paper": "imagenet/val-5k"}


def _build_zoo(base: Recipe, name_of: Callable[[str], str], *, large_sources: bool = True) -> dict[str, Recipe]:
    """Every zoo entry over ``base``; ``name_of`` maps an architecture key to this scale's registered name;
    ``large_sources`` pre-trains the fine-tuned Dataset models on every image of the 52,000 letters and
    60,000 shapes (else on the base's image budget of the small glyph and shape sets)."""

    def arch(a: str) -> Recipe:
        return base.replace(model=name_of(a), **(_ADAMW if a in _ADAMW_ARCHS else {}))

    zoo: dict[str, Recipe] = {f"arch/{a}": arch(a) for a in ARCHS}
    res = zoo["arch/resnet"]
    # the initialisation alone differs (the data order is the base's), as the paper's Reinit; five, so that a
    # bootstrap over the category's models can decide (three gave a percentile interval that errs 2-3x too often)
    for s in (1, 2, 3, 4, 5):
        zoo[f"reinit/resnet-s{s}"] = res.replace(init_seed=s)
    hp = {
        "lr0.01": {"lr": 0.01},
        "lr0.2": {"lr": 0.2},
        "wd0": {"weight_decay": 0.0},
        "wd5e-3": {"weight_decay": 5e-3},
        "dropout0.3": {"dropout": 0.3},
        "ls0.1": {"label_smoothing": 0.1},
        "adamw": {"optimizer": "adamw", "lr": 2e-3, "weight_decay": 0.05},
        # at paper scale the base already flips and crops: mixup adds to that, and "flipcrop" would be the base
        # itself (a model compared with its own copy), so it is left out there
        "mixup": {"augment": "flipcrop+mixup" if res.data.augment == "flipcrop" else "flip+mixup"},
        "flipcrop": {"augment": "flipcrop"},
    }
    for k, v in hp.items():
        if res.replace(**v).key() != res.key():
            zoo[f"hparam/resnet-{k}"] = res.replace(**v)
    epochs = base.optim.epochs
    simclr = Pretrain(objective="simclr", epochs=epochs, lr=0.1)
    zoo["framework/resnet-simclr"] = res.replace(method=simclr, augment="none", lr=0.1)
    # the paper's kind of Framework model (§3.1: SimCLR fine-tuned, DeiT distilled from a CNN teacher): a ResNet
    # student keeps the architecture fixed; the teachers are other architectures, never the base itself
    zoo["framework/resnet-simclr-ft"] = res.replace(method=simclr.replace(head="finetune"))
    zoo["framework/resnet-distill"] = res.replace(method=Distill(teacher=zoo["arch/mobilenetv3"].to_dict()), seed=4)
    zoo["framework/resnet-distill-hard"] = res.replace(
        method=Distill(teacher=zoo["arch/efficientnet"].to_dict(), mode="hard"), seed=4
    )
    # design-diversity's distilled DeiT (its teacher is the base; training-methods leaves it out of Framework)
    zoo["framework/deit-distill-hard"] = zoo["arch/deit"].replace(
        method=Distill(teacher=res.to_dict(), mode="hard"), seed=4
    )
    # linear probes on small sources (kept for the chapters that use them; not the paper's kind of Dataset model)
    for src in ("shapes", "digits"):
        zoo[f"dataset/resnet-{src}"] = res.replace(
            method=Pretrain(dataset=f"pretrain/{src}", epochs=epochs * (1 if src == "shapes" else 3)), lr=0.1
        )
    # a real data source of another domain (typography; training-methods' analogue of JFT/CLIP data)
    glyphs = Pretrain(dataset="pretrain/glyphs", epochs=2 * epochs)
    zoo["dataset/resnet-glyphs"] = res.replace(method=glyphs, lr=0.1)
    # the paper's kind of Dataset model: pre-trained on a source larger than the base's training set, then
    # fine-tuned end to end like the base (BiT, ViT-21k); the contrastive one plays CLIP / ALIGN
    # (smoke: 5,200 letters and the 12,000 shapes, so that a test run renders no 52,000 letters)
    letters, shapes = ("pretrain/letters", "pretrain/shapes-large") if large_sources else ("pretrain/letters-small",
                                                                                          "pretrain/shapes")
    size = {"pretrain/letters": LETTERS_SIZE, "pretrain/shapes-large": SHAPES_LARGE_SIZE}

    def big(src: str, **kw: Any) -> Pretrain:
        return Pretrain(dataset=src, epochs=max(1, epochs // 2), head="finetune", source_size=size.get(src, 0), **kw)

    zoo["dataset/resnet-letters-ft"] = res.replace(method=big(letters))
    zoo["dataset/resnet-shapes-ft"] = res.replace(method=big(shapes))
    zoo["dataset/resnet-letters-simclr-ft"] = res.replace(method=big(letters, objective="simclr"))
    # design-diversity Table i analogues (names follow the paper's ids)
    rx = zoo["arch/resnext"]
    deit = zoo["arch/deit"]
    dd = {
        "ResNext50_32_2": rx.replace(
            model_kwargs={"cardinality": 8, "base_width": 4, "layers": [1, 1, 2, 1]}, dropout=0.2
        ),
        "ResNext50_32_4l": rx.replace(model_kwargs={"cardinality": 8, "base_width": 8}, dropout=0.2, seed=1),
        "ResNext50_16_4": rx.replace(
            model_kwargs={"cardinality": 4, "base_width": 8, "layers": [1, 1, 2, 1]}, dropout=0.2, seed=2
        ),
        "MNASNET_1": zoo["arch/mnasnet"].replace(dropout=0.2),
        "MNASNET_1p": zoo["arch/mnasnet"].replace(dropout=0.2, optimizer="rmsprop", lr=0.005, schedule="step"),
        "Squeezenet_512": zoo["arch/squeezenet"].replace(batch_size=512, lr=0.08),
        "Squeezenet": zoo["arch/squeezenet"],
        "bootstrapNAS-B_0": res.replace(model_kwargs={"channels": [16, 32, 48, 96]}, seed=5),
        "bootstrapNAS-B_1": res.replace(model_kwargs={"channels": [16, 24, 64, 96]}, seed=6),
        "deit_tiny_p16_224": deit.replace(seed=1),
        "dino_deit_tiny1": deit.replace(method=Pretrain(objective="simclr", epochs=epochs, seed=0), seed=0,
                                        augment="none"),
        "dino_deit_tiny2": deit.replace(method=Pretrain(objective="simclr", epochs=epochs, seed=7), seed=7,
                                        augment="none"),
        # one SimCLR backbone (that of framework/resnet-simclr), two probe seeds, like the paper's
        # dino_resnet1/2 (backboneSeed 7, classifierSeed 5 / 15)
        "dino_resnet1": zoo["framework/resnet-simclr"].replace(seed=5, method=simclr.replace(seed=0)),
        "dino_resnet2": zoo["framework/resnet-simclr"].replace(seed=15, method=simclr.replace(seed=0)),
    }
    if name_of("resnet") != "resnet":  # smoke and paper: other architectures, so drop the cpu-size options
        dd = {k: v.replace(model_kwargs={}) for k, v in dd.items()}
    for k, v in dd.items():
        zoo[f"dd/{k}"] = v
    return {k: v.replace(name=k) for k, v in zoo.items()}


_CPU_BASE = Recipe.make(
    model="resnet",
    epochs=4,
    batch_size=64,
    lr=0.1,
    optimizer="sgd",
    weight_decay=2e-3,
    schedule="cosine",
    augment="flip",
    train_subset=30000,
)
_SMOKE_BASE = _CPU_BASE.replace(epochs=1, train_subset=256, batch_size=64)
# Paper scale: design-diversity Table i / training-methods' ImageNet ResNet-50 setting
# (SGD 0.1, step schedule, 90-100 epochs), with the timm architecture each CPU model stands for.
_PAPER_BASE = Recipe.make(
    model="resnet50",
    dataset="imagenet/train",
    epochs=100,
    batch_size=256,
    lr=0.1,
    optimizer="sgd",
    weight_decay=1e-4,
    schedule="step",
    augment="flipcrop",
)

ZOO: dict[str, dict[str, Recipe]] = {
    "smoke": {
        k: v
        for k, v in _build_zoo(_SMOKE_BASE, lambda a: f"test_{a}", large_sources=False).items()
        if k.startswith(("arch/", "framework/", "dataset/"))
        or k in ("reinit/resnet-s1", "hparam/resnet-mixup")
    },
    "cpu": _build_zoo(_CPU_BASE, lambda a: a),
    "paper": _build_zoo(_PAPER_BASE, lambda a: PAPER_MODELS[a]),
}


def category_of(key: str) -> str:
    """``"hparam/resnet-lr0.01"`` -> ``"hparam"``."""
    return key.split("/", 1)[0]


#: what a dry run of the paper presets (:mod:`ensdiv.book.dry`) changes in every paper zoo recipe: sizes only
DRY_RECIPE_SIZES = {"epochs": 1, "batch_size": 8}


def zoo_recipes(scale: str = "cpu", only: str | list[str] | None = None) -> dict[str, Recipe]:
    """The zoo's recipes at ``scale``, optionally filtered by keys or glob patterns (``"arch/*"``)."""
    if scale not in ZOO:
        raise unknown_name("scale", scale, ZOO)
    zoo = ZOO[scale]
    if scale == "paper" and dry_run():  # a dry run (ensdiv run --dry-run): the paper recipes with a dry run's sizes
        zoo = {k: r.replace(**DRY_RECIPE_SIZES) for k, r in zoo.items()}
    if not only:  # None or an empty list (``ensdiv zoo build --only`` with no names): everything
        return dict(zoo)
    patterns = [only] if isinstance(only, str) else list(only)
    out = {}
    for pat in patterns:
        hits = [k for k in zoo if fnmatch.fnmatch(k, pat) or k == pat or k.startswith(pat.rstrip("/") + "/")]
        if not hits:
            raise unknown_name("zoo entry", pat, zoo)
        out.update({k: zoo[k] for k in hits})
    return out


_SOURCE_SIZE = {"pretrain/digits": 1797, "pretrain/shapes": 12000, "pretrain/glyphs": 12400,
                "pretrain/letters": LETTERS_SIZE, "pretrain/shapes-large": SHAPES_LARGE_SIZE, "fmnist/train": 55000}


def images_seen(r: Recipe, seen_backbones: set | None = None) -> int:
    """Training image-passes of a recipe (forward+backward), counting a shared pre-training once."""
    n = r.data.subset or _SOURCE_SIZE.get(r.data.dataset, 55000)
    epochs, method = r.optim.epochs, r.method
    if isinstance(method, Pretrain):
        src = method.dataset or r.data.dataset
        m = min(method.source_size or r.data.subset or 10**9, _SOURCE_SIZE.get(src, n))
        pre = method.epochs * m * (2 if method.objective == "simclr" else 1)
        backbone = (r.model.name, src, m, method.epochs, method.seed if method.seed >= 0 else r.seeds.init)
        if seen_backbones is not None:
            pre = 0 if backbone in seen_backbones else pre
            seen_backbones.add(backbone)
        if method.head == "finetune":
            return pre + epochs * n
        return pre + epochs * n // 20  # the linear probe runs on cached features: almost free
    teacher = epochs * n // 3 if isinstance(method, Distill) else 0  # teacher forward passes
    return epochs * n + teacher


def estimate_seconds(recipes: dict[str, Recipe], images_per_second: dict[str, float]) -> float:
    """Cold-build estimate: training image-passes of each recipe / its architecture's images/s, plus
    one forward pass over the 10,000 test images per model (a third of a training pass each)."""
    total, seen = 0.0, set()
    for r in recipes.values():
        work = images_seen(r, seen) + 10000 // 3
        total += work / max(images_per_second.get(r.model.name, 500.0), 1e-6)
    return total


def zoo_build(
    scale: str = "cpu",
    only: str | list[str] | None = None,
    *,
    store: Store | None = None,
    progress: bool = True,
    workers: int = 1,
    threads: int | None = None,
) -> pd.DataFrame:
    """Train (or load) every recipe of the zoo at ``scale`` and cache its test-set predictions.

    Args:
        scale: ``"smoke"``, ``"cpu"`` or ``"paper"``.
        only: keys or glob patterns (``"arch/*"``, ``["reinit", "hparam/resnet-lr0.2"]``); ``None`` = all.
        store: the cache (default store).
        progress: print one line per finished model (key, seconds, models left).
        workers: training processes (:func:`ensdiv.workers.build_many`; 2 on two cores trains two
            small models at once, one thread each); 1 trains here, one model after the other.
        threads: torch threads per worker process (default 1 with several workers, else torch's default).

    Returns:
        One row per recipe, as :func:`zoo_list` returns them.
    """
    recipes = zoo_recipes(scale, only)
    store = store or default_store()
    by_label = {r.label: k for k, r in recipes.items()}
    left = [len(recipes)]
    t_start = time.perf_counter()

    def done(recipe: Recipe, seconds: float) -> None:
        left[0] -= 1
        if progress:
            print(f"zoo {scale}: {by_label.get(recipe.label, recipe.label):<28} {seconds:7.1f} s   "
                  f"({left[0]} left, {time.perf_counter() - t_start:.0f} s so far)", flush=True)

    if workers == 1 and threads:
        torch.set_num_threads(threads)
    build_many(list(recipes.values()), EVAL_SET[scale], workers=workers, threads=threads or 1, store=store,
               on_done=done)
    return zoo_list(scale, store=store, only=only)


def zoo_list(scale: str = "cpu", *, store: Store | None = None, only: str | list[str] | None = None):
    """What of the zoo is cached: key, category, model, trained?, test accuracy, params, size, training time.

    Returns:
        A pandas DataFrame, one row per recipe (nothing is trained).
    """
    store = store or default_store()
    recipes = zoo_recipes(scale, only)
    labels = None
    rows = []
    for key, r in recipes.items():
        mcfg = model_cache_config(r)
        path = store.path("model", config_key(mcfg))
        row: dict[str, Any] = {
            "key": key,
            "category": category_of(key),
            "model": r.model.name,
            "trained": path.exists(),
            "test_acc": None,
            "params": None,
            "size_mb": None,
            "train_time_s": None,
        }
        if path.exists():
            payload = store.load("model", mcfg, compute=False)
            if payload is not None:
                row.update(
                    params=int(payload["meta"]["num_params"]),
                    size_mb=path.stat().st_size / 2**20,
                    train_time_s=float(payload["meta"]["train_time_s"]),
                )
        logits = cached_predictions(r, EVAL_SET[scale], store=store)
        if logits is not None:
            if labels is None:
                labels = get_dataset(EVAL_SET[scale]).y
            row["test_acc"] = float((logits.argmax(-1) == labels).float().mean())
        rows.append(row)
    if not rows:
        raise EnsdivError(f"The {scale} zoo has no recipes matching {only!r}.")
    return pd.DataFrame(rows)
