"""Issue #53, item 3: which page waits for which in ``ensdiv book --jobs N`` (ensdiv.book.schedule)."""

import json

from ensdiv.book import schedule


def test_pages_that_share_only_a_dataset_do_not_wait_for_each_other():
    pages = ["zoo", "tab1", "fig5", "pe"]
    zoo_models = ["model/a.pt", "model/b.pt", "model/c.pt"]
    entries = {"zoo": ["datasets/fm.pt", *zoo_models], "tab1": ["datasets/fm.pt", *zoo_models],
               "fig5": [*zoo_models, "checkpoint/c.pt"], "pe": ["datasets/fm.pt", "model/p.pt"]}
    assert schedule.needs_from_entries(pages, entries) == {"zoo": [], "tab1": ["zoo"], "fig5": ["zoo"], "pe": []}


def test_pages_that_read_the_same_models_need_the_page_that_trained_them_not_each_other():
    pages = ["basics", "zoo", "dd", "tm1", "tm2"]
    s, r, v = ["model/s0.pt", "model/s1.pt", "model/s2.pt"], ["model/r0.pt", "model/r1.pt", "model/r2.pt"], \
        ["model/v0.pt", "model/v1.pt", "model/v2.pt"]
    preds = ["predictions/r0.pt", "predictions/r1.pt", "predictions/r2.pt"]
    entries = {"basics": s, "zoo": [*s, *r, *v], "dd": [*r, "dd-cka/x.pt"], "tm1": [*r, *preds],
               "tm2": [*v, "dd-cka/x.pt", *preds]}
    # tm2 reads the zoo's models v, dd's CKA entry and tm1's predictions (tm1 computed them first); tm1 reads
    # the zoo's models r, as dd does, and so does not wait for dd
    assert schedule.needs_from_entries(pages, entries) == {
        "basics": [], "zoo": ["basics"], "dd": ["zoo"], "tm1": ["zoo"], "tm2": ["zoo", "dd", "tm1"]}


def test_a_page_sharing_one_or_two_models_with_an_earlier_page_starts_beside_it():
    """The cold --jobs 2 run of 28 Nov 2026: the zoo page shares one model with deep-ensemble basics and
    Packed-Ensembles' Table 1 one with the zoo; neither waits. Two models and their predictions are still few;
    three entries, or a single entry of another kind (a SAT matrix: an hour of attacks), are a reason to wait."""
    pages = ["basics", "zoo", "pe_tab1", "corruptions", "dd", "sat_fig2"]
    entries = {"basics": ["model/s0.pt"], "zoo": ["model/s0.pt", "model/r.pt", "model/v.pt", "sat-matrix/m.pt"],
               "pe_tab1": ["model/r.pt", "model/pe.pt"], "corruptions": ["model/s0.pt", "predictions/s0.pt"],
               "dd": ["model/r.pt", "model/v.pt", "predictions/v.pt"], "sat_fig2": ["sat-matrix/m.pt"]}
    # corruptions' two entries: basics computed the model, corruptions the predictions (first used there)
    assert schedule.needs_from_entries(pages, entries) == {
        "basics": [], "zoo": [], "pe_tab1": [], "corruptions": [], "dd": [], "sat_fig2": ["zoo"]}
    entries["dd"] = ["model/r.pt", "model/v.pt", "model/s0.pt"]  # three shared entries (two pages: zoo, basics)
    assert schedule.needs_from_entries(pages, entries)["dd"] == []
    entries["dd"] = ["model/r.pt", "model/v.pt", "sat-matrix/m.pt"]  # three entries of the zoo's
    assert schedule.needs_from_entries(pages, entries)["dd"] == ["zoo"]


def test_a_page_without_a_record_needs_nothing_and_is_needed_by_no_one():
    assert schedule.needs_from_entries(["a", "b"], {"b": ["model/x.pt"]}) == {"a": [], "b": []}


