"""Paper-scale models: the papers' timm architectures, with pretrained weights only from local files.

Paper-scale models are named by their timm names (``resnet50``, ``deit_tiny_patch16_224``, ...);
:data:`PAPER_MODELS` says which CPU-scale architecture stands for which of them; the 69 model names of
attack-similarity's SAT table (``book/data/sat/model_features_release.csv``) resolve through
:data:`ALIASES` where newer timm renamed them. Nothing is downloaded: ``pretrained=True`` uses timm's
Hugging Face cache (``$HF_HOME/hub``) only, and ``pretrained="/path/file"`` loads that file.

A model built with pretrained weights expects ImageNet-normalised inputs at its own resolution: it
carries ``model.ensdiv_input`` (an :class:`ensdiv.attacks.InputSpec` from timm's resolved data config),
which the attack code applies to [0, 1] pixels. :func:`paper_models` builds such models wrapped in
:class:`PixelModel`, whose ``forward`` itself takes [0, 1] pixels, so ``ensdiv.predict`` works too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import timm
import torch
import torch.nn as nn

from ensdiv.config import dry_run, register_list_token
from ensdiv.data.paper.tensors import pipeline_of
from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.models.input_spec import InputSpec, forward_pixels, input_spec

__all__ = ["PAPER_MODELS", "ALIASES", "SAT_WEIGHTS", "NO_EQUIVALENT",
           "create_paper_model", "resolve_paper_name", "sat_model_names",
           "PixelModel", "paper_models"]

#: CPU-scale architecture name -> the timm model the papers used for it (design-diversity Table 1 /
#: Table i; training-methods' ResNet-50 base; attack-similarity's ResNet/ViT re-training). The paper
#: zoo uses the timm names; this table says which CPU-scale model stands for which paper model.
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
#: Names of the SAT table that current timm no longer knows, -> the current architecture name.
ALIASES = {
    "gluon_xception65": "xception65",
}

#: The weights the SAT paper's timm 0.6.7 loaded for a name, as a current timm ``arch.tag``: every one of the
#: 69 names is pinned, so a timm upgrade that moves a default cannot silently change the models a page measures.
#: First the names whose current default differs from 0.6.7's or that current timm renamed (our reading of timm
#: 0.6.7's ``default_cfgs``, the weights file each name pointed to then), then the names whose architecture has
#: one set of ImageNet-1k weights in timm (1.0.x), the ones 0.6.7 loaded.
SAT_WEIGHTS = {
    "convnext_tiny": "convnext_tiny.fb_in1k",  # 0.6.7: ImageNet-1k; now defaults to ImageNet-12k pre-training
    "regnetx_320": "regnetx_320.pycls_in1k",  # 0.6.7: pycls; now torchvision's v2 recipe
    "seresnet50": "seresnet50.ra2_in1k",  # 0.6.7: seresnet50_ra_224; now the A1 recipe
    "resnext50_32x4d": "resnext50_32x4d.ra_in1k",  # 0.6.7: resnext50_32x4d_ra; now A1h
    "gluon_resnet101_v1c": "resnet101c.gluon_in1k",  # renamed
    "jx_nest_tiny": "nest_tiny_jx.goog_in1k",  # renamed
    "gluon_resnext50_32x4d": "resnext50_32x4d.gluon_in1k",  # renamed (Fig. G.2's extra model)
    "resnet50": "resnet50.a1_in1k",  # unchanged, pinned so a future default cannot move it
    "resnet101": "resnet101.a1h_in1k",
    "swin_tiny_patch4_window7_224": "swin_tiny_patch4_window7_224.ms_in1k",
    "vit_small_patch16_224": "vit_small_patch16_224.augreg_in21k_ft_in1k",
    "vit_base_patch32_224": "vit_base_patch32_224.augreg_in21k_ft_in1k",
    "vit_small_r26_s32_224": "vit_small_r26_s32_224.augreg_in21k_ft_in1k",
    "wide_resnet50_2": "wide_resnet50_2.racm_in1k",
    "seresnext50_32x4d": "seresnext50_32x4d.racm_in1k",
    "regnety_032": "regnety_032.ra_in1k",
    "resmlp_24_224": "resmlp_24_224.fb_in1k",
    "resmlp_big_24_224": "resmlp_big_24_224.fb_in1k",
    "xcit_medium_24_p16_224": "xcit_medium_24_p16_224.fb_in1k",
    "xcit_tiny_12_p8_224": "xcit_tiny_12_p8_224.fb_in1k",
    "gluon_xception65": "xception65.tf_in1k",  # the Gluon weights are gone (NO_EQUIVALENT)
    # one set of weights in timm for the architecture
    "botnet26t_256": "botnet26t_256.c1_in1k",
    "convmixer_1536_20": "convmixer_1536_20.in1k",
    "cspdarknet53": "cspdarknet53.ra_in1k",
    "cspresnet50": "cspresnet50.ra_in1k",
    "cspresnext50": "cspresnext50.ra_in1k",
    "dla102x2": "dla102x2.in1k",
    "dpn107": "dpn107.mx_in1k",
    "eca_botnext26ts_256": "eca_botnext26ts_256.c1_in1k",
    "eca_halonext26ts": "eca_halonext26ts.c1_in1k",
    "eca_nfnet_l0": "eca_nfnet_l0.ra2_in1k",
    "eca_resnet33ts": "eca_resnet33ts.ra2_in1k",
    "ese_vovnet39b": "ese_vovnet39b.ra_in1k",
    "gcresnet50t": "gcresnet50t.ra2_in1k",
    "gcresnext50ts": "gcresnext50ts.ch_in1k",
    "halo2botnet50ts_256": "halo2botnet50ts_256.a1h_in1k",
    "halonet50ts": "halonet50ts.a1h_in1k",
    "hrnet_w64": "hrnet_w64.ms_in1k",
    "lambda_resnet50ts": "lambda_resnet50ts.a1h_in1k",
    "lamhalobotnet50ts_256": "lamhalobotnet50ts_256.a1h_in1k",
    "nf_resnet50": "nf_resnet50.ra2_in1k",
    "nfnet_l0": "nfnet_l0.ra2_in1k",
    "poolformer_m48": "poolformer_m48.sail_in1k",
    "resnest50d": "resnest50d.in1k",
    "resnet50_gn": "resnet50_gn.a1h_in1k",
    "resnetblur50": "resnetblur50.bt_in1k",
    "resnetv2_101": "resnetv2_101.a1h_in1k",
    "resnetv2_50": "resnetv2_50.a1h_in1k",
    "resnetv2_50d_evos": "resnetv2_50d_evos.ah_in1k",
    "sebotnet33ts_256": "sebotnet33ts_256.a1h_in1k",
    "sehalonet33ts": "sehalonet33ts.ra2_in1k",
    "convit_base": "convit_base.fb_in1k",
    "crossvit_base_240": "crossvit_base_240.in1k",
    "deit_base_patch16_224": "deit_base_patch16_224.fb_in1k",
    "deit_small_patch16_224": "deit_small_patch16_224.fb_in1k",
    "pit_s_224": "pit_s_224.in1k",
    "tnt_s_patch16_224": "tnt_s_patch16_224.in1k",
    "gmlp_s16_224": "gmlp_s16_224.ra3_in1k",
    "swin_s3_tiny_224": "swin_s3_tiny_224.ms_in1k",
    "efficientnet_b2": "efficientnet_b2.ra_in1k",
    "fbnetv3_g": "fbnetv3_g.ra2_in1k",
    "haloregnetz_b": "haloregnetz_b.ra3_in1k",
    "mixnet_xl": "mixnet_xl.ra_in1k",
    "nf_regnet_b1": "nf_regnet_b1.ra2_in1k",
    "rexnet_150": "rexnet_150.nav_in1k",
    "coat_lite_small": "coat_lite_small.in1k",
    "pit_b_224": "pit_b_224.in1k",
    "twins_pcpvt_base": "twins_pcpvt_base.in1k",
    "twins_svt_small": "twins_svt_small.in1k",
    "visformer_small": "visformer_small.in1k",
}
#: SAT names for which current timm has no equivalent of the paper's weights (what is loaded instead).
NO_EQUIVALENT = {
    "gluon_xception65": "xception65 with TensorFlow-ported weights (xception65.tf_in1k): the Gluon weights are gone",
}


def sat_model_names() -> list[str]:
    """The 69 model names of attack-similarity's released component table."""
    import csv

    path = Path(__file__).resolve().parents[2] / "book" / "data" / "sat" / "model_features_release.csv"
    if not path.exists():
        return []
    with path.open() as fh:
        return [row["Model name"] for row in csv.DictReader(fh)]


