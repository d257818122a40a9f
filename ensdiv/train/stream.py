"""Heads over a frozen pretrained backbone on paper-scale sets read from folders (SED at ImageNet scale).

ImageNet does not fit in memory, so a :class:`~ensdiv.train.Heads` recipe whose ``DataSpec.dataset`` is a
stream set (:mod:`ensdiv.data.paper.stream`: ``"imagenet/train"``, ...) does not go through
:func:`ensdiv.train.load_training_set`: ``ed.train_recipe`` hands it to :func:`train_stream_heads`. The
backbone recipe must name a timm model with ``pretrained=True`` (weights from timm's local cache, never
downloaded); it is used as built (never trained), with 1000 ImageNet classes, and its data and optimisation
fields are ignored. Each set is read through the backbone's own evaluation transform (its timm data config) by
a DataLoader, and the cut features (:func:`ensdiv.models.stack.cut_features`) are computed batch by batch and
cached like the in-memory ones: kind ``"features"`` for training and OOD sets (``"sed-features"`` where the
SED chapter asks for evaluation sets), keyed by the backbone (recipe key, weights file name and size), the
cut, the set name, the subset and :func:`ensdiv.data.paper.stream.stream_fingerprint` (file list and
transform, not the folder's location). Sets larger than ``shard_size`` images are cached shard by shard while
they are computed, so an interrupted pass resumes at its last finished shard.

Not supported on stream sets: augmented feature passes (``Heads.feature_passes`` must be 0, as in the SED
paper preset) and an unlabeled OOD set that is not itself a stream set.
"""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Subset

from ensdiv import losses, tracing
from ensdiv.data.paper.common import loader_workers
from ensdiv.data.paper.imagenet import imagenet_wnids
from ensdiv.data.paper.stream import (
    is_stream_set,
    open_stream_set,
    stream_files,
    stream_fingerprint,
    transform_config,
)
from ensdiv.data.registry import subset_indices
from ensdiv.errors import InvalidInputError
from ensdiv.models.registry import create_model
from ensdiv.models.stack import BackboneWithHeads, HeadStack, cut_features
from ensdiv.progress import line
from ensdiv.store import Store, config_key, default_store
from ensdiv.train.batches import LoaderBatches, training_transform
from ensdiv.train.frameworks import fit_heads, joint_loss, make_heads
from ensdiv.train.keys import model_cache_config
from ensdiv.train.loop import cpu_state
from ensdiv.train.recipes import Heads, Recipe

__all__ = ["SHARD_SIZE", "STREAM_SHAPE", "PIXEL_RANGE", "is_stream_recipe", "stream_backbone", "backbone_data_config",
           "stream_features", "stream_model_config", "train_stream_heads", "stream_training_files",
           "stream_training_batches"]

#: images per cached shard of a streamed feature pass
SHARD_SIZE = 50_000
_BACKBONES: dict[str, tuple[nn.Module, dict[str, Any]]] = {}
_FINGERPRINTS: dict[str, str] = {}


def is_stream_recipe(recipe: Recipe) -> bool:
    """Whether ``recipe`` is a :class:`~ensdiv.train.Heads` recipe on a stream set (train with
    :func:`train_stream_heads`)."""
    return isinstance(recipe.method, Heads) and is_stream_set(recipe.data.dataset)


def stream_backbone(recipe: Recipe) -> tuple[nn.Module, dict[str, Any]]:
    """The frozen pretrained backbone of ``recipe`` (eval mode, on CPU, built once per process) and its cache
    key: the recipe's model key and the weights file's name and size.

    Raises:
        InvalidInputError: the recipe does not ask for pretrained weights.
        EnsdivError: the weights are not on this machine (the message says where to put them).
    """
    if not recipe.model.pretrained:
        raise InvalidInputError(
            f"Paper-scale sets are read through a pretrained timm backbone, got {recipe.model.name!r} without "
            "pretrained weights; use Recipe.make(model=<timm name>, pretrained=True).")
    cfg = model_cache_config(recipe, trained=False)  # used as built: its set's files do not key it
    memo = config_key(cfg)
    if memo not in _BACKBONES:
        with tracing.recording() as built:  # the code that builds it, for each computation it is handed to
            model = create_model(recipe.model.name, num_classes=1000, in_chans=3, img_size=224, pretrained=True,
                                 **recipe.model.kwargs)
            model.eval().requires_grad_(False)
        tracing.attach(model, built)
        file = Path(getattr(model, "ensdiv_weights", ""))
        weights = {"file": file.name, "bytes": file.stat().st_size if file.is_file() else 0}
        _BACKBONES[memo] = (model, {"model": cfg, "weights": weights})
    return _BACKBONES[memo]


