"""Scale presets: resolution, overrides, and the bad-input sentences."""

from __future__ import annotations

import pytest

from ensdiv import chapters
from ensdiv.config import SCALES, resolve_preset
from ensdiv.errors import EnsdivError, UnknownNameError

NAME = "demo/fig01"
SPEC = {
    "common": {"seed": 0, "num_members": 4, "lr": 0.05, "model": "small_cnn"},
    "smoke": {"epochs": 1, "train_subset": 1024, "model": "test_cnn"},
    "cpu": {"epochs": 3, "train_subset": 0},
    "paper": {"epochs": 90, "train_subset": 0},
}




def preset(name, scale, **kw):
    """A demo chapter's preset: the mechanics are the library's ``resolve_preset``."""
    if name != NAME:
        return chapters.preset(name, scale, **kw)
    return resolve_preset(NAME, SPEC, scale, **kw)


def test_scales_resolve_common_then_scale_block():
    smoke = preset(NAME, "smoke", verbose=False)
    cpu = preset(NAME, "cpu", verbose=False)
    assert smoke.epochs == 1 and smoke.train_subset == 1024
    assert cpu.epochs == 3 and cpu.train_subset == 0
    assert smoke.num_members == cpu.num_members == 4
    assert smoke.model == "test_cnn" and cpu.model == "small_cnn"
    assert smoke.scale == "smoke" and smoke.preset == NAME


def test_override_and_none_keeps_preset(capsys):
    cfg = preset(NAME, "smoke", seed=7, epochs=None)
    assert cfg.seed == 7 and cfg.epochs == 1
    assert "seed         = 7" in capsys.readouterr().out


def test_preset_summary_folds_the_table_and_names_the_parameters(capsys):
    """#32: a page shows its preset as one folded line naming the values a parameter set (escaped), the
    table under it; a terminal gets one line per field with the parameters marked."""
    from ensdiv.config import PresetSummary

    s = PresetSummary("demo/x", "cpu", {"preset": "demo/x", "scale": "cpu", "seed": 7, "tag": "<b>"}, ("seed",))
    page = s._repr_html_()
    assert page.startswith('<details class="ensdiv-preset"><summary>') and "</summary><table>" in page
    assert "2 values, set by parameters: seed = <code>7</code>" in page
    assert "&lt;b&gt;" in page and "<b>'" not in page  # values are escaped
    assert page.count("<tr>") == 3 and "<td>parameter</td>" in page and "<td>preset</td>" in page
    assert "all from the preset" in PresetSummary("demo/x", "cpu", {"seed": 0})._repr_html_()
    assert repr(s).splitlines() == ["# preset demo/x at scale cpu", "preset = 'demo/x'", "scale  = 'cpu'",
                                    "seed   = 7  # parameter", "tag    = '<b>'"]
    preset(NAME, "smoke", seed=5)  # outside a kernel: printed as text
    assert "# parameter" in capsys.readouterr().out


def test_int_accepted_for_float_field():
    assert preset(NAME, "cpu", verbose=False, lr=1).lr == 1


def test_unknown_scale():
    with pytest.raises(UnknownNameError, match="Unknown scale 'gpu'.*cpu, paper, smoke"):
        preset(NAME, "gpu")


def test_unknown_preset_suggests_close_match():
    with pytest.raises(UnknownNameError, match="Did you mean 'foundations/zoo'"):
        preset("foundations/zoos", "cpu")
    with pytest.raises(UnknownNameError, match="Did you mean 'foundations/zoo'"):
        preset("fondations/zoo", "cpu")


def test_unknown_override_key():
    with pytest.raises(UnknownNameError, match="num_memebrs.*Did you mean 'num_members'"):
        preset(NAME, "cpu", num_memebrs=3)


def test_wrong_override_type():
    with pytest.raises(EnsdivError, match="'num_members'.*must be an integer.*str '4'"):
        preset(NAME, "cpu", num_members="4")
    with pytest.raises(EnsdivError, match="must be an integer"):
        preset(NAME, "cpu", num_members=True)


def test_attribute_error_lists_fields():
    cfg = preset(NAME, "cpu", verbose=False)
    with pytest.raises(AttributeError, match="no field 'nope'"):
        _ = cfg.nope


def test_every_preset_has_valid_scales():
    for name in chapters.list_presets():
        for scale in SCALES:
            cfg = preset(name, scale, verbose=False)
            assert cfg.scale == scale


SIZED = {
    "common": {"num_members": 4, "n_draws": 200, "n_resamples": 1000, "seeds": [0, 1, 2], "sizes": [2, 4],
               "test_subset": None},
    "smoke": {"epochs": 1, "train_subset": 512},
    "cpu": {"epochs": 5, "train_subset": 30000},
    "paper": {"epochs": 200, "train_subset": 0},
    "types": {"test_subset": int},
}


@pytest.mark.parametrize(("key", "value", "bound"), [
    ("num_members", 99999999999999999999999999999, "at most 40 (10 × 4, the largest value its preset gives it)"),
    ("epochs", 10**6, "at most 2000 (10 × 200,"),
    ("train_subset", 10**9, "at most 300000 (10 × 30000,"),
    ("n_draws", 2001, "at most 2000 (10 × 200,"),
    ("n_resamples", 10**7, "at most 10000 (10 × 1000,"),
    ("sizes", [2, 41], "at most 40 (10 × 4, the largest value its preset gives it), got [2, 41] (the element 41)"),
    ("test_subset", 10**8 + 1, "at most 1e+08 (the bound of a size its preset leaves open)"),
])
def test_a_parameter_beyond_ten_times_its_presets_largest_size_is_one_sentence(key, value, bound):
    """Members, epochs, subsets, draws, resamples and size lists set by a parameter are bounded by ten times the
    largest value the preset gives them at any scale (a size it leaves open by 1e8); the bound is in the
    sentence. Before, ``-p num_members 1e29`` passed and spun at 100 % CPU."""
    import re

    with pytest.raises(EnsdivError, match=re.escape(f"Parameter '{key}' of preset 'demo/sized' must be {bound}")):
        resolve_preset("demo/sized", SIZED, "smoke", verbose=False, **{key: value})


def test_sizes_at_their_bound_and_the_presets_own_values_are_accepted():
    cfg = resolve_preset("demo/sized", SIZED, "smoke", verbose=False, num_members=40, epochs=2000, sizes=[40],
                         test_subset=10**8, seeds=list(range(30)))
    assert cfg.num_members == 40 and cfg.epochs == 2000 and len(cfg.seeds) == 30
    assert resolve_preset("demo/sized", {**SIZED, "smoke": {"epochs": 10**7, "train_subset": 0}}, "smoke",
                          verbose=False).epochs == 10**7  # the book's own preset is not a parameter


def test_a_seed_list_is_bounded_by_its_length_not_its_values():
    assert resolve_preset("demo/sized", SIZED, "smoke", verbose=False, seeds=[10**6]).seeds == [10**6]
    with pytest.raises(EnsdivError, match=r"Parameter 'seeds' of preset 'demo/sized' may list at most 30 seeds "
                                          r"\(10 × the preset's 3\), got 31\."):
        resolve_preset("demo/sized", SIZED, "smoke", verbose=False, seeds=list(range(31)))
