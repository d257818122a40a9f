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

Divergence: a non-finite loss raises by default (``on_diverge="raise"``); with ``on_diverge="stop"``
training stops there and the model gets back the weights of its last finished epoch. Either way the
returned model carries a :class:`FitReport` as ``model.ensdiv_fit`` (how the call ended).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ensdiv.data.registry import TensorSet
from ensdiv.errors import EnsdivError, InvalidInputError
from ensdiv.progress import bar as progress_bar
from ensdiv.train.augment import BatchAugment
from ensdiv.train.batches import LoaderBatches, MemoryBatches, as_batches
from ensdiv.train.engine import LossFn, derive_seed, lr_factor, make_fabric, make_optimizer, seed_everything
from ensdiv.train.recipes import Optim

__all__ = ["fit", "cpu_state", "FitReport", "ON_DIVERGE"]

#: what :func:`fit` does at the first non-finite loss
ON_DIVERGE = ("raise", "stop")


@dataclass(frozen=True)
class FitReport:
    """How one call of :func:`fit` ended; set on the returned model as ``model.ensdiv_fit``.

    Losses are those of this process (under DDP each rank reports the loss of its share of the batch).
    """

    #: ``"finished"`` (every epoch), ``"interrupted"`` (``stop_after``) or ``"diverged"`` (``on_diverge="stop"``)
    status: str
    #: epochs finished, resumed ones included: the epoch whose weights the model holds
    epochs_done: int
    #: mean training loss of each epoch finished in this call
    history: tuple[float, ...] = ()
    #: 1-based epoch of the non-finite loss (``None`` unless diverged)
    diverged_epoch: int | None = None
    #: 1-based global optimisation step of the non-finite loss, counted from the run's first epoch (resumed
    #: epochs included); ``None`` unless diverged
    diverged_step: int | None = None
    #: the loss of the last step whose loss was finite (``None`` before any)
    last_finite_loss: float | None = None
    #: ``"loss"`` (a non-finite loss) or ``"weights"`` (finite losses that left non-finite weights, found at
    #: the end of the epoch; ``diverged_step`` is then that epoch's last step); ``None`` unless diverged
    cause: str | None = None

    def to_dict(self) -> dict:
        """Plain types only (storable with ``torch.save(..., weights_only=True)``)."""
        d = asdict(self)
        d["history"] = list(self.history)
        return d


