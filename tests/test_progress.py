"""Progress reporting: bars for people, one line per finished unit on rendered pages, nothing when off."""

from __future__ import annotations

import pytest

import ensdiv as ed
from ensdiv import progress


@pytest.mark.parametrize(("value", "expected"), [(None, "bars"), ("lines", "lines"), ("OFF", "off"),
                                                 ("nonsense", "bars")])
def test_mode_from_the_environment(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("ENSDIV_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("ENSDIV_PROGRESS", value)
    assert progress.mode() == expected


def test_bars_are_off_and_lines_printed_in_lines_mode(monkeypatch, capsys):
    monkeypatch.setenv("ENSDIV_PROGRESS", "lines")
    assert progress.bar(range(3)).disable
    progress.line("trained x in 1.0 s")
    assert capsys.readouterr().out == "trained x in 1.0 s\n"
    monkeypatch.setenv("ENSDIV_PROGRESS", "off")
    progress.line("nothing")
    assert capsys.readouterr().out == ""


def test_training_under_lines_mode_prints_one_line_and_no_bar(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("ENSDIV_PROGRESS", "lines")
    r = ed.Recipe.make(model="test_mlp", epochs=2, batch_size=32, train_subset=64, name="tiny")
    ed.train_recipe(r, store=ed.Store(tmp_path))
    out = capsys.readouterr()
    assert out.out.count("trained tiny in") == 1
    assert "it/s" not in out.err and "%|" not in out.err