def test_the_critical_path_sums_the_longest_chain_of_dependents_and_fills_unknown_estimates_with_the_mean():
    # zoo (30) -> a (5) -> b (1); zoo -> d (unknown: mean of 30, 5, 1, 20 = 14); c (20) alone
    pri = schedule.critical_path(["zoo", "a", "b", "c", "d"], {"a": ["zoo"], "b": ["a"], "d": ["zoo"]},
                                 {"zoo": 30, "a": 5, "b": 1, "c": 20})
    assert pri == {"d": 14.0, "c": 20.0, "b": 1.0, "a": 6.0, "zoo": 44.0}
    assert schedule.critical_path(["x"], {}, {}) == {"x": 1.0}  # nothing known: one second


def test_the_next_page_is_the_ready_one_with_the_longest_chain_and_none_while_all_wait():
    needs = {"a": ["zoo"], "b": ["zoo"], "c": []}
    pri = {"zoo": 50, "a": 10, "b": 30, "c": 5}
    assert schedule.next_page(["zoo", "a", "b", "c"], needs, {"zoo", "a", "b", "c"}, pri) == "zoo"
    assert schedule.next_page(["a", "b", "c"], needs, {"zoo", "a", "b", "c"}, pri) == "c"  # zoo running
    assert schedule.next_page(["a", "b"], needs, {"a", "b"}, pri) == "b"  # zoo finished
    assert schedule.next_page(["a"], needs, {"zoo", "a"}, pri) is None
    assert schedule.next_page([], needs, set(), pri) is None
    # equal priorities: book order
    assert schedule.next_page(["c", "x"], {}, {"c", "x"}, {}) == "c"


def test_recorded_needs_read_book_json_and_a_missing_or_broken_file_gives_none(tmp_path):
    book = tmp_path / "book.json"
    assert schedule.recorded_needs("cpu", book_json=book) == {}  # no file
    book.write_text("{not json")
    assert schedule.recorded_needs("cpu", book_json=book) == {}
    book.write_text(json.dumps({"scales": {"cpu": {"cold": {}}}}))  # no relation recorded
    assert schedule.recorded_needs("cpu", book_json=book) == {}
    book.write_text(json.dumps({"scales": {"cpu": {"page_needs": ["not", "a", "map"]}}}))
    assert schedule.recorded_needs("cpu", book_json=book) == {}
    book.write_text(json.dumps({"scales": {"cpu": {"page_needs": {
        "notebooks/foundations/zoo.ipynb": [], "notebooks/sat/fig5.ipynb": ["notebooks/foundations/zoo.ipynb"]}}}}))
    assert schedule.recorded_needs("cpu", book_json=book) == {
        "notebooks/foundations/zoo.ipynb": [], "notebooks/sat/fig5.ipynb": ["notebooks/foundations/zoo.ipynb"]}
    assert schedule.recorded_needs("smoke", book_json=book) == {}  # another scale


def test_a_timed_page_runs_alone_and_every_timed_page_is_a_page_of_the_book():
    from ensdiv.book import toc_notebooks
    from ensdiv.paths import project_root

    pri = {"t": 9, "c": 5, "d": 1}
    # something runs: the timed page waits, another page may start
    assert schedule.next_page(["t", "c"], {}, {"t", "c", "x"}, pri, running={"x"}, alone={"t"}) == "c"
    assert schedule.next_page(["t"], {}, {"t", "x"}, pri, running={"x"}, alone={"t"}) is None
    # the timed page runs: nothing starts beside it
    assert schedule.next_page(["c", "d"], {}, {"c", "d", "t"}, pri, running={"t"}, alone={"t"}) is None
    # nothing runs: the timed page starts first by its priority
    assert schedule.next_page(["t", "c"], {}, {"t", "c"}, pri, running=set(), alone={"t"}) == "t"
    pages = {nb.relative_to(project_root()).as_posix() for nb in toc_notebooks()}
    assert schedule.TIMED_PAGES <= pages


