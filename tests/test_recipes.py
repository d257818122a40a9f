"""Recipes as data: five parts, flat-name construction, round trips, validation (one sentence each),
cache keys; the zoo definitions."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import ensdiv as ed
from ensdiv.chapters.zoo import ZOO, category_of, estimate_seconds, zoo_build, zoo_list, zoo_recipes
from ensdiv.errors import EnsdivError, InvalidInputError, UnknownNameError
from ensdiv.train import Arch, DataSpec, Distill, Heads, Joint, Optim, Pretrain, Recipe, Seeds


def test_make_routes_flat_names_to_parts():
    r = Recipe.make(model="resnet", lr=0.1, epochs=2, train_subset=100, augment="flip", seed=3,
                    model_kwargs={"channels": [8, 8, 16, 16]}, dropout=0.1)
    assert r.model == Arch("resnet", {"channels": [8, 8, 16, 16]}, dropout=0.1)
    assert r.data == DataSpec(subset=100, augment="flip")
    assert r.optim == Optim(epochs=2, lr=0.1)
    assert r.seeds == Seeds(init=3, order=3, subset=0)


def test_three_separate_seeds():
    r = Recipe.make(seed=1)
    assert r.replace(init_seed=5).seeds == Seeds(5, 1, 0)
    assert r.replace(order_seed=5).seeds == Seeds(1, 5, 0)
    assert r.replace(subset_seed=5).seeds == Seeds(1, 1, 5)
    keys = {r.key()["seeds"].__repr__(), r.replace(init_seed=5).key()["seeds"].__repr__(),
            r.replace(order_seed=5).key()["seeds"].__repr__()}
    assert len(keys) == 3


def test_dict_and_yaml_round_trip_including_teacher_and_backbone():
    teacher = Recipe.make(model="convnext", seed=3)
    r = Recipe.make(model="resnet", lr=0.1, augment="flipcrop+mixup").replace(method=Distill(teacher=teacher))
    assert Recipe.from_dict(r.to_dict()) == r
    assert Recipe.from_yaml(r.to_yaml()) == r
    assert r.teacher == teacher
    h = Recipe.make(model="resnet").replace(method=Heads(backbone=teacher, members=3, loss="independent"))
    assert Recipe.from_yaml(h.to_yaml()) == h and h.backbone == teacher
    j = Recipe.make().replace(method=Joint(members=3, loss="independent", lam=0.2))
    assert Recipe.from_dict(j.to_dict()).method == Joint(3, "independent", 0.2)


def test_key_ignores_names_also_inside_a_teacher():
    a = Recipe.make(name="one").replace(method=Distill(teacher=Recipe.make(name="t1")))
    b = Recipe.make(name="two").replace(method=Distill(teacher=Recipe.make(name="t2")))
    assert a.key() == b.key()


@pytest.mark.parametrize("part", [Arch, DataSpec, Optim, Seeds])
def test_key_changes_with_every_field(part):
    base = Recipe.make(schedule="step")  # lr_decay acts on a step schedule only
    attr = {Arch: "model", DataSpec: "data", Optim: "optim", Seeds: "seeds"}[part]
    for f in dataclasses.fields(part):
        value = getattr(getattr(base, attr), f.name)
        changed = {str: {"name": "resnet", "dataset": "fmnist/val", "augment": "flip", "optimizer": "adamw",
                         "schedule": "cosine"}.get(f.name), bool: not value, dict: {"x": 1}, list: [1]}.get(type(value))
        if f.name == "lr_decay":
            changed = 0.2
        if changed is None:
            changed = value + 1
        other = base.replace(**{attr: getattr(base, attr).replace(**{f.name: changed})})
        assert other.key() != base.key(), f"{part.__name__}.{f.name}"


def test_int_is_accepted_for_float_fields():
    assert Recipe.make(lr=1).optim.lr == 1.0 and isinstance(Recipe.make(lr=1).optim.lr, float)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("epochs", "3", "'epochs' must be an int"),
        ("lr", "0.1", "'lr' must be a float"),
        ("model_kwargs", [1], "'kwargs' must be a dict"),
        ("seed", True, "'init' must be an int"),
        ("epochs", 0, "'epochs' must be positive"),
        ("train_subset", -5, "'subset' must be zero or positive"),
        ("lr", -0.1, "'lr' must be zero or positive"),
    ],
)
def test_wrong_field_type_or_range_is_one_sentence(field, value, message):
    with pytest.raises(InvalidInputError, match=message) as err:
        Recipe.make(**{field: value})
    assert isinstance(err.value, ValueError) and isinstance(err.value, EnsdivError)


@pytest.mark.parametrize(("field", "value"), [("optimizer", "adma"), ("schedule", "cosin"), ("augment", "flip+mixpu")])
def test_unknown_choice_names_close_matches(field, value):
    with pytest.raises(UnknownNameError, match="Did you mean"):
        Recipe.make(**{field: value})


def test_unknown_flat_name_and_unknown_dict_keys():
    with pytest.raises(UnknownNameError, match="Did you mean 'epochs'"):
        Recipe.make(epoch=3)
    with pytest.raises(UnknownNameError, match="Did you mean 'epochs'"):
        Recipe.from_dict({"optim": {"epoch": 3}})
    with pytest.raises(UnknownNameError, match="training method"):
        Recipe.from_dict({"method": {"kind": "magic"}})


def test_part_of_the_wrong_type_is_one_sentence():
    with pytest.raises(InvalidInputError, match="Recipe.optim must be an ed.Optim"):
        Recipe(optim={"epochs": 3})
    with pytest.raises(InvalidInputError, match="Recipe.method must be one of"):
        Recipe(method="supervised")


def test_method_requirements():
    with pytest.raises(InvalidInputError, match="needs a teacher"):
        Distill()
    with pytest.raises(InvalidInputError, match="needs a source"):
        Pretrain(objective="supervised")
    with pytest.raises(InvalidInputError, match="needs a backbone"):
        Heads()
    with pytest.raises(InvalidInputError, match="'members' must be positive"):
        Joint(members=0)


def test_pretrain_head_and_source_size_are_in_the_key_at_their_defaults_too():
    """``head`` and ``source_size`` are in the key at their defaults too (a changed default changes every key that
    uses it); set, they enter it with their value; a wrong value is one sentence."""
    p = Pretrain(dataset="pretrain/shapes", epochs=2)
    assert (p.to_dict()["head"], p.to_dict()["source_size"]) == ("probe", 0)
    f = p.replace(head="finetune", source_size=50000)
    assert (f.to_dict()["head"], f.to_dict()["source_size"]) == ("finetune", 50000)
    base = Recipe.make(model="test_cnn", epochs=1)
    assert base.replace(method=f).key() != base.replace(method=p).key()
    assert Recipe.from_dict(base.replace(method=f).to_dict()).method == f
    with pytest.raises(UnknownNameError, match="head after pre-training"):
        Pretrain(dataset="pretrain/shapes", head="linear")
    with pytest.raises(InvalidInputError, match="'source_size' must be zero or positive"):
        Pretrain(dataset="pretrain/shapes", source_size=-1)


def test_fine_tuned_pretraining_shares_the_backbone_and_trains_every_layer(tmp_path):
    """A probe and a fine-tuned recipe over the same pre-training share one cached backbone; the probe keeps its
    convolutions, fine-tuning changes them; the backbone's key records the source size."""
    store = ed.Store(tmp_path)
    base = Recipe.make(model="test_cnn", epochs=1, batch_size=64, train_subset=128)
    pre = Pretrain(dataset="pretrain/shapes", epochs=1, source_size=256)
    probe = ed.train_recipe(base.replace(method=pre), store=store, progress=False)
    tuned = ed.train_recipe(base.replace(method=pre.replace(head="finetune")), store=store, progress=False)
    (entry,) = store.entries("pretrained")
    config = store.read_config(entry)
    assert config["method"]["source_size"] == 256 and "head" not in config["method"]
    backbone = store.load("pretrained", config)
    conv = [k for k, v in backbone.items() if v.dim() == 4]
    assert conv
    assert all(torch.equal(probe.state_dict()[k], backbone[k]) for k in conv)
    assert all(not torch.equal(tuned.state_dict()[k], backbone[k]) for k in conv)