def backbone_data_config(backbone: nn.Module) -> dict[str, Any]:
    """The timm data config of ``backbone`` (``timm.data.resolve_data_config``): its evaluation transform."""
    from timm.data import resolve_data_config

    return dict(resolve_data_config(model=backbone))


def _opened(name: str, backbone: nn.Module) -> tuple[Any, dict[str, Any], str]:
    """The stream set ``name`` opened with ``backbone``'s transform, that config and the set's fingerprint
    (computed once per process, set, folder and transform)."""
    dc = backbone_data_config(backbone)
    dataset = open_stream_set(name, data_config=dc)
    files = getattr(dataset, "files", [])
    memo = json.dumps([name, str(files[0]) if len(files) else "", len(dataset), transform_config(dc)])
    if memo not in _FINGERPRINTS:
        _FINGERPRINTS[memo] = stream_fingerprint(name, dataset, dc)
    return dataset, dc, _FINGERPRINTS[memo]


@torch.no_grad()
def _features_of(backbone: nn.Module, dataset: Any, cut: str, *, batch_size: int, num_workers: int | None,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    if num_workers is None:
        num_workers = loader_workers(len(dataset))
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=num_workers, pin_memory=device.type == "cuda")
    feats, labels = [], []
    backbone.to(device)
    try:
        for x, y in loader:
            feats.append(cut_features(backbone, x.to(device, non_blocking=True), cut).float().cpu())
            labels.append(torch.as_tensor(y, dtype=torch.long))
    finally:
        backbone.to("cpu")
    return torch.cat(feats), torch.cat(labels)


def stream_features(backbone: nn.Module, backbone_key: dict[str, Any], name: str, *, cut: str,
                    store: Store | None = None, kind: str = "features", subset: int = 0, subset_seed: int = 0,
                    batch_size: int = 256, num_workers: int | None = None, device: str | torch.device | None = None,
                    shard_size: int = SHARD_SIZE) -> dict[str, torch.Tensor]:
    """Cut features of the stream set ``name`` through ``backbone``, computed batch by batch and cached.

    Args:
        backbone, backbone_key: the frozen model and what identifies it (:func:`stream_backbone`).
        name: a stream set name (:mod:`ensdiv.data.paper.stream`), read with the backbone's eval transform.
        cut: the cut point (:func:`ensdiv.models.stack.cut_features`).
        store, kind: where to cache (default store; kind ``"features"``).
        subset, subset_seed: a seeded subset of ``subset`` images (0 = all), drawn like ``TensorSet.subset``.
        batch_size, num_workers, device: the DataLoader and where the backbone runs (default: CUDA if
            available); ``num_workers=None`` uses up to 8 worker processes for sets of 512 images or more.
        shard_size: images per shard cached while a large set is computed.

    Returns:
        ``features`` ``(N, D)`` float32, ``labels`` ``(N,)`` (1000-class indices; -1 for OOD sets),
        ``class_mask`` ``(K,)`` (the 1000-class indices of a class-subset set such as ImageNet-R; empty
        otherwise) and ``masked_labels`` ``(N,)`` (labels as positions in ``class_mask``; empty otherwise).
    """
    store = store or default_store()
    dataset, dc, fingerprint = _opened(name, backbone)
    idx = subset_indices(len(dataset), subset, seed=subset_seed).tolist()
    key = {"backbone": backbone_key, "set": name, "fingerprint": fingerprint,
           "transform": transform_config(dc), "cut": cut, "n": len(idx), "subset": subset,
           "subset_seed": subset_seed}
    out = store.load(kind, key)
    if out is not None:
        return out
    tracing.note_units(tracing.built_by(backbone))  # built before this miss: its code is in the record too
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    t0, parts = time.perf_counter(), []
    bounds = [(a, min(a + shard_size, len(idx))) for a in range(0, len(idx), shard_size)]
    for a, b in bounds:
        shard_key = {**key, "shard": [a, b]}
        part = store.load(kind, shard_key) if len(bounds) > 1 else None
        if part is None:
            part = _features_of(backbone, Subset(dataset, idx[a:b]), cut, batch_size=batch_size,
                                num_workers=num_workers, device=dev)
            if len(bounds) > 1:
                store.save(kind, shard_key, part)
        parts.append(part)
    mask = getattr(dataset, "class_mask", None)
    labels = torch.cat([p[1] for p in parts])
    out = {"features": torch.cat([p[0] for p in parts]), "labels": labels,
           "class_mask": torch.empty(0, dtype=torch.long) if mask is None else torch.as_tensor(mask).long(),
           "masked_labels": (torch.empty(0, dtype=torch.long) if mask is None
                             else dataset.masked_targets[torch.tensor(idx, dtype=torch.long)])}
    store.save(kind, key, out)
    for a, b in bounds if len(bounds) > 1 else []:
        store.path(kind, config_key({**key, "shard": [a, b]})).unlink(missing_ok=True)
    line(f"features of {name}: {len(idx)} images through the backbone in {time.perf_counter() - t0:.1f} s")
    return out


