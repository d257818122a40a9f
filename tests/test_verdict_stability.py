"""Two recorded runs compared claim by claim (``benchmarks/verdict_stability.py``): same or moved, and why."""

from __future__ import annotations

import importlib.util

import pytest

from ensdiv.paths import project_root

_spec = importlib.util.spec_from_file_location("verdict_stability",
                                               project_root() / "benchmarks" / "verdict_stability.py")
vs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vs)


def _record(verdict, *, ours="pass", p=0.01, p_fail=0.9, interval=(0.5, 1.5), counted=True, excluded="",
            gate="pass", item="Fig. 1"):
    return {"paper": "sed", "item": item, "claim_id": None, "verdict": verdict, "scale": "cpu",
            "gates": [{"name": "members trained", "ours": gate}],
            "checks": [{"name": "a beats b", "ours": ours, "p": p, "p_fail": p_fail, "interval": list(interval),
                        "counted": counted, "excluded": excluded}]}


@pytest.mark.parametrize(("b", "why"), [
    (_record("not testable at this scale", gate="fail"), "gate: members trained (pass → fail)"),
    (_record("cannot decide", counted=False, excluded="cannot decide with 4 seeds (needs 5)"),
     "counted: a beats b left out in one run (cannot decide with 4 seeds (needs 5))"),
    (_record("inconclusive", ours="inconclusive", p=0.08, interval=(-0.1, 1.0)),
     "near its boundary: a beats b (pass → inconclusive, p 0.01 → 0.08)"),
    (_record("inconclusive", ours="inconclusive", p=0.6, interval=(-3.0, 1.0)),
     "check moved: a beats b (pass → inconclusive, p 0.01 → 0.6)"),
    (_record("does not hold", ours="fail", p=0.99, p_fail=0.004, interval=(-3.0, -1.0)),
     "check moved: a beats b (pass → fail, p of a fail 0.9 → 0.004)"),
    (_record("inconclusive", ours="inconclusive", p=None, interval=(-3.0, 1.0)),
     "check moved: a beats b (pass → inconclusive)"),
])
def test_a_moved_verdict_names_its_reason(b, why):
    assert vs.why_moved(_record("holds"), b) == why


def test_compare_counts_the_same_and_the_moved_claims(monkeypatch, tmp_path):
    runs = {tmp_path / "a": {("sed", "Fig. 1", ""): _record("holds"), ("sed", "Fig. 2", ""): _record("holds"),
                             ("sed", "Fig. 3", ""): _record("holds")},
            tmp_path / "b": {("sed", "Fig. 1", ""): _record("holds"),
                             ("sed", "Fig. 2", ""): _record("inconclusive", ours="inconclusive", p=0.07)}}
    monkeypatch.setattr(vs, "records_of", lambda run: runs[run])
    out = vs.compare(tmp_path / "a", tmp_path / "b")
    assert (out["claims"], out["same"], out["only_in_one"], out["share_same"]) == (2, 1, 1, 0.5)
    assert out["scale"] == "cpu"  # the book marks moved claims at this scale only (ensdiv.book.site.moved_claims)
    assert [(r["paper"], r["item"], r["claim_id"]) for r in out["rows"]] == [
        ("sed", "Fig. 1", ""), ("sed", "Fig. 2", ""), ("sed", "Fig. 3", "")]
    assert vs.table(out["rows"]).splitlines() == [
        "sed · Fig. 2: holds → inconclusive (near its boundary: a beats b (pass → inconclusive, p 0.01 → 0.07))",
        "sed · Fig. 3: holds → None (only in one run)"]


def test_records_of_an_empty_folder_is_empty(tmp_path):
    assert vs.records_of(tmp_path) == {}


def _run(commit, *claims):
    pages: dict[str, list] = {}
    for page, item, verdict, counts in claims:
        pages.setdefault(page, []).append({"item": item, "verdict": verdict,
                                           **dict(zip(vs.COUNTS, counts, strict=True))})
    return {"commit": commit, "pages": [{"notebook": p, "claims": c} for p, c in pages.items()]}


