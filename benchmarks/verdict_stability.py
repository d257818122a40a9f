"""How stable the book's verdicts are: two recorded runs compared claim by claim.

A run is a folder of executed pages (``_build/executed/<scale>`` of a build, or a copy of it); each page carries
the claim records its run promoted (:func:`ensdiv.book.page_run`). Two runs of the same book, e.g. the same
commit trained on another processor or with another ``--seed-base``, should reach the same verdicts: the goal is
at least 95 % the same. For each claim the comparison says *same* or *moved*, and for a moved one why, read from
the two records:

- ``gate``: a gate passed in one run and not in the other;
- ``counted``: a check counted in one run and was left out in the other (the reason is named);
- ``near its boundary``: a check changed outcome and in one of the runs its p-value (of a pass or of a fail) lies
  within a factor of three of ``ALPHA``, or its interval's end lies within a tenth of the interval's width of the
  region's bound (the row names the check, its two outcomes and its two p-values);
- ``check moved``: a check changed outcome far from its boundary (the suspicious case);
- ``only in one run``: the claim is missing from the other run.

``python benchmarks/bench_book.py --compare RUN_A RUN_B`` prints the table and stores the summary in
``results/book.json`` under ``verdict_stability``.

Two builds of *different* commits are compared from their ``book.json`` records instead (:func:`since`): a record
keeps each claim's verdict and counts, not its checks, so the reason a verdict moved between two commits is read
from the counts and from the commits that changed the page in between (``bench_book.py --since KEY``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ensdiv.book import page_run
from ensdiv.report import ALPHA


def records_of(run: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The claim records of one run's executed pages, by ``(paper, item, claim_id)``."""
    out = {}
    for path in sorted(run.rglob("*.ipynb")):
        rel = path.relative_to(run).as_posix()
        for r in page_run(path, rel).records:
            out[(r["paper"], r["item"], r.get("claim_id") or "")] = r
    return out


def _near(check: Mapping[str, Any]) -> bool:
    """Whether a check row sits near its decision: a p-value within a factor of three of ALPHA, or its interval's
    end within a tenth of its width of zero or of the bound the name states (read from ``value`` and
    ``interval``: the region's bound is where the interval ends nearest)."""
    for key in ("p", "p_fail"):
        p = check.get(key)
        if p is not None and ALPHA / 3 <= p <= 3 * ALPHA:
            return True
    iv = check.get("interval")
    if iv and iv[1] > iv[0]:
        width = iv[1] - iv[0]
        return min(abs(iv[0]), abs(iv[1])) <= width / 10
    return False


