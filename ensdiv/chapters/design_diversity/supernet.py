"""Design-diversity's super-network (Sec. 4.2, Fig. 8): one weight-sharing SuperResNet trained once in
progressive stages, and the sub-networks extracted from it (BootstrapNAS's reading, our small analogue).

Every stage reads its batches from :func:`ensdiv.train.training_data`, the source ``ed.train_recipe`` itself
uses: an in-memory set at ``cpu`` scale, an ImageNet-layout folder read by DataLoader workers at ``paper``
scale (``imagenet/train``, through the super-network's training transform, [0, 1] pixels). Batch-norm
recalibration takes its images from the same source (at paper scale: one random-resized crop of each chosen
training image, as a training loader would give them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

import ensdiv as ed
from ensdiv.chapters import design_diversity as dd
from ensdiv.models.supernet import (
    SubnetConfig,
    SuperResNet,
    all_configs,
    extract_subnet,
    recalibrate_bn,
    sample_config,
    subnet_params,
)
from ensdiv.train import build_model, cpu_state, fit, model_cache_config, training_data, training_images

__all__ = ["supernet", "subnetworks", "select_configs"]


# ---- the super-network ------------------------------------------------------------------------------------------
def _supernet_base(cfg: Any) -> ed.Recipe:
    return ed.Recipe.make(model=cfg["supernet_model"], dataset=cfg["train_set"], train_subset=cfg["supernet_subset"],
                          epochs=cfg["supernet_epochs"][0], batch_size=cfg["batch_size"], optimizer="sgd",
                          lr=cfg["supernet_lr"], weight_decay=5e-4, schedule="cosine", augment=cfg["augment"],
                          seed=cfg["seed"], name="supernet-base")  # fmt: skip


def supernet(cfg: Any) -> SuperResNet:
    """The super-network trained by progressive shrinking (cached as kind ``dd-supernet``).

    1. the full network trained as an ordinary model (a cached recipe, ``supernet_epochs[0]`` epochs, SGD);
    2. inner channels sorted by importance (:meth:`SuperResNet.reorganize_widths`);
    3. ``supernet_epochs[1]`` epochs with a random depth per batch, then ``supernet_epochs[2]`` epochs with a random
       depth and width per batch (BootstrapNAS's ``progressivity_of_elasticity: [depth, width]``), SGD at
       ``supernet_lr / 10``, cosine.
    """
    base = _supernet_base(cfg)
    e = list(cfg["supernet_epochs"])
    conf = {"base": model_cache_config(base), "stages": e[1:], "lr": cfg["supernet_lr"]}

    def compute() -> dict:
        net = ed.train_recipe(base)
        net.reorganize_widths()
        data, _ = training_data(base)
        for i, (elastic, epochs) in enumerate((("depth", e[1]), ("depth+width", e[2]))):
            if epochs:
                net.elastic = elastic
                fit(net, data, base.optim.replace(epochs=epochs, lr=cfg["supernet_lr"] / 10),
                    seed=base.seeds.order + 100 + i, augment=base.data.augment, desc=f"supernet {elastic}")
        net.elastic = "none"
        return {"state": cpu_state(net)}

    net = build_model(base, **training_data(base)[1])
    net.load_state_dict(ed.cached("dd-supernet", conf, compute)["state"])
    net.ensdiv_cache_id = conf
    return net.eval()


def select_configs(net: SuperResNet, n: int = 11, *, quantile: float = 0.5, candidates: int = 4000,
                   seed: int = 0) -> list[SubnetConfig]:
    """``n`` distinct configurations of similar size: those whose parameter count is closest to the
    ``quantile`` of the candidates' counts (every configuration when there are at most ``candidates``, else
    ``candidates`` seeded random draws); ties keep the candidates' order."""
    pool = all_configs(net) if _n_configs(net) <= candidates else _sampled(net, candidates, seed)
    sizes = np.array([subnet_params(net, c) for c in pool])
    target = np.quantile(sizes, quantile)
    order = np.argsort(np.abs(sizes - target), kind="stable")
    return [pool[i] for i in order[:n]]


def _n_configs(net: SuperResNet) -> int:
    return len(all_configs(net)) if sum(net.blocks) <= 8 else 10**9


def _sampled(net: SuperResNet, k: int, seed: int) -> list[SubnetConfig]:
    g = torch.Generator().manual_seed(seed)
    seen: dict[SubnetConfig, None] = {}
    for _ in range(k):
        seen.setdefault(sample_config(net, generator=g), None)
    return list(seen)


def subnetworks(cfg: Any) -> list[nn.Module]:
    """The ``cfg.subnets`` sub-networks of similar size, extracted as ordinary models with their batch norm
    recalibrated on ``cfg.bn_images`` training images (the same images for every sub-network)."""
    net = supernet(cfg)
    data, _ = training_data(_supernet_base(cfg))
    idx = dd.subset_index(len(data), cfg["bn_images"], cfg["seed"])
    with torch.random.fork_rng():  # a stream set's random-resized crops, seeded without touching the caller's
        torch.manual_seed(cfg["seed"])
        images = training_images(data, idx)
    out = []
    for c in select_configs(net, cfg["subnets"], seed=cfg["seed"]):
        sub = recalibrate_bn(extract_subnet(net, c), images)
        sub.ensdiv_cache_id = {"supernet": net.ensdiv_cache_id, "config": c.to_dict(), "bn_images": cfg["bn_images"],
                               "bn_seed": cfg["seed"]}  # fmt: skip
        sub.ensdiv_name = c.label
        out.append(sub)
    return out
