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

cpu scale choices (the goal is the whole zoo in <= 25 min on 2 uncontended cores): every model sees
a fixed 10,000-image subset of Fashion-MNIST train for 4 epochs (40k images, batch 64); architectures
are sized to 0.2-5 M mult-adds per image (:mod:`ensdiv.models.zoo_cpu`), convnets use SGD (lr 0.05, cosine,
horizontal flips), transformers/mixers AdamW (lr 2e-3, wd 0.05, one warm-up epoch).
"""

from __future__ import annotations

import fnmatch
import time
from typing import Any

import torch

from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.recipes import Recipe
from ensdiv.store import Store, config_key, default_store

__all__ = ["ZOO", "EVAL_SET", "zoo_recipes", "zoo_build", "zoo_list", "estimate_seconds", "category_of"]

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


def _arch(base: Recipe, model: str) -> Recipe:
    arch = model.removeprefix("test_")
    return base.replace(model=model, **(_ADAMW if arch in _ADAMW_ARCHS else {}))


def _build_zoo(base: Recipe, prefix: str = "") -> dict[str, Recipe]:
    p = prefix
    zoo: dict[str, Recipe] = {}
    for a in ARCHS:
        zoo[f"arch/{a}"] = _arch(base, p + a)
    res = zoo["arch/resnet"]
    for s in (1, 2, 3):
        zoo[f"reinit/resnet-s{s}"] = res.replace(seed=s)
    hp = {
        "lr0.01": {"lr": 0.01},
        "lr0.2": {"lr": 0.2},
        "wd0": {"weight_decay": 0.0},
        "wd5e-3": {"weight_decay": 5e-3},
        "dropout0.3": {"dropout": 0.3},
        "ls0.1": {"label_smoothing": 0.1},
        "adamw": {"optimizer": "adamw", "lr": 2e-3, "weight_decay": 0.05},
        "mixup": {"augment": "flip+mixup"},
        "flipcrop": {"augment": "flipcrop"},
    }
    for k, v in hp.items():
        zoo[f"hparam/resnet-{k}"] = res.replace(**v)
    zoo["framework/resnet-simclr"] = res.replace(
        framework="simclr", pretrain_epochs=base.epochs, pretrain_lr=0.1, augment="none", lr=0.1
    )
    zoo["framework/resnet-distill"] = res.replace(framework="distill", teacher=zoo["arch/convnext"], seed=4)
    zoo["framework/deit-distill-hard"] = zoo["arch/deit"].replace(
        framework="distill", distill="hard", teacher=res, seed=4
    )
    for src in ("shapes", "digits"):
        zoo[f"dataset/resnet-{src}"] = res.replace(
            framework="pretrain",
            pretrain_dataset=f"pretrain/{src}",
            pretrain_epochs=base.epochs * (1 if src == "shapes" else 3),
            lr=0.1,
        )
    # design-diversity Table i analogues (names follow the paper's ids)
    rx = zoo["arch/resnext"]
    dd = {
        "ResNext50_32_2": rx.replace(
            model_kwargs={"cardinality": 8, "base_width": 4, "layers": [1, 1, 2, 1]}, dropout=0.2
        ),
        "ResNext50_32_4l": rx.replace(model_kwargs={"cardinality": 8, "base_width": 8}, dropout=0.2, seed=1),
        "ResNext50_16_4": rx.replace(
            model_kwargs={"cardinality": 4, "base_width": 8, "layers": [1, 1, 2, 1]}, dropout=0.2, seed=2
        ),
        "MNASNET_1": zoo["arch/mnasnet"].replace(dropout=0.2),
        "MNASNET_1p": zoo["arch/mnasnet"].replace(
            dropout=0.2, optimizer="rmsprop", lr=0.005, schedule="step"
        ),
        "Squeezenet_512": zoo["arch/squeezenet"].replace(batch_size=512, lr=0.08),
        "Squeezenet": zoo["arch/squeezenet"],
        "bootstrapNAS-B_0": res.replace(model_kwargs={"channels": [16, 32, 48, 96]}, seed=5),
        "bootstrapNAS-B_1": res.replace(model_kwargs={"channels": [16, 24, 64, 96]}, seed=6),
        "deit_tiny_p16_224": zoo["arch/deit"].replace(seed=1),
        "dino_deit_tiny1": zoo["arch/deit"].replace(
            framework="simclr", pretrain_epochs=base.epochs, seed=0, pretrain_seed=0, augment="none"
        ),
        "dino_deit_tiny2": zoo["arch/deit"].replace(
            framework="simclr", pretrain_epochs=base.epochs, seed=7, pretrain_seed=7, augment="none"
        ),
        # one SimCLR backbone (that of framework/resnet-simclr), two probe seeds, like the paper's
        # dino_resnet1/2 (backboneSeed 7, classifierSeed 5 / 15)
        "dino_resnet1": zoo["framework/resnet-simclr"].replace(seed=5, pretrain_seed=0),
        "dino_resnet2": zoo["framework/resnet-simclr"].replace(seed=15, pretrain_seed=0),
    }
    if p:  # smoke: tiny variants, so replace architecture options the tiny models do not take
        dd = {k: v.replace(model_kwargs={}) for k, v in dd.items()}
    for k, v in dd.items():
        zoo[f"dd/{k}"] = v
    return {k: v.replace(name=k) for k, v in zoo.items()}


_CPU_BASE = Recipe(
    model="resnet",
    epochs=4,
    batch_size=64,
    lr=0.05,
    optimizer="sgd",
    weight_decay=5e-4,
    schedule="cosine",
    augment="flip",
    train_subset=10000,
)
_SMOKE_BASE = _CPU_BASE.replace(epochs=1, train_subset=256, batch_size=64)
# Paper scale: design-diversity Table i / training-methods' ImageNet ResNet-50 setting
# (SGD 0.1, step schedule, 90-100 epochs).
_PAPER_BASE = Recipe(
    model="resnet",
    scale="paper",
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
        for k, v in _build_zoo(_SMOKE_BASE, prefix="test_").items()
        if k.startswith(("arch/", "framework/", "dataset/"))
        or k in ("reinit/resnet-s1", "hparam/resnet-mixup")
    },
    "cpu": _build_zoo(_CPU_BASE),
    "paper": {k: v.replace(model_kwargs={}) for k, v in _build_zoo(_PAPER_BASE).items()},
}


def category_of(key: str) -> str:
    """``"hparam/resnet-lr0.01"`` -> ``"hparam"``."""
    return key.split("/", 1)[0]


def zoo_recipes(scale: str = "cpu", only: str | list[str] | None = None) -> dict[str, Recipe]:
    """The zoo's recipes at ``scale``, optionally filtered by keys or glob patterns (``"arch/*"``)."""
    if scale not in ZOO:
        raise unknown_name("scale", scale, ZOO)
    zoo = ZOO[scale]
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