def _check(recipe: Recipe) -> Heads:
    method = recipe.method
    if not isinstance(method, Heads) or not is_stream_set(recipe.data.dataset):
        raise InvalidInputError(
            f"train_stream_heads needs a Heads recipe on a paper-scale stream set, got {recipe.label!r} on "
            f"{recipe.data.dataset!r}; train it with ed.train_recipe.")
    if method.feature_passes:
        raise InvalidInputError(
            f"Augmented feature passes are not supported on the paper-scale set {recipe.data.dataset!r} "
            f"(Heads.feature_passes={method.feature_passes}); use feature_passes=0, as the SED paper preset does.")
    if method.loss in losses.UNLABELED_LOSSES and not is_stream_set(method.ood_set):
        raise InvalidInputError(
            f"The loss {method.loss!r} on {recipe.data.dataset!r} needs a paper-scale stream set as its unlabeled "
            f"OOD set (Heads.ood_set, e.g. 'imagenet-r'), got {method.ood_set!r}.")
    return method


def _ood_set(recipe: Recipe) -> str:
    return recipe.method.ood_set if recipe.method.loss in losses.UNLABELED_LOSSES else ""


def stream_model_config(recipe: Recipe) -> dict[str, Any]:
    """The store config (kind ``"model"``) of the heads of a stream recipe: the recipe's model config, the
    backbone's key and the fingerprints of the stream sets it reads (other files, other heads)."""
    backbone, bb_key = stream_backbone(recipe.backbone)
    names = [n for n in (recipe.data.dataset, _ood_set(recipe)) if n]
    return {"stream_heads": model_cache_config(recipe), "backbone": bb_key,
            "sets": {n: _opened(n, backbone)[2] for n in names}}


