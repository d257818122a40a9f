"""Claims: a paper's claim tested on this run's numbers (and the paper's), and its JSON record.

Where a record goes: a notebook executed by ``ensdiv run``/``ensdiv book`` writes its records into the
run's own staging folder (``$ENSDIV_CLAIMS_STAGING``, set by the build, :mod:`ensdiv.book`); the build checks them and
promotes them *inside the executed notebook* when, and only when, the run finishes, replacing that page's
previous records as a set. A claim made anywhere else (a plain Python session, a test) is written to
:func:`claims_dir` and never reaches the book.
"""

from __future__ import annotations

import html
import importlib.metadata
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ensdiv.errors import EnsdivError, InvalidInputError
from ensdiv.paths import build_dir
from ensdiv.report.checks import (
    ALPHA,
    KEEPS,
    NO_NULL,
    TYPED_NULL,
    VERDICTS,
    Check,
    _check_scale,
    _in_region,
    _plain,
    _points,
    at_bound,
    evaluate,
    holm,
    kept_share,
    null_p,
    randomisation_p,
    verdict,
)
from ensdiv.report.nulls import Null, needed_replicates
from ensdiv.report.replication import UNITS, covers, uncovered
from ensdiv.report.uncertainty import LEVEL, Estimate

__all__ = ["PAPERS", "STAGING_ENV", "Claim", "check_record", "claim", "claims_dir", "describe_strength", "load_claims",
           "read_records", "slug", "strength_of", "audit", "FACT_NAMES", "evidence_clashes", "facts_table"]

PAPERS = ("packed-ensembles", "attack-similarity", "training-methods", "design-diversity", "sed", "foundations",
          "synthesis")
#: The folder a run's claim records are written to while the run is in progress (set by the build, :mod:`ensdiv.book`).
STAGING_ENV = "ENSDIV_CLAIMS_STAGING"
_MISSING = "–"

