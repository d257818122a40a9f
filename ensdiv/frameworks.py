"""Training frameworks beyond supervised learning (training-methods' "framework" and "dataset" categories).

* Knowledge distillation (Hinton et al., 2015): the student minimises
  ``(1 - a) CE(s, y) + a T^2 KL(softmax(t/T) || softmax(s/T))`` (``soft``), or, as in DeiT's hard-label
  distillation used by attack-similarity's re-trained ViTs,
  ``(1 - a) CE(s, y) + a CE(s, argmax t)`` (``hard``).
* SimCLR-style contrastive pre-training (Chen et al., 2020): two random views of each image, a
  2-layer projection head, the NT-Xent loss at temperature 0.5; then a linear probe on the frozen
  penultimate features of the training set.
* Supervised pre-training on another data source (``pretrain_dataset``, e.g. ``pretrain/shapes`` or
  ``pretrain/digits`` from :mod:`ensdiv.sources`), then the same linear probe.

The pre-trained backbone is cached in the store (kind ``"pretrained"``), so recipes that differ only
in their probe share it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

import ensdiv.sources  # noqa: F401 - registers the shapes/digits pre-training sources
from ensdiv.data.registry import TensorSet, get_dataset
from ensdiv.recipes import Recipe
from ensdiv.store import Store

__all__ = ["distillation_loss", "SimCLR", "simclr_views", "nt_xent", "pretrain_and_probe", "set_classifier"]


def distillation_loss(teacher: nn.Module, recipe: Recipe):
    """``loss_fn(model, x, y)`` for :func:`ensdiv.fit` distilling ``teacher`` (soft or hard, see above)."""
    teacher.eval()
    a, temp, hard = recipe.distill_alpha, recipe.distill_temperature, recipe.distill == "hard"

    def loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        teacher.to(x.device)
        with torch.no_grad():
            t = teacher(x).float()
        s = model(x).float()
        ce = (
            torch.sum(-y * F.log_softmax(s, -1), -1).mean()
            if y.ndim == 2
            else F.cross_entropy(s, y, label_smoothing=recipe.label_smoothing)
        )
        if hard:
            kd = F.cross_entropy(s, t.argmax(-1))
        else:
            kd = (
                F.kl_div(
                    F.log_softmax(s / temp, -1),
                    F.log_softmax(t / temp, -1),
                    log_target=True,
                    reduction="batchmean",
                )
                * temp**2
            )
        return (1 - a) * ce + a * kd

    return loss


def simclr_views(x: torch.Tensor) -> torch.Tensor:
    """One random view per image: resized crop (scale 0.4-1), horizontal flip, contrast/brightness, noise.

    Draws from torch's global generator (re-seeded per epoch by the engine).
    """
    n = x.shape[0]
    dev = x.device
    scale = torch.empty(n, device=dev).uniform_(0.4, 1.0).sqrt()
    flip = torch.where(torch.rand(n, device=dev) < 0.5, -1.0, 1.0)
    tx = (1 - scale) * torch.empty(n, device=dev).uniform_(-1, 1)
    ty = (1 - scale) * torch.empty(n, device=dev).uniform_(-1, 1)
    theta = torch.zeros(n, 2, 3, device=dev)
    theta[:, 0, 0], theta[:, 1, 1] = scale * flip, scale
    theta[:, 0, 2], theta[:, 1, 2] = tx, ty
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    v = F.grid_sample(x, grid, align_corners=False)
    v = v * torch.empty(n, 1, 1, 1, device=dev).uniform_(0.6, 1.4) + torch.empty(
        n, 1, 1, 1, device=dev
    ).uniform_(-0.2, 0.2)
    return (v + 0.05 * torch.randn_like(v)).clamp(0, 1)


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    """NT-Xent (Eq. 1 of SimCLR): cross-entropy of each view against its partner among 2N-1 others."""
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    n = z1.shape[0]
    sim = z @ z.t() / temperature
    sim.fill_diagonal_(float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
    return F.cross_entropy(sim, target)


def _features(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model.forward_head(model.forward_features(x), pre_logits=True)


class SimCLR(nn.Module):
    """A backbone plus a projection head, trained by :meth:`training_loss` (NT-Xent of two views)."""

    def __init__(self, backbone: nn.Module, feature_dim: int, proj_dim: int = 64, temperature: float = 0.5):
        super().__init__()
        self.backbone = backbone
        self.proj = nn.Sequential(
            nn.Linear(feature_dim, 128), nn.ReLU(inplace=True), nn.Linear(128, proj_dim)
        )
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(_features(self.backbone, x))

    def training_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nt_xent(self(simclr_views(x)), self(simclr_views(x)), self.temperature)


def set_classifier(model: nn.Module, weight: torch.Tensor, bias: torch.Tensor) -> None:
    """Reset the model's classifier to ``weight.shape[0]`` classes and copy the given weights in."""
    model.reset_classifier(weight.shape[0])
    heads = model.get_classifier()
    for head in heads if isinstance(heads, tuple | list) else (heads,):
        with torch.no_grad():
            head.weight.copy_(weight)
            head.bias.copy_(bias)