def test_zoo_covers_the_papers_categories():
    cpu = ZOO["cpu"]
    cats = {category_of(k) for k in cpu}
    assert {"arch", "reinit", "hparam", "framework", "dataset", "dd"} <= cats
    assert len([k for k in cpu if k.startswith("arch/")]) >= 14
    assert len([k for k in cpu if k.startswith("dd/")]) == 14  # design-diversity's Table i + Figure A
    # the paper base already flips and crops: its "flipcrop" variant would be the base itself, so it is left out
    assert set(ZOO["smoke"]) <= set(cpu) and set(ZOO["paper"]) == set(cpu) - {"hparam/resnet-flipcrop"}
    assert all(r.model.name.startswith("test_") for r in ZOO["smoke"].values())
    # a registry name is one architecture: the paper zoo names timm's ResNet-50, the cpu zoo the small ResNet
    assert ZOO["paper"]["arch/resnet"].model.name == "resnet50" and cpu["arch/resnet"].model.name == "resnet"
    assert cpu["reinit/resnet-s1"].replace(seed=0, name="arch/resnet") == cpu["arch/resnet"]


def test_zoo_entries_train_distinct_models_and_hparams_bracket_the_base():
    """A change of the base recipe must not turn an hparam/ variant into the base model itself (one cached
    model under two names; the key leaves out the name); the only intended alias is design-diversity's Squeezenet
    = the zoo's SqueezeNet."""
    cpu = ZOO["cpu"]
    for scale in ("cpu", "paper"):  # at paper the base's flip + crop made "hparam/resnet-flipcrop" the base
        by_key: dict[str, list[str]] = {}
        for name, r in ZOO[scale].items():
            by_key.setdefault(repr(r.key()), []).append(name)
        shared = sorted(sorted(v) for v in by_key.values() if len(v) > 1)
        assert shared == [["arch/squeezenet", "dd/Squeezenet"]], scale
    base = cpu["arch/resnet"].optim
    assert (base.lr, base.weight_decay) == (0.1, 2e-3)  # bench_zoo_recipes.py row 30k-4-lr2-wd4
    lrs = [cpu[f"hparam/resnet-{k}"].optim.lr for k in ("lr0.01", "lr0.2")]
    wds = [cpu[f"hparam/resnet-{k}"].optim.weight_decay for k in ("wd0", "wd5e-3")]
    assert lrs[0] < base.lr < lrs[1] and wds[0] < base.weight_decay < wds[1]


