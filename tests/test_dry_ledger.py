"""The dry-run ledger (ensdiv.book.ledger): a page's dry run is repeated exactly when something it ran or read
changed — code it executed (not a docstring, not code it did not run), a module-level constant its code names, its
notebook, book/data, the fake-data generator, a dependency's version, or a page whose dry cache it used."""

from __future__ import annotations

import json
import textwrap

import pytest

from ensdiv import tracing
from ensdiv.book import ledger
from ensdiv.errors import EnsdivError

MODULE = textwrap.dedent('''
    """A module of the package."""
    SIZE = 4


    def f(x):
        """Doubles."""
        return 2 * x  # a comment


    def g(x):
        return x + SIZE
''')


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project root: a package module, the fake-data generator, book/data and two notebooks."""
    # files here are rewritten within one modification-time tick: no memo of unit hashes from an earlier test
    monkeypatch.setattr(tracing, "_HASHES", {})
    monkeypatch.setattr(tracing, "_DEPS", {})
    (tmp_path / "ensdiv" / "data" / "paper").mkdir(parents=True)
    (tmp_path / "ensdiv" / "data" / "paper" / "fake.py").write_text(
        "def write_fake_data():\n    return 1\n\n\nclass Layout:\n    def size(self):\n        return 8\n")
    (tmp_path / "ensdiv" / "mod.py").write_text(MODULE)
    (tmp_path / "book" / "data").mkdir(parents=True)
    (tmp_path / "book" / "data" / "record.json").write_text("{}")
    (tmp_path / "notebooks").mkdir()
    for name in ("a", "b"):
        (tmp_path / "notebooks" / f"{name}.ipynb").write_text(json.dumps({"cells": [], "name": name}))
    return tmp_path


def _executed(path, root, units, *, cache=(), status="ok", code=True):
    meta = {"status": status, "cache": list(cache),
            "code": {"units": [[str(root / "ensdiv" / "mod.py"), q] for q in units], "hash": "x"} if code else None}
    path.write_text(json.dumps({"cells": [], "metadata": {"ensdiv": meta}}))
    return path


def _record(root, page, units, *, cache=()):
    book = root / "ledger.json"
    copy = _executed(root / f"{page}-executed.ipynb", root, units, cache=cache)
    notebook = root / "notebooks" / f"{page}.ipynb"
    ledger.record_dry_run(book, notebook, ledger.dry_entry(copy, notebook, seconds=3.14, root=root), root=root)
    return book, notebook


def _edit(root, old, new):
    path = root / "ensdiv" / "mod.py"
    path.write_text(path.read_text().replace(old, new))


def test_an_entry_holds_the_units_by_relative_path_and_the_run(project):
    book, _ = _record(project, "a", ["f", "<module>"], cache=["models/x.pt"])
    whole = ledger.read_ledger(book)
    entry = whole["pages"]["notebooks/a.ipynb"]
    assert entry["ran"] == {"ensdiv/mod.py": ["<module>", "f"]}
    assert sorted(whole["units"]) == ["ensdiv/mod.py::<module>", "ensdiv/mod.py::f"]
    assert entry["seconds"] == 3.1 and entry["cache"] == ["models/x.pt"]
    assert str(project) not in book.read_text()  # nothing of this machine's paths: the ledger is committed
    assert len(book.read_text().splitlines()) == 7 + 1 + 2  # the frame, one line per page and per unit


def test_a_docstring_a_comment_or_code_the_page_did_not_run_re_runs_nothing(project):
    book, nb = _record(project, "a", ["f", "<module>"])
    assert ledger.stale_reason(ledger.read_ledger(book), nb, root=project) is None
    _edit(project, '"""Doubles."""', '"""Twice the input, as the paper\'s Eq. 3."""')
    _edit(project, "# a comment", "# another comment")
    _edit(project, "return x + SIZE", "return x - SIZE")  # g: not run by the page
    assert ledger.stale_reason(ledger.read_ledger(book), nb, root=project) is None


def test_a_changed_function_the_page_ran_re_runs_it(project):
    book, nb = _record(project, "a", ["f", "<module>"])
    _edit(project, "return 2 * x", "return 3 * x")
    assert ledger.stale_reason(ledger.read_ledger(book), nb, root=project) == "code it ran changed (ensdiv/mod.py: f)"


def test_a_changed_module_constant_re_runs_the_page_whose_code_names_it(project):
    """``g`` reads ``SIZE``; ``f`` does not: the page that ran ``g`` re-runs, the one that ran only ``f`` (and
    imported the module) does not."""
    book, nb = _record(project, "a", ["f", "<module>"])
    book, nb_g = _record(project, "b", ["g", "<module>"])
    _edit(project, "SIZE = 4", "SIZE = 5")
    assert ledger.stale_reason(ledger.read_ledger(book), nb, root=project) is None
    assert ledger.stale_reason(ledger.read_ledger(book), nb_g, root=project) == "code it ran changed (ensdiv/mod.py: g)"


def test_a_removed_function_re_runs_the_page(project):
    book, nb = _record(project, "a", ["f"])
    _edit(project, "def f(x):", "def h(x):")
    assert "ensdiv/mod.py: f" in ledger.stale_reason(ledger.read_ledger(book), nb, root=project)


