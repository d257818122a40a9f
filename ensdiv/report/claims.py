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

import pandas as pd

from ensdiv.errors import EnsdivError, InvalidInputError
from ensdiv.paths import build_dir
from ensdiv.report.checks import VERDICTS, Check, _check_scale, _plain, evaluate, null_values, verdict
from ensdiv.report.uncertainty import LEVEL, Estimate

__all__ = ["PAPERS", "STAGING_ENV", "Claim", "check_record", "claim", "claims_dir", "describe_strength", "load_claims",
           "read_records", "slug", "strength_of", "audit", "FACT_NAMES", "facts_table"]

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

    ``checks`` holds dicts ``{name, cites, ours, paper, null, counted, excluded, value, interval, source}``:
    ``ours``/``paper``/``null`` are ``"pass"``, ``"fail"``, ``"inconclusive"`` or None (not computable; for
    ``null``, also ``"no null"``), ``interval`` the interval of the check's statistic on this run (None on
    plain numbers), ``excluded`` why a computable check is not counted. ``values`` and ``facts`` hold dicts
    ``{quantity, paper, ours}`` (JSON-safe; None where missing) and ``intervals`` the interval of each
    quantity that has one. ``variance`` says what the intervals randomise.
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
        """The checks table: check | paper's numbers | no effect | this run | interval | counted."""
        shown = {"pass": "pass", "fail": "fail", "inconclusive": "inconclusive", None: _MISSING, "no null": "no null"}
        rows = [(c["name"], shown[c["paper"]], shown[c["null"]], shown[c["ours"]] if c["ours"] else "not testable",
                 _fmt_interval(c.get("interval")), "yes" if c["counted"] else f"no: {c['excluded'] or 'not testable'}")
                for c in self.checks]
        return pd.DataFrame(rows, columns=["check", "on the paper's numbers", "with no effect", "this run",
                                           "interval", "counted"])

    def _summary(self) -> str:
        return describe_strength(self.strength(), self.scale, self.variance)

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
    ``untestable`` (not computable on this run) and ``excluded`` (fails on the paper's numbers or passes with
    no effect)."""
    counted = [c for c in checks if c["counted"]]
    return {"checks": len(checks), "counted": len(counted),
            "passed": sum(c["ours"] == "pass" for c in counted), "failed": sum(c["ours"] == "fail" for c in counted),
            "inconclusive": sum(c["ours"] == "inconclusive" for c in counted),
            "untestable": sum(c["ours"] is None for c in checks),
            "excluded": sum(bool(c.get("excluded")) for c in checks)}


def describe_strength(st: Mapping[str, int], scale: str, variance: str = "") -> str:
    """One line: ``2 of 3 counted checks pass, 1 inconclusive; 1 not testable; ...``."""
    parts = [f"{st['passed']} of {st['counted']} counted checks pass"]
    parts[0] += "".join(f", {st[k]} {w}" for k, w in (("failed", "fail"), ("inconclusive", "inconclusive")) if st[k])
    if st["untestable"]:
        parts.append(f"{st['untestable']} not testable")
    if st["excluded"]:
        parts.append(f"{st['excluded']} not counted (fail on the paper's numbers or pass with no effect)")
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


def _check_row(check: Check, ours: Mapping[str, Any], paper_values: Mapping[str, Any] | None,
               level: float) -> dict[str, Any]:
    """One check on this run's values, the paper's and the null's, and whether it counts.

    Besides the outcomes, the row says how the check is *built*, which the audit reads even where this run
    could not compute it: ``has_null`` (the check states a null) and ``estimated`` (one of its quantities is
    an :class:`~ensdiv.report.uncertainty.Estimate`, so the check gets an interval once computable)."""
    mine = evaluate(check, ours, level=level)
    on_paper = evaluate(check, paper_values, level=level).result if paper_values is not None else None
    null = null_values(check, ours)
    on_null = ("no null" if check.null is None else None) if null is None else evaluate(check, null,
                                                                                        level=level).result
    excluded = ("fails on the paper's numbers" if on_paper == "fail" else
                "passes with no effect" if on_null == "pass" else "")
    return {"name": check.name, "needs": list(check.needs), "cites": check.cites, "ours": mine.result,
            "paper": on_paper, "null": on_null, "null_reason": check.null_reason if check.null is None else "",
            "has_null": check.null is not None,
            "estimated": any(isinstance(ours.get(q), Estimate) for q in check.needs) or mine.interval is not None,
            "counted": mine.result is not None and not excluded,
            "excluded": excluded if mine.result is not None else "", "value": mine.value,
            "interval": list(mine.interval) if mine.interval else None, "source": mine.source}


def claim(*, paper: str, item: str, claim: str, checks: Sequence[Check], ours: Mapping[str, Any],
          paper_values: Mapping[str, Any] | None = None, scale: str, key: Sequence[str] | None = None,
          notes: str = "", write: bool = True, claim_id: str | None = None, facts: Mapping[str, Any] | None = None,
          variance: str = "", level: float = LEVEL) -> Claim:
    """Test a paper's claim on this run's numbers (and on the paper's own, and on "no effect"), and record it.

    Args:
        paper: Chapter slug, one of :data:`PAPERS`.
        item: The figure or table as the notebook names it (``"Table 1"``, ``"Fig. 2"``).
        claim: The claim under test, one sentence.
        checks: The checks that test it (distinct names).
        ours: This run's quantities by name: numbers or :class:`~ensdiv.report.uncertainty.Estimate` objects.
        paper_values: The paper's reported quantities by name; each check is also run on them, and a
            check they fail is shown but not counted.
        scale: ``"smoke"``, ``"cpu"`` or ``"paper"``.
        key: Quantities shown in the "Paper vs this run" table (default: every key of ``ours`` and
            ``paper_values``, in order, facts excepted).
        notes: A paragraph shown after the tables.
        write: Write the record (to the run's staging folder under ``ensdiv run``, else :func:`claims_dir`).
        claim_id: Distinguishes several claims about the same item.
        facts: Quantities that are facts, not measurements (parameter counts, mult-adds, identities, costs):
            shown in their own table beside the paper's value of the same name, never in a verdict.
        variance: What the intervals randomise, in the page's words ("test images (paired bootstrap); training
            seeds not covered"). Default: the sources of the estimates used.
        level: The interval level (default :data:`~ensdiv.report.uncertainty.LEVEL`).

    Returns:
        The :class:`Claim`; it renders itself in a notebook.

    >>> from ensdiv.report import below, less
    >>> c = claim(paper="foundations", item="Fig. 1", claim="Ensembling lowers the error.",
    ...           checks=[less("err_ens", "err_single"), below("err_ens", 0.05, null=0.1)],
    ...           ours={"err_ens": 0.08, "err_single": 0.11}, paper_values={"err_ens": 0.06, "err_single": 0.09},
    ...           scale="cpu", write=False)
    >>> c.verdict
    'holds'
    >>> [(ch["paper"], ch["null"], ch["ours"], ch["counted"]) for ch in c.checks]
    [('pass', 'fail', 'pass', True), ('fail', 'fail', 'fail', False)]
    """
    if paper not in PAPERS:
        raise InvalidInputError(f"Unknown paper {paper!r}; valid chapter slugs: {', '.join(PAPERS)}.")
    _check_scale(scale)
    if not isinstance(claim, str) or not claim.strip():
        raise InvalidInputError("The claim text is empty; state the claim under test in one sentence.")
    if not isinstance(item, str) or not slug(item):
        raise InvalidInputError(f"The item {item!r} must name the figure or table, e.g. 'Table 1'.")
    checks = list(checks)
    if not checks:
        raise InvalidInputError("A claim needs at least one check; an empty checks list cannot test anything.")
    for check in checks:
        if not isinstance(check, Check):
            raise InvalidInputError(f"Every check must be an ed.report.Check, got {type(check).__name__}.")
    names = [check.name for check in checks]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InvalidInputError(f"Two checks share the name {dupes[0]!r}; give each check its own name.")
    facts = dict(facts or {})
    read = {q for check in checks for q in check.needs}
    both = sorted(read & set(facts))
    if both:
        raise InvalidInputError(f"{both[0]!r} is a fact and a checked quantity; a fact never enters a verdict.")
    rows = [_check_row(check, ours, paper_values, level) for check in checks]
    paper_values = paper_values or {}
    shown = list(key) if key is not None else [q for q in dict.fromkeys([*ours, *paper_values]) if q not in facts]

    def row(q: str) -> dict[str, Any]:
        est = ours.get(q)
        iv = est.interval(level) if isinstance(est, Estimate) else None
        return {"quantity": q, "paper": _plain(paper_values.get(q)), "ours": _plain(est),
                "interval": list(iv) if iv else None, "source": est.source if isinstance(est, Estimate) else None}

    values = [row(q) for q in shown]
    fact_rows = [{"quantity": q, "paper": _plain(paper_values.get(q)), "ours": _plain(v)} for q, v in facts.items()]
    sources = sorted({r["source"] for r in rows if r["counted"] and r["source"]})
    variance = variance or (", ".join(sources) if sources else "none: no counted check compares estimates")
    excluded = sum(bool(r["excluded"]) for r in rows)
    result = Claim(paper=paper, item=item, claim=claim.strip(), scale=scale,
                   verdict=verdict([r["ours"] for r in rows if not r["excluded"]], scale=scale,
                                   total=len(rows) - excluded),
                   checks=rows, values=values, notes=notes, claim_id=claim_id, facts=fact_rows, variance=variance,
                   level=level)
    if write:
        suffix = f"__{slug(claim_id)}" if claim_id else ""
        staging = os.environ.get(STAGING_ENV)
        folder = Path(staging) if staging else claims_dir(scale)
        folder.mkdir(parents=True, exist_ok=True)
        _write_json(folder / f"{paper}__{slug(item)}{suffix}.json", result.record())
    return result


#: Quantity names that are facts of an architecture or a cost, never measurements to count in a verdict.
FACT_NAMES = re.compile(r"(^|_)(params?|n_params|parameters|mult_adds?|macs|flops)($|_)")


def audit(record: Mapping[str, Any]) -> list[str]:
    """What a skeptical reviewer would object to in a claim record, one sentence each (``[]``: nothing).

    Every check that is not left out (failing on the paper's numbers, passing with no effect) is judged by how
    it is built, also where this run could not compute it (at smoke scale many cannot):

    - a check without a null (it cannot show that it fails when the effect is absent);
    - a check that reads a fact (a parameter count, mult-adds, FLOPs);
    - a check whose quantities carry no uncertainty (a comparison of measured numbers decided by point
      estimates);

    and the record must say what its intervals randomise. ``tests/test_notebooks.py`` runs it on every page's
    records at smoke scale.

    >>> audit({"checks": [{"name": "a is less than b", "needs": ["a", "b"], "has_null": True, "estimated": True,
    ...                    "excluded": ""}], "variance": "evaluation samples"})
    []
    """
    problems = []
    for c in record.get("checks", []):
        if c.get("excluded"):
            continue
        if not c.get("has_null", c.get("null") not in (None, "no null")):
            problems.append(f"check {c['name']!r} has no null ({c.get('null_reason') or 'no reason given'}).")
        facts = [q for q in c.get("needs", []) if FACT_NAMES.search(q)]
        if facts:
            problems.append(f"check {c['name']!r} reads the fact {facts[0]!r}; show it in the facts table.")
        if not c.get("estimated", bool(c.get("interval"))):
            problems.append(f"check {c['name']!r} compares numbers without an interval.")
    if not str(record.get("variance", "")).strip():
        problems.append("the record does not say what its intervals randomise.")
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