def test_zoo_filters_and_estimate():
    assert set(zoo_recipes("cpu", "reinit")) == {f"reinit/resnet-s{s}" for s in range(1, 6)}
    assert list(zoo_recipes("cpu", ["arch/vit"])) == ["arch/vit"]
    with pytest.raises(UnknownNameError, match="Did you mean"):
        zoo_recipes("cpu", "arch/vitt")
    one = zoo_recipes("cpu", "arch/mlp")
    assert estimate_seconds(one, {"mlp": 1000.0}) == pytest.approx((4 * 30000 + 10000 // 3) / 1000.0)  # 30k x 4


def test_zoo_list_on_empty_store(tmp_path):
    df = zoo_list("smoke", store=ed.Store(tmp_path))
    assert len(df) == len(ZOO["smoke"]) and not df["trained"].any()


def test_zoo_build_trains_caches_and_lists(tmp_path):
    st = ed.Store(tmp_path)
    df = zoo_build("smoke", "arch/mlp", store=st, progress=False)
    row = df.iloc[0]
    assert row["trained"] and 0.0 <= row["test_acc"] <= 1.0 and row["params"] > 0
    assert zoo_list("smoke", store=st, only="arch/mlp").iloc[0]["test_acc"] == row["test_acc"]


# ---- the key: every field, defaults included ---------------------------------------------------------------
def test_a_recipe_key_is_the_sha256_of_every_field():
    """The key of a recipe's model is the SHA-256 of the canonical JSON of every field of every part (defaults
    such as Nesterov momentum and the step schedules' decay factor included), computed here by hand."""
    import hashlib
    import json

    from ensdiv.store import config_key

    zoo_like = Recipe.make(model="resnet", epochs=4, lr=0.05, augment="flip", train_subset=30000, batch_size=64)
    by_hand = {
        "model": {"name": "resnet", "kwargs": {}, "dropout": 0.0, "pretrained": False},
        "data": {"dataset": "fmnist/train", "subset": 30000, "augment": "flip", "crop_pad": 2},
        "optim": {"epochs": 4, "batch_size": 64, "lr": 0.05, "optimizer": "sgd", "momentum": 0.9,
                  "weight_decay": 0.0005, "eps": 1e-08, "schedule": "cosine", "milestones": [], "warmup_epochs": 0,
                  "label_smoothing": 0.0, "decay_all": False, "nesterov": False, "lr_decay": 0.1},
        "seeds": {"init": 0, "order": 0, "subset": 0},
        "method": {"kind": "supervised"},
    }
    assert zoo_like.key() == by_hand
    text = json.dumps(by_hand, sort_keys=True, separators=(",", ":"))
    assert config_key(zoo_like.key()) == hashlib.sha256(text.encode()).hexdigest()
    pe_paper = Recipe.make(model="pe_resnet18", dataset="cifar10/train", epochs=75, lr=0.05, weight_decay=5e-4,
                           schedule="multistep", milestones=[25, 50], decay_all=True, augment="flipcrop",
                           crop_pad=4, seed=3)
    set_ = pe_paper.replace(nesterov=True, lr_decay=0.2)
    assert (set_.key()["optim"]["nesterov"], set_.key()["optim"]["lr_decay"]) == (True, 0.2)
    assert config_key(set_.key()) != config_key(pe_paper.key())
    assert Recipe.from_dict(set_.to_dict()) == set_ and Recipe.from_dict(pe_paper.to_dict()) == pe_paper


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"lr_decay": 0.0, "schedule": "step"}, r"lr_decay .* must be in \(0, 1\]"),
        ({"lr_decay": 1.5, "schedule": "step"}, r"lr_decay .* must be in \(0, 1\]"),
        ({"lr_decay": 0.2}, "lr_decay applies to the step and multistep schedules only, not to 'cosine'"),
        ({"nesterov": True, "optimizer": "adamw"}, "Nesterov momentum needs optimizer 'sgd'"),
        ({"nesterov": True, "momentum": 0.0}, "with momentum 0.0"),
        ({"nesterov": 1}, "'nesterov' must be a bool"),
    ],
)
def test_bad_nesterov_or_lr_decay_is_one_sentence(changes, message):
    with pytest.raises(InvalidInputError, match=message):
        Recipe.make(**changes)


