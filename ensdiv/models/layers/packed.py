"""Packed-Ensembles layers (Laurent et al., ICLR 2023, slug ``packed-ensembles``).

A Packed-Ensemble PE-(α, M, γ) holds M subnetworks in one network: every layer is a grouped
convolution with ``M·γ`` groups, so subnetwork ``m`` only ever sees the channels of block ``m``
(Eq. 2-3 of the paper: a grouped convolution is a full convolution whose weight is multiplied by a
block-diagonal binary mask). The width of each layer is multiplied by α, and each subnetwork's
block is further split into γ subgroups.

Parameter count (§3.2 of the paper). A convolution with ``C_j`` input and ``C_{j+1}`` output channels
of the *original* network and kernel ``s_j`` becomes, in PE-(α, M, γ)::

    M × [ (α C_j / M) · (α C_{j+1} / M) · s_j² / γ ]  =  α² C_j C_{j+1} s_j² / (M γ)

(plus ``α C_{j+1}`` bias terms if there is a bias). Dense layers are 1×1 convolutions. So with
α = √M and γ = 1 the packed network has the parameters of the single model, and with α = M, γ = 1
each subnetwork is a full-width single model (the size of a Deep Ensemble). Two layers differ:

* the ``first`` layer sees the input shared by all subnetworks, so it is an ordinary (ungrouped)
  convolution ``C_0 → α C_1`` (Figure 3c: the "rearrange" + first grouped convolution of Figure 3b
  is replaced by one full convolution; both have ``C_0 · α C_1 · s²`` weights);
* the ``last`` layer emits M heads: ``α C_L → M · C_out`` with ``M·γ`` groups.

:func:`packed_param_count` evaluates the formula; ``tests/test_packed.py`` checks it against a
built model and against the counts in Table 1 of the paper.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ensdiv.errors import EnsdivError

__all__ = [
    "PackedConv2d",
    "PackedLinear",
    "packed_channels",
    "packed_param_count",
    "packed_mask",
    "to_members",
]


_IMPLEMENTATIONS = ("auto", "grouped", "dense")


def _check_hparams(alpha: float, num_estimators: int, gamma: int, first: bool, last: bool) -> None:
    if isinstance(num_estimators, bool) or not isinstance(num_estimators, int) or num_estimators < 1:
        raise EnsdivError(f"num_estimators (M) must be an integer >= 1, got {num_estimators!r}.")
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        raise EnsdivError(f"gamma (subgroups per subnetwork) must be an integer >= 1, got {gamma!r}.")
    if not isinstance(alpha, int | float) or isinstance(alpha, bool) or not alpha > 0 or math.isinf(alpha):
        raise EnsdivError(f"alpha (width factor) must be a finite number > 0, got {alpha!r}.")
    if first and last:
        raise EnsdivError(
            "A layer cannot be both first and last: a one-layer Packed-Ensemble is just M independent "
            "linear heads, build it with first=False, last=True on the input repeated M times."
        )


def packed_channels(
    in_channels: int,
    out_channels: int,
    *,
    alpha: float,
    num_estimators: int,
    gamma: int = 1,
    first: bool = False,
    last: bool = False,
    min_channels_per_group: int = 0,
) -> tuple[int, int, int]:
    """Channels and groups of one packed layer.

    Args:
        in_channels: input channels of the *original* (single-model) layer.
        out_channels: output channels of the original layer (for ``last``: the outputs of one head).
        alpha: width factor α > 0.
        num_estimators: number of subnetworks M ≥ 1.
        gamma: subgroups γ ≥ 1 inside each subnetwork (ignored for the ``first`` layer, which is a
            full convolution of the shared input).
        first: the layer sees the input shared by all subnetworks (Figure 3c).
        last: the layer emits M heads of ``out_channels`` each.
        min_channels_per_group: lower γ (down to 1) until every group has at least this many input
            channels. The reference implementation (torch-uncertainty) uses 64, so that in a
            ResNet-18 γ only acts in the wide stages; with it the counts of Table 1 are reproduced
            (8.18M for PE-(2,4,2)); ``0`` (default) applies γ everywhere.

    Returns:
        ``(packed_in, packed_out, groups)``.

    Raises:
        EnsdivError: α, M or γ out of range, ``first`` and ``last`` together, or channel counts that
            the groups do not divide (the message says which and what would work).
    """
    _check_hparams(alpha, num_estimators, gamma, first, last)
    ext_in = in_channels if first else alpha * in_channels
    ext_out = out_channels * num_estimators if last else alpha * out_channels
    if not first:
        while gamma > 1 and alpha * in_channels / (num_estimators * gamma) < min_channels_per_group:
            gamma -= 1
    groups = 1 if first else num_estimators * gamma
    for what, value, orig in (("input", ext_in, in_channels), ("output", ext_out, out_channels)):
        if abs(value - round(value)) > 1e-9:
            raise EnsdivError(
                f"alpha={alpha} times the {what} channels {orig} gives {value}, not an integer; "
                f"pick alpha so that alpha*{orig} is a whole number."
            )
    ext_in, ext_out = int(round(ext_in)), int(round(ext_out))
    for what, value in (("input", ext_in), ("output", ext_out)):
        if value % groups:
            raise EnsdivError(
                f"The packed {what} channels {value} (= {'M' if last and what == 'output' else 'alpha'} x "
                f"{in_channels if what == 'input' else out_channels}) are not divisible by M*gamma = "
                f"{num_estimators}*{gamma} = {groups} groups; use channel counts that are multiples of "
                f"{groups}, or a smaller gamma / a different alpha."
            )
    return ext_in, ext_out, groups


class PackedConv2d(nn.Conv2d):
    """A packed convolution: ``M·γ``-grouped convolution of α-widened channels (Eq. 2 / Eq. 5).

    It *is* an :class:`torch.nn.Conv2d` with computed channels and groups, so it runs on the native
    grouped-convolution kernel. Inputs of a non-first layer have ``α·in_channels`` channels laid out
    member by member (channels ``[m·αC/M, (m+1)·αC/M)`` belong to subnetwork m).

    Args:
        in_channels: input channels of the original (single-model) layer.
        out_channels: output channels of the original layer.
        kernel_size, stride, padding, dilation, bias, padding_mode: as :class:`~torch.nn.Conv2d`.
        alpha: width factor α.
        num_estimators: number of subnetworks M.
        gamma: subgroups γ per subnetwork.
        first: the layer sees the shared input: a full convolution ``C_in → α·C_out`` (Figure 3c).
        last: the layer emits M heads of ``out_channels`` each.
        min_channels_per_group: see :func:`packed_channels`.
        implementation: ``"grouped"`` (native grouped kernel), ``"dense"`` (the equivalent full
            convolution with the block-diagonal weight of Eq. 3), or ``"auto"``: dense only while
            training on CPU with fewer than 8 channels per group, where it is several times faster.

    Shape:
        ``(B, packed_in, H, W) -> (B, packed_out, H', W')``, see :func:`packed_channels`.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        *,
        alpha: float = 2,
        num_estimators: int = 4,
        gamma: int = 1,
        first: bool = False,
        last: bool = False,
        stride: int = 1,
        padding: int | str = 0,
        dilation: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        min_channels_per_group: int = 0,
        implementation: str = "auto",
    ) -> None:
        if implementation not in _IMPLEMENTATIONS:
            raise EnsdivError(
                f"PackedConv2d implementation must be one of {', '.join(_IMPLEMENTATIONS)}, "
                f"got {implementation!r}."
            )
        ext_in, ext_out, groups = packed_channels(
            in_channels, out_channels, alpha=alpha, num_estimators=num_estimators, gamma=gamma,
            first=first, last=last, min_channels_per_group=min_channels_per_group,
        )
        super().__init__(
            ext_in, ext_out, kernel_size, stride=stride, padding=padding, dilation=dilation,
            groups=groups, bias=bias, padding_mode=padding_mode,
        )
        self.alpha, self.num_estimators = alpha, num_estimators
        self.gamma = 1 if first else groups // num_estimators  # effective γ
        self.first, self.last = first, last
        self.implementation = implementation

    def _dense(self, x: Tensor) -> bool:
        if self.groups == 1 or self.padding_mode != "zeros" or self.implementation == "grouped":
            return False
        if self.implementation == "dense":
            return True
        # auto: PyTorch's CPU backward of grouped convolutions is several times slower than a dense
        # convolution when groups hold fewer than 8 channels (benchmarks/bench_packed.py).
        return x.device.type == "cpu" and torch.is_grad_enabled() and self.in_channels // self.groups < 8

    def dense_weight(self) -> Tensor:
        """The weight as a full convolution: block-diagonal, i.e. ``ω ∘ mask`` of Eq. 3."""
        g = self.groups
        co, ci = self.out_channels // g, self.in_channels // g
        w = self.weight.view(g, co, ci, *self.kernel_size)
        dense = w.new_zeros(g, co, g, ci, *self.kernel_size)
        idx = torch.arange(g, device=w.device)
        dense[idx, :, idx] = w
        return dense.view(self.out_channels, self.in_channels, *self.kernel_size)

    def forward(self, x: Tensor) -> Tensor:
        if self._dense(x):
            return F.conv2d(x, self.dense_weight(), self.bias, self.stride, self.padding, self.dilation)
        return super().forward(x)

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, alpha={self.alpha}, M={self.num_estimators}, "
                f"gamma={self.gamma}, first={self.first}, last={self.last}")


