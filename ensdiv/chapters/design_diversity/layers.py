"""Which layers Fig. 12's CKA compares, and which of them correspond across two members.

Fig. 12 of Rosales et al. shows CKA maps between the layers of two members. A single number summarising
a map should compare layers that *correspond*: the same layer of two members of one architecture, and,
across architectures, layers at the same relative depth — not every layer with every other (the mean over
a whole map mixes the stem of one model with the head of the other).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from ensdiv.errors import InvalidInputError
from ensdiv.report import nan_mean

_SKIP = (nn.Identity, nn.Dropout, nn.ReLU, nn.GELU, nn.Flatten)


def layer_names(model: nn.Module, *, max_layers: int = 12) -> list[str]:
    """The layers compared by CKA: the model's top-level children, with containers (Sequential / ModuleList) opened
    one level, skipping identities, dropouts and activations; at most ``max_layers`` evenly spaced, last kept.

    A wrapper whose only such child is itself a model with children (a paper-scale
    :class:`~ensdiv.models.paper.PixelModel`, whose one child ``model`` is the timm network) is opened: its layers
    are the wrapped model's, named through the wrapper (``"model.layer1"``), so a wrapped member is compared
    stage by stage rather than as one 1 x 1 map.
    """
    names = _children(model, "")
    if len(names) == 1:
        inner = model.get_submodule(names[0])
        if not isinstance(inner, nn.Sequential | nn.ModuleList) and any(True for _ in inner.children()):
            names = _children(inner, names[0] + ".")
    if len(names) > max_layers:
        keep = np.unique(np.linspace(0, len(names) - 1, max_layers).round().astype(int))
        names = [names[i] for i in keep]
    return names


def _children(model: nn.Module, prefix: str) -> list[str]:
    names = []
    for n, child in model.named_children():
        if isinstance(child, _SKIP):
            continue
        if isinstance(child, nn.Sequential | nn.ModuleList) and len(child) > 1:
            names += [f"{prefix}{n}.{k}" for k, g in child.named_children() if not isinstance(g, _SKIP)]
        else:
            names.append(prefix + n)
    return names


def corresponding_layers(la: Sequence[str], lb: Sequence[str]) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)`` of layer ``i`` of one member and layer ``j`` of the other that correspond.

    The same list of names (two members of one architecture): each layer with itself, the map's diagonal.
    Otherwise by relative depth: every layer of the shorter list with the layer of the longer one at the same
    fraction of its depth, ``j = round(i · (L_long − 1) / (L_short − 1))`` (first with first, last with last);
    a one-layer model (a timm model seen whole) corresponds to the other's last layer.
    """
    if not la or not lb:
        return []
    if list(la) == list(lb):
        return [(i, i) for i in range(len(la))]
    short, long_ = (len(la), len(lb)) if len(la) <= len(lb) else (len(lb), len(la))
    if short == 1:
        matched = [(0, long_ - 1)]
    else:
        matched = [(i, int(round(i * (long_ - 1) / (short - 1)))) for i in range(short)]
    return matched if len(la) <= len(lb) else [(j, i) for i, j in matched]


def corresponding_mean(cka: torch.Tensor | np.ndarray, la: Sequence[str], lb: Sequence[str]) -> np.ndarray:
    """Mean CKA over :func:`corresponding_layers`, NaN entries (constant layers) left out (NaN, silently, when
    every corresponding entry is NaN: :func:`ensdiv.report.nan_mean`).

    Shape:
        ``cka`` (..., La, Lb) -> (...): one value per map (a batch of maps gives one per batch).
    """
    c = np.asarray(cka, dtype=float)
    pairs = corresponding_layers(la, lb)
    if not pairs:
        raise InvalidInputError("corresponding_mean needs two non-empty layer lists.")
    if c.shape[-2:] != (len(la), len(lb)):
        raise InvalidInputError(f"A CKA map of shape {tuple(c.shape[-2:])} does not have {len(la)} x {len(lb)} "
                                "layers.")
    rows, cols = zip(*pairs, strict=True)
    return nan_mean(c[..., list(rows), list(cols)], axis=-1)