_SOURCE_SIZE = {"pretrain/digits": 1797, "pretrain/shapes": 12000, "fmnist/train": 55000}


def _images_seen(r: Recipe, seen_backbones: set | None = None) -> int:
    """Training image-passes of a recipe (forward+backward), counting a shared pre-training once."""
    n = r.train_subset or _SOURCE_SIZE.get(r.dataset, 55000)
    pre = 0
    if r.framework in ("simclr", "pretrain"):
        src = r.pretrain_dataset or r.dataset
        m = min(r.train_subset or 10**9, _SOURCE_SIZE.get(src, n))
        pre = r.pretrain_epochs * m * (2 if r.framework == "simclr" else 1)
        backbone = (r.model, src, r.pretrain_epochs, r.pretrain_seed if r.pretrain_seed >= 0 else r.seed)
        if seen_backbones is not None:
            pre = 0 if backbone in seen_backbones else pre
            seen_backbones.add(backbone)
        return pre + r.epochs * n // 20  # the linear probe runs on cached features: almost free
    teacher = r.epochs * n // 3 if r.framework == "distill" else 0  # teacher forward passes
    return r.epochs * n + teacher


def estimate_seconds(recipes: dict[str, Recipe], images_per_second: dict[str, float]) -> float:
    """Cold-build estimate: training image-passes of each recipe / its architecture's images/s, plus
    one forward pass over the 10,000 test images per model (a third of a training pass each)."""
    total, seen = 0.0, set()
    for r in recipes.values():
        work = _images_seen(r, seen) + 10000 // 3
        total += work / max(images_per_second.get(r.model, 500.0), 1e-6)
    return total


