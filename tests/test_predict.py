"""Cached predictions and features."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from ensdiv.data.registry import TensorSet
from ensdiv.errors import EnsdivError
from ensdiv.models import create_model
from ensdiv.predict import predict, predict_many
from ensdiv.store import Store
from ensdiv.train.recipes import Recipe


def _set(n=40, c=1, size=28, classes=10) -> TensorSet:
    g = torch.Generator().manual_seed(0)
    return TensorSet(
        torch.rand(n, c, size, size, generator=g),
        torch.arange(n) % classes,
        "rand",
        [str(i) for i in range(classes)],
    )


def test_predict_module_matches_forward_and_features_feed_the_head():
    torch.manual_seed(0)
    m = create_model("test_resnet").eval()
    data = _set()
    logits, feats = predict(m, data, features=True, batch_size=16)
    with torch.no_grad():
        ref = m(data.x)
        assert torch.allclose(logits, ref, atol=1e-5)
        assert torch.allclose(m.get_classifier()(feats), ref, atol=1e-5)
    assert feats.shape == (40, m.num_features)


def test_features_fallback_hooks_last_linear():
    net = nn.Sequential(nn.Flatten(), nn.Linear(784, 7), nn.ReLU(), nn.Linear(7, 10))
    logits, feats = predict(net, _set(), features=True)
    assert feats.shape == (40, 7)
    assert torch.allclose(net[3](feats), logits, atol=1e-5)


class _Ens(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList(nn.Sequential(nn.Flatten(), nn.Linear(784, 10)) for _ in range(3))

    def forward(self, x):
        return torch.stack([h(x) for h in self.heads])


def test_ensemble_in_one_model_gives_mnc():
    out = predict(_Ens(), _set(), batch_size=16)
    assert out.shape == (3, 40, 10)


def test_packed_member_features_are_the_input_of_each_members_head():
    """Member m's logits depend on member m's features only: perturbing member 1's block of the
    member-major feature vector changes member 1's logits and leaves member 0's (γ=1 head) alone."""
    from ensdiv.models.layers.packed import to_members

    torch.manual_seed(0)
    m = create_model("test_packed", num_estimators=4, alpha=2, gamma=1).eval()
    data = _set(12)
    logits, feats = predict(m, data, features=True)
    assert logits.shape == (4, 12, 10) and feats.shape[:2] == (4, 12)
    flat = feats.transpose(0, 1).reshape(12, -1)  # back to member-major (B, M·D)
    with torch.no_grad():
        assert torch.allclose(to_members(m.head(flat), 4), logits, atol=1e-5)
        bumped = feats.clone()
        bumped[1] += 1.0
        out = to_members(m.head(bumped.transpose(0, 1).reshape(12, -1)), 4)
    for k in (0, 2, 3):
        assert torch.allclose(out[k], logits[k], atol=1e-5)
    assert not torch.allclose(out[1], logits[1], atol=1e-3)


@pytest.mark.parametrize("name", ["test_batchensemble", "test_mimo", "test_masksembles", "test_single"])
def test_efficient_ensembles_give_member_features(name):
    torch.manual_seed(0)
    m = create_model(name).eval()
    logits, feats = predict(m, _set(8), features=True)
    if name == "test_single":  # one member: (N, D), like any single model
        assert logits.shape == (8, 10) and feats.ndim == 2 and feats.shape[0] == 8
        return
    assert logits.shape == (4, 8, 10) and feats.shape[:2] == (4, 8)
    if name == "test_mimo":  # one shared trunk: the same features for every head
        assert torch.equal(feats[0], feats[3])
    if name == "test_batchensemble":  # rank-1 factors differ per member, so do the features
        assert not torch.allclose(feats[0], feats[1])


def test_recipe_predictions_are_cached_and_stack(tmp_path):
    st = Store(tmp_path)
    recipes = [Recipe.make(model="test_cnn", epochs=1, batch_size=64, train_subset=128, seed=s) for s in (0, 1)]
    data = _set()
    a = predict(recipes[0], data, store=st)
    assert len(st.entries("predictions")) == 1 and len(st.entries("model")) == 1
    assert torch.equal(predict(recipes[0], data, store=st), a)
    many = predict_many(recipes, data, store=st)
    assert many.shape == (2, 40, 10) and torch.equal(many[0], a)


def test_bad_inputs_one_sentence():
    m = create_model("test_cnn")
    with pytest.raises(EnsdivError, match="3 channels"):
        predict(m, _set(c=3))
    with pytest.raises(EnsdivError, match="outputs 10 classes"):
        predict(m, _set(classes=5))
    with pytest.raises(EnsdivError, match="nn.Module or an ed.Recipe"):
        predict("test_cnn", _set())