def _finite_state(state: dict[str, torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point())


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
    train_set: TensorSet | LoaderBatches,
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
    on_diverge: str = "raise",
) -> nn.Module:
    """Train ``model`` on ``train_set`` with the optimisation settings ``optim`` (Lightning Fabric loop).

    Args:
        model: any ``nn.Module`` mapping (B, C, H, W) images to (B, K) logits, or defining
            ``training_loss(x, y)``.
        train_set: an in-memory training set, or a :class:`~ensdiv.train.batches.LoaderBatches` reading
            image files (ImageNet-layout folders) through worker processes; the same loop trains on both.
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
        on_diverge: what a non-finite loss does: ``"raise"`` an :class:`~ensdiv.errors.EnsdivError` naming
            the epoch (default), or ``"stop"``: training ends before that step's backward pass and the model
            gets back the weights and buffers of its **last finished epoch** (the starting weights when it
            diverged in its first epoch of this call); ``model.ensdiv_fit`` then says ``"diverged"``, with the
            epoch, the global step and the last finite loss. With ``"stop"`` the weights are also checked
            at the end of every epoch: non-finite weights after finite losses end the run the same way
            (``cause="weights"``), so the weights handed back are always finite (given finite starting
            weights), and ``on_epoch_end`` is never called with non-finite weights. Under DDP every rank
            learns of a non-finite loss on any rank (one all-reduce of a flag per step), so all ranks stop
            (or raise) at the same step.

    Returns:
        The trained model (the module passed in), in eval mode, on CPU, with ``model.ensdiv_fit`` a
        :class:`FitReport`.
    """
    if on_diverge not in ON_DIVERGE:
        raise InvalidInputError(f"on_diverge must be 'raise' or 'stop', got {on_diverge!r}.")
    source = as_batches(train_set)
    n = len(source)
    if n == 0:
        raise EnsdivError(f"Cannot train on the empty dataset {source.name!r}.")
    _check_shapes(model, source)
    fabric = make_fabric(accelerator, precision)
    world, rank = fabric.world_size, fabric.global_rank
    epochs, lr, batch_size = optim.epochs, optim.lr, optim.batch_size
    if batch_size % world:
        raise EnsdivError(f"batch_size {batch_size} must be a multiple of the {world} DDP processes.")
    aug = BatchAugment(augment, num_classes=source.num_classes, label_smoothing=optim.label_smoothing, pad=crop_pad)
    # a model's own training_loss runs under the precision's autocast: Fabric routes a marked method through
    # forward (and its autocast) only when a strategy wraps the module (DDP), so in one process it would
    # otherwise train in float32 under "bf16-mixed" (benchmarks/bench_gpu.py found it: 2.7x the memory)
    own_loss = loss_fn is None and hasattr(model, "training_loss")
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
    pinned = fabric.device.type == "cuda"
    done = 0
    stop = on_diverge == "stop"
    good = cpu_state(base) if stop else None  # the weights of the last finished epoch
    history: list[float] = []
    last_finite: float | None = None
    diverged: dict | None = None
    for epoch in range(start, epochs):
        gen = torch.Generator().manual_seed(derive_seed(seed, epoch, rank, 1))
        seed_everything(derive_seed(seed, epoch, rank, 2))
        wrapped.train()
        running = 0.0
        batches = source.epoch(seed=seed, epoch=epoch, global_batch=gb, steps=steps, rank=rank, world=world,
                               aug=aug, gen=gen)
        for step, (x, y) in enumerate(batches):
            if pinned and not x.is_pinned():  # page-locked: copied while the GPU still runs the last update
                x, y = x.pin_memory(), y.pin_memory()
            x, y = x.to(fabric.device, non_blocking=True), y.to(fabric.device, non_blocking=True)
            if channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            for group in opt.param_groups:
                group["lr"] = lr * lr_factor(
                    (epoch * steps + step) / total, schedule=optim.schedule, warmup=optim.warmup_epochs / epochs,
                    milestones=tuple(m / epochs for m in optim.milestones), decay=optim.lr_decay
                )
            opt.zero_grad(set_to_none=True)
            with fabric.autocast() if own_loss else contextlib.nullcontext():
                loss = loss_fn(wrapped, x, y)
            finite, value = _read_loss(fabric, loss, world)
            if not finite:
                if not stop:
                    raise EnsdivError(
                        f"Training diverged (loss {value}) at epoch {epoch + 1}; "
                        f"lower the learning rate {lr}."
                    )
                diverged = {"diverged_epoch": epoch + 1, "diverged_step": epoch * steps + step + 1, "cause": "loss"}
                break
            fabric.backward(loss)
            opt.step()
            last_finite = value
            running += last_finite
            bar.update(1)
            if step % 20 == 0:
                bar.set_postfix(epoch=epoch + 1, loss=f"{running / (step + 1):.3f}", refresh=False)
        if diverged is not None:
            break
        state = cpu_state(base) if stop or on_epoch_end is not None else None
        if stop and not _finite_state(state):
            diverged = {"diverged_epoch": epoch + 1, "diverged_step": (epoch + 1) * steps, "cause": "weights"}
            break
        good = state if stop else None
        history.append(running / steps)
        if on_epoch_end is not None:
            on_epoch_end(
                epoch + 1,
                {
                    "epoch": epoch + 1,
                    "model": state,
                    "optimizer": opt.state_dict(),
                    "loss": running / steps,
                },
            )
        done += 1
        if stop_after is not None and done >= stop_after and epoch + 1 < epochs:
            break
    bar.close()
    if diverged is not None:
        base.load_state_dict(good)
        report = FitReport("diverged", start + done, tuple(history), last_finite_loss=last_finite, **diverged)
    else:
        report = FitReport("finished" if start + done == epochs else "interrupted", start + done, tuple(history),
                           last_finite_loss=last_finite)
    if channels_last:  # hand back the default format: a fresh and a reloaded model then compute alike
        base = base.to(memory_format=torch.contiguous_format)
    base.to("cpu").eval()
    base.ensdiv_fit = report
    return base


def _read_loss(fabric, loss: torch.Tensor, world: int) -> tuple[bool, float]:
    """``(finite on every rank, this rank's loss)``, read in one device-to-host transfer.

    This is the step's one synchronisation, taken before the backward pass is queued (one all-reduce of
    a flag under DDP): reading the loss after ``opt.step()`` instead would make the host wait for the
    whole update before it prepares the next batch (``benchmarks/bench_gpu.py`` measured that wait).
    """
    value = loss.detach().float().reshape(())
    bad = (~torch.isfinite(value)).float()
    if world > 1:
        bad = fabric.all_reduce(bad, reduce_op="sum")
    read, flag = torch.stack([value, bad.reshape(())]).tolist()
    return flag == 0, read


@torch.no_grad()
def _check_shapes(model: nn.Module, source: MemoryBatches | LoaderBatches) -> None:
    """One-sentence errors for a model whose input channels or classes do not fit the set of ``source``."""
    x, _ = source.sample(2)
    first = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    if first is not None and first.in_channels != x.shape[1]:
        raise EnsdivError(
            f"The model takes {first.in_channels}-channel images but {source.name!r} has {x.shape[1]} "
            f"channels; create it with in_chans={x.shape[1]}."
        )
    was_training = model.training
    model.eval()
    try:
        out = model(x)
    except RuntimeError as exc:
        raise EnsdivError(
            f"The model cannot take {source.name!r} images shaped {tuple(x.shape[1:])} ({exc}); "
            "create it with matching in_chans and img_size."
        ) from None
    finally:
        model.train(was_training)
    out = out[0] if isinstance(out, tuple | list) else out
    n_cls = source.max_label + 1
    if out.shape[-1] < n_cls:
        raise EnsdivError(
            f"The model outputs {out.shape[-1]} classes but {source.name!r} has labels up to {n_cls - 1}; "
            f"create it with num_classes={n_cls}."
        )


def cpu_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}