def why_moved(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """Why one claim's verdict differs between two records (see the module's text)."""
    gates_a = {g["name"]: g["ours"] for g in a.get("gates", [])}
    gates_b = {g["name"]: g["ours"] for g in b.get("gates", [])}
    moved_gates = sorted(n for n in gates_a.keys() & gates_b.keys() if gates_a[n] != gates_b[n])
    if moved_gates:
        return f"gate: {moved_gates[0]} ({gates_a[moved_gates[0]]} → {gates_b[moved_gates[0]]})"
    checks_b = {c["name"]: c for c in b.get("checks", [])}
    near, far = [], []
    for ca in a.get("checks", []):
        cb = checks_b.get(ca["name"])
        if cb is None:
            continue
        if ca["counted"] != cb["counted"]:
            left = cb if ca["counted"] else ca
            return f"counted: {ca['name']} left out in one run ({left.get('excluded') or 'not computable'})"
        if ca["ours"] != cb["ours"]:
            (near if _near(ca) or _near(cb) else far).append(f"{ca['name']} ({ca['ours']} → {cb['ours']}"
                                                             f"{_p_moved(ca, cb)})")
    if near:
        return f"near its boundary: {near[0]}"
    if far:
        return f"check moved: {far[0]}"
    return "the same checks, another total"


def _p_moved(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """The two runs' p-values of the outcome a moved check reached (a fail's where one of them failed, a pass's
    otherwise), as ``", p 0.003 → 0.094"``; empty where either run has none."""
    key = "p_fail" if "fail" in (a["ours"], b["ours"]) else "p"
    pa, pb = a.get(key), b.get(key)
    return "" if pa is None or pb is None else f", {'p of a fail' if key == 'p_fail' else 'p'} {pa:.2g} → {pb:.2g}"


def compare(run_a: Path, run_b: Path) -> dict[str, Any]:
    """Every claim of two runs: ``rows`` (``claim``, ``a``, ``b``, ``same``, ``why``) and the counts."""
    ra, rb = records_of(run_a), records_of(run_b)
    rows = []
    for key in sorted(ra.keys() | rb.keys()):
        a, b = ra.get(key), rb.get(key)
        ids = {"claim": " · ".join(k for k in key if k), "paper": key[0], "item": key[1], "claim_id": key[2]}
        if a is None or b is None:
            rows.append({**ids, "a": a and a["verdict"], "b": b and b["verdict"], "same": False,
                         "why": "only in one run"})
            continue
        same = a["verdict"] == b["verdict"]
        rows.append({**ids, "a": a["verdict"], "b": b["verdict"], "same": same,
                     "why": "" if same else why_moved(a, b)})
    both = [r for r in rows if r["why"] != "only in one run"]
    scales = sorted({str(r.get("scale")) for r in (*ra.values(), *rb.values()) if r.get("scale")})
    return {"run_a": str(run_a), "run_b": str(run_b), "scale": ", ".join(scales) or None, "claims": len(both),
            "same": sum(r["same"] for r in both), "only_in_one": len(rows) - len(both),
            "share_same": round(sum(r["same"] for r in both) / len(both), 3) if both else None, "rows": rows}


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The moved claims as plain text, one line each."""
    return "\n".join(f"{r['claim']}: {r['a']} → {r['b']} ({r['why']})" for r in rows if not r["same"])


COUNTS = ("counted", "passed", "failed", "inconclusive", "excluded")


def _counts(claim: Mapping[str, Any]) -> str:
    """A record's counts in one phrase: ``2 of 3 counted pass, 1 failed, 1 excluded``."""
    counted = claim.get("counted") or 0
    parts = [f"{claim.get('passed') or 0} of {counted} counted pass"]
    parts += [f"{claim[k]} {k}" for k in ("failed", "inconclusive", "excluded") if claim.get(k)]
    return ", ".join(parts)


def page_commits(page: str, since: str, until: str, *, root: Path) -> list[str]:
    """Subjects of the commits between ``since`` and ``until`` that changed the notebook ``page``
    (``<chapter>/<stem>.ipynb``) or its chapter's module (``ensdiv/chapters/<chapter>*``, where a page's claim
    code lives), newest first; none when git cannot say (a commit it does not know)."""
    chapter = page.split("/", 1)[0].replace("-", "_")
    proc = subprocess.run(["git", "log", "--format=%h %s", f"{since}..{until}", "--", f"notebooks/{page}",
                           f"ensdiv/chapters/{chapter}*"], cwd=root, capture_output=True, text=True, check=False)
    return proc.stdout.splitlines() if proc.returncode == 0 else []


def _pairs(la: Sequence[Mapping[str, Any]], lb: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any, str]]:
    """The claims of one page and item in two records, paired: by ``claim_id`` when every claim of both has one,
    else by their order on the page (an older record kept no ids), with the pairing named."""
    if all(c.get("claim_id") for c in (*la, *lb)):
        ia, ib = {c["claim_id"]: c for c in la}, {c["claim_id"]: c for c in lb}
        return [(ia.get(k), ib.get(k), "by id") for k in sorted(ia.keys() | ib.keys())]
    how = "by order" if max(len(la), len(lb)) > 1 else "by item"
    return [(la[i] if i < len(la) else None, lb[i] if i < len(lb) else None, how)
            for i in range(max(len(la), len(lb)))]


def since(old: Mapping[str, Any], new: Mapping[str, Any], *,
          commits: Callable[[str, str, str], list[str]] | None = None) -> dict[str, Any]:
    """Every claim of two ``book.json`` run records (``--record-run``) of different commits: ``rows`` with the
    page, the claim's item (and id, where a record keeps it), both verdicts and counts, why the newer one is
    undecided where it is (its record's reason: a premise or gate this scale fails, evidence counted on another
    page, a null too coarse), whether the verdict is the same, and for a moved one the commits that changed its
    page or its chapter's module in between (``commits(page, old_commit, new_commit)``, :func:`page_commits` by
    default); a claim of one record only says so. Several claims of one item on a page are told apart by their
    ids, else by their order (``matched``)."""
    commits = commits or (lambda page, a, b: page_commits(page, a, b, root=Path(__file__).resolve().parents[1]))

    def claims(record: Mapping[str, Any]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
        out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for p in record.get("pages", []):
            for c in p.get("claims", []):
                out.setdefault((p["notebook"], c["item"]), []).append(c)
        return out
    ca, cb = claims(old), claims(new)
    rows = []
    for page, item in sorted(ca.keys() | cb.keys()):
        for a, b, matched in _pairs(ca.get((page, item), []), cb.get((page, item), [])):
            row = {"page": page, "item": item, "claim_id": (b or a or {}).get("claim_id") or "",
                   "matched": matched, "a": a and a.get("verdict"), "b": b and b.get("verdict"),
                   "a_counts": a and _counts(a), "b_counts": b and _counts(b),
                   "b_undecided": (b or {}).get("undecided") or ""}
            row["same"] = a is not None and b is not None and row["a"] == row["b"]
            row["commits"] = [] if row["same"] else commits(page, str(old.get("commit")), str(new.get("commit")))
            rows.append(row)
    both = [r for r in rows if r["a"] is not None and r["b"] is not None]
    return {"old": old.get("commit"), "new": new.get("commit"), "claims": len(both),
            "same": sum(r["same"] for r in both), "only_in_one": len(rows) - len(both), "rows": rows}