class PackedLinear(nn.Module):
    """A packed dense layer: a ``M·γ``-grouped 1×1 convolution on vectors (§3.2).

    Args:
        in_features: input features of the original (single-model) layer.
        out_features: output features of the original layer (for ``last``: of one head).
        alpha, num_estimators, gamma, first, last, min_channels_per_group: as :class:`PackedConv2d`.
        bias: learn an additive bias.

    Shape:
        ``(B, packed_in) -> (B, packed_out)``; with ``last=True`` the output is ``(B, M·out_features)``,
        member-major (use :func:`to_members` to get ``(M, B, out_features)``).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        alpha: float = 2,
        num_estimators: int = 4,
        gamma: int = 1,
        first: bool = False,
        last: bool = False,
        bias: bool = True,
        min_channels_per_group: int = 0,
    ) -> None:
        super().__init__()
        ext_in, ext_out, groups = packed_channels(
            in_features, out_features, alpha=alpha, num_estimators=num_estimators, gamma=gamma,
            first=first, last=last, min_channels_per_group=min_channels_per_group,
        )
        self.in_features, self.out_features, self.groups = ext_in, ext_out, groups
        self.alpha, self.num_estimators = alpha, num_estimators
        self.gamma = 1 if first else groups // num_estimators
        self.first, self.last = first, last
        # Same layout and initialisation as a grouped Conv1d with kernel 1.
        ref = nn.Conv1d(ext_in, ext_out, 1, groups=groups, bias=bias)
        self.weight = nn.Parameter(ref.weight.detach().squeeze(-1).clone())  # (out, in/groups)
        self.bias = nn.Parameter(ref.bias.detach().clone()) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        if self.groups == 1:
            return F.linear(x, self.weight, self.bias)
        g = self.groups
        w = self.weight.view(g, self.out_features // g, self.in_features // g)
        out = torch.einsum("bgi,goi->bgo", x.reshape(x.shape[0], g, -1), w).reshape(x.shape[0], -1)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return (f"in={self.in_features}, out={self.out_features}, groups={self.groups}, alpha={self.alpha}, "
                f"M={self.num_estimators}, gamma={self.gamma}, first={self.first}, last={self.last}")


def to_members(packed_logits: Tensor, num_estimators: int) -> Tensor:
    """Split the member-major output of a ``last`` layer into ``(M, B, C)``.

    Args:
        packed_logits: ``(B, M·C)`` output of a packed network.
        num_estimators: M.

    Returns:
        ``(M, B, C)`` logits, member m = channels ``[m·C, (m+1)·C)``.
    """
    b, mc = packed_logits.shape
    if mc % num_estimators:
        raise EnsdivError(
            f"{mc} outputs cannot be split into {num_estimators} heads; expected a multiple of M."
        )
    return packed_logits.reshape(b, num_estimators, mc // num_estimators).transpose(0, 1)


def packed_mask(in_channels: int, out_channels: int, groups: int) -> Tensor:
    """The binary block-diagonal mask of Eq. 3 (Figure 4): ``mask[k, l] = 1`` iff ⌊γl/C_j⌋ = ⌊γk/C_{j+1}⌋.

    Args:
        in_channels: C_j. out_channels: C_{j+1}. groups: number of groups (M·γ).

    Returns:
        ``(out_channels, in_channels)`` float tensor of 0/1.
    """
    k = torch.arange(out_channels) * groups // out_channels
    l_ = torch.arange(in_channels) * groups // in_channels
    return (k[:, None] == l_[None, :]).float()


def packed_param_count(
    channels: list[tuple[int, int, int]],
    *,
    alpha: float,
    num_estimators: int,
    gamma: int,
    first_index: int | None = 0,
    last_index: int | None = -1,
    bias: list[bool] | None = None,
    gammas: list[int] | None = None,
) -> int:
    """Weights of a packed network from its original layer list (the formula of §3.2).

    Args:
        channels: ``(C_j, C_{j+1}, s_j)`` for each conv/dense layer of the original network.
        alpha, num_estimators, gamma: PE-(α, M, γ).
        first_index: index of the layer that sees the shared input (None: none).
        last_index: index of the output layer (None: none).
        bias: which layers have a bias (default: none).
        gammas: per-layer γ overriding ``gamma`` (e.g. 1 for the first conv of each residual block).

    Returns:
        The number of weights (and biases) — normalisation layers not included.
    """
    n = len(channels)
    first_index = None if first_index is None else first_index % n
    last_index = None if last_index is None else last_index % n
    total = 0
    for j, (c_in, c_out, s) in enumerate(channels):
        first, last = j == first_index, j == last_index
        ext_in = c_in if first else alpha * c_in
        ext_out = c_out * num_estimators if last else alpha * c_out
        g = gamma if gammas is None else gammas[j]
        groups = 1 if first else num_estimators * g
        total += round(ext_in * ext_out * s * s / groups)  # = M·(αC_j/M)(αC_{j+1}/M)s²/γ inside
        if bias is not None and bias[j]:
            total += round(ext_out)
    return int(total)