@pytest.mark.parametrize("change, reason", [
    (lambda root: (root / "notebooks" / "a.ipynb").write_text("{}"), "the notebook changed"),
    (lambda root: (root / "book" / "data" / "record.json").write_text('{"x": 1}'), "book/data changed"),
    (lambda root: (root / "ensdiv" / "data" / "paper" / "fake.py").write_text("def write_fake_data():\n    return 2\n"),
     "the fake-data generator changed"),
    (lambda root: (root / "ensdiv" / "data" / "paper" / "fake.py").write_text(
        (root / "ensdiv" / "data" / "paper" / "fake.py").read_text().replace("return 8", "return 9")),
     "the fake-data generator changed"),  # a method's body, not only a top-level function's
    (lambda root: (root / "notebooks" / "a.ipynb").unlink(), "the notebook is gone"),
])
def test_what_the_page_read_besides_code_re_runs_it(project, change, reason):
    book, nb = _record(project, "a", ["f"])
    change(project)
    assert ledger.stale_reason(ledger.read_ledger(book), nb, root=project) == reason


def test_a_new_environment_re_runs_the_page_and_names_the_package(project, monkeypatch):
    """The entry is keyed on the environment's fingerprint (the lock): the same fingerprint with other installed
    versions recorded beside it changes nothing; another fingerprint re-runs the page, naming what moved."""
    book, nb = _record(project, "a", ["f"])
    monkeypatch.setattr(ledger, "versions", lambda: {"torch": "99.0"})
    assert ledger.stale_reason(ledger.read_ledger(book), nb, root=project) is None
    monkeypatch.setattr(ledger, "environment_stamp", lambda: "another lock")
    was = ledger.read_ledger(book)["pages"]["notebooks/a.ipynb"]["versions"]["torch"]
    assert ledger.stale_reason(ledger.read_ledger(book), nb, root=project) == \
        f"the environment changed (torch {was} -> 99.0)"


def test_a_page_is_stale_by_its_own_record_not_by_the_pages_it_shared_an_entry_with(project):
    """Page b loaded the entry page a trained with ``f``: b's record holds ``f`` too (a loaded entry's units are
    the page's, ensdiv.tracing.note_units), so a change to ``f`` re-runs both. Page c shared an entry with a that
    does not involve ``f`` (its record has no ``f``): it is not re-run just for sharing it."""
    _record(project, "a", ["f"], cache=["models/x.pt"])
    book, nb_b = _record(project, "b", ["g", "f"], cache=["models/x.pt", "preds/y.pt"])
    (project / "notebooks" / "c.ipynb").write_text("{}")
    book, nb_c = _record(project, "c", ["g"], cache=["models/x.pt", "preds/z.pt"])
    _edit(project, "return 2 * x", "return 3 * x")
    pages = ledger.read_ledger(book)
    assert ledger.stale_reason(pages, nb_b, root=project) == "code it ran changed (ensdiv/mod.py: f)"
    assert ledger.stale_reason(pages, nb_c, root=project) is None


def test_a_page_without_an_entry_or_with_an_unreadable_ledger_runs(project):
    book, _ = _record(project, "a", ["f"])
    nb_b = project / "notebooks" / "b.ipynb"
    assert ledger.stale_reason(ledger.read_ledger(book), nb_b, root=project) == "it has no entry in the ledger"
    book.write_text("{not json")
    empty = {"pages": {}, "units": {}}
    assert ledger.read_ledger(book) == empty
    assert ledger.read_ledger(project / "missing.json") == empty
    book.write_text(json.dumps({"pages": ["not", "a", "mapping"]}))
    assert ledger.read_ledger(book) == empty
    book.write_text(json.dumps(["not", "a", "ledger"]))
    assert ledger.read_ledger(book) == empty
    nb_a = project / "notebooks" / "a.ipynb"
    assert ledger.stale_reason({}, nb_a, root=project) == "it has no entry in the ledger"
    assert ledger.stale_reason({"pages": {"notebooks/a.ipynb": {}}}, nb_a, root=project) == "the notebook changed"


def test_only_a_finished_run_with_a_code_record_enters_the_ledger(project):
    nb = project / "notebooks" / "a.ipynb"
    failed = _executed(project / "failed.ipynb", project, ["f"], status="failed")
    with pytest.raises(EnsdivError, match="not a finished run with a record of its code"):
        ledger.dry_entry(failed, nb, seconds=1.0, root=project)
    untraced = _executed(project / "untraced.ipynb", project, ["f"], code=False)
    with pytest.raises(EnsdivError, match="not a finished run"):
        ledger.dry_entry(untraced, nb, seconds=1.0, root=project)
    with pytest.raises(EnsdivError, match="not a finished run"):
        ledger.dry_entry(project / "no-such-copy.ipynb", nb, seconds=1.0, root=project)


def test_a_page_recorded_before_a_later_recording_of_changed_code_is_still_stale(project):
    """Page b is recorded after f changed, so the ledger's table holds f's new hash; page a, recorded before,
    still ran the old f and must run again (its one hash over the code it ran differs)."""
    book, nb_a = _record(project, "a", ["f"])
    _edit(project, "return 2 * x", "return 3 * x")
    _record(project, "b", ["f"])
    pages = ledger.read_ledger(book)
    assert ledger.stale_reason(pages, nb_a, root=project).startswith("code it ran changed since 20")
    assert ledger.stale_reason(pages, project / "notebooks" / "b.ipynb", root=project) is None


def test_recording_keeps_the_other_pages(project):
    _record(project, "a", ["f"])
    book, _ = _record(project, "b", ["g"])
    _record(project, "a", ["f", "g"])
    pages = ledger.read_ledger(book)["pages"]
    assert sorted(pages) == ["notebooks/a.ipynb", "notebooks/b.ipynb"]
    assert pages["notebooks/a.ipynb"]["ran"] == {"ensdiv/mod.py": ["f", "g"]}
