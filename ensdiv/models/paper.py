"""Paper-scale models: the papers' timm architectures, with pretrained weights only from local files.

A zoo name maps to the architecture the papers used (``"resnet"`` -> ``resnet50``, ``"deit"`` ->
``deit_tiny_patch16_224``, ...); any timm model name is accepted as well, and the 69 model names of
attack-similarity's SAT table (``book/data/sat/model_features_release.csv``) resolve through
:data:`ALIASES` where newer timm renamed them. Nothing is downloaded: ``pretrained=True`` uses timm's
Hugging Face cache (``$HF_HOME/hub``) only, and ``pretrained="/path/file"`` loads that file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch.nn as nn

from ensdiv.errors import EnsdivError, unknown_name

__all__ = ["PAPER_MODELS", "ALIASES", "create_paper_model", "resolve_paper_name", "sat_model_names"]

#: cpu-zoo name -> the timm model the papers used (design-diversity Table 1 / Table i; training-methods'
#: ResNet-50 base; attack-similarity's ResNet/ViT re-training).
PAPER_MODELS = {
    "resnet": "resnet50",
    "resnext": "resnext50_32x4d",
    "mnasnet": "mnasnet_100",
    "deit": "deit_tiny_patch16_224",
    "swin": "swin_tiny_patch4_window7_224",
    "efficientnet": "efficientnet_b7",
    "vit": "vit_base_patch16_224",
    "mobilenetv3": "mobilenetv3_large_100",
    "convnext": "convnext_tiny",
    "convmixer": "convmixer_768_32",
    "mixer": "mixer_b16_224",
    "densenet": "densenet121",
    "squeezenet": "squeezenet1_1",  # torchvision's; see create_paper_model
    "small_cnn": "resnet18",
    "mlp": "resmlp_12_224",
}
#: Names of the SAT table that current timm no longer knows, -> the current name.
ALIASES = {
    "gluon_xception65": "xception65",
}


def sat_model_names() -> list[str]:
    """The 69 model names of attack-similarity's released component table."""
    import csv

    path = Path(__file__).resolve().parents[2] / "book" / "data" / "sat" / "model_features_release.csv"
    if not path.exists():
        return []
    with path.open() as fh:
        return [row["Model name"] for row in csv.DictReader(fh)]


def resolve_paper_name(name: str) -> str:
    """The timm name for a zoo name, an aliased SAT name, or a timm name (unknown -> close matches)."""
    import timm

    name = PAPER_MODELS.get(name, name)
    name = ALIASES.get(name, name)
    if name == "squeezenet1_1" or timm.is_model(name):
        return name
    raise unknown_name("paper-scale model", name, list(PAPER_MODELS) + timm.list_models())


def _local_weights(model_name: str) -> str | None:
    """Path of timm's cached pretrained weights for ``model_name``, or None (never downloads)."""
    import timm

    cfg = timm.models.get_pretrained_cfg(model_name) if hasattr(timm.models, "get_pretrained_cfg") else None
    repo = getattr(cfg, "hf_hub_id", None) if cfg is not None else None
    if not repo:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return None
    repo = repo.split("@")[0]
    for fname in ("model.safetensors", "pytorch_model.bin", "open_clip_pytorch_model.bin"):
        hit = try_to_load_from_cache(repo, fname)
        if isinstance(hit, str):
            return hit
    return None


def create_paper_model(
    name: str,
    *,
    num_classes: int,
    in_chans: int,
    img_size: int,
    pretrained: bool | str = False,
    **overrides: Any,
) -> nn.Module:
    """Build the paper-scale model ``name`` with timm (see module docstring).

    Raises:
        UnknownNameError: not a zoo name, SAT name or timm name.
        EnsdivError: ``pretrained`` asked for but the weights are not on this machine.
    """
    import timm

    timm_name = resolve_paper_name(name)
    if timm_name == "squeezenet1_1":
        import torchvision

        if pretrained:
            raise EnsdivError(
                "Pretrained SqueezeNet weights are not provided; train it with an ed.Recipe instead."
            )
        m = torchvision.models.squeezenet1_1(num_classes=num_classes)
        if in_chans != 3:
            m.features[0] = nn.Conv2d(in_chans, 64, 3, 2)
        return m
    kwargs = dict(num_classes=num_classes, in_chans=in_chans, **overrides)
    if pretrained:
        file = str(pretrained) if isinstance(pretrained, str | os.PathLike) else _local_weights(timm_name)
        if file is None or not Path(file).exists():
            cfg = timm.models.get_pretrained_cfg(timm_name)
            repo = getattr(cfg, "hf_hub_id", None) or timm_name
            hub = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
            raise EnsdivError(
                f"Pretrained weights for {timm_name!r} are not on this machine; put them in timm's cache "
                f"({hub}/models--{repo.replace('/', '--')}, e.g. by running timm.create_model({timm_name!r}, "
                f"pretrained=True) once with internet) or pass pretrained='/path/to/weights.safetensors'."
            )
        kwargs["pretrained_cfg_overlay"] = {"file": file}
        return timm.create_model(timm_name, pretrained=True, **kwargs)
    try:
        return timm.create_model(timm_name, pretrained=False, img_size=img_size, **kwargs)
    except TypeError:  # architectures without an img_size argument (CNNs)
        return timm.create_model(timm_name, pretrained=False, **kwargs)
