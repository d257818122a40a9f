"""Model size and cost: parameters and mult-adds (via :mod:`torch.utils.flop_counter`)."""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["count_params", "count_mult_adds"]


def count_params(model: nn.Module) -> int:
    """Number of parameters."""
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def count_mult_adds(model: nn.Module, input_shape: tuple[int, ...] = (1, 28, 28)) -> int:
    """Multiply-accumulates of one eval-mode forward pass on a single image of ``input_shape``.

    Counted by :class:`torch.utils.flop_counter.FlopCounterMode` (matmuls, convolutions, attention),
    which reports 2 FLOPs per multiply-add; element-wise operations (activations, norms) are not
    counted, as in the mult-adds columns of the papers.
    """
    from torch.utils.flop_counter import FlopCounterMode

    was_training = model.training
    model.eval()
    try:
        with FlopCounterMode(display=False) as counter:
            model(torch.zeros(1, *input_shape))
    finally:
        model.train(was_training)
    return int(counter.get_total_flops() // 2)
