"""Model size and cost: parameters and mult-adds — the one place both are counted.

Two conventions for mult-adds, because the papers use two:

- ``"flops"`` (default): :class:`torch.utils.flop_counter.FlopCounterMode` counts every matmul,
  convolution and attention product (2 FLOPs per multiply-add, halved). Right for transformers,
  whose attention products are no layer's weights; used by the zoo table.
- ``"layers"``: torchinfo's convention, which Packed-Ensembles' Table 1 reports: each convolution costs
  ``output positions × weight elements`` (so grouped / packed convolutions count only their real
  weights) and each dense layer ``in_features × out_features / groups`` per sample.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ensdiv.errors import unknown_name

__all__ = ["count_params", "count_mult_adds"]


def count_params(model: nn.Module, *, trainable_only: bool = False) -> int:
    """Number of parameters (only those with ``requires_grad`` when ``trainable_only``)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def _layer_mult_adds(model: nn.Module, x: torch.Tensor) -> int:
    total = 0

    def conv_hook(mod: nn.Module, _inp, out: torch.Tensor) -> None:
        nonlocal total
        # every weight is used once per output position: H'·W'·(C_out·C_in/groups·k²) per sample
        total += out.shape[0] * out.shape[2:].numel() * mod.weight.numel()

    def dense_hook(mod: nn.Module, inp, _out) -> None:
        nonlocal total
        total += inp[0].numel() * mod.out_features // getattr(mod, "groups", 1)

    handles = []
    for mod in model.modules():
        if isinstance(mod, nn.Conv1d | nn.Conv2d):
            handles.append(mod.register_forward_hook(conv_hook))
        elif hasattr(mod, "in_features") and hasattr(mod, "out_features") and hasattr(mod, "weight"):
            handles.append(mod.register_forward_hook(dense_hook))  # nn.Linear, PackedLinear
    try:
        model(x)
    finally:
        for h in handles:
            h.remove()
    return int(total)


@torch.no_grad()
def count_mult_adds(
    model: nn.Module, input_shape: tuple[int, ...] = (1, 28, 28), *, convention: str = "flops"
) -> int:
    """Multiply-adds of one eval-mode forward pass on a single zero image of ``input_shape``.

    Args:
        model: the network.
        input_shape: ``(C, H, W)`` of one input, without batch dimension.
        convention: ``"flops"`` (every matmul and attention product) or ``"layers"`` (torchinfo's
            conv + dense count, as in Packed-Ensembles Table 1); see the module docstring.

    Returns:
        Mult-adds per image (for a model that repeats its input M times, the whole M-fold cost).
    """
    if convention not in ("flops", "layers"):
        raise unknown_name("mult-add convention", convention, ["flops", "layers"])
    x = torch.zeros(1, *input_shape)
    was_training = model.training
    model.eval()
    try:
        if convention == "layers":
            return _layer_mult_adds(model, x)
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            model(x)
        return int(counter.get_total_flops() // 2)
    finally:
        model.train(was_training)
