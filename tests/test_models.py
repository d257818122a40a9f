"""Model registry: every cpu/test model builds, has the right output shape and head API; bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from ensdiv.errors import EnsdivError, UnknownNameError
from ensdiv.models import cpu, create_model, list_models, model_info, register_model
from ensdiv.models.paper import ALIASES, PAPER_MODELS, resolve_paper_name, sat_model_names

# the CPU-scale architectures: every function registered in ensdiv/models/cpu.py except the test_ variants
CPU_MODELS = sorted(n for n in list_models(include_test=False) if model_info(n).factory.__module__ == cpu.__name__)
TEST_MODELS = [f"test_{n}" for n in CPU_MODELS] + ["test_cnn"]


def test_zoo_has_at_least_14_architectures_in_6_families():
    assert len(CPU_MODELS) >= 14
    assert len({model_info(n).family for n in CPU_MODELS}) >= 6
    assert set(CPU_MODELS) <= set(list_models(include_test=False))
    assert set(TEST_MODELS) <= set(list_models("test_*"))


@pytest.mark.parametrize("name", TEST_MODELS)
def test_tiny_models_forward_features_and_head(name):
    torch.manual_seed(0)
    m = create_model(name, num_classes=7).eval()
    x = torch.rand(3, 1, 28, 28)
    out = m(x)
    assert out.shape == (3, 7)
    feats = m.forward_head(m.forward_features(x), pre_logits=True)
    heads = m.get_classifier()
    head = heads[0] if isinstance(heads, tuple) else heads
    assert feats.shape == (3, head.in_features)
    assert sum(p.numel() for p in m.parameters()) < 20_000


def test_cpu_models_build_with_other_inputs():
    m = create_model("resnet", num_classes=3, in_chans=3, img_size=32)
    assert m(torch.rand(2, 3, 32, 32)).shape == (2, 3)
    v = create_model("vit", img_size=32)
    assert v(torch.rand(2, 1, 32, 32)).shape == (2, 10)


def test_overrides_reach_the_timm_class():
    a = create_model("resnet", channels=(8, 8, 16, 16))
    b = create_model("resnet")
    assert sum(p.numel() for p in a.parameters()) < sum(p.numel() for p in b.parameters())
    d = create_model("small_cnn", drop_rate=0.5)
    assert d.drop.p == 0.5


def test_register_model_decorator():
    @register_model("unit_linear", family="test-family", description="a linear probe")
    def _factory(num_classes, in_chans, img_size, **kw):
        return nn.Sequential(nn.Flatten(), nn.Linear(in_chans * img_size * img_size, num_classes))

    assert "unit_linear" in list_models(family="test-family")
    assert create_model("unit_linear", num_classes=4)(torch.rand(2, 1, 28, 28)).shape == (2, 4)


def test_unknown_name_suggests_close_matches():
    with pytest.raises(UnknownNameError, match="Did you mean 'resnet'"):
        create_model("resnte")


@pytest.mark.parametrize("kw", [{"num_classes": 0}, {"in_chans": "1"}, {"img_size": 2.5}])
def test_bad_sizes_are_one_sentence(kw):
    with pytest.raises(EnsdivError, match="positive int"):
        create_model("test_cnn", **kw)


def test_bad_override_is_one_sentence():
    with pytest.raises(EnsdivError, match="does not accept"):
        create_model("test_cnn", no_such_option=3)


def test_pretrained_at_cpu_scale_is_refused():
    with pytest.raises(EnsdivError, match="registered CPU-scale model without pretrained weights"):
        create_model("resnet", pretrained=True)


def test_a_name_is_one_architecture_and_missing_weights_say_where(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the CPU-scale ResNet and timm's ResNet-50 are two names; PAPER_MODELS says which stands for which
    assert PAPER_MODELS["resnet"] == "resnet50" and PAPER_MODELS["deit"] == "deit_tiny_patch16_224"
    small, big = create_model("resnet"), create_model("resnet50", in_chans=1)
    assert sum(p.numel() for p in small.parameters()) < sum(p.numel() for p in big.parameters()) / 10
    assert resolve_paper_name("resnet50") == "resnet50.a1_in1k"  # the SAT paper's weights, pinned
    m = create_model("resnet10t", num_classes=5, img_size=32).eval()  # a timm name builds timm's model
    assert m(torch.rand(1, 1, 32, 32)).shape == (1, 5)
    with pytest.raises(EnsdivError, match="not on this machine.*put them in timm's cache"):
        create_model("resnet50", pretrained=True)
    with pytest.raises(EnsdivError, match="not on this machine"):
        create_model("resnet50", pretrained=str(tmp_path / "missing.safetensors"))


def test_create_model_has_no_scale_switch():
    with pytest.raises(EnsdivError, match="does not accept these options"):
        create_model("resnet", scale="paper")


def test_every_sat_name_resolves_to_a_timm_model():
    names = sat_model_names()
    assert len(names) == 69
    import timm

    for n in names:
        r = resolve_paper_name(n)
        assert timm.is_model(r), n
    assert set(ALIASES) <= set(names)


def test_unknown_paper_name():
    with pytest.raises(UnknownNameError, match="Unknown model 'resnet5O'"):
        create_model("resnet5O")


def test_every_sat_name_resolves_offline_to_pinned_pretrained_weights():
    """The 69 SAT models and Fig. G.2's Gluon ResNeXt-50 resolve to an ``arch.tag`` that current timm
    has pretrained weights for (its registry only: nothing is downloaded)."""
    import timm

    from ensdiv.models.paper import NO_EQUIVALENT, SAT_WEIGHTS

    pretrained = set(timm.list_pretrained())
    for name in [*sat_model_names(), "gluon_resnext50_32x4d"]:
        resolved = resolve_paper_name(name)
        if name in NO_EQUIVALENT:
            continue
        tagged = resolved if "." in resolved else timm.models.get_pretrained_cfg(resolved) and resolved
        assert tagged in pretrained or any(p.startswith(resolved + ".") for p in pretrained), name
    # the renamed and re-defaulted ones load the weights the paper's timm 0.6.7 loaded
    assert SAT_WEIGHTS["convnext_tiny"] == "convnext_tiny.fb_in1k"
    assert resolve_paper_name("gluon_resnet101_v1c") == "resnet101c.gluon_in1k"
    assert resolve_paper_name("jx_nest_tiny") == "nest_tiny_jx.goog_in1k"
    assert all(v in pretrained for v in SAT_WEIGHTS.values())


def test_every_sat_name_is_pinned_to_one_set_of_weights():
    """#33: all 69 SAT names (and Fig. G.2's extra model) resolve to an explicit ``arch.tag``, so a timm upgrade that
    moves a default cannot change the models a page measures; each tag is one the installed timm knows."""
    import timm

    pretrained = set(timm.list_pretrained())
    for name in [*sat_model_names(), "gluon_resnext50_32x4d"]:
        resolved = resolve_paper_name(name)
        assert "." in resolved and resolved in pretrained, (name, resolved)
    assert resolve_paper_name("gluon_xception65") == "xception65.tf_in1k"  # as NO_EQUIVALENT says
    assert resolve_paper_name("rexnet_150") == "rexnet_150.nav_in1k"