def test_the_zoo_page_starts_first_and_alone_in_a_parallel_run():
    """The zoo trains with two one-thread workers of its own: it runs before every other ready page and alone
    (beside other pages its models took about twice their idle time)."""
    zoo = "notebooks/foundations/zoo.ipynb"
    assert zoo in schedule.SELF_PARALLEL_PAGES and zoo in schedule.ALONE_PAGES
    assert schedule.TIMED_PAGES <= schedule.ALONE_PAGES
    pages = ["notebooks/packed-ensembles/tab01_efficient_ensembles.ipynb", "notebooks/foundations/deb.ipynb", zoo]
    # Table 1 has the longest chain behind it; the zoo goes first all the same
    pri = schedule.first_first({pages[0]: 2700.0, pages[1]: 1100.0, zoo: 1700.0})
    assert pri[zoo] > pri[pages[0]] > pri[pages[1]]
    assert schedule.next_page(pages, {}, set(pages), pri) == zoo
    # while it runs, nothing starts beside it; after it, the longest chain first
    assert schedule.next_page(pages[:2], {}, set(pages), pri, running={zoo}) is None
    assert schedule.next_page(pages[:2], {}, set(pages[:2]), pri) == pages[0]
    # an empty table stays empty; a page not in the table is not added
    assert schedule.first_first({}) == {}
    assert schedule.first_first({"a": 1.0}, {"zoo"}) == {"a": 1.0}



def test_recording_some_pages_keeps_the_books_page_needs(tmp_path, monkeypatch):
    """``bench_book.py --record-run BUILD --pages FILE --as remeasured_x`` stores the pages' record but leaves
    ``page_needs`` alone (a run of a few pages cannot say what the others need); a whole run replaces it."""
    import json
    import sys

    bench = _bench_book()
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    out = tmp_path / "benchmarks" / "results" / "book.json"
    out.write_text(json.dumps({"scales": {"cpu": {"page_needs": {"b": ["a"]}}}}))
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    monkeypatch.setattr(bench, "one_run", lambda build, **kw: {"status": "partial one run", "pages_finished": 1,
                                                               "finished_pages_s": 60.0, "only": kw["only"]})
    monkeypatch.setattr(bench, "page_needs", lambda build: {"c": ["b"]})
    (tmp_path / "pages.txt").write_text("notebooks/x/p.ipynb\n")
    monkeypatch.setattr(sys, "argv", ["bench_book.py", "--record-run", str(tmp_path), "--pages",
                                      str(tmp_path / "pages.txt"), "--as", "remeasured_x"])
    bench.main()
    cpu = json.loads(out.read_text())["scales"]["cpu"]
    assert cpu["page_needs"] == {"b": ["a"]} and cpu["remeasured_x"]["only"] == ["notebooks/x/p.ipynb"]
    monkeypatch.setattr(sys, "argv", ["bench_book.py", "--record-run", str(tmp_path)])
    bench.main()
    assert json.loads(out.read_text())["scales"]["cpu"]["page_needs"] == {"c": ["b"]}


