"""Reference minutes (``ensdiv.book.reference``) and a build record that times one commit on one machine
(``benchmarks/bench_book.py``)."""

from __future__ import annotations

import importlib.util
import json
import types

import pytest
import torch

from ensdiv.book import reference
from ensdiv.paths import project_root


def _bench_book():
    import sys

    sys.path.insert(0, str(project_root() / "benchmarks"))
    spec = importlib.util.spec_from_file_location("bench_book", project_root() / "benchmarks" / "bench_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_minutes_scale_wall_time_by_the_machines_speed(monkeypatch):
    monkeypatch.setattr(reference, "REFERENCE_IMG_S", 1000.0)
    assert reference.reference_minutes(600.0, 500.0) == pytest.approx(5.0)  # half as fast: 10 min are 5
    assert reference.reference_minutes(600.0, 2000.0) == pytest.approx(20.0)
    assert reference.reference_minutes(600.0, None) is None and reference.reference_minutes(None, 500.0) is None


def test_the_workload_trains_and_leaves_the_thread_count_as_it_was():
    before = torch.get_num_threads()
    assert reference.workload_speed(seconds=0.05, warmup=1) > 0
    assert torch.get_num_threads() == before


def test_estimates_carry_each_records_times_to_this_machine(tmp_path, monkeypatch):
    """A record that measured its machine (``reference.img_s``) is scaled by its speed over this machine's; one
    that did not is taken as the reference processor's."""
    from ensdiv.book import run as book_run

    monkeypatch.setattr(book_run, "REFERENCE_IMG_S", 1000.0)
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    monkeypatch.setattr(book_run, "project_root", lambda: tmp_path)
    (results / "book.json").write_text(json.dumps({"scales": {"cpu": {
        "cold_one_run": {"pages": [{"notebook": "a/x.ipynb", "seconds": 60.0}]},
        "remeasured_a": {"reference": {"img_s": 2000.0}, "pages": [{"notebook": "a/y.ipynb", "seconds": 30.0}]}}}}))
    book_run.recorded_seconds.cache_clear()
    try:
        assert book_run.recorded_seconds("cpu", img_s=500.0) == {"notebooks/a/x.ipynb": 120.0,
                                                                  "notebooks/a/y.ipynb": 120.0}
        assert book_run.recorded_seconds("cpu") == {"notebooks/a/x.ipynb": 60.0, "notebooks/a/y.ipynb": 30.0}
    finally:
        book_run.recorded_seconds.cache_clear()


XEON = {"name": "Xeon", "family": 6, "model": 207, "avx512": True}
ZEN3 = {"name": "AMD EPYC", "family": 25, "model": 1, "avx512": False}


def _build(tmp_path, monkeypatch, made, *, cached=False, earlier_s=0.0, earlier_img_s=None):
    import ensdiv.book as book
    from ensdiv.book import stamps

    bench = _bench_book()
    pages = [tmp_path / "notebooks" / "x" / f"{n}.ipynb" for n in made]
    executed = tmp_path / "build" / "executed" / "cpu" / "notebooks" / "x"
    executed.mkdir(parents=True, exist_ok=True)
    for n, m in made.items():
        (executed / f"{n}.ipynb").write_text(json.dumps({"metadata": {"papermill": {"duration": 30.0},
                                                                      "ensdiv": {"made": m}}}))
    rows = [{"notebook": f"notebooks/x/{n}.ipynb", "status": "cached" if cached and i else "ok", "seconds": 30.0}
            for i, n in enumerate(made)]
    (tmp_path / "build" / "timings-cpu.json").write_text(json.dumps(
        {"jobs": 2, "run_s": 60.0, "render_s": 6.0, "reference": {"img_s": 500.0}, "notebooks": rows}))
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    monkeypatch.setattr(book, "toc_notebooks", lambda root: pages)
    monkeypatch.setattr(stamps, "page_run", lambda copy, rel, scale: types.SimpleNamespace(status="ok", records=[]))
    monkeypatch.setattr(reference, "REFERENCE_IMG_S", 1000.0)
    return bench.one_run(tmp_path / "build", commit="abc", earlier_s=earlier_s, earlier_img_s=earlier_img_s)


def test_a_build_resumed_on_its_own_commit_and_machine_says_so_with_reference_minutes(tmp_path, monkeypatch):
    one = {"commit": "abc", "dirty": False, "cpu": XEON}
    row = _build(tmp_path, monkeypatch, {"a": one, "b": one}, cached=True)
    assert row["status"] == "one commit, resumed" and row["made"] == one
    assert row["finished_pages_s"] == 60.0 and row["reference"] == {"img_s": 500.0}
    assert row["reference_min"] == {"wall": 0.6, "pages": 0.5}  # 66 s and 60 s at half the reference's speed
    assert _build(tmp_path, monkeypatch, {"a": one, "b": one})["status"] == "one run"


def test_a_resumed_builds_interrupted_invocations_add_to_its_wall_time(tmp_path, monkeypatch):
    one = {"commit": "abc", "dirty": False, "cpu": XEON}
    row = _build(tmp_path, monkeypatch, {"a": one, "b": one}, cached=True, earlier_s=54.0)
    # 60 s of running and 6 of rendering in the last invocation, 54 s before it: 120 s at half the reference speed
    assert (row["wall_s"], row["earlier_legs_s"], row["reference_min"]["wall"]) == (120.0, 54.0, 1.0)
    assert "earlier_legs_s" not in _build(tmp_path, monkeypatch, {"a": one, "b": one})


def test_the_interrupted_invocations_convert_at_the_speed_they_measured(tmp_path, monkeypatch):
    one = {"commit": "abc", "dirty": False, "cpu": XEON}
    row = _build(tmp_path, monkeypatch, {"a": one, "b": one}, cached=True, earlier_s=38.0, earlier_img_s=1500.0)
    # the last invocation: 66 s at 500 img/s (0.55 reference min); the earlier one: 38 s at 1,500 (0.95). Its page b
    # (cached in the last invocation) converts at 1,500: 0.75 reference min, page a at 500: 0.25
    assert row["reference_min"] == {"wall": 1.5, "pages": 1.0}
    assert row["earlier_legs_reference"] == {"img_s": 1500.0} and row["reference"] == {"img_s": 500.0}


@pytest.mark.parametrize(("earlier_s", "img_s"), [(38.0, 0.0), (38.0, -1.0), (38.0, float("nan")), (0.0, 1500.0)])
def test_an_earlier_speed_that_is_not_positive_or_has_no_earlier_wall_time_is_refused(tmp_path, monkeypatch,
                                                                                     earlier_s, img_s):
    one = {"commit": "abc", "dirty": False, "cpu": XEON}
    with pytest.raises(SystemExit, match=r"^--earlier-img-s is the reference speed .* > 0 given with their"):
        _build(tmp_path, monkeypatch, {"a": one, "b": one}, cached=True, earlier_s=earlier_s, earlier_img_s=img_s)



@pytest.mark.parametrize("earlier", [-1.0, float("nan")])
def test_a_negative_or_missing_earlier_wall_time_is_refused_in_one_sentence(tmp_path, monkeypatch, earlier):
    one = {"commit": "abc", "dirty": False, "cpu": XEON}
    with pytest.raises(SystemExit, match=r"^--earlier-wall is the wall seconds .* a number >= 0; got"):
        _build(tmp_path, monkeypatch, {"a": one}, earlier_s=earlier)


@pytest.mark.parametrize(("other", "what"), [
    ({"commit": "def", "dirty": False, "cpu": XEON}, "commit"),
    ({"commit": "abc", "dirty": True, "cpu": XEON}, "checkout (one of them edited)"),
    ({"commit": "abc", "dirty": False, "cpu": ZEN3}, "processor"),
])
def test_a_record_of_pages_from_two_commits_or_two_machines_is_refused(tmp_path, monkeypatch, other, what):
    one = {"commit": "abc", "dirty": False, "cpu": XEON}
    import re

    sentence = f"a.ipynb and notebooks/x/b.ipynb were not run on the same {what}:"
    with pytest.raises(SystemExit, match=re.escape(sentence)):
        _build(tmp_path, monkeypatch, {"a": one, "b": other})


def test_a_page_says_which_commit_and_processor_made_it():
    from ensdiv.book.stamps import made

    m = made()
    assert set(m) == {"commit", "dirty", "cpu"} and set(m["cpu"]) == {"name", "family", "model", "avx512"}
    assert m["commit"] is None or len(m["commit"]) == 40