def test_since_lists_each_claim_of_two_commits_with_counts_and_the_page_commits_between():
    old = _run("aaa", ("sed/fig02.ipynb", "Fig. 2", "holds", (2, 2, 0, 0, 0)),
               ("sed/fig03.ipynb", "Fig. 3", "inconclusive", (1, 0, 0, 1, 1)),
               ("sed/gone.ipynb", "Fig. 9", "holds", (1, 1, 0, 0, 0)))
    new = _run("bbb", ("sed/fig02.ipynb", "Fig. 2", "holds", (2, 2, 0, 0, 0)),
               ("sed/fig03.ipynb", "Fig. 3", "does not hold", (3, 0, 2, 1, 0)))
    asked = []

    def commits(page, a, b):
        asked.append((page, a, b))
        return [f"c1 changed {page}"]
    out = vs.since(old, new, commits=commits)
    assert (out["old"], out["new"], out["claims"], out["same"], out["only_in_one"]) == ("aaa", "bbb", 2, 1, 1)
    fig3 = next(r for r in out["rows"] if r["item"] == "Fig. 3")
    assert (fig3["a"], fig3["b"], fig3["same"]) == ("inconclusive", "does not hold", False)
    assert fig3["a_counts"] == "0 of 1 counted pass, 1 inconclusive, 1 excluded"
    assert fig3["b_counts"] == "0 of 3 counted pass, 2 failed, 1 inconclusive"
    assert fig3["commits"] == ["c1 changed sed/fig03.ipynb"]
    gone = next(r for r in out["rows"] if r["item"] == "Fig. 9")
    assert (gone["b"], gone["b_counts"], gone["same"]) == (None, None, False)
    # the page of a kept verdict is not looked up
    assert asked == [("sed/fig03.ipynb", "aaa", "bbb"), ("sed/gone.ipynb", "aaa", "bbb")]


def test_since_tells_claims_of_one_item_apart_by_id_else_by_their_order_on_the_page():
    def claim(verdict, claim_id="", undecided=""):
        return {"item": "Table 3", "claim_id": claim_id, "verdict": verdict, "counted": 1, "passed": 1,
                "undecided": undecided}

    def record(commit, *claims):
        return {"commit": commit, "pages": [{"notebook": "sed/tab03.ipynb", "claims": list(claims)}]}
    no_commits = lambda page, a, b: []  # noqa: E731
    # ids on both sides: matched by id whatever their order; an id of one record only is its own row
    out = vs.since(record("a", claim("holds", "x"), claim("mixed", "y")),
                   record("b", claim("mixed", "y"), claim("holds", "x"),
                          claim("not testable at this scale", "z", "not meaningful (gate failed: g)")),
                   commits=no_commits)
    assert [(r["claim_id"], r["a"], r["b"], r["same"], r["matched"]) for r in out["rows"]] == [
        ("x", "holds", "holds", True, "by id"), ("y", "mixed", "mixed", True, "by id"),
        ("z", None, "not testable at this scale", False, "by id")]
    assert [r["b_undecided"] for r in out["rows"]] == ["", "", "not meaningful (gate failed: g)"]
    assert (out["claims"], out["same"], out["only_in_one"]) == (2, 2, 1)
    # an older record without ids: paired by order, the longer side's tail in one record only
    out = vs.since(record("a", claim("holds"), claim("does not hold")),
                   record("b", claim("holds", "x"), claim("holds", "y"), claim("inconclusive", "z")),
                   commits=no_commits)
    assert [(r["claim_id"], r["a"], r["b"], r["matched"]) for r in out["rows"]] == [
        ("x", "holds", "holds", "by order"), ("y", "does not hold", "holds", "by order"),
        ("z", None, "inconclusive", "by order")]
    assert (out["claims"], out["same"], out["only_in_one"]) == (2, 1, 1)


def test_page_commits_counts_a_commit_to_the_chapter_module_as_one_to_its_pages():
    root, page = project_root(), "sed/fig02_divergent_samples.ipynb"

    def git(*args):
        return vs.subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()
    last = git("log", "-1", "--format=%h %s", "--", "ensdiv/chapters/sed")
    if not last or not git("rev-parse", "--verify", "-q", last.split()[0] + "^"):
        pytest.skip("a clone without the chapter's history")
    sha = last.split()[0]
    assert last in vs.page_commits(page, sha + "^", sha, root=root)
    # another chapter's page does not list it unless that commit touched it too
    touched = git("show", "--name-only", "--format=", sha).splitlines()
    if not any(t.startswith(("notebooks/training-methods/", "ensdiv/chapters/training_methods")) for t in touched):
        assert vs.page_commits("training-methods/fig01_error_inconsistency.ipynb", sha + "^", sha, root=root) == []


def test_page_commits_reads_git_and_says_nothing_for_an_unknown_commit():
    root, page = project_root(), "sed/fig02_divergent_samples.ipynb"

    def git(*args):
        return vs.subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()
    last = git("log", "-1", "--format=%h %s", "--", f"notebooks/{page}")
    if not last or not git("rev-parse", "--verify", "-q", last.split()[0] + "^"):
        pytest.skip("a clone without the page's history")
    sha = last.split()[0]
    assert vs.page_commits(page, sha + "^", sha, root=root) == [last]
    assert vs.page_commits(page, sha, sha, root=root) == []
    assert vs.page_commits(page, "0" * 40, sha, root=root) == []
