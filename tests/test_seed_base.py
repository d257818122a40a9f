"""The seed base (``--seed-base K``, :mod:`ensdiv.seeding`): a second, independent run of the book moves every
training seed, keys its cache entries and its pages apart, and changes nothing at ``K = 0``."""

from __future__ import annotations

import pytest
import torch

from ensdiv import seeding
from ensdiv.book import cli
from ensdiv.errors import InvalidInputError
from ensdiv.paths import build_dir
from ensdiv.store import config_key
from ensdiv.train import derive_seed, moved


def _mix(*parts: int) -> int:
    """derive_seed written out by hand (the hash the engine documents)."""
    h = 0x9E3779B1
    for p in parts:
        h = (h * 1_000_003 ^ (p & 0xFFFFFFFF)) & 0xFFFFFFFFFFFF
    return h % (2**31 - 1)


def test_seed_base_zero_changes_no_seed_key_or_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(seeding.SEED_BASE_ENV, raising=False)
    monkeypatch.delenv("ENSDIV_BUILD", raising=False)
    assert derive_seed(3, 1, 2) == _mix(3, 1, 2)
    assert moved(7) == 7
    import hashlib

    assert config_key({"b": 1, "a": [1, 2]}) == hashlib.sha256(b'{"a":[1,2],"b":1}').hexdigest()
    assert build_dir().name == "_build"
    monkeypatch.setenv(seeding.SEED_BASE_ENV, "0")
    assert derive_seed(3, 1, 2) == _mix(3, 1, 2) and build_dir().name == "_build"


def test_a_seed_base_moves_every_derived_seed_the_keys_and_the_build_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("ENSDIV_BUILD", raising=False)
    monkeypatch.setenv(seeding.SEED_BASE_ENV, "1")
    assert derive_seed(3, 1, 2) == _mix(0x5EEDBA5E, 1, 3, 1, 2) != _mix(3, 1, 2)
    assert moved(7) == _mix(0x5EEDBA5E, 1, 7)
    import hashlib

    assert config_key({"a": 1}) == hashlib.sha256(b'{"a":1}|seed-base=1').hexdigest()
    assert build_dir().parts[-2:] == ("_build", "seed-base-1")
    monkeypatch.setenv("ENSDIV_BUILD", str(tmp_path))
    assert build_dir() == tmp_path  # a folder the user names is used as named
    monkeypatch.setenv(seeding.SEED_BASE_ENV, "2")
    assert derive_seed(3, 1, 2) != _mix(0x5EEDBA5E, 1, 3, 1, 2)


def test_a_seed_base_draws_other_initial_weights_and_the_same_again(monkeypatch):
    from ensdiv.train import Recipe, build_model

    recipe = Recipe.make(model="small_cnn", seed=0)

    def weights() -> torch.Tensor:
        model = build_model(recipe, num_classes=10, in_chans=1, img_size=28)
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    monkeypatch.delenv(seeding.SEED_BASE_ENV, raising=False)
    base0 = weights()
    monkeypatch.setenv(seeding.SEED_BASE_ENV, "1")
    base1 = weights()
    assert torch.equal(base1, weights()) and not torch.allclose(base0, base1)


@pytest.mark.parametrize("bad", ["-1", "1.5", "one", "1000001", "", "٣"])
def test_a_seed_base_that_is_not_a_whole_number_in_range_is_one_sentence(monkeypatch, bad):
    with pytest.raises(InvalidInputError, match="The seed base must be a whole number from 0 to 1000000"):
        seeding.check_seed_base(bad)
    if bad:
        monkeypatch.setenv(seeding.SEED_BASE_ENV, bad)
        with pytest.raises(InvalidInputError, match=r"--seed-base or \$ENSDIV_SEED_BASE"):
            seeding.seed_base()


def test_the_cli_takes_a_seed_base_for_run_and_book_and_refuses_a_bad_one(monkeypatch):
    # setenv first, so that the variable the CLI sets is removed after the test (a delenv of an absent variable
    # records nothing to undo, and the seed base leaked into the tests that ran next in this process)
    monkeypatch.setenv(seeding.SEED_BASE_ENV, "0")
    monkeypatch.delenv(seeding.SEED_BASE_ENV)
    parser = cli.build_parser()
    assert parser.parse_args(["run", "--seed-base", "1", "x.ipynb"]).seed_base == "1"
    assert parser.parse_args(["book", "--seed-base", "2"]).seed_base == "2"
    args = parser.parse_args(["run", "--seed-base", "3"])
    cli._set_seed_base(args)
    assert seeding.seed_base() == 3
    with pytest.raises(InvalidInputError):
        cli._set_seed_base(parser.parse_args(["run", "--seed-base", "-4"]))


def test_a_page_stamp_carries_a_seed_base_and_a_change_of_it_reruns_the_page(monkeypatch, tmp_path):
    from ensdiv.book import run, stamps

    monkeypatch.delenv(seeding.SEED_BASE_ENV, raising=False)
    assert "seed_base" not in run._base_stamp()
    monkeypatch.setenv(seeding.SEED_BASE_ENV, "1")
    assert run._base_stamp()["seed_base"] == 1
    assert stamps._STAMP_PARTS["seed_base"] == "the seed base changed"
