"""The training engine: one loop on Lightning Fabric for CPU, one GPU (mixed precision) and DDP.

``fit`` trains a given model on an in-memory :class:`~ensdiv.data.TensorSet`; ``train_recipe`` builds
the model of a :class:`~ensdiv.recipes.Recipe`, trains it once and caches it in :mod:`ensdiv.store`,
with a checkpoint per finished epoch so an interrupted run resumes where it stopped.

Determinism: the data order of epoch ``e`` is a permutation drawn from a generator seeded with
``(seed, e)``, and the augmentation / dropout generators are re-seeded from ``(seed, e, rank)`` at the
start of every epoch, so the same seed gives the same weights, and a resumed run gives the same
weights as an uninterrupted one (on the same machine and device).

DDP: under ``torchrun --nproc_per_node=K`` (or any launcher setting ``LOCAL_RANK``/``WORLD_SIZE``) the
engine uses Fabric's ``ddp`` strategy; each global batch is split over the ranks and gradients are
averaged, so K ranks see the same samples per step as one process with the same ``batch_size``.

A model that defines ``training_loss(self, x, y) -> Tensor`` (Packed-Ensembles, BatchEnsemble,
MIMO, ...) gets that called instead of cross-entropy.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from ensdiv.augment import BatchAugment
from ensdiv.data.registry import TensorSet
from ensdiv.engine import LossFn, derive_seed, lr_factor, make_fabric, make_optimizer, seed_everything
from ensdiv.errors import EnsdivError
from ensdiv.recipes import Recipe
from ensdiv.store import Store

__all__ = [
    "fit",
    "train_recipe",
    "build_model",
    "load_training_set",
    "model_cache_config",
    "make_fabric",
    "make_optimizer",
    "lr_factor",
    "derive_seed",
    "seed_everything",
]


def _default_loss(aug: BatchAugment, label_smoothing: float) -> LossFn:
    def loss(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if hasattr(model, "training_loss"):
            return model.training_loss(x, target)
        out = model(x)
        if aug.soft_targets:
            return torch.sum(-target * F.log_softmax(out.float(), dim=-1), dim=-1).mean()
        return F.cross_entropy(out.float(), target, label_smoothing=label_smoothing)

    return loss


def fit(
    model: nn.Module,
    train_set: TensorSet,
    *,
    epochs: int,
    lr: float,
    seed: int = 0,
    batch_size: int = 128,
    optimizer: str = "sgd",
    momentum: float = 0.9,
    weight_decay: float = 5e-4,
    schedule: str = "cosine",
    warmup_epochs: int = 0,
    label_smoothing: float = 0.0,
    augment: str = "none",
    loss_fn: LossFn | None = None,
    accelerator: str = "auto",
    precision: str | None = None,
    progress: bool = True,
    desc: str | None = None,
    resume: dict | None = None,
    on_epoch_end: Callable[[int, dict], None] | None = None,
    stop_after: int | None = None,
) -> nn.Module:
    """Train ``model`` on ``train_set`` (mini-batch SGD-family loop on Lightning Fabric).

    Args:
        model: any ``nn.Module`` mapping (B, C, H, W) images to (B, K) logits, or defining
            ``training_loss(x, y)``.
        train_set: in-memory training set.
        epochs: number of passes over ``train_set``.
        lr: peak learning rate (see :func:`lr_factor` for the schedule).
        seed: seeds data order, augmentation and dropout (not the initialisation: seed before
            creating the model, as :func:`ensdiv.train_recipe` does).
        batch_size: global batch size (split over DDP ranks; the last incomplete batch is dropped).
        optimizer: ``sgd``, ``adamw``, ``rmsprop`` or ``adabelief``.
        momentum, weight_decay, schedule, warmup_epochs, label_smoothing, augment: as in
            :class:`~ensdiv.Recipe`.
        loss_fn: ``loss_fn(model, x, target) -> loss`` replacing the default (cross-entropy, or the
            model's ``training_loss``).
        accelerator, precision: see :func:`make_fabric`.
        progress: show a tqdm bar (rank 0 only).
        desc: label of the bar.
        resume: ``{"epoch": e, "model": state_dict, "optimizer": state_dict}`` of a finished epoch
            to continue from.
        on_epoch_end: called as ``on_epoch_end(epoch, state)`` after each epoch on every rank, with
            ``state`` like ``resume`` (used for per-epoch checkpoints).
        stop_after: stop after this many epochs of this call (simulates an interruption in tests).

    Returns:
        The trained model (the module passed in), in eval mode, on CPU.
    """
    from tqdm.auto import tqdm

    n = len(train_set)
    if n == 0:
        raise EnsdivError(f"Cannot train on the empty dataset {train_set.name!r}.")
    _check_shapes(model, train_set)
    fabric = make_fabric(accelerator, precision)
    world, rank = fabric.world_size, fabric.global_rank
    if batch_size % world:
        raise EnsdivError(f"batch_size {batch_size} must be a multiple of the {world} DDP processes.")
    num_classes = max(int(train_set.y.max()) + 1, train_set.num_classes)
    aug = BatchAugment(augment, num_classes=num_classes, label_smoothing=label_smoothing)
    loss_fn = loss_fn or _default_loss(aug, label_smoothing)
    base = model
    opt = make_optimizer(base, optimizer, lr=lr, weight_decay=weight_decay, momentum=momentum)
    start = 0
    if resume is not None:
        base.load_state_dict(resume["model"])
        opt.load_state_dict(resume["optimizer"])
        start = int(resume["epoch"])
    wrapped, opt = fabric.setup(base, opt)
    for state in opt.state.values():  # resumed optimiser state follows the parameters' device
        for k, v in state.items():
            if isinstance(v, torch.Tensor):
                state[k] = v.to(fabric.device)
    if hasattr(base, "training_loss") and hasattr(wrapped, "mark_forward_method"):
        wrapped.mark_forward_method("training_loss")
    gb = min(batch_size, n - n % world) if n >= world else n
    steps = max(n // gb, 1)
    total = epochs * steps
    bar = tqdm(
        total=total,
        initial=start * steps,
        desc=desc or type(base).__name__,
        leave=False,
        disable=not progress or rank != 0,
        mininterval=1.0,
    )
    x_all, y_all = train_set.x, train_set.y
    done = 0
    for epoch in range(start, epochs):
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(derive_seed(seed, epoch)))
        gen = torch.Generator().manual_seed(derive_seed(seed, epoch, rank, 1))
        seed_everything(derive_seed(seed, epoch, rank, 2))
        wrapped.train()
        running = 0.0
        for step in range(steps):
            idx = perm[step * gb : (step + 1) * gb][rank::world]
            x, y = aug(x_all[idx], y_all[idx], gen)
            x, y = x.to(fabric.device, non_blocking=True), y.to(fabric.device, non_blocking=True)
            for group in opt.param_groups:
                group["lr"] = lr * lr_factor(
                    (epoch * steps + step) / total, schedule=schedule, warmup=warmup_epochs / epochs
                )
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(wrapped, x, y)
            if not torch.isfinite(loss):
                raise EnsdivError(
                    f"Training diverged (loss {loss.item()}) at epoch {epoch + 1}; "
                    f"lower the learning rate {lr}."
                )
            fabric.backward(loss)
            opt.step()
            running += float(loss.detach())
            bar.update(1)
            if step % 20 == 0:
                bar.set_postfix(epoch=epoch + 1, loss=f"{running / (step + 1):.3f}", refresh=False)
        if on_epoch_end is not None:
            on_epoch_end(
                epoch + 1,
                {
                    "epoch": epoch + 1,
                    "model": _cpu_state(base),
                    "optimizer": opt.state_dict(),
                    "loss": running / steps,
                },
            )
        done += 1
        if stop_after is not None and done >= stop_after and epoch + 1 < epochs:
            break
    bar.close()
    base.to("cpu").eval()
    return base


@torch.no_grad()
def _check_shapes(model: nn.Module, data: TensorSet) -> None:
    """One-sentence errors for a model whose input channels or classes do not fit ``data``."""
    first = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    if first is not None and first.in_channels != data.x.shape[1]:
        raise EnsdivError(
            f"The model takes {first.in_channels}-channel images but {data.name!r} has {data.x.shape[1]} "
            f"channels; create it with in_chans={data.x.shape[1]}."
        )
    was_training = model.training
    model.eval()
    try:
        out = model(data.x[:2])
    except RuntimeError as exc:
        raise EnsdivError(
            f"The model cannot take {data.name!r} images shaped {tuple(data.x.shape[1:])} ({exc}); "
            "create it with matching in_chans and img_size."
        ) from None
    finally:
        model.train(was_training)
    out = out[0] if isinstance(out, tuple | list) else out
    n_cls = int(data.y.max()) + 1
    if out.shape[-1] < n_cls:
        raise EnsdivError(
            f"The model outputs {out.shape[-1]} classes but {data.name!r} has labels up to {n_cls - 1}; "
            f"create it with num_classes={n_cls}."
        )


def _cpu_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}


# ---------------------------------------------------------------------------------------------
# Recipes: build, train once, cache, resume
# ---------------------------------------------------------------------------------------------
TRAIN_VERSION = 1


def model_cache_config(recipe: Recipe) -> dict[str, Any]:
    """The store config of the trained model of ``recipe`` (also keys its predictions).

    Holds the engine version, the recipe's key and, when not 1, the registered model's code version.
    """
    cfg: dict[str, Any] = {"version": TRAIN_VERSION, "recipe": recipe.key()}
    if recipe.scale != "paper":
        from ensdiv.models import model_info

        try:
            version = model_info(recipe.model).version
        except KeyError:
            version = 1
        if version != 1:
            cfg["model_version"] = version
    return cfg


def load_training_set(recipe: Recipe) -> TensorSet:
    """The training set of ``recipe``: ``get_dataset(recipe.dataset)`` subset to ``train_subset``."""
    import ensdiv.sources  # noqa: F401 - registers the shapes/digits pre-training sources
    from ensdiv.data.registry import get_dataset

    return get_dataset(recipe.dataset).subset(recipe.train_subset, seed=recipe.subset_seed)


def build_model(recipe: Recipe, *, num_classes: int, in_chans: int, img_size: int) -> nn.Module:
    """The freshly initialised model of ``recipe`` (initialisation seeded by ``recipe.seed``)."""
    from ensdiv.models import create_model

    kwargs = dict(recipe.model_kwargs)
    if recipe.dropout > 0:
        kwargs["drop_rate"] = recipe.dropout
    torch.manual_seed(derive_seed(recipe.seed, 7))
    return create_model(
        recipe.model,
        num_classes=num_classes,
        in_chans=in_chans,
        img_size=img_size,
        scale=recipe.scale,
        pretrained=recipe.pretrained,
        **kwargs,
    )


def train_recipe(
    recipe: Recipe,
    *,
    store: Store | None = None,
    progress: bool = True,
    accelerator: str = "auto",
    precision: str | None = None,
    retrain: bool = False,
    stop_after: int | None = None,
) -> nn.Module:
    """The trained model of ``recipe``: loaded from the cache, or trained (resuming from the last
    finished epoch's checkpoint) and cached.

    Args:
        recipe: what to train (:class:`~ensdiv.Recipe`).
        store: the cache (default :func:`ensdiv.store.default_store`).
        progress: tqdm bar while training.
        accelerator, precision: see :func:`make_fabric`.
        retrain: ignore a cached final model (checkpoints are still used).
        stop_after: train at most this many epochs in this call, leaving checkpoints (tests).

    Returns:
        The model in eval mode on CPU; ``model.ensdiv_meta`` holds ``train_time_s`` and ``num_params``.
    """
    from ensdiv.store import config_key, default_store

    if not isinstance(recipe, Recipe):
        raise EnsdivError(f"train_recipe needs an ed.Recipe, got a {type(recipe).__name__}.")
    store = store or default_store()
    cfg = model_cache_config(recipe)
    payload = None if retrain else store.load("model", cfg)
    if payload is not None:
        model = build_model(recipe, **payload["shape"])
        model.load_state_dict(payload["state_dict"])
        model.ensdiv_meta = dict(payload["meta"])
        return model.eval()
    data = load_training_set(recipe)
    shape = {
        "num_classes": max(data.num_classes, int(data.y.max()) + 1),
        "in_chans": int(data.x.shape[1]),
        "img_size": int(data.x.shape[-1]),
    }
    t0 = time.perf_counter()
    if recipe.framework in ("simclr", "pretrain"):
        from ensdiv.frameworks import pretrain_and_probe

        model = pretrain_and_probe(
            recipe, data, shape, store=store, progress=progress, accelerator=accelerator, precision=precision
        )
    else:
        model = build_model(recipe, **shape)
        loss_fn = None
        if recipe.framework == "distill":
            from ensdiv.frameworks import distillation_loss

            teacher = train_recipe(
                Recipe.from_dict(recipe.teacher),
                store=store,
                progress=progress,
                accelerator=accelerator,
                precision=precision,
            )
            loss_fn = distillation_loss(teacher, recipe)
        ckpt = lambda e: {**cfg, "epoch": e}  # noqa: E731
        resume = None
        for e in range(recipe.epochs - 1, 0, -1):
            resume = store.load("checkpoint", ckpt(e))
            if resume is not None:
                break
        rank = int(os.environ.get("RANK", "0"))
        earlier_s = float(resume.get("elapsed_s", 0.0)) if resume else 0.0  # time of interrupted runs
        t0 -= earlier_s

        def save_ckpt(epoch: int, state: dict) -> None:
            if rank == 0 and epoch < recipe.epochs:
                store.save("checkpoint", ckpt(epoch), {**state, "elapsed_s": time.perf_counter() - t0})
                if epoch > 1:  # keep only the last finished epoch
                    store.path("checkpoint", config_key(ckpt(epoch - 1))).unlink(missing_ok=True)

        fit(
            model,
            data,
            epochs=recipe.epochs,
            lr=recipe.lr,
            seed=recipe.seed,
            batch_size=recipe.batch_size,
            optimizer=recipe.optimizer,
            momentum=recipe.momentum,
            weight_decay=recipe.weight_decay,
            schedule=recipe.schedule,
            warmup_epochs=recipe.warmup_epochs,
            label_smoothing=recipe.label_smoothing,
            augment=recipe.augment,
            loss_fn=loss_fn,
            accelerator=accelerator,
            precision=precision,
            progress=progress,
            desc=recipe.label,
            resume=resume,
            on_epoch_end=save_ckpt,
            stop_after=stop_after,
        )
        if stop_after is not None and (resume["epoch"] if resume else 0) + stop_after < recipe.epochs:
            return model
        if rank == 0:
            store.path("checkpoint", config_key(ckpt(recipe.epochs - 1))).unlink(missing_ok=True)
    meta = {
        "train_time_s": time.perf_counter() - t0,
        "num_params": sum(p.numel() for p in model.parameters()),
        "train_size": len(data),
    }
    if int(os.environ.get("RANK", "0")) == 0:
        store.save("model", cfg, {"state_dict": _cpu_state(model), "shape": shape, "meta": meta})
    model.ensdiv_meta = meta
    return model.eval()
