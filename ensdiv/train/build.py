"""From a recipe to a trained model: build it, train it once, cache it, resume it.

``train_recipe(recipe)`` returns the cached model of a :class:`~ensdiv.train.Recipe` or trains it
(supervised, distilled, pre-trained + probed, a jointly trained ensemble, or heads over a frozen
backbone) and caches it in :mod:`ensdiv.store`; supervised and jointly trained models write a
checkpoint per finished epoch, so an interrupted run resumes where it stopped. With
``on_diverge="stop"`` a run whose loss becomes non-finite is a result: the weights of its last
finished epoch are cached as its model, with the :class:`~ensdiv.train.loop.FitReport` in its meta.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn as nn

from ensdiv.data.paper.stream import is_stream_set
from ensdiv.data.registry import TensorSet, get_dataset
from ensdiv.errors import EnsdivError, InvalidInputError
from ensdiv.models.registry import create_model
from ensdiv.models.stack import BackboneWithHeads, HeadStack
from ensdiv.progress import line
from ensdiv.store import Store, config_key, default_store
from ensdiv.train.batches import LoaderBatches
from ensdiv.train.engine import derive_seed
from ensdiv.train.frameworks import build_joint, distillation_loss, joint_loss, pretrain_and_probe, train_heads
from ensdiv.train.keys import model_cache_config
from ensdiv.train.loop import ON_DIVERGE, cpu_state, fit
from ensdiv.train.recipes import Distill, Heads, Joint, Pretrain, Recipe
from ensdiv.train.stream import (
    STREAM_SHAPE,
    is_stream_recipe,
    stream_training_batches,
    stream_training_files,
    train_stream_heads,
)

__all__ = ["train_recipe", "build_model", "load_training_set", "training_data", "training_images", "model_cache_config"]

# Architectures trained in the channels-last memory format: those that benchmarks/bench_train.py
# (results/train.json, engine_channels_last_ratio) measured at least 1.3x faster on the 2-core CPU. The
# base ResNet (0.88-1.19x across runs), ConvNeXt (1.0x) and the small CNN (1.2x) stay in the default
# format; transformers and MLPs have no 4-d activations to reorder. The Packed-Ensembles chapter's models at
# Table 1's batch (64) on two threads, as the chapter trains them (``bench_train.py --packed``, two runs on
# 26 Nov 2026, results/train.json): the single model 1.65-1.66x, PE 1.25-1.35x, BatchEnsemble 1.41-1.47x,
# Masksembles 1.38-1.58x, all four in; MIMO 1.11-1.19x stays. Results differ from the default format only by
# floating-point rounding, so the choice is not part of a model's cache key.
CHANNELS_LAST_ARCHS = frozenset({"squeezenet", "resnext", "densenet", "mobilenetv3", "efficientnet", "mnasnet",
                                 "convmixer", "single_small", "packed_small", "batchensemble_small",
                                 "masksembles_small"})


def load_training_set(recipe: Recipe) -> TensorSet:
    """The training set of ``recipe``: its registered set, subset to ``data.subset`` with ``seeds.subset``."""
    return get_dataset(recipe.data.dataset).subset(recipe.data.subset, seed=recipe.seeds.subset)


def training_data(recipe: Recipe) -> tuple[TensorSet | LoaderBatches, dict[str, int]]:
    """Where the training batches of ``recipe`` come from, and the shape its model is built with: the one place
    that decides it for every recipe that trains a whole model (``ed.train_recipe``, and a chapter that trains
    further, such as design-diversity's super-network).

    A registered in-memory set: its :class:`~ensdiv.data.TensorSet` (:func:`load_training_set`) and the shape
    read from it. A stream set (image folders too large for memory, such as ``imagenet/train``): a
    :class:`~ensdiv.train.batches.LoaderBatches` reading its files through the model's own timm training
    transform (:func:`ensdiv.train.stream.stream_training_batches`), and :data:`~ensdiv.train.stream.STREAM_SHAPE`.
    Either goes to :func:`ensdiv.train.fit` unchanged.

    Raises:
        DataNotFoundError: the set or its folder is missing.
    """
    if is_stream_set(recipe.data.dataset):
        shape = dict(STREAM_SHAPE)
        return stream_training_batches(recipe, build_model(recipe, **shape), stream_training_files(recipe)), shape
    data = load_training_set(recipe)
    return data, _shape_of(data)


def training_images(data: TensorSet | LoaderBatches, idx: Sequence[int] | torch.Tensor) -> torch.Tensor:
    """The images ``idx`` of a training source as one tensor (N, C, H, W), as training sees them (a stream set's
    through its training transform: one random-resized crop each); e.g. batch-norm recalibration."""
    if isinstance(data, TensorSet):
        return data.x[torch.as_tensor(idx, dtype=torch.long)]
    if isinstance(data, LoaderBatches):
        return torch.stack([data.dataset[int(i)][0] for i in idx])
    raise EnsdivError(f"training_images reads a TensorSet or a LoaderBatches, got a {type(data).__name__}.")


def build_model(recipe: Recipe, *, num_classes: int, in_chans: int, img_size: int, init_seed: int | None = None
                ) -> nn.Module:
    """The freshly initialised model of ``recipe`` (initialisation seeded by ``init_seed``, default
    ``recipe.seeds.init``)."""
    kwargs = dict(recipe.model.kwargs)
    if recipe.model.dropout > 0:
        kwargs["drop_rate"] = recipe.model.dropout
    seed = recipe.seeds.init if init_seed is None else init_seed
    torch.manual_seed(derive_seed(seed, 7))
    return create_model(
        recipe.model.name,
        num_classes=num_classes,
        in_chans=in_chans,
        img_size=img_size,
        pretrained=recipe.model.pretrained,
        **kwargs,
    )


def _empty_model(recipe: Recipe, shape: dict[str, int], store: Store) -> nn.Module:
    """A model shaped like the cached one of ``recipe`` (its weights are loaded afterwards)."""
    method = recipe.method
    if isinstance(method, Joint):
        return build_joint(recipe, build_model, **shape)
    if isinstance(method, Heads):
        backbone = train_recipe(recipe.backbone, store=store, progress=False)
        clf = backbone.get_classifier()
        clf = clf[0] if isinstance(clf, tuple | list) else clf
        heads = HeadStack([nn.Linear(clf.in_features, clf.out_features) for _ in range(method.members)],
                          loss_fn=joint_loss(method, recipe.optim))
        return BackboneWithHeads(backbone, heads)
    return build_model(recipe, **shape)


def _shape_of(data: TensorSet) -> dict[str, int]:
    return {
        "num_classes": max(data.num_classes, int(data.y.max()) + 1),
        "in_chans": int(data.x.shape[1]),
        "img_size": int(data.x.shape[-1]),
    }


def train_recipe(
    recipe: Recipe,
    *,
    store: Store | None = None,
    progress: bool = True,
    accelerator: str = "auto",
    precision: str | None = None,
    retrain: bool = False,
    stop_after: int | None = None,
    on_diverge: str = "raise",
) -> nn.Module:
    """The trained model of ``recipe``: loaded from the cache, or trained (resuming from the last
    finished epoch's checkpoint) and cached.

    Args:
        recipe: what to train (:class:`~ensdiv.Recipe`).
        store: the cache (default :func:`ensdiv.store.default_store`).
        progress: tqdm bar while training.
        accelerator, precision: see :func:`ensdiv.train.engine.make_fabric`.
        retrain: ignore a cached final model (checkpoints are still used).
        stop_after: train at most this many epochs in this call, leaving checkpoints (tests).
        on_diverge: ``"raise"`` (default) or ``"stop"``, as in :func:`ensdiv.train.fit`, for supervised,
            distilled and jointly trained recipes (pre-training and heads always raise). With ``"stop"`` a
            diverged run is cached like a finished one (its model: the weights of its last finished epoch);
            loading such an entry with ``"raise"`` raises, naming the step.

    Returns:
        The model in eval mode on CPU (a :class:`~ensdiv.models.MemberStack` or
        :class:`~ensdiv.models.BackboneWithHeads` returning ``(M, B, C)`` for joint and heads recipes);
        ``model.ensdiv_meta`` holds ``train_time_s``, ``num_params`` and ``train_size``, and for the
        recipes that ``on_diverge`` applies to, ``fit``: :meth:`FitReport.to_dict` of the training, its
        ``history`` covering every epoch (resumed ones included). Entries cached before this field
        existed have no ``fit``.
    """
    if not isinstance(recipe, Recipe):
        raise EnsdivError(f"train_recipe needs an ed.Recipe, got a {type(recipe).__name__}.")
    if on_diverge not in ON_DIVERGE:
        raise InvalidInputError(f"on_diverge must be 'raise' or 'stop', got {on_diverge!r}.")
    store = store or default_store()
    if is_stream_recipe(recipe):  # heads on an image-folder set too large for memory (ImageNet)
        return train_stream_heads(recipe, store=store, progress=progress, accelerator=accelerator,
                                  precision=precision)
    cfg = model_cache_config(recipe)
    if retrain:
        store.begin("model", cfg)  # record what trains it, as a miss does
    payload = None if retrain else store.load("model", cfg)
    if payload is None:  # train it, holding the entry's lock (another process training it: wait, then load)
        with store.computing("model", cfg, reload=not retrain) as payload:
            if payload is None:
                return _train_and_save(recipe, cfg, store, progress=progress, accelerator=accelerator,
                                       precision=precision, stop_after=stop_after, on_diverge=on_diverge)
    # loaded, or saved by another process while this one waited
    report = payload["meta"].get("fit") or {}
    if report.get("status") == "diverged" and on_diverge == "raise":
        raise EnsdivError(
            f"The cached run of {recipe.label!r} diverged (non-finite {report['cause']}) at step "
            f"{report['diverged_step']}, epoch {report['diverged_epoch']}; "
            "train_recipe(..., on_diverge='stop') returns its last finished epoch."
        )
    model = _empty_model(recipe, payload["shape"], store)
    model.load_state_dict(payload["state_dict"])
    model.ensdiv_meta = dict(payload["meta"])
    return model.eval()


def _train_and_save(recipe: Recipe, cfg: dict, store: Store, *, progress: bool, accelerator: str,
                    precision: str | None, stop_after: int | None, on_diverge: str) -> nn.Module:
    """Train ``recipe`` (its entry's lock held by the caller) and cache it: the miss branch of
    :func:`train_recipe`."""
    method = recipe.method
    if is_stream_set(recipe.data.dataset) and isinstance(method, Pretrain):
        raise InvalidInputError(
            f"{recipe.label!r}: pre-training and probing reads its set into memory; {recipe.data.dataset!r} "
            "is read from image folders, which only supervised, distilled and jointly trained recipes do.")
    data, shape = training_data(recipe)
    run = dict(progress=progress, accelerator=accelerator, precision=precision)
    t0 = time.perf_counter()
    report: dict | None = None  # the fit report of the recipes on_diverge applies to
    if isinstance(method, Pretrain):
        model = pretrain_and_probe(recipe, data, shape, build_model, store=store, **run)
    elif isinstance(method, Heads):
        backbone_recipe = recipe.backbone
        backbone = train_recipe(backbone_recipe, store=store, **run)
        heads = train_heads(recipe, backbone, data, store=store, backbone_key=model_cache_config(backbone_recipe),
                            **run)
        model = BackboneWithHeads(backbone, heads).eval()
    else:
        if isinstance(method, Joint):
            model: nn.Module = build_joint(recipe, build_model, **shape)
            loss_fn = None  # the MemberStack's training_loss carries the ensemble loss
        else:
            model = build_model(recipe, **shape)
            loss_fn = None
        if isinstance(method, Distill):
            teacher = train_recipe(recipe.teacher, store=store, **run)
            loss_fn = distillation_loss(teacher, recipe)
        done, t0, report = _fit_with_checkpoints(recipe, model, data, cfg, store, loss_fn, t0, stop_after, run,
                                                 on_diverge)
        if not done:
            return model
    meta = {
        "train_time_s": time.perf_counter() - t0,
        "num_params": sum(p.numel() for p in model.parameters()),
        "train_size": len(data),
    }
    if report is not None:
        meta["fit"] = report
    if int(os.environ.get("RANK", "0")) == 0:
        store.save("model", cfg, {"state_dict": cpu_state(model), "shape": shape, "meta": meta})
    if report is not None and report["status"] == "diverged":
        line(f"{recipe.label} diverged at step {report['diverged_step']} (epoch {report['diverged_epoch']}); "
             f"kept epoch {report['epochs_done']}")
    else:
        line(f"trained {recipe.label} in {meta['train_time_s']:.1f} s ({meta['train_size']} images)")
    model.ensdiv_meta = meta
    return model.eval()


def _fit_with_checkpoints(recipe: Recipe, model: nn.Module, data: TensorSet | LoaderBatches, cfg: dict,
                          store: Store, loss_fn: Any, t0: float, stop_after: int | None, run: dict,
                          on_diverge: str = "raise") -> tuple[bool, float, dict]:
    """Train with one checkpoint per finished epoch (only the last kept); resume from the newest.

    Returns whether training ended (``False`` when ``stop_after`` interrupted it; a diverged run has
    ended), the start time shifted back by the time of interrupted runs, and the fit report as a dict
    whose ``history`` holds every finished epoch's loss (checkpoints carry the history of their run).
    """
    epochs = recipe.optim.epochs
    ckpt = lambda e: {**cfg, "epoch": e}  # noqa: E731
    resume = None
    for e in range(epochs - 1, 0, -1):
        resume = store.load("checkpoint", ckpt(e))
        if resume is not None:
            break
    rank = int(os.environ.get("RANK", "0"))
    t0 -= float(resume.get("elapsed_s", 0.0)) if resume else 0.0  # time of interrupted runs
    history = [float(v) for v in resume.get("history", [])] if resume else []

    def save_ckpt(epoch: int, state: dict) -> None:
        history.append(float(state["loss"]))
        if rank == 0 and epoch < epochs:
            store.save("checkpoint", ckpt(epoch),
                       {**state, "elapsed_s": time.perf_counter() - t0, "history": list(history)})
            if epoch > 1:  # keep only the last finished epoch
                store.path("checkpoint", config_key(ckpt(epoch - 1))).unlink(missing_ok=True)

    fit(model, data, recipe.optim, seed=recipe.seeds.order, augment=recipe.data.augment,
        crop_pad=recipe.data.crop_pad, loss_fn=loss_fn, channels_last=recipe.model.name in CHANNELS_LAST_ARCHS,
        desc=recipe.label, resume=resume, on_epoch_end=save_ckpt, stop_after=stop_after, on_diverge=on_diverge,
        **run)
    report = {**model.ensdiv_fit.to_dict(), "history": list(history)}
    if report["status"] == "interrupted":
        return False, t0, report
    if rank == 0:
        last = report["epochs_done"] if report["status"] == "diverged" else epochs - 1
        if last > 0:
            store.path("checkpoint", config_key(ckpt(last))).unlink(missing_ok=True)
    return True, t0, report