def zoo_build(
    scale: str = "cpu",
    only: str | list[str] | None = None,
    *,
    store: Store | None = None,
    progress: bool = True,
    threads: int | None = None,
) -> list[dict[str, Any]]:
    """Train (or load) every recipe of the zoo at ``scale`` and cache its test-set predictions.

    Args:
        scale: ``"smoke"``, ``"cpu"`` or ``"paper"``.
        only: keys or glob patterns (``"arch/*"``, ``["reinit", "hparam/resnet-lr0.2"]``); ``None`` = all.
        store: the cache (default store).
        progress: overall tqdm bar (weighted by training cost, with ETA) plus each model's bar.
        threads: ``torch.set_num_threads`` for the build (``None`` keeps torch's default).

    Returns:
        One row per recipe, as :func:`zoo_list` returns them.
    """
    from tqdm.auto import tqdm

    from ensdiv.predict import predict
    from ensdiv.train import train_recipe

    recipes = zoo_recipes(scale, only)
    store = store or default_store()
    if threads:
        torch.set_num_threads(threads)
    costs = {k: _images_seen(r) for k, r in recipes.items()}
    bar = tqdm(
        total=sum(costs.values()), desc=f"zoo {scale}", unit="img", unit_scale=True, disable=not progress
    )
    for key, r in recipes.items():
        bar.set_postfix_str(key)
        t0 = time.perf_counter()
        train_recipe(r, store=store, progress=progress)
        predict(r, EVAL_SET[scale], store=store)
        bar.update(costs[key])
        if time.perf_counter() - t0 > 1:
            bar.refresh()
    bar.close()
    return zoo_list(scale, store=store, only=only)


def zoo_list(scale: str = "cpu", *, store: Store | None = None, only: str | list[str] | None = None):
    """What of the zoo is cached: key, category, model, trained?, test accuracy, params, size, training time.

    Returns:
        A pandas DataFrame, one row per recipe (nothing is trained).
    """
    import pandas as pd

    from ensdiv.data.registry import get_dataset
    from ensdiv.predict import PREDICT_VERSION
    from ensdiv.train import model_cache_config

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
            "model": r.model,
            "trained": path.exists(),
            "test_acc": None,
            "params": None,
            "size_mb": None,
            "train_time_s": None,
        }
        if path.exists():
            payload = store.load("model", mcfg)
            if payload is not None:
                row.update(
                    params=int(payload["meta"]["num_params"]),
                    size_mb=path.stat().st_size / 2**20,
                    train_time_s=float(payload["meta"]["train_time_s"]),
                )
        pcfg = {"version": PREDICT_VERSION, "model": mcfg, "dataset": EVAL_SET[scale], "features": False}
        if store.path("predictions", config_key(pcfg)).exists():
            out = store.load("predictions", pcfg)
            if out is not None:
                if labels is None:
                    labels = get_dataset(EVAL_SET[scale]).y
                logits = out["logits"]
                row["test_acc"] = float((logits.argmax(-1) == labels).float().mean())
        rows.append(row)
    if not rows:
        raise EnsdivError(f"The {scale} zoo has no recipes matching {only!r}.")
    return pd.DataFrame(rows)