@torch.no_grad()
def _all_features(model: nn.Module, x: torch.Tensor, batch: int = 1024) -> torch.Tensor:
    model.eval()
    return torch.cat([_features(model, x[i : i + batch]).float() for i in range(0, len(x), batch)])


def _pretrain_config(recipe: Recipe) -> dict[str, Any]:
    keep = (
        "model",
        "dataset",
        "batch_size",
        "optimizer",
        "momentum",
        "weight_decay",
        "schedule",
        "dropout",
        "seed",
        "train_subset",
        "subset_seed",
        "model_kwargs",
        "framework",
        "pretrain_dataset",
        "pretrain_epochs",
        "pretrain_lr",
        "augment",
    )
    key = recipe.key()
    key["seed"] = recipe.pretrain_seed if recipe.pretrain_seed >= 0 else recipe.seed
    return {"version": 1, **{k: key[k] for k in keep}}


def pretrain_and_probe(
    recipe: Recipe,
    data: TensorSet,
    shape: dict[str, int],
    *,
    store: Store,
    progress: bool = True,
    accelerator: str = "auto",
    precision: str | None = None,
) -> nn.Module:
    """Pre-train a backbone (SimCLR on ``pretrain_dataset`` or ``data``; or supervised on
    ``pretrain_dataset``) for ``pretrain_epochs``, then fit a linear probe on ``data`` for ``epochs``.

    Returns:
        The backbone with its classifier replaced by the probe, shaped like ``build_model(recipe, **shape)``.
    """
    from ensdiv.train import _cpu_state, build_model, fit

    lr0 = recipe.pretrain_lr or recipe.lr
    # The pre-training source gets the same image budget (train_subset) as the probe's data.
    source = (
        get_dataset(recipe.pretrain_dataset).subset(recipe.train_subset, seed=recipe.subset_seed)
        if recipe.pretrain_dataset
        else data
    )
    if recipe.framework == "pretrain":
        src_shape = {**shape, "num_classes": max(source.num_classes, int(source.y.max()) + 1)}
    else:
        src_shape = shape
    pcfg = _pretrain_config(recipe)
    cached = store.load("pretrained", pcfg)
    pseed = pcfg["seed"]
    model = build_model(recipe.replace(seed=pseed), **src_shape)
    if cached is not None:
        model.load_state_dict(cached)
    else:
        common = dict(
            epochs=max(recipe.pretrain_epochs, 1),
            lr=lr0,
            seed=pseed,
            batch_size=recipe.batch_size,
            optimizer=recipe.optimizer,
            momentum=recipe.momentum,
            weight_decay=recipe.weight_decay,
            schedule=recipe.schedule,
            warmup_epochs=0,
            accelerator=accelerator,
            precision=precision,
            progress=progress,
        )
        if recipe.framework == "simclr":
            wrapper = SimCLR(model, int(_features(model.eval(), source.x[:2]).shape[1]))
            fit(wrapper, source, desc=f"{recipe.label} simclr", **common)
        else:
            fit(model, source, desc=f"{recipe.label} pretrain", augment=recipe.augment, **common)
        store.save("pretrained", pcfg, _cpu_state(model))
    # Linear probe on frozen penultimate features (standardised inside the head's weights afterwards).
    feats = _all_features(model, data.x)
    mean, std = feats.mean(0), feats.std(0) + 1e-6
    probe_set = TensorSet(
        ((feats - mean) / std)[:, :, None, None], data.y, f"{data.name}:features", data.classes
    )
    torch.manual_seed(recipe.seed)
    head = nn.Sequential(nn.Flatten(), nn.Linear(feats.shape[1], shape["num_classes"]))
    fit(
        head,
        probe_set,
        epochs=recipe.epochs,
        lr=recipe.lr,
        seed=recipe.seed,
        batch_size=recipe.batch_size,
        optimizer=recipe.optimizer,
        momentum=recipe.momentum,
        weight_decay=0.0,
        schedule=recipe.schedule,
        accelerator=accelerator,
        precision=precision,
        progress=progress,
        desc=f"{recipe.label} probe",
    )
    lin = head[1]
    weight = lin.weight.detach() / std  # fold the standardisation into the linear layer
    bias = lin.bias.detach() - weight @ mean
    set_classifier(model, weight, bias)
    return model.eval()