def train_stream_heads(recipe: Recipe, *, store: Store | None = None, progress: bool = True,
                       accelerator: str = "auto", precision: str | None = None, batch_size: int = 256,
                       num_workers: int | None = None) -> BackboneWithHeads:
    """The trained heads of a :class:`~ensdiv.train.Heads` recipe on a stream set, over its frozen pretrained
    backbone: loaded from the cache, or trained on the streamed cut features (:func:`stream_features`, kind
    ``"features"``) by :func:`ensdiv.train.frameworks.fit_heads`, exactly as :func:`ensdiv.train_recipe`
    trains heads on an in-memory set, and cached (kind ``"model"``, the heads' weights only).

    Returns:
        A :class:`~ensdiv.models.BackboneWithHeads` in eval mode on CPU, ``(B, 3, H, W) -> (M, B, 1000)`` on
        images normalised by the backbone's transform; ``ensdiv_meta`` holds ``train_time_s``,
        ``num_params`` (the heads') and ``train_size``.

    Raises:
        InvalidInputError: not a Heads recipe on a stream set, ``feature_passes`` > 0, an OOD set that is not a
            stream set, a backbone without pretrained weights, or a training set without labels.
        DataNotFoundError: a set's folder is missing (one sentence naming it).
    """
    method = _check(recipe)
    store = store or default_store()
    backbone, bb_key = stream_backbone(recipe.backbone)
    cfg = stream_model_config(recipe)
    paired = method.loss in losses.UNLABELED_LOSSES
    payload = store.load("model", cfg)
    if payload is not None:
        heads = HeadStack(make_heads(method, backbone, seed=recipe.seeds.init),
                          loss_fn=joint_loss(method, recipe.optim), subset=method.subset, paired_ood=paired,
                          cut=method.cut)
        heads.load_state_dict(payload["state_dict"])
        meta = dict(payload["meta"])
    else:
        store.check_writable()
        run = {"kind": "features", "store": store, "cut": method.cut, "batch_size": batch_size,
               "num_workers": num_workers, "device": "cuda" if accelerator == "cuda" else None}
        train = stream_features(backbone, bb_key, recipe.data.dataset, subset=recipe.data.subset,
                                subset_seed=recipe.seeds.subset, **run)
        if (train["labels"] < 0).any():
            raise InvalidInputError(f"The training set {recipe.data.dataset!r} has unlabelled images (label -1).")
        ood = stream_features(backbone, bb_key, method.ood_set, **run)["features"] if paired else None
        t0 = time.perf_counter()
        heads = fit_heads(recipe, backbone, train["features"], train["labels"], ood=ood,
                          name=recipe.data.dataset, classes=imagenet_wnids(), progress=progress,
                          accelerator=accelerator, precision=precision).to("cpu")
        meta = {"train_time_s": time.perf_counter() - t0, "num_params": sum(p.numel() for p in heads.parameters()),
                "train_size": len(train["labels"])}
        if int(os.environ.get("RANK", "0")) == 0:
            store.save("model", cfg, {"state_dict": cpu_state(heads), "meta": meta})
        line(f"trained {recipe.label} in {meta['train_time_s']:.1f} s ({meta['train_size']} images)")
    model = BackboneWithHeads(backbone, heads).eval()
    model.ensdiv_meta = meta
    return model


# ---- full models trained on a stream set (the same fit as in-memory sets; only the batch source differs) ----
#: the shape a full model trained on an ImageNet-labelled stream set is built with (its transform decides the
#: input size it is fed: :func:`ensdiv.train.batches.training_transform`)
STREAM_SHAPE = {"num_classes": 1000, "in_chans": 3, "img_size": 224}
#: the transform's normalisation for models trained from scratch: none, so they take [0, 1] pixels
PIXEL_RANGE = {"mean": (0.0, 0.0, 0.0), "std": (1.0, 1.0, 1.0)}


def stream_training_files(recipe: Recipe) -> Subset:
    """The images a full-model recipe on a stream set trains on: its subset of ``DataSpec.dataset``, drawn as
    :meth:`~ensdiv.data.TensorSet.subset` draws, not yet given a transform (the files and labels key the
    model: :func:`ensdiv.train.keys.model_cache_config`).

    Raises:
        InvalidInputError: the set has unlabelled images or labels outside ImageNet's 1000 classes.
        DataNotFoundError: the folder is missing (one sentence naming it).
    """
    name = recipe.data.dataset
    dataset = stream_files(name)
    targets = torch.as_tensor(list(getattr(dataset, "targets", [])), dtype=torch.long)
    if len(targets) and (targets.min() < 0 or targets.max() >= STREAM_SHAPE["num_classes"]):
        raise InvalidInputError(f"{name!r} is not labelled with ImageNet's 1000 classes, so no full model can "
                                "be trained on it.")
    idx = subset_indices(len(dataset), recipe.data.subset, seed=recipe.seeds.subset).tolist()
    return Subset(dataset, idx)


def stream_training_batches(recipe: Recipe, model: nn.Module, files: Subset, *, num_workers: int | None = None
                            ) -> LoaderBatches:
    """The batch source of ``files`` (:func:`stream_training_files`) for ``model``: each image transformed by
    the model's own timm training transform (:func:`~ensdiv.train.batches.training_transform`: its input size,
    random-resized crop, flip), read by DataLoader workers.

    A model trained from scratch is fed [0, 1] pixels (the transform's mean 0, std 1), as every model the engine
    trains is and as the paper-scale evaluation sets (:mod:`ensdiv.data.paper.tensors`) and ``ed.predict``
    feed it; a ``pretrained`` model keeps the normalisation its weights were trained with."""
    base = copy.copy(files.dataset)  # the same file list, another transform
    base.transform = training_transform(model, overrides=None if recipe.model.pretrained else PIXEL_RANGE)
    return LoaderBatches(Subset(base, files.indices), name=recipe.data.dataset,
                         num_classes=STREAM_SHAPE["num_classes"], num_workers=num_workers)