def test_lr_decay_sets_the_factor_at_each_milestone():
    # 200 epochs, x0.2 at 60/120/160 (hand-computed): 1, 0.2, 0.04, 0.008
    ms = (60 / 200, 120 / 200, 160 / 200)
    factors = [ed.train.lr_factor(e / 200, schedule="multistep", milestones=ms, decay=0.2)
               for e in (59, 60, 119, 120, 159, 160, 199)]
    assert factors == pytest.approx([1.0, 0.2, 0.2, 0.04, 0.04, 0.008, 0.008])
    assert [ed.train.lr_factor(t, schedule="step", decay=0.5) for t in (0.49, 0.5, 0.75)] == pytest.approx(
        [1.0, 0.5, 0.25])
    # as torch's MultiStepLR(gamma=0.2), stepped once per epoch
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[60, 120, 160], gamma=0.2)
    ours = []
    for epoch in range(200):
        ours.append(ed.train.lr_factor(epoch / 200, schedule="multistep", milestones=ms, decay=0.2))
        assert ours[-1] == pytest.approx(opt.param_groups[0]["lr"]), epoch
        opt.step()
        sched.step()


@pytest.mark.parametrize(("nesterov", "optimizer"), [(True, "sgd"), (False, "sgd"), (False, "rmsprop")])
def test_nesterov_reaches_torch_sgd(nesterov, optimizer):
    optim = Optim(optimizer=optimizer, nesterov=nesterov, momentum=0.9)
    opt = ed.train.make_optimizer(torch.nn.Linear(3, 2), optim)
    if optimizer == "sgd":
        assert type(opt) is torch.optim.SGD
        assert all(g["nesterov"] is nesterov and g["momentum"] == 0.9 for g in opt.param_groups)
    else:
        assert "nesterov" not in opt.param_groups[0]