def slug(text: str) -> str:
    """Lowercase ``text`` and make every run of non-alphanumerics one ``-``: ``"Table 1 (a)"`` → ``"table-1-a"``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def claims_dir(scale: str) -> Path:
    """Folder holding the claim records of one scale (``_build/claims/<scale>``), created if missing."""
    _check_scale(scale)
    path = build_dir() / "claims" / scale
    path.mkdir(parents=True, exist_ok=True)
    return path


def _fmt(value: Any) -> str:
    """Compact display: ints as ints, floats with 3–4 significant digits, missing as a dash."""
    if isinstance(value, float) and value.is_integer() and math.fabs(value) < 1e15:
        value = int(value)
    if value is None or isinstance(value, bool):
        return {None: _MISSING, True: "yes", False: "no"}[value]
    if not isinstance(value, float):
        return str(value)
    return f"{value:.0f}" if math.fabs(value) >= 1e4 else f"{value:.3g}" if math.fabs(value) < 1e-3 else f"{value:.4g}"


def _version() -> str | None:
    try:
        return importlib.metadata.version("ensdiv")
    except importlib.metadata.PackageNotFoundError:
        return getattr(sys.modules.get("ensdiv"), "__version__", None)


def _fmt_interval(iv: Sequence[float] | None) -> str:
    return f"[{_fmt(iv[0])}, {_fmt(iv[1])}]" if iv else _MISSING


@dataclass(frozen=True, repr=False)
class Claim:
    """One tested claim: the verdict, the "Paper vs this run" values, the facts and the checks behind it.

    ``checks`` holds one dict per check: ``ours``/``paper`` are ``"pass"``, ``"fail"``, ``"inconclusive"`` or
    None (not computable); ``null`` a short text of the null pass rate, ``null_rate``/``null_draws``/
    ``null_construction`` the numbers behind it (``truth_*`` the same for an absence claim); ``p`` and ``holm``
    the randomisation p-value of a pass and whether it survives Holm's correction, ``p_fail`` and ``holm_fail``
    the same for a fail, ``p_min`` the smallest p-value its null can give; ``unit``, ``source`` and ``covered`` what
    the claim is about, what the interval resampled and whether that covers it (``note`` says what is missing);
    ``evidence``, ``implied_by``, ``gates``; ``counted`` and ``excluded`` (why a check is not counted). ``gates``
    holds the gate rows; ``values`` and ``facts`` dicts ``{quantity, paper, ours}`` (JSON-safe; None where
    missing); ``variance`` what the intervals randomise; ``paper_findings`` the checks the paper's own numbers
    fail (findings about the paper); ``untestable`` a premise the scale cannot test; ``undecided`` why a claim
    that decides nothing does not (the reasons its checks are not counted, each naming what would settle it).
    """

    paper: str
    item: str
    claim: str
    scale: str
    verdict: str
    checks: list[dict[str, Any]]
    values: list[dict[str, Any]]
    notes: str = ""
    claim_id: str | None = None
    facts: list[dict[str, Any]] = field(default_factory=list)
    variance: str = ""
    level: float = LEVEL
    unit: str | None = None
    gates: list[dict[str, Any]] = field(default_factory=list)
    untestable: str = ""
    paper_findings: list[str] = field(default_factory=list)
    key_check: str | None = None
    undecided: str = ""
    models: str = ""

    def record(self) -> dict[str, Any]:
        """The JSON-safe claim record, with ``ensdiv_version`` and ``notebook`` (``$ENSDIV_NOTEBOOK``)."""
        return {**asdict(self), "strength": self.strength(), "ensdiv_version": _version(),
                "notebook": os.environ.get("ENSDIV_NOTEBOOK") or None}

    def strength(self) -> dict[str, int]:
        """How the verdict was reached: checks in all, counted, passed, failed, inconclusive, not computable, and
        left out (failing on the paper's numbers or passing with no effect)."""
        return strength_of(self.checks)

    def frame(self) -> pd.DataFrame:
        """The "Paper vs this run" table as shown: quantity | paper | this run | interval (formatted strings)."""
        rows = [(v["quantity"], _fmt(v["paper"]), _fmt(v["ours"]), _fmt_interval(v.get("interval")))
                for v in self.values]
        return pd.DataFrame(rows, columns=["quantity", "paper", "this run", f"{int(self.level * 100)}% interval"])

    def facts_frame(self) -> pd.DataFrame:
        """The facts table: quantity | paper | this run. Facts never enter the verdict."""
        return facts_table({v["quantity"]: v["ours"] for v in self.facts},
                           {v["quantity"]: v["paper"] for v in self.facts})

    def checks_frame(self) -> pd.DataFrame:
        """The checks table: check | paper's numbers | passes with no effect | this run | interval | counted."""
        shown = {"pass": "pass", "fail": "fail", "inconclusive": "inconclusive", None: _MISSING}
        rows = []
        for c in [*({**g, "name": f"gate: {g['name']}"} for g in self.gates), *self.checks]:
            ours = shown[c["ours"]] if c["ours"] else "not testable"
            if c.get("note"):
                ours += f" ({c['note']})"
            counted = "gate" if c["name"].startswith("gate: ") and "counted" not in c else \
                "yes" if c["counted"] else f"no: {c['excluded'] or 'not testable'}"
            rows.append((c["name"], shown[c.get("paper")], c.get("null", _MISSING), ours,
                         _fmt_interval(c.get("interval")), counted))
        return pd.DataFrame(rows, columns=["check", "on the paper's numbers", "passes with no effect", "this run",
                                           "interval", "counted"])

    def _summary(self) -> str:
        return describe_strength(self.strength(), self.scale, self.variance, self.unit)

    def __str__(self) -> str:
        text = [f"**Verdict: {self.verdict}** ({self._summary()})", "", self.frame().to_string(index=False), ""]
        text.append(self.checks_frame().to_string(index=False))
        if self.facts:
            text += ["", self.facts_frame().to_string(index=False)]
        return "\n".join(text + (["", self.notes] if self.notes else []))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        frames = [self.frame(), self.checks_frame(), *([self.facts_frame()] if self.facts else [])]
        tables = [df.to_html(index=False, border=0) for df in frames]
        parts = [f"<p><b>Verdict: {html.escape(self.verdict)}</b> ({html.escape(self._summary())})</p>", *tables]
        return "\n".join(parts + ([f"<p>{html.escape(self.notes)}</p>"] if self.notes else []))


def facts_table(facts: Mapping[str, Any], paper: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Facts as the book shows them — fact | paper | this run — for a claim's facts, or for a page that states
    facts and tests no claim (a worked example, an identity the code satisfies).

    >>> facts_table({"max |table - direct|": 0.0, "measures compared": 8}).values.tolist()
    [['max |table - direct|', '–', '0'], ['measures compared', '–', '8']]
    """
    paper = paper or {}
    rows = [(q, _fmt(_plain(paper.get(q))), _fmt(_plain(v))) for q, v in facts.items()]
    return pd.DataFrame(rows, columns=["fact", "paper", "this run"])


def strength_of(checks: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Counts over a record's checks: ``checks``, ``counted``, ``passed``, ``failed``, ``inconclusive``,
    ``untestable`` (not computable on this run) and ``excluded`` (computable, and not counted: see each
    check's ``excluded``)."""
    counted = [c for c in checks if c["counted"]]
    return {"checks": len(checks), "counted": len(counted),
            "passed": sum(c["ours"] == "pass" for c in counted), "failed": sum(c["ours"] == "fail" for c in counted),
            "inconclusive": sum(c["ours"] == "inconclusive" for c in counted),
            "untestable": sum(c["ours"] is None for c in checks),
            "excluded": sum(bool(c.get("excluded")) and c["ours"] is not None for c in checks)}


def describe_strength(st: Mapping[str, int], scale: str, variance: str = "", unit: str | None = None) -> str:
    """One line: ``2 of 3 counted checks pass, 1 inconclusive; 1 not testable; ...``."""
    parts = [f"{st['passed']} of {st['counted']} counted checks pass"]
    parts[0] += "".join(f", {st[k]} {w}" for k, w in (("failed", "fail"), ("inconclusive", "inconclusive")) if st[k])
    if st["untestable"]:
        parts.append(f"{st['untestable']} not testable")
    if st["excluded"]:
        parts.append(f"{st['excluded']} not counted (see the checks table)")
    if unit:
        parts.append(f"about {unit}")
    if variance:
        parts.append(f"intervals: {variance}")
    return "; ".join([*parts, f"scale {scale}"])


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON atomically: a temp file in the same folder, then ``os.replace``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _on_draws(check: Check, null: Null | None, ours: Mapping[str, Any], level: float
              ) -> tuple[np.ndarray | None, float | None]:
    """The check's statistic on each draw of ``null`` (each replacing some of this run's quantities; a check
    with a rule and no statistic scores 1 for a pass, 0 for a fail) and how often it passes there; None without
    a null, or when fewer than half of the draws could be computed."""
    if null is None:
        return None, None
    stats_, results = [], []
    for draw in null.draws:
        out = evaluate(check, {**ours, **draw}, level=level, with_p=False)
        results.append(out.result)
        stats_.append(out.value if out.value is not None else _SCORE.get(out.result, math.nan))
    computed = [r for r in results if r is not None]
    if 2 * len(computed) < len(results) or not computed:
        return None, None
    return np.asarray(stats_, dtype=float), computed.count("pass") / len(computed)


#: The statistic of a check with a rule and no statistic: its pass scores 1, its fail 0 (tested as "> 0.5").
_SCORE = {"pass": 1.0, "fail": 0.0}
_BINARY = Check("a rule's pass (1) or fail (0)", region=(">", 0.5))


def _rate_text(rate: float | None, null: Null | None, reason: str, *, p: float | None = None) -> str:
    """The verdict box's "passes with no effect" cell: the share of null draws on which the check passes, or, for
    a null centred on the claim's bound (half its draws pass there by construction), the p-value at the bound."""
    if null is None:
        return f"no null: {reason}" if reason else "no null"
    if null.centred and p is not None:
        return f"p = {p:.2g} at the bound ({len(null.draws)} draws)"
    return f"{_MISSING} (not computable)" if rate is None else f"{rate:.0%} of {len(null.draws)} draws"


def _cannot_decide(check: Check, p_min: float) -> str:
    """Why a check's null cannot give a p-value below :data:`ALPHA`, and what it would take."""
    null = next(n for n in (check.null, check.truth) if n is not None and n.min_p == p_min)
    if null.exact and null.replicates:
        return (f"cannot decide with {null.replicates} {null.replicate} (needs {needed_replicates(ALPHA)}): its "
                f"smallest p-value is 1/{len(null.draws)}")
    return (f"cannot decide with {len(null.draws)} null draws (needs {math.ceil(1 / ALPHA - 1)}): its smallest "
            f"p-value is {p_min:.2g}")


def _p_values(probe: Check, observed: float, check: Check, null_stats: np.ndarray | None,
              truth_stats: np.ndarray | None) -> tuple[float | None, float | None, float | None]:
    """The p-values of a pass and of a fail, and the smallest p-value of a pass the check's data can give.

    A check of an effect reads its null (the effect removed), moved to the region's bound when ``null_at`` says
    where it sits (:func:`~ensdiv.report.checks.null_p`). A check that an effect is absent or small reads the data
    where the claim is true moved to the bound (its fail is the mirror test there), and also its null as given
    (data where the claim is false, at the bound; a centred null, which sits at no effect, moved there first): its
    pass must beat both, so a statistic that reads the same on both (a tie at a grid's floor) cannot pass."""
    if not check.absence:
        if null_stats is None:
            return None, None, None
        p, p_fail = null_p(probe, observed, null_stats, exact=check.null.exact)
        return p, p_fail, check.null.min_p if p is not None else None
    if truth_stats is None:
        return None, None, None
    op = probe.region[0]
    passes, mins = [], []
    if probe.null_at is not None:
        p_truth, p_fail = null_p(probe, observed, truth_stats, exact=check.truth.exact)
        passes.append(p_truth)
        mins.append(check.truth.min_p)
    else:  # where the claim is true, as given: the fail is a statistic beyond it
        p_fail = randomisation_p(observed, truth_stats, side="<" if op == ">" else ">", exact=check.truth.exact)
    if null_stats is not None:
        if check.null.centred and op != "within":  # at no effect: moved to the claim's bound (where it is false)
            null_stats = at_bound(probe, null_stats, probe.region[1])
        passes.append(randomisation_p(abs(observed), np.abs(null_stats), side="<", exact=check.null.exact)
                      if op == "within" else randomisation_p(observed, null_stats, side=op, exact=check.null.exact))
        mins.append(check.null.min_p)
    if not passes or None in passes:
        return None, p_fail, None
    return max(passes), p_fail, max(mins)


def implication_broken(check: Check, impliers: Sequence[Check], ours: Mapping[str, Any]) -> str:
    """Where ``check``'s statistic leaves its region while all its ``impliers``' statistics are in theirs ("" when
    nowhere): on this run's point values and on every null draw of the checks involved. A check marked
    ``implied_by`` is shown, not counted, only where this finds nothing: "the trend implies the ends" must hold
    on data without the effect too, not only where the page author pictured it.

    >>> from ensdiv.report.checks import above, greater, positive
    >>> mean, worst = above("mean", 0.25), above("worst", 0.25)
    >>> implication_broken(worst, [mean], {"mean": 0.3, "worst": 0.5})
    ''
    >>> implication_broken(greater("d", "r"), [positive("rho")], {"rho": 0.4, "d": 1.0, "r": 2.0})
    'on this run: rho is positive holds and d is greater than r does not'
    """
    if check.statistic is None or check.region is None:
        return ""
    sources = [("this run", ours)] + [
        (f"null draw {i + 1} of {c.name!r}", draw) for c in [check, *impliers] if c.null is not None
        for i, draw in enumerate(c.null.draws)]
    for where, values in sources:
        points = _points(values)
        try:
            if not all(c.statistic is not None and c.region is not None and _in_region(float(c.statistic(points)),
                                                                                       c.region) for c in impliers):
                continue
            if not _in_region(float(check.statistic(points)), check.region):
                return f"on {where}: {' and '.join(c.name for c in impliers)} holds and {check.name} does not"
        except (KeyError, ZeroDivisionError, TypeError, ValueError):
            continue  # a draw without one of the quantities says nothing either way
    return ""


def _check_row(check: Check, ours: Mapping[str, Any], paper_values: Mapping[str, Any] | None, level: float, *,
               unit: str | None, gates: Mapping[str, str | None], premise: str, broken: str = "") -> dict[str, Any]:
    """One check on this run's values, on the paper's, on its null data (and truth data), and whether it counts.

    The p-values read the statistic on the draws of the check's null (and of its ``truth`` for an absence
    claim, :func:`_p_values`); :func:`_apply_holm` then turns the interval's outcome into the check's. Besides
    the outcomes, the row says how the check is *built*, which the audit reads even where this run could not
    compute it: ``has_null`` (it carries null data), ``estimated`` (one of its quantities is an
    :class:`~ensdiv.report.uncertainty.Estimate`), ``unit``, ``evidence``."""
    mine = evaluate(check, ours, level=level)
    unit = check.unit or unit
    result, note = mine.result, ""
    covered = unit is None or covers(unit, mine.source)
    if result in ("pass", "fail") and not covered:
        result, note = "inconclusive", uncovered(unit)
    on_paper = evaluate(check, paper_values, level=level).result if paper_values is not None else None
    null_stats, null_rate = _on_draws(check, check.null, ours, level)
    truth_stats, truth_rate = _on_draws(check, check.truth, ours, level) if check.absence else (None, None)
    p = p_fail = p_min = None
    tested = [n for n, d in ((check.null, null_stats), (check.truth, truth_stats)) if n is not None and d is not None]
    if result is not None and tested:
        observed = mine.value if mine.value is not None else _SCORE[mine.result]
        p, p_fail, p_min = _p_values(check if check.region else _BINARY, observed, check, null_stats, truth_stats)
    kept = (kept_share(check, null_stats) if null_stats is not None and not check.absence and not check.beyond
            and not check.null.centred else None)  # a centred null sits at the bound by construction
    if kept is not None and kept >= KEEPS and result in ("pass", "fail"):
        result, note = "inconclusive", (f"its null keeps what its region asks ({kept:.0%} of its draws lie in it): "
                                        "beating it tests something the check does not name")
    failed_gates = [g for g in (gates if check.gates is None else check.gates) if gates.get(g) != "pass"]
    unknown = [g for g in (check.gates or ()) if g not in gates]
    if unknown:
        raise InvalidInputError(f"Check {check.name!r} depends on the gate {unknown[0]!r}, which the claim lacks.")
    reasons = [
        (on_paper == "fail", "fails on the paper's numbers"),
        (bool(check.implied_by) and not broken, f"implied by {', '.join(check.implied_by)}"),
        (bool(failed_gates), f"not meaningful (gate failed: {', '.join(failed_gates)})"),
        (bool(premise), f"premise not testable at this scale ({premise})"),
        (check.null is None and (not check.absence or bool(check.null_reason)), check.null_reason or NO_NULL),
        (check.absence and check.truth is None, check.null_reason or "an absence claim with no data where it is "
                                                                      "true"),
        ((check.truth if check.absence else check.null) is not None and p_min is None and result is not None,
         "its null could not be computed"),
        (p_min is not None and p_min > ALPHA, _cannot_decide(check, p_min) if p_min is not None else ""),
    ]
    excluded = next((why for hit, why in reasons if hit), "")
    return {"name": check.name, "needs": list(check.needs), "cites": check.cites, "ours": result, "note": note,
            "paper": on_paper, "null": _rate_text(null_rate, check.null, check.null_reason, p=p)
            + (f"; tests beyond {check.beyond}" if check.beyond and check.null is not None else ""),
            "null_rate": null_rate, "null_kept": kept, "beyond": check.beyond,
            "null_draws": len(check.null.draws) if check.null else 0,
            "null_construction": check.null.construction if check.null else "",
            "null_reason": check.null_reason if check.null is None else "", "has_null": check.null is not None,
            "absence": check.absence, "truth_rate": truth_rate,
            "truth_construction": check.truth.construction if check.truth else "",
            "estimated": any(isinstance(ours.get(q), Estimate) for q in check.needs) or mine.interval is not None,
            "unit": unit, "covered": covered, "p": p, "p_fail": p_fail,
            "p_min": p_min, "holm": None, "holm_fail": None,
            "p_interval": mine.p, "evidence": check.evidence,
            "implied_by": [] if broken else list(check.implied_by), "implication_refused": broken,
            "gates": list(check.gates if check.gates is not None else gates),
            "counted": result is not None and not excluded, "excluded": excluded,
            "value": mine.value, "interval": list(mine.interval) if mine.interval else None, "source": mine.source}


def _pct(rate: float | None) -> str:
    return _MISSING if rate is None else f"{rate:.0%}"


def _apply_holm(rows: list[dict[str, Any]]) -> None:
    """Holm over the counted checks, once for the p-values of a pass and once for those of a fail: a pass (a
    fail) whose interval lies wholly on one side stays one only when its p-value survives; else inconclusive. A
    fail with no mirror p-value (a threshold against a reference null) rests on its interval."""
    counted = [r for r in rows if r["counted"]]
    over = f" after Holm over {len(counted)} checks" if len(counted) > 1 else ""
    for r, keep, keep_fail in zip(counted, holm([r["p"] for r in counted]), holm([r["p_fail"] for r in counted]),
                                  strict=True):
        r["holm"], r["holm_fail"] = keep, keep_fail
        if r["ours"] == "pass" and not keep:
            r["ours"], r["note"] = "inconclusive", f"p = {_fmt(r['p'])}, not significant{over}"
        elif r["ours"] == "fail" and keep_fail is False:
            r["ours"], r["note"] = "inconclusive", f"the interval is outside, but p = {_fmt(r['p_fail'])} is not " \
                                                   f"significant{over}"


def _holm_reach(rows: list[dict[str, Any]]) -> None:
    """Leave out every counted check when none can pass or fail: Holm's first step asks the smallest p-value for
    :data:`ALPHA` over the number counted, and none of their nulls reaches it (five seeds, 1/32, under two or
    more checks). The reason names the seeds such a claim needs."""
    counted = [r for r in rows if r["counted"]]
    if not counted:
        return
    need = ALPHA / len(counted)
    reach = min(r["p_min"] for r in counted)
    if reach <= need:
        return
    why = (f"cannot decide over {len(counted)} checks: Holm asks one p-value of at most {need:.3g}, and their nulls "
           f"reach {reach:.3g} (seed flips need {needed_replicates(need)} seeds)")
    for r in counted:
        r["counted"], r["excluded"] = False, why


def _undecided(rows: Sequence[Mapping[str, Any]], untestable: str) -> tuple[str, str]:
    """For a claim with too few counted checks: the verdict (*not testable at this scale* where the scale is the
    reason: a premise or a failed gate) and why, naming what would settle it."""
    if untestable:
        return "not testable at this scale", f"premise not testable at this scale: {untestable}"
    left = [r for r in rows if not r["counted"] and not r["implied_by"]]
    why = list(dict.fromkeys(r["excluded"] or "not computable on this run" for r in left))
    scale = any(w.startswith(("not meaningful (gate failed", "premise not testable")) for w in why)
    return ("not testable at this scale" if scale else "cannot decide"), "; ".join(why)


def claim(*, paper: str, item: str, claim: str, checks: Sequence[Check], ours: Mapping[str, Any],
          paper_values: Mapping[str, Any] | None = None, scale: str, key: Sequence[str] | None = None,
          notes: str = "", write: bool = True, claim_id: str | None = None, facts: Mapping[str, Any] | None = None,
          variance: str = "", unit: str | None = None, gates: Sequence[Check] = (), untestable: str = "",
          key_check: str | None = None, models: str = "") -> Claim:
    """Test a paper's claim on this run's numbers (and on the paper's own, and on null data), and record it.

    The rule (:data:`~ensdiv.report.checks.RULE`): each check's statistic is tested against its null draws (a
    randomisation p-value, Holm over the claim's counted checks); a check counts when its null can reach
    :data:`~ensdiv.report.checks.ALPHA`, the paper's numbers do not fail it, its gates pass and no other check
    implies it, and the verdict follows :func:`~ensdiv.report.checks.verdict` over the built checks.

    Args:
        paper: Chapter slug, one of :data:`PAPERS`.
        item: The figure or table as the notebook names it (``"Table 1"``, ``"Fig. 2"``).
        claim: The claim under test, one sentence.
        checks: The checks that test it (distinct names, distinct evidence keys).
        ours: This run's quantities by name: numbers or :class:`~ensdiv.report.uncertainty.Estimate` objects.
        paper_values: The paper's reported quantities by name; each check is also run on them, and a
            check they fail is shown, listed as a finding about the paper, and not counted.
        scale: ``"smoke"``, ``"cpu"`` or ``"paper"``.
        key: Quantities shown in the "Paper vs this run" table (default: every key of ``ours`` and
            ``paper_values``, in order, facts excepted).
        notes: A paragraph shown after the tables.
        write: Write the record (to the run's staging folder under ``ensdiv run``, else :func:`claims_dir`).
        claim_id: Distinguishes several claims about the same item.
        facts: Quantities that are facts, not measurements (parameter counts, mult-adds, identities, costs):
            shown in their own table beside the paper's value of the same name, never in a verdict.
        variance: What the intervals randomise, in the page's words. Default: the sources of the estimates used.
        unit: What the claim is about, one of :data:`~ensdiv.report.replication.UNITS` ("trained methods", "groups of
            models", ...): a check whose interval does not resample it is inconclusive.
        gates: Checks that must pass for the others to mean anything (member accuracy near a baseline, a
            detector above chance); never counted themselves.
        models: For ``unit="these models"``: the fixed models the claim is about, named ("the five released
            committee checkpoints", "the zoo's 12 timm ImageNet weights"); the audit refuses "these models" without
            them, and a claim about what a training method gives is about ``"trained methods"``.
        untestable: A premise this scale cannot test ("GPU parallelism; this run times CPU processes"): the
            verdict is *not testable at this scale* and the numbers are shown, not counted.
        key_check: The check the claims page and the verdict box show (default: the first counted one).

    Returns:
        The :class:`Claim`; it renders itself in a notebook.

    >>> from ensdiv.report import from_seeds, greater, seed_flips
    >>> ours = {"pe": from_seeds([91.0, 91.2, 90.9, 91.1, 91.3]), "single": from_seeds([89.9, 90.1, 90.0, 90.2, 89.8])}
    >>> c = claim(paper="foundations", item="Fig. 1", claim="Ensembling raises accuracy.", unit="trained methods",
    ...           checks=[greater("pe", "single", null=seed_flips(ours, "pe", "single", seed=0),
    ...                           evidence="foundations/fig-1/accuracy")], ours=ours, scale="cpu", write=False)
    >>> c.verdict, c.checks[0]["p"] == 1 / 2 ** 5  # pe wins on every seed: 1 of the 32 swap patterns as extreme
    ('holds', True)
    >>> four = {q: from_seeds(e.replicates[:4]) for q, e in ours.items()}
    >>> c4 = claim(paper="foundations", item="Fig. 1", claim="Ensembling raises accuracy.", unit="trained methods",
    ...            checks=[greater("pe", "single", null=seed_flips(four, "pe", "single", seed=0),
    ...                            evidence="foundations/fig-1/accuracy")], ours=four, scale="cpu", write=False)
    >>> c4.verdict, c4.undecided  # 1/16 > 0.05 whatever the data
    ('cannot decide', 'cannot decide with 4 seeds (needs 5): its smallest p-value is 1/16')
    """
    if paper not in PAPERS:
        raise InvalidInputError(f"Unknown paper {paper!r}; valid chapter slugs: {', '.join(PAPERS)}.")
    _check_scale(scale)
    if not isinstance(claim, str) or not claim.strip():
        raise InvalidInputError("The claim text is empty; state the claim under test in one sentence.")
    if not isinstance(item, str) or not slug(item):
        raise InvalidInputError(f"The item {item!r} must name the figure or table, e.g. 'Table 1'.")
    if unit is not None and unit not in UNITS:
        raise InvalidInputError(f"Unknown unit {unit!r}; a claim is about one of: {', '.join(UNITS)}.")
    checks, gates = list(checks), list(gates)
    if not checks:
        raise InvalidInputError("A claim needs at least one check; an empty checks list cannot test anything.")
    for check in [*checks, *gates]:
        if not isinstance(check, Check):
            raise InvalidInputError(f"Every check and gate must be an ed.report.Check, got {type(check).__name__}.")
    names = [check.name for check in [*checks, *gates]]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InvalidInputError(f"Two checks share the name {dupes[0]!r}; give each check its own name.")
    keys = [c.evidence for c in checks if c.evidence]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise InvalidInputError(f"Two checks count the evidence {twice[0]!r}; one piece of evidence counts once.")
    for check in checks:
        if check.null is not None and check.null.centred and check.null_at is None:
            raise InvalidInputError(f"Check {check.name!r} reads a centred null (at no effect) but does not move it "
                                    "to its bound: give it null_at (0 for a difference, 1 and null_scale=True for "
                                    "a ratio).")
        missing = [n for n in check.implied_by if n not in names]
        if missing:
            raise InvalidInputError(f"Check {check.name!r} is implied by {missing[0]!r}, which the claim lacks.")
    facts = dict(facts or {})
    read = {q for check in checks for q in check.needs}
    both = sorted(read & set(facts))
    if both:
        raise InvalidInputError(f"{both[0]!r} is a fact and a checked quantity; a fact never enters a verdict.")
    gate_rows = []
    for g in gates:
        out = evaluate(g, ours)
        gate_rows.append({"name": g.name, "needs": list(g.needs), "ours": out.result, "value": out.value,
                          "interval": list(out.interval) if out.interval else None, "source": out.source,
                          "paper": None, "null": _MISSING})
    gate_results = {g["name"]: g["ours"] for g in gate_rows}
    by_name = {c.name: c for c in [*checks, *gates]}
    rows = [_check_row(check, ours, paper_values, LEVEL, unit=unit, gates=gate_results, premise=untestable,
                       broken=implication_broken(check, [by_name[n] for n in check.implied_by], ours)
                       if check.implied_by else "") for check in checks]
    _holm_reach(rows)
    _apply_holm(rows)
    paper_values = paper_values or {}
    shown = list(key) if key is not None else [q for q in dict.fromkeys([*ours, *paper_values]) if q not in facts]

    def row(q: str) -> dict[str, Any]:
        est = ours.get(q)
        iv = est.interval(LEVEL) if isinstance(est, Estimate) else None
        return {"quantity": q, "paper": _plain(paper_values.get(q)), "ours": _plain(est),
                "interval": list(iv) if iv else None, "source": est.source if isinstance(est, Estimate) else None}

    values = [row(q) for q in shown]
    fact_rows = [{"quantity": q, "paper": _plain(paper_values.get(q)), "ours": _plain(v)} for q, v in facts.items()]
    sources = sorted({r["source"] for r in rows if r["counted"] and r["source"]})
    variance = variance or (", ".join(sources) if sources else "none: no counted check compares estimates")
    judged = verdict([r["ours"] for r in rows if r["counted"]], scale=scale,
                     total=sum(not r["implied_by"] for r in rows))
    why = ""
    if judged == "cannot decide" or untestable:
        judged, why = _undecided(rows, untestable)
    if key_check is not None and key_check not in names:
        raise InvalidInputError(f"key_check {key_check!r} is not one of the claim's checks.")
    key_check = key_check or next((r["name"] for r in rows if r["counted"]), None)
    result = Claim(paper=paper, item=item, claim=claim.strip(), scale=scale, verdict=judged, checks=rows,
                   values=values, notes=notes, claim_id=claim_id, facts=fact_rows, variance=variance, level=LEVEL,
                   unit=unit, gates=gate_rows, untestable=untestable, key_check=key_check, undecided=why,
                   models=models.strip(),
                   paper_findings=[r["name"] for r in rows if r["paper"] == "fail"])
    if write:
        suffix = f"__{slug(claim_id)}" if claim_id else ""
        staging = os.environ.get(STAGING_ENV)
        folder = Path(staging) if staging else claims_dir(scale)
        folder.mkdir(parents=True, exist_ok=True)
        _write_json(folder / f"{paper}__{slug(item)}{suffix}.json", result.record())
    return result


#: Quantity names that are facts of an architecture or a cost, never measurements to count in a verdict.
FACT_NAMES = re.compile(r"(^|_)(params?|n_params|parameters|mult_adds?|macs|flops)($|_)")


#: Reasons a check may be left out that the audit accepts: the check is built right, and the data or the paper
#: decided (the paper's numbers fail it, a gate failed, another check implies it, the premise is untestable).
_LEFT_OUT = ("fails on the paper's numbers", "implied by ", "not meaningful (gate failed", "premise not testable")


def audit(record: Mapping[str, Any]) -> list[str]:
    """What a skeptical reviewer would object to in a claim record, one sentence each (``[]``: nothing).

    The record must state its unit (what the claim is about) at the book's one :data:`LEVEL`. Every check that
    the data or the paper did not leave out (:data:`_LEFT_OUT`) is judged by how it is built, also where this
    run could not compute it (at smoke scale many cannot):

    - it carries null data built from this run's data (or says why none can be built, and then never counts);
      a value typed on the page is not a null;
    - an absence check also carries data where the claim is true;
    - it reads no fact (a parameter count, mult-adds, FLOPs);
    - its quantities carry uncertainty (except for a claim about one released artefact);
    - it names its evidence key.

    ``tests/test_notebooks.py`` runs it on every page's records at smoke scale.

    >>> audit({"unit": "trained methods", "level": 0.9, "variance": "seeds × test images",
    ...        "checks": [{"name": "a is less than b", "needs": ["a", "b"], "has_null": True, "estimated": True,
    ...                    "evidence": "x/fig-1/a-vs-b", "excluded": ""}]})
    []
    """
    problems = []
    unit = record.get("unit")
    if unit not in UNITS:
        problems.append("the record does not say what the claim is about (its unit).")
    if unit == "these models":
        problems += _these_models(record)
    if record.get("level", LEVEL) != LEVEL:
        problems.append(f"the record uses the level {record.get('level')}, not the book's {LEVEL}.")
    for c in record.get("checks", []):
        if str(c.get("excluded", "")).startswith(_LEFT_OUT):
            continue
        name = c["name"]
        if not c.get("has_null"):
            reason = c.get("null_reason") or ""
            if reason in ("", NO_NULL, TYPED_NULL):
                problems.append(f"check {name!r} has no null built from this run's data ({reason or 'no reason'}).")
        if c.get("absence") and not c.get("truth_construction"):
            problems.append(f"check {name!r} claims an absence and has no data where the claim is true.")
        facts = [q for q in c.get("needs", []) if FACT_NAMES.search(q)]
        if facts:
            problems.append(f"check {name!r} reads the fact {facts[0]!r}; show it in the facts table.")
        if unit != "released artefact" and not c.get("estimated", bool(c.get("interval"))):
            problems.append(f"check {name!r} compares numbers without an interval.")
        if c.get("implication_refused"):
            problems.append(f"check {name!r} is marked implied, but its impliers do not imply it "
                            f"({c['implication_refused']}); it counts.")
        if not c.get("evidence") and (c.get("has_null") or not c.get("null_reason")):
            problems.append(f"check {name!r} names no evidence key.")
    if not str(record.get("variance", "")).strip():
        problems.append("the record does not say what its intervals randomise.")
    return problems


#: Sources and null constructions that compare training methods: a claim about "these models" never uses them.
_METHOD_SOURCES = ("training seeds", "seeds × test images")
_METHOD_NULLS = ("swapped at random within each seed", "A/A")


def _these_models(record: Mapping[str, Any]) -> list[str]:
    """What is wrong with a claim declared about "these models": it must name them, and none of its checks may
    compare training methods (seeds as its replicates, seeds swapped as its null)."""
    problems = []
    if not str(record.get("models") or "").strip():
        problems.append("the claim is about 'these models' and does not name them (models=...); a claim about "
                        "what a training method gives is about 'trained methods', with seeds as its unit.")
    for c in record.get("checks", []):
        sources = str(c.get("source") or "").split(" + ")
        construction = str(c.get("null_construction") or "")
        if any(s in _METHOD_SOURCES for s in sources) or any(m in construction for m in _METHOD_NULLS):
            problems.append(f"check {c['name']!r} compares training runs (seeds) in a claim about 'these models'; "
                            "its unit is 'trained methods'.")
    return problems


def evidence_clashes(pages: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[str]:
    """One sentence per evidence key that two claims of the book name (naming both pages): a key says which
    piece of evidence a check counts, so two claims naming it would count it twice (in any build, smoke too).

    Args:
        pages: ``(notebook, claim records)`` per page.

    >>> rec = {"item": "Table 1", "checks": [{"name": "pe > single", "evidence": "pe/acc"}]}
    >>> evidence_clashes([("a.ipynb", [rec]), ("b.ipynb", [{**rec, "item": "Fig. 1"}])])
    ["The evidence 'pe/acc' counts in a.ipynb (Table 1) and in b.ipynb (Fig. 1); one piece of evidence counts once."]
    """
    seen: dict[str, str] = {}
    problems = []
    for notebook, records in pages:
        for r in records:
            for c in r.get("checks", []):
                key = c.get("evidence")
                if not key:
                    continue
                where = f"{notebook} ({r['item']})"
                if key in seen:
                    problems.append(f"The evidence {key!r} counts in {seen[key]} and in {where}; one piece of "
                                    "evidence counts once.")
                else:
                    seen[key] = where
    return problems


#: What every claim record holds: ``{field: (type, ...)}``.
_RECORD_FIELDS: dict[str, tuple[type, ...]] = {
    "paper": (str,), "item": (str,), "claim": (str,), "scale": (str,), "verdict": (str,), "checks": (list,),
    "values": (list,), "notes": (str,), "claim_id": (str, type(None)), "notebook": (str, type(None)),
}


def check_record(record: Any, where: str, *, scale: str | None = None) -> dict[str, Any]:
    """Check that ``record`` is a claim record (of ``scale``, when given) and return it.

    Args:
        record: A decoded JSON value.
        where: The file it came from, for the message.
        scale: The scale the record must have been made at.

    Raises:
        EnsdivError: one sentence naming ``where`` and what is wrong (not an object, a missing field, a field
            of the wrong type, an unknown verdict, a check or value row without its keys, another scale).
    """
    problem = None
    if not isinstance(record, dict):
        problem = "it is not a JSON object"
    else:
        missing = [k for k in _RECORD_FIELDS if k not in record and k not in ("notes", "claim_id", "notebook")]
        wrong = [k for k, types in _RECORD_FIELDS.items() if k in record and not isinstance(record[k], types)]
        if missing:
            problem = f"it lacks the field(s) {', '.join(missing)}"
        elif wrong:
            problem = f"the field(s) {', '.join(wrong)} have the wrong type"
        elif record["verdict"] not in VERDICTS:
            problem = f"its verdict {record['verdict']!r} is not one of {', '.join(VERDICTS)}"
        elif not all(isinstance(c, dict) and {"name", "ours", "counted"} <= set(c) for c in record["checks"]):
            problem = "a check lacks its name, result or counted flag"
        elif not all(isinstance(v, dict) and {"quantity", "ours", "paper"} <= set(v) for v in record["values"]):
            problem = "a value row lacks its quantity, paper or ours entry"
        elif scale is not None and record["scale"] != scale:
            problem = f"it was made at scale {record['scale']!r}, not {scale!r}"
    if problem:
        raise EnsdivError(f"The claim record in {where} is malformed ({problem}); re-run its notebook.")
    return record


def read_records(folder: Path, *, scale: str | None = None) -> list[dict[str, Any]]:
    """The claim records (``*.json``) of one folder, each checked by :func:`check_record`, sorted by paper,
    item and claim id.

    Raises:
        EnsdivError: a file that is not valid JSON or not a claim record (the message names the file).
    """
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
            raise EnsdivError(f"The claim record {path} is corrupt ({err}); delete it and re-run its notebook."
                              ) from None
        records.append(check_record(record, str(path), scale=scale))
    return sorted(records, key=lambda r: (r["paper"], r["item"], r.get("claim_id") or ""))


def load_claims(scale: str) -> list[dict[str, Any]]:
    """Every claim record written at one scale outside the book's runs (:func:`claims_dir`: plain Python
    sessions and tests), sorted by paper, then item. The book never reads these: its pages carry their own.

    Raises:
        EnsdivError: If a record is not valid JSON or not a claim record (the message names the file).
    """
    _check_scale(scale)
    return read_records(build_dir() / "claims" / scale)
