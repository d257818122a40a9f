"""How a model wants its input: resolution and normalisation, applied to [0, 1] pixels.

The ensdiv CPU-scale models train on raw [0, 1] pixels; a pretrained timm ImageNet model expects its
own resolution and ImageNet normalisation. :func:`input_spec` reads a model's pipeline and
:func:`forward_pixels` applies it, so attacks, predictions and attributions can all work in pixel space.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["InputSpec", "input_spec", "forward_pixels", "resize_to"]


@dataclass(frozen=True)
class InputSpec:
    """How a model wants its input: side (``None`` = any) and per-channel mean/std (``None`` = identity)."""

    size: int | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None


def input_spec(model: nn.Module) -> InputSpec:
    """The input pipeline of ``model``.

    ``model.ensdiv_input`` (an :class:`InputSpec` or dict) if set; else timm's ``pretrained_cfg``
    (``input_size``, ``mean``, ``std``) when ``model.ensdiv_pretrained`` is true (a model trained on
    normalised inputs); else identity (the ensdiv zoo trains on raw [0, 1] pixels).
    """
    spec = getattr(model, "ensdiv_input", None)
    if isinstance(spec, InputSpec):
        return spec
    if isinstance(spec, dict):
        return InputSpec(**spec)
    cfg = getattr(model, "pretrained_cfg", None)
    if isinstance(cfg, dict) and getattr(model, "ensdiv_pretrained", False):
        size = cfg.get("input_size")
        return InputSpec(size=int(size[-1]) if size else None, mean=tuple(cfg["mean"]), std=tuple(cfg["std"]))
    return InputSpec()


def resize_to(x: torch.Tensor, size: int | None) -> torch.Tensor:
    if size is None or x.shape[-1] == size and x.shape[-2] == size:
        return x
    return F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=False)


def forward_pixels(model: nn.Module, x: torch.Tensor, spec: InputSpec | None = None) -> torch.Tensor:
    """Logits of ``model`` on [0, 1] images ``x``, after its own resize and normalisation.

    Shape:
        x: (B, C, H, W); returns (B, num_classes).
    """
    spec = spec or input_spec(model)
    x = resize_to(x, spec.size)
    if spec.mean is not None:
        mean = torch.tensor(spec.mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        std = torch.tensor(spec.std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        x = (x - mean) / std
    out = model(x)
    return out[0] if isinstance(out, tuple | list) else out