register_list_token("sat69", sat_model_names)  # a dry run's preset may pick some of the 69 (ensdiv.config)


def is_timm_name(name: str) -> bool:
    """Whether ``name`` is a timm model (``arch`` or ``arch.tag``), a pinned or aliased SAT name, or
    torchvision's ``squeezenet1_1``."""
    name = SAT_WEIGHTS.get(name, ALIASES.get(name, name))
    return name == "squeezenet1_1" or timm.is_model(name.split(".")[0])


def resolve_paper_name(name: str) -> str:
    """The timm name to build for ``name``: a SAT name's pinned ``arch.tag`` (:data:`SAT_WEIGHTS`), an
    aliased SAT name, or ``name`` itself when timm knows it (unknown -> close matches)."""
    resolved = SAT_WEIGHTS.get(name, ALIASES.get(name, name))
    if is_timm_name(resolved):
        return resolved
    raise unknown_name("timm model", name, timm.list_models())


def _local_weights(model_name: str) -> str | None:
    """Path of timm's cached pretrained weights for ``model_name``, or None (never downloads)."""
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


def _set_input(m: nn.Module) -> None:
    """``m.ensdiv_input`` from timm's resolved data config of ``m`` (its pretrained weights' input size, mean, std)."""
    from timm.data import resolve_data_config

    dc = resolve_data_config(model=m)
    m.ensdiv_input = InputSpec(size=int(dc["input_size"][-1]), mean=tuple(float(v) for v in dc["mean"]),
                               std=tuple(float(v) for v in dc["std"]))


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

    In a dry run (:func:`ensdiv.config.dry_run`) ``pretrained`` builds the same architecture with the same timm
    data config and random weights (``ensdiv_weights`` empty): nothing is read, nothing is needed locally.

    With pretrained weights the model gets ``ensdiv_input``: an :class:`ensdiv.attacks.InputSpec` with
    the side (``input_size[-1]``), mean and std of ``timm.data.resolve_data_config(model=m)``, and
    ``ensdiv_weights``: the weights file. Without them it is left as is (the engine trains on [0, 1]).

    Raises:
        UnknownNameError: not a zoo name, SAT name or timm name.
        EnsdivError: ``pretrained`` asked for but the weights are not on this machine.
    """
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
    if pretrained and dry_run():  # a dry run: the pretrained model's architecture and data config, random weights
        m = timm.create_model(timm_name, pretrained=False, **kwargs)
        _set_input(m)
        m.ensdiv_weights = ""
        return m
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
        m = timm.create_model(timm_name, pretrained=True, **kwargs)
        _set_input(m)
        m.ensdiv_weights = str(file)
        return m
    try:
        return timm.create_model(timm_name, pretrained=False, img_size=img_size, **kwargs)
    except TypeError:  # architectures without an img_size argument (CNNs)
        return timm.create_model(timm_name, pretrained=False, **kwargs)


class PixelModel(nn.Module):
    """A pretrained classifier that takes [0, 1] pixels: ``forward`` resizes and normalises (its
    ``ensdiv_input``) before calling the wrapped model.

    ``ensdiv_input`` of the wrapper keeps only the side, so an attack still runs at the model's own
    resolution (attack-similarity §2: the source's adversarial image is resized for the target).

    Attributes:
        model: the wrapped model.
        ensdiv_name: display name.
        ensdiv_cache_id: what identifies the model in cache keys: its timm name, weights file name and size.
        ensdiv_pipeline: how its evaluation images are framed (size, crop fraction, interpolation, crop mode:
            :func:`ensdiv.data.paper.pipeline_of` of its timm data config; ``None``: the shared default). A
            :class:`~ensdiv.data.paper.PipelineSets` hands each model the images framed its way.
    """

    def __init__(self, model: nn.Module, name: str):
        super().__init__()

        self.model, self.ensdiv_name = model, name
        self.inner_spec = input_spec(model)
        self.ensdiv_input = InputSpec(size=self.inner_spec.size)
        file = getattr(model, "ensdiv_weights", None)
        cfg = getattr(model, "pretrained_cfg", None)
        if isinstance(cfg, dict):
            from timm.data import resolve_data_config

            self.ensdiv_pipeline = pipeline_of(resolve_data_config(model=model))
        else:
            self.ensdiv_pipeline = None
        arch = cfg.get("architecture") if isinstance(cfg, dict) else None
        self.ensdiv_cache_id = {
            "timm": arch or type(model).__name__,
            "weights": Path(file).name if file else "",
            "bytes": Path(file).stat().st_size if file and Path(file).exists() else 0,
        }

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return forward_pixels(self.model, x, self.inner_spec)


def paper_models(
    keys: str | list[str], *, device: str | torch.device | None = None, weights: dict[str, str] | None = None
) -> list[PixelModel]:
    """The papers' pretrained ImageNet classifiers, ready for [0, 1] pixels, in eval mode.

    Args:
        keys: model names: ``"sat69"`` (the 69 models of attack-similarity's SAT table,
            :func:`sat_model_names`), a zoo key or name (``"arch/resnet"`` / ``"resnet"`` -> ``resnet50``),
            a SAT table name or any timm name.
        device: where to put them (default: CUDA when available, else CPU).
        weights: name -> weights file, for models whose weights are not in timm's cache.

    Returns:
        One :class:`PixelModel` per name (``ensdiv_name`` = the key without its category, a SAT name
        as written in the table), each built by :func:`create_paper_model` with 1000 classes, 3
        channels and pretrained weights.

    Raises:
        EnsdivError: weights of a model are not on this machine (the message says where to put them).
        UnknownNameError: a name is neither a zoo name nor a SAT / timm name.
    """
    names: list[str] = []
    for key in [keys] if isinstance(keys, str) else list(keys):
        if key == "sat69" and not sat_model_names():
            raise EnsdivError(
                "The SAT model table book/data/sat/model_features_release.csv is missing, so 'sat69' names "
                "no models; restore it from the repository or list the models by name."
            )
        names += sat_model_names() if key == "sat69" else [key.split("/", 1)[-1]]
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    out = []
    for name in names:
        m = create_paper_model(PAPER_MODELS.get(name, name), num_classes=1000, in_chans=3, img_size=224,
                               pretrained=(weights or {}).get(name, True))  # fmt: skip
        out.append(PixelModel(m, name).eval().to(device))
    return out
