"""The efficient-ensemble baselines as the paper's reference implementation builds them: Masksembles'
mask placement and batch repetition, MIMO's ρ = 1 input construction, per-seed randomness,
BatchEnsemble's fast-weight initialisation."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ensdiv.errors import EnsdivError, UnknownNameError
from ensdiv.models import create_model
from ensdiv.models.efficient import (
    BatchEnsembleConv2d,
    BatchEnsembleLinear,
    BatchEnsembleResNet,
    MasksemblesResNet,
    MIMOResNet,
    mimo_permutations,
)


def _masked_layers(model: MasksemblesResNet) -> list[nn.Module]:
    return [m for m in model.modules() if type(m).__name__ == "_MaskedInput"]


def test_masksembles_masks_every_conv_after_the_stem_and_the_head():
    m = MasksemblesResNet("test", num_estimators=3, num_classes=4, in_chans=1, seed=0)
    convs = [c for c in m.backbone.modules() if isinstance(c, nn.Conv2d)]
    masked = _masked_layers(m)
    # every convolution but the stem, plus the classifier
    assert len(masked) == len(convs) - 1 + 1 == m.num_masked_layers
    assert all(isinstance(x.layer, nn.Conv2d) for x in masked[:-1]) and masked[-1].layer is not None
    assert m.backbone.conv1 not in [x.layer for x in masked]


def test_masksembles_member_m_sees_only_its_channels():
    torch.manual_seed(0)
    m = MasksemblesResNet("test", num_estimators=2, num_classes=4, in_chans=1, seed=1).eval()
    layer = _masked_layers(m)[1]
    seen = {}
    layer.layer.register_forward_hook(lambda mod, inp, out: seen.setdefault("x", inp[0]))
    m(torch.rand(3, 1, 16, 16))
    x = seen["x"]  # (M·B, C, H, W), member-major
    for member in range(2):
        dropped = layer.masks[member] == 0
        rows = x[member * 3:(member + 1) * 3]
        assert torch.all(rows[:, dropped] == 0)
        assert rows[:, ~dropped].abs().sum() > 0


@pytest.mark.parametrize(("mode", "rows"), [("repeat", 3 * 5), ("split", 5)])
def test_masksembles_training_repeats_the_batch_by_default(mode, rows):
    m = MasksemblesResNet("test", num_estimators=3, num_classes=4, in_chans=1, seed=0, train_mode=mode).train()
    seen = []
    m.backbone.conv1.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].shape[0]))
    loss = m.training_loss(torch.rand(5, 1, 16, 16), torch.tensor([0, 1, 2, 3, 0]))
    assert seen == [rows] and loss.ndim == 0
    with pytest.raises(EnsdivError, match="train_mode"):
        MasksemblesResNet("test", train_mode="chunks")


def test_mimo_rho_one_gives_every_member_the_same_images_and_rho_zero_does_not():
    g = torch.Generator().manual_seed(0)
    same = mimo_permutations(8, 3, rho=1.0, generator=g)
    assert all(torch.equal(same[0], p) for p in same)
    assert sorted(same[0].tolist()) == list(range(8))  # a shuffle of the batch
    apart = mimo_permutations(8, 3, rho=0.0, generator=torch.Generator().manual_seed(0))
    assert not torch.equal(apart[0], apart[1])
    half = mimo_permutations(8, 2, rho=0.5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(half[0][4:], half[1][4:])  # the last ρ of the shuffle is shared


def test_mimo_batch_repetition_and_defaults():
    perms = mimo_permutations(4, 2, rho=1.0, batch_repeat=3, generator=torch.Generator().manual_seed(0))
    assert len(perms[0]) == 12 and sorted(perms[0].tolist()) == sorted(list(range(4)) * 3)
    m = MIMOResNet("test", num_estimators=2, num_classes=4, in_chans=1)
    assert m.rho == 1.0 and m.batch_repeat == 1
    with pytest.raises(EnsdivError, match="batch_repeat"):
        MIMOResNet("test", batch_repeat=0)


def test_mimo_shuffles_follow_the_global_generator_so_a_resumed_run_repeats_them():
    m = MIMOResNet("test", num_estimators=2, num_classes=4, in_chans=1, rho=0.5).train()
    x, y = torch.rand(6, 1, 16, 16), torch.tensor([0, 1, 2, 3, 0, 1])
    torch.manual_seed(3)
    a = m.training_loss(x, y)
    torch.manual_seed(3)
    b = m.training_loss(x, y)
    assert torch.equal(a, b)


@pytest.mark.parametrize("name", ["test_batchensemble", "test_masksembles"])
def test_baseline_randomness_comes_from_the_run_seed(name):
    def build(seed):
        torch.manual_seed(seed)
        return create_model(name, num_classes=4)

    def randomness(model):
        keys = ("r", "s", "masks")
        return torch.cat([v.flatten().float() for k, v in model.state_dict().items() if k.rsplit(".", 1)[-1] in keys])

    assert torch.equal(randomness(build(0)), randomness(build(0)))
    assert not torch.equal(randomness(build(0)), randomness(build(1)))


def test_masksembles_eval_output_of_member_m_is_the_backbone_under_mask_m():
    torch.manual_seed(0)
    net = MasksemblesResNet("test", num_estimators=2, num_classes=5, in_chans=1, seed=2).eval()
    x = torch.randn(3, 1, 16, 16)
    out = net(x)
    layers = _masked_layers(net)
    for member in range(2):
        originals = [layer.forward for layer in layers]
        for layer in layers:  # mask every row with member m's mask, no batch repetition
            layer.forward = _fixed_mask(layer, member)
        bb = net.backbone
        ref = bb.head(bb.forward_features(x))
        for layer, f in zip(layers, originals, strict=True):
            layer.forward = f
        torch.testing.assert_close(out[member], ref, atol=1e-5, rtol=1e-5)


def _fixed_mask(layer: nn.Module, member: int):
    def forward(h: torch.Tensor) -> torch.Tensor:
        return layer.layer(h * layer.masks[member].view(1, -1, *[1] * (h.dim() - 2)))

    return forward


# ---- BatchEnsemble's fast-weight initialisation: random signs (default) or the reference's N(1, 0.5²) ------
def _fast_weights(model: nn.Module) -> torch.Tensor:
    layers = [m for m in model.modules() if isinstance(m, BatchEnsembleConv2d | BatchEnsembleLinear)]
    return torch.cat([torch.cat([m.r.flatten(), m.s.flatten()]) for m in layers]).detach()


def test_normal_fast_weights_have_mean_one_and_std_half_on_a_large_layer():
    layer = BatchEnsembleLinear(4096, 4096, 4, seed=3, fast_weight_init="normal")
    w = torch.cat([layer.r.flatten(), layer.s.flatten()]).detach()  # 32,768 draws
    # the sample mean and std of 32,768 normal draws are within 0.01 of 1 and 0.5 (about 3.6 and 5 standard errors)
    assert abs(w.mean().item() - 1.0) < 0.01 and abs(w.std().item() - 0.5) < 0.01
    assert (w < 0).float().mean().item() == pytest.approx(0.0228, abs=0.004)  # P(N(1, 0.25) < 0) = Φ(-2)
    signs = BatchEnsembleLinear(4096, 4096, 4, seed=3)  # the default: random signs
    assert set(torch.cat([signs.r.flatten(), signs.s.flatten()]).unique().tolist()) == {-1.0, 1.0}


def test_normal_fast_weights_follow_the_seed_and_reach_the_registered_model():
    def build(seed: int, init: str) -> nn.Module:
        return create_model("test_batchensemble", num_classes=4, in_chans=1, img_size=16, seed=seed,
                            fast_weight_init=init)

    a, b, c = _fast_weights(build(5, "normal")), _fast_weights(build(5, "normal")), _fast_weights(build(6, "normal"))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert not set(a.unique().tolist()) <= {-1.0, 1.0}
    assert set(_fast_weights(build(5, "random_sign")).unique().tolist()) == {-1.0, 1.0}
    conv = BatchEnsembleConv2d(nn.Conv2d(3, 8, 3), 2, seed=0, fast_weight_init="normal")
    assert conv.r.shape == (2, 3) and conv.s.shape == (2, 8)


@pytest.mark.parametrize("build", [
    lambda: BatchEnsembleResNet("test", num_classes=4, in_chans=1, fast_weight_init="gaussian"),
    lambda: BatchEnsembleLinear(3, 2, 2, fast_weight_init="Normal"),
    lambda: BatchEnsembleConv2d(nn.Conv2d(3, 8, 3), 2, fast_weight_init="sign"),
])
def test_unknown_fast_weight_init_is_one_sentence(build):
    with pytest.raises(UnknownNameError, match="fast_weight_init"):
        build()
