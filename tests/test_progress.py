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


def _run_as_a_page(code: str):
    """Run ``code`` in a fresh Python as an executed page runs (ENSDIV_PROGRESS=lines)."""
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "ENSDIV_PROGRESS": "lines"}, check=True)


@pytest.mark.slow
def test_library_warnings_reach_a_page_once_as_a_note_without_paths():
    """On an executed page (ENSDIV_PROGRESS=lines) a warning of the library is shown once, as a note with the
    message only; a third-party warning is left as Python shows it."""
    code = (
        "import IPython.display as d\n"
        "d.display = lambda obj: print('DISPLAY', obj.data)\n"
        "import ensdiv, warnings\n"
        "from ensdiv.store import CorruptEntryWarning\n"
        "for _ in range(2):\n"
        "    warnings.warn('entry <x> is corrupt', CorruptEntryWarning)\n"
        "warnings.warn('not ours', UserWarning)\n"
    )
    out = _run_as_a_page(code)
    notes = [ln for ln in out.stdout.splitlines() if ln.startswith("DISPLAY")]
    assert notes == ['DISPLAY <div class="admonition note"><p class="admonition-title">Note</p>'
                     '<p>entry &lt;x&gt; is corrupt</p></div>']
    assert "ensdiv/" not in out.stdout and "UserWarning: not ours" in out.stderr


@pytest.mark.slow
def test_an_undefined_metric_raised_for_the_callers_line_is_still_a_note():
    """The SAT score of two models sharing no correct input warns with stacklevel pointing at the caller (a
    notebook cell, outside the package): its own class, UndefinedMetricWarning, keeps it a note without the
    cell's temporary file path (#32: the smoke page measuring_diversity showed /tmp/ipykernel_… lines)."""
    code = (
        "import IPython.display as d\n"
        "d.display = lambda obj: print('DISPLAY', obj.data)\n"
        "import torch, ensdiv as ed\n"
        "f = torch.tensor([True, False])\n"
        "print(float(ed.metrics.sat_score(f, f, torch.tensor([False, False]))))\n"
    )
    out = _run_as_a_page(code)
    assert "nan" in out.stdout and "empty X_AB" in out.stdout and "DISPLAY" in out.stdout
    assert "RuntimeWarning" not in out.stderr and "<string>" not in out.stderr


def test_undefined_metric_warning_is_a_runtime_warning_of_the_library():
    from ensdiv.errors import UndefinedMetricWarning

    assert issubclass(UndefinedMetricWarning, RuntimeWarning)
    assert UndefinedMetricWarning.__module__ == "ensdiv.errors"
