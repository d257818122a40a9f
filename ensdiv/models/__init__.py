"""Models: a registry where one name is one architecture, the CPU-scale architectures, paper (timm) models,
Packed-Ensembles layers and efficient ensembles, and ensembles as one module.

Importing this package imports every module that registers models (as timm's ``models/__init__`` does),
so ``create_model`` / ``list_models`` see the whole registry after ``import ensdiv``.
"""

from ensdiv.models import (
    cpu,  # noqa: F401 - registers the CPU-scale architectures
    supernet,  # noqa: F401 - registers the weight-sharing super-network (design-diversity)
)
from ensdiv.models.efficient import BatchEnsembleResNet, MasksemblesResNet, MIMOResNet
from ensdiv.models.input_spec import InputSpec, forward_pixels, input_spec
from ensdiv.models.layers import PackedConv2d, PackedLinear, packed_mask, packed_param_count, to_members
from ensdiv.models.packed_resnet import PackedResNet, pack_members
from ensdiv.models.paper import PAPER_MODELS, PixelModel, paper_models, sat_model_names
from ensdiv.models.registry import ModelEntry, create_model, is_registered, list_models, model_info, register_model
from ensdiv.models.stack import BackboneWithHeads, HeadStack, MemberStack, penultimate
from ensdiv.models.stats import count_mult_adds, count_params
from ensdiv.models.throughput import inference_throughput, steady_allocator, throughput_rounds, training_throughput

__all__ = [
    "PAPER_MODELS",
    "BackboneWithHeads",
    "BatchEnsembleResNet",
    "HeadStack",
    "InputSpec",
    "MIMOResNet",
    "MasksemblesResNet",
    "MemberStack",
    "ModelEntry",
    "PackedConv2d",
    "PackedLinear",
    "PackedResNet",
    "PixelModel",
    "count_mult_adds",
    "count_params",
    "create_model",
    "forward_pixels",
    "inference_throughput",
    "input_spec",
    "is_registered",
    "list_models",
    "model_info",
    "pack_members",
    "packed_mask",
    "packed_param_count",
    "paper_models",
    "penultimate",
    "register_model",
    "sat_model_names",
    "to_members",
    "training_throughput",
    "throughput_rounds",
    "steady_allocator",
]