def _bench_book():
    import importlib.util

    from ensdiv.paths import project_root

    spec = importlib.util.spec_from_file_location("bench_book", project_root() / "benchmarks" / "bench_book.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_replay_schedules_a_recorded_run_as_the_book_would_and_rejects_bad_factors(monkeypatch, capsys):
    """``bench_book.py --replay``, by hand on two slots: the zoo alone 0-60 s; then the longest page ``a`` (120 s)
    beside ``b`` (60 s); ``c`` takes ``b``'s slot at 120 s; the run ends at 180 s. ``a`` twice as long ends it at
    300 s. Bad input: a factor that is not a number, a page the run does not have (one sentence each)."""
    import sys

    import pytest

    bench = _bench_book()
    record = {"jobs": 2, "pages": [{"notebook": "foundations/zoo.ipynb", "seconds": 60},
                                   {"notebook": "x/a.ipynb", "seconds": 120}, {"notebook": "x/b.ipynb", "seconds": 60},
                                   {"notebook": "x/c.ipynb", "seconds": 60}]}
    assert bench.replay(record, {}) == pytest.approx(3.0)
    assert bench.replay(record, {}, factors={"x/a": 2.0}) == pytest.approx(5.0)
    with pytest.raises(SystemExit, match="no page of the recorded run ends with 'x/z'"):
        bench.replay(record, {}, factors={"x/z": 2.0})
    monkeypatch.setattr(sys, "argv", ["bench_book.py", "--replay", "--page-factor", "x/a=two"])
    with pytest.raises(SystemExit):
        bench.main()
    assert "takes PAGE=FACTOR with a number, got 'x/a=two'" in capsys.readouterr().err


def test_pace_is_a_ratio_of_sums_over_the_pages_with_an_estimate():
    """By hand: 120 s against 60 and 90 s against 30 are 210 / 90 = 7/3 of the recorded times; 600 s left is then
    1,400 s. Bad input: a page without an estimate (None) or with 0 is left out on both sides; before any page with
    an estimate has finished there is no pace; nothing left is 0 s left."""
    import pytest

    ratio, left = schedule.pace([(120.0, 60.0), (90.0, 30.0), (45.0, None), (10.0, 0.0)], [600.0, None, 0.0])
    assert ratio == pytest.approx(7 / 3) and left == pytest.approx(1400.0)
    assert schedule.pace([], [600.0]) is None
    assert schedule.pace([(45.0, None), (10.0, 0.0)], [600.0]) is None
    assert schedule.pace([(30.0, 60.0)], []) == (0.5, 0.0)


def test_a_resumed_build_is_recorded_as_a_partial_one_run(monkeypatch, tmp_path):
    """``bench_book.one_run``: a build whose every page finished ok is "one run" only if it ran them all; a page its
    timings file lists as cached ran in an earlier run on the same executed copies (the Zen 3 build resumed on
    29 Nov 2026 was first recorded as "one run" with 12 of its 56 pages from earlier runs). Bad input: a build
    without a timings file is partial too."""
    import json
    import types

    import ensdiv.book as book
    from ensdiv.book import stamps

    bench = _bench_book()
    pages = [tmp_path / "notebooks" / "x" / f"{n}.ipynb" for n in ("a", "b")]
    executed = tmp_path / "build" / "executed" / "cpu" / "notebooks" / "x"
    executed.mkdir(parents=True)
    for n, s in (("a", 12.5), ("b", 30.0)):
        (executed / f"{n}.ipynb").write_text(json.dumps({"metadata": {"papermill": {"duration": s}}}))
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    monkeypatch.setattr(book, "toc_notebooks", lambda root: pages)
    monkeypatch.setattr(stamps, "page_run", lambda copy, rel, scale: types.SimpleNamespace(status="ok", records=[]))

    def timings(status_of_b):
        rows = [{"notebook": "notebooks/x/a.ipynb", "status": "ok", "seconds": 12.5},
                {"notebook": "notebooks/x/b.ipynb", "status": status_of_b, "seconds": 0.0}]
        (tmp_path / "build" / "timings-cpu.json").write_text(json.dumps({"jobs": 2, "run_s": 50.0, "render_s": 5.0,
                                                                         "notebooks": rows}))

    timings("ok")
    whole = bench.one_run(tmp_path / "build", commit="abc")
    assert (whole["status"], whole["wall_s"], whole["finished_pages_s"]) == ("one run", 55.0, 42.5)
    timings("cached")
    assert bench.one_run(tmp_path / "build", commit="abc")["status"] == "partial one run"
    (tmp_path / "build" / "timings-cpu.json").unlink()
    assert bench.one_run(tmp_path / "build", commit="abc")["status"] == "partial one run"


def test_critical_path_takes_the_pages_in_any_order():
    """``ensdiv run a/x.ipynb b/y.ipynb --jobs 2`` where x needs y (a later page of the command line) raised a
    KeyError: the chains were summed in reverse list order, which assumed a page's needs come before it. By hand:
    y 5 s + x 1 s = 6 s on y's chain, whichever order. Bad input: a cycle of needs (x needs y, y needs x) ends:
    y, scored first, counts x's second, and x's need back to y is not followed; a page that needs itself counts
    once."""
    from ensdiv.book import schedule

    seconds = {"x": 1.0, "y": 5.0, "z": 2.0}
    for order in (["x", "y", "z"], ["y", "x", "z"], ["z", "x", "y"]):
        assert schedule.critical_path(order, {"x": ["y"]}, seconds) == {"x": 1.0, "y": 6.0, "z": 2.0}
    assert schedule.critical_path(["x", "y"], {"x": ["y"], "y": ["x"]}, seconds) == {"y": 6.0, "x": 1.0}
    assert schedule.critical_path(["x"], {"x": ["x"]}, seconds) == {"x": 1.0}
