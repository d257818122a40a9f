"""The training engine: one loop on Lightning Fabric for CPU, one GPU (mixed precision) and DDP.

``fit`` trains a given model on an in-memory :class:`~ensdiv.data.TensorSet` with an
:class:`~ensdiv.train.Optim`; :mod:`ensdiv.train.build` turns a recipe into a trained, cached model,
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

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ensdiv.data.registry import TensorSet
from ensdiv.errors import EnsdivError
from ensdiv.progress import bar as progress_bar
from ensdiv.train.augment import BatchAugment
from ensdiv.train.engine import LossFn, derive_seed, lr_factor, make_fabric, make_optimizer, seed_everything
from ensdiv.train.recipes import Optim

__all__ = ["fit", "cpu_state"]


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
    optim: Optim,
    *,
    seed: int = 0,
    augment: str = "none",
    crop_pad: int = 2,
    channels_last: bool = False,
    loss_fn: LossFn | None = None,
    accelerator: str = "auto",
    precision: str | None = None,
    progress: bool = True,
    desc: str | None = None,
    resume: dict | None = None,
    on_epoch_end: Callable[[int, dict], None] | None = None,
    stop_after: int | None = None,
) -> nn.Module:
    """Train ``model`` on ``train_set`` with the optimisation settings ``optim`` (Lightning Fabric loop).

    Args:
        model: any ``nn.Module`` mapping (B, C, H, W) images to (B, K) logits, or defining
            ``training_loss(x, y)``.
        train_set: in-memory training set.
        optim: epochs, batch, optimiser, learning rate and schedule, weight decay, label smoothing
            (:class:`~ensdiv.train.Optim`).
        seed: the data-order seed: data order, augmentation and dropout (not the initialisation:
            seed before creating the model, as :func:`ensdiv.train_recipe` does with ``Seeds.init``).
        augment: ``+``-joined augmentations (see :class:`~ensdiv.train.DataSpec`).
        crop_pad: zero padding of the random crop.
        channels_last: train in the channels-last memory format (the model is handed back in the default
            format). ``benchmarks/bench_train.py`` measures it 1.2-1.9x faster for most convolutional models
            on CPU but not reliably for the base ResNet yet, so it is off by default; results differ from
            the default format only by floating-point rounding.
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
    n = len(train_set)
    if n == 0:
        raise EnsdivError(f"Cannot train on the empty dataset {train_set.name!r}.")
    _check_shapes(model, train_set)
    fabric = make_fabric(accelerator, precision)
    world, rank = fabric.world_size, fabric.global_rank
    epochs, lr, batch_size = optim.epochs, optim.lr, optim.batch_size
    if batch_size % world:
        raise EnsdivError(f"batch_size {batch_size} must be a multiple of the {world} DDP processes.")
    num_classes = max(int(train_set.y.max()) + 1, train_set.num_classes)
    aug = BatchAugment(augment, num_classes=num_classes, label_smoothing=optim.label_smoothing, pad=crop_pad)
    loss_fn = loss_fn or _default_loss(aug, optim.label_smoothing)
    base = model
    if channels_last:
        base = base.to(memory_format=torch.channels_last)
    opt = make_optimizer(base, optim)
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
    bar = progress_bar(
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
            if channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            for group in opt.param_groups:
                group["lr"] = lr * lr_factor(
                    (epoch * steps + step) / total, schedule=optim.schedule, warmup=optim.warmup_epochs / epochs,
                    milestones=tuple(m / epochs for m in optim.milestones)
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
                    "model": cpu_state(base),
                    "optimizer": opt.state_dict(),
                    "loss": running / steps,
                },
            )
        done += 1
        if stop_after is not None and done >= stop_after and epoch + 1 < epochs:
            break
    bar.close()
    if channels_last:  # hand back the default format: a fresh and a reloaded model then compute alike
        base = base.to(memory_format=torch.contiguous_format)
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


def cpu_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}
