"""Layers that make an ensemble out of one network: Packed-Ensembles' grouped convolutions and dense layers."""

from ensdiv.models.layers.packed import (
    PackedConv2d,
    PackedLinear,
    packed_channels,
    packed_mask,
    packed_param_count,
    to_members,
)

__all__ = ["PackedConv2d", "PackedLinear", "packed_channels", "packed_mask", "packed_param_count", "to_members"]
