"""Recipes as data: round trips, validation (one sentence each), cache keys; the zoo definitions."""

from __future__ import annotations

import dataclasses

import pytest

from ensdiv.errors import EnsdivError, UnknownNameError
from ensdiv.recipes import Recipe
from ensdiv.zoo import ZOO, category_of, estimate_seconds, zoo_list, zoo_recipes


def test_dict_and_yaml_round_trip_including_teacher():
    r = Recipe(
        model="resnet",
        lr=0.1,
        model_kwargs={"channels": [8, 8, 16, 16]},
        framework="distill",
        teacher=Recipe(model="convnext", seed=3),
        augment="flipcrop+mixup",
    )
    assert Recipe.from_dict(r.to_dict()) == r
    assert Recipe.from_yaml(r.to_yaml()) == r
    assert r.teacher == Recipe(model="convnext", seed=3).to_dict()


def test_key_ignores_name_and_changes_with_every_other_field():
    a = Recipe(name="one")
    assert a.key() == Recipe(name="two").key()
    for f in dataclasses.fields(Recipe):
        if f.name in (
            "name",
            "teacher",
            "model_kwargs",
            "pretrained",
            "scale",
            "framework",
            "distill",
            "augment",
            "optimizer",
            "schedule",
            "pretrain_dataset",
            "model",
            "dataset",
        ):
            continue
        value = getattr(a, f.name)
        changed = value + 1 if isinstance(value, int | float) else value
        assert a.replace(**{f.name: changed}).key() != a.key(), f.name


def test_int_is_accepted_for_float_fields():
    assert Recipe(lr=1).lr == 1.0 and isinstance(Recipe(lr=1).lr, float)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("epochs", "3", "'epochs' must be an int"),
        ("lr", "0.1", "'lr' must be a float"),
        ("model_kwargs", [1], "'model_kwargs' must be a dict"),
        ("seed", True, "'seed' must be an int"),
        ("epochs", 0, "'epochs' must be positive"),
    ],
)
def test_wrong_field_type_is_one_sentence(field, value, message):
    with pytest.raises(EnsdivError, match=message):
        Recipe(**{field: value})


@pytest.mark.parametrize(
    ("field", "value"),
    [("optimizer", "adma"), ("schedule", "cosin"), ("augment", "flip+mixpu"), ("framework", "simclear")],
)
def test_unknown_choice_names_close_matches(field, value):
    with pytest.raises(UnknownNameError, match="Did you mean"):
        Recipe(**{field: value})


def test_unknown_field_in_dict():
    with pytest.raises(UnknownNameError, match="Did you mean 'epochs'"):
        Recipe.from_dict({"epoch": 3})


def test_framework_requirements():
    with pytest.raises(EnsdivError, match="needs a teacher"):
        Recipe(framework="distill")
    with pytest.raises(EnsdivError, match="needs pretrain_dataset"):
        Recipe(framework="pretrain")


def test_zoo_covers_the_papers_categories():
    cpu = ZOO["cpu"]
    cats = {category_of(k) for k in cpu}
    assert {"arch", "reinit", "hparam", "framework", "dataset", "dd"} <= cats
    assert len([k for k in cpu if k.startswith("arch/")]) >= 14
    assert len([k for k in cpu if k.startswith("dd/")]) == 14  # design-diversity's Table i + Figure A
    assert set(ZOO["smoke"]) <= set(cpu) and set(ZOO["paper"]) == set(cpu)
    assert all(r.model.startswith("test_") for r in ZOO["smoke"].values())
    assert ZOO["paper"]["arch/resnet"].scale == "paper"
    assert cpu["reinit/resnet-s1"].replace(seed=0, name="arch/resnet") == cpu["arch/resnet"]


def test_zoo_filters_and_estimate():
    assert set(zoo_recipes("cpu", "reinit")) == {"reinit/resnet-s1", "reinit/resnet-s2", "reinit/resnet-s3"}
    assert list(zoo_recipes("cpu", ["arch/vit"])) == ["arch/vit"]
    with pytest.raises(UnknownNameError, match="Did you mean"):
        zoo_recipes("cpu", "arch/vitt")
    one = zoo_recipes("cpu", "arch/mlp")
    assert estimate_seconds(one, {"mlp": 1000.0}) == pytest.approx((4 * 10000 + 10000 // 3) / 1000.0)


def test_zoo_list_on_empty_store(tmp_path):
    from ensdiv.store import Store

    df = zoo_list("smoke", store=Store(tmp_path))
    assert len(df) == len(ZOO["smoke"]) and not df["trained"].any()


def test_zoo_build_trains_caches_and_lists(tmp_path):
    from ensdiv.store import Store
    from ensdiv.zoo import zoo_build

    st = Store(tmp_path)
    df = zoo_build("smoke", "arch/mlp", store=st, progress=False)
    row = df.iloc[0]
    assert row["trained"] and 0.0 <= row["test_acc"] <= 1.0 and row["params"] > 0
    assert zoo_list("smoke", store=st, only="arch/mlp").iloc[0]["test_acc"] == row["test_acc"]
