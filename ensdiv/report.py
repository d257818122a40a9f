""""Paper vs this run": the book's one verdict rule, its tables and its claim records.

Every notebook ends by testing the paper's claim on this run's numbers. A claim is tested by a few
:class:`Check` objects, each a named yes/no question over named quantities ("the ensemble's error is
below the single model's"). The verdict comes from one rule, the same on every page:

1. At ``smoke`` scale the verdict is always *not testable at this scale*. Smoke runs train on a few
   hundred images for one short epoch: they show that the code path works, and whatever their numbers
   say about the science is noise, so they never confirm or refute a paper.
2. A check that cannot be evaluated (a quantity is missing, NaN or infinite) does not count. If no
   check counts, the verdict is again *not testable at this scale*.
3. If every counted check passes, the claim *holds*; if at least half pass, it *holds partly*; if
   fewer than half pass, it *does not hold*.

When the paper's own numbers are given, every check is also run on them: the calibration row. A
check the paper's own numbers would fail is not a test of the paper's claim (the check is stricter
than, or different from, what the paper showed), so it is shown, marked "fails on the paper's
numbers", and left out of the verdict. A check that cannot be evaluated on the paper's numbers (the
paper does not report that quantity) still counts.

>>> verdict([True, True, False, None], scale="cpu")
'holds partly'
>>> evaluate(less("err_ensemble", "err_single"), {"err_ensemble": 0.08, "err_single": 0.1})
True
>>> verdict([True, True], scale="smoke")
'not testable at this scale'
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ensdiv.errors import EnsdivError, InvalidInputError
from ensdiv.paths import build_dir

__all__ = [
    "PAPERS", "SCALES", "VERDICTS", "Check", "Claim", "above", "below", "claim", "claims_dir", "evaluate",
    "greater", "less", "load_claims", "negative", "positive", "significant", "slug", "verdict", "within",
]

SCALES = ("smoke", "cpu", "paper")
PAPERS = ("packed-ensembles", "attack-similarity", "training-methods", "design-diversity", "sed", "foundations",
          "synthesis")
VERDICTS = ("holds", "holds partly", "does not hold", "not testable at this scale")
_MISSING = "–"


@dataclass(frozen=True)
class Check:
    """A named predicate over a dict of named quantities.

    Args:
        name: What the check asks, as a sentence ("err_ensemble is less than err_single").
        rule: Receives a dict ``{quantity: float}`` (finite values only) and returns a bool.
        needs: The quantities the rule reads. If empty, a ``KeyError`` raised by the rule means
            "not testable".
    """

    name: str
    rule: Callable[[Mapping[str, float]], bool]
    needs: Sequence[str] = field(default=(), kw_only=True)


def _number(value: Any, quantity: str) -> float | None:
    """A finite float, None for missing/NaN/inf; anything not a scalar number is an error."""
    plain = _plain(value)
    if isinstance(plain, str):
        raise InvalidInputError(f"Quantity {quantity!r} must be a scalar number, got {type(value).__name__}.")
    return None if plain is None else float(plain)


def evaluate(check: Check, values: Mapping[str, Any]) -> bool | None:
    """Run one check on a dict of quantities.

    Args:
        check: The check.
        values: Quantities by name: floats, ints, bools, numpy scalars or 0-d torch tensors.

    Returns:
        True or False, or None when a needed quantity is missing, NaN or infinite (or the rule
        raises ``KeyError``).
    """
    for name in check.needs:
        if _number(values.get(name), name) is None:
            return None
    # the rule sees finite numbers only: labels, NaN and inf are invisible to it
    numbers = {k: float(p) for k, v in values.items() if isinstance(p := _plain(v), int | float)}
    try:
        return bool(check.rule(numbers))
    except KeyError:
        return None


def less(a: str, b: str, *, name: str | None = None, margin: float = 0.0) -> Check:
    """Check that ``a < b - margin``."""
    by = f" by more than {margin:g}" if margin else ""
    return Check(name or f"{a} is less than {b}{by}", lambda v: v[a] < v[b] - margin, needs=(a, b))


def greater(a: str, b: str, *, name: str | None = None, margin: float = 0.0) -> Check:
    """Check that ``a > b + margin``."""
    by = f" by more than {margin:g}" if margin else ""
    return Check(name or f"{a} is greater than {b}{by}", lambda v: v[a] > v[b] + margin, needs=(a, b))


def negative(a: str, *, name: str | None = None) -> Check:
    """Check that ``a < 0``."""
    return Check(name or f"{a} is negative", lambda v: v[a] < 0, needs=(a,))


def positive(a: str, *, name: str | None = None) -> Check:
    """Check that ``a > 0``."""
    return Check(name or f"{a} is positive", lambda v: v[a] > 0, needs=(a,))


def below(a: str, threshold: float, *, name: str | None = None) -> Check:
    """Check that ``a < threshold``."""
    return Check(name or f"{a} is below {threshold:g}", lambda v: v[a] < threshold, needs=(a,))


def above(a: str, threshold: float, *, name: str | None = None) -> Check:
    """Check that ``a > threshold``."""
    return Check(name or f"{a} is above {threshold:g}", lambda v: v[a] > threshold, needs=(a,))


def significant(p: str, *, alpha: float = 0.05, name: str | None = None) -> Check:
    """Check that the p-value ``p`` is below ``alpha``."""
    return Check(name or f"{p} is significant at the {alpha:g} level", lambda v: v[p] < alpha, needs=(p,))


def within(a: str, b: str, *, rel: float | None = None, abs: float | None = None, name: str | None = None) -> Check:
    """Check that ``|a - b| <= abs`` or ``|a - b| <= rel * |b|`` (either tolerance suffices).

    Raises:
        InvalidInputError: If neither tolerance is given, or one is negative.
    """
    if rel is None and abs is None:
        raise InvalidInputError("within() needs a tolerance: give rel=, abs= or both.")
    if (rel is not None and rel < 0) or (abs is not None and abs < 0):
        raise InvalidInputError(f"within() tolerances must be non-negative, got rel={rel}, abs={abs}.")
    tols = ([f"{rel * 100:g}%"] if rel is not None else []) + ([f"{abs:g}"] if abs is not None else [])

    def rule(v: Mapping[str, float]) -> bool:
        gap = math.fabs(v[a] - v[b])
        return (abs is not None and gap <= abs) or (rel is not None and gap <= rel * math.fabs(v[b]))

    return Check(name or f"{a} is within {' or '.join(tols)} of {b}", rule, needs=(a, b))


def _check_scale(scale: str) -> None:
    if scale not in SCALES:
        raise InvalidInputError(f"Unknown scale {scale!r}; valid scales: {', '.join(SCALES)}.")


def verdict(passed: Sequence[bool | None], *, scale: str) -> str:
    """The book's one verdict rule (see the module docstring).

    Args:
        passed: One entry per counted check: True, False, or None (not testable).
        scale: ``"smoke"``, ``"cpu"`` or ``"paper"``.

    Returns:
        ``"holds"``, ``"holds partly"``, ``"does not hold"`` or ``"not testable at this scale"``.
    """
    _check_scale(scale)
    counted = [bool(p) for p in passed if p is not None]
    if scale == "smoke" or not counted:
        return "not testable at this scale"
    if all(counted):
        return "holds"
    return "holds partly" if 2 * sum(counted) >= len(counted) else "does not hold"


def slug(text: str) -> str:
    """Lowercase ``text`` and make every run of non-alphanumerics one ``-``: ``"Table 1 (a)"`` → ``"table-1-a"``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def claims_dir(scale: str) -> Path:
    """Folder holding the claim records of one scale (``_build/claims/<scale>``), created if missing."""
    _check_scale(scale)
    path = build_dir() / "claims" / scale
    path.mkdir(parents=True, exist_ok=True)
    return path


def _plain(value: Any) -> Any:
    """A JSON-safe copy of a shown value: numpy/torch scalars unwrapped, NaN/inf → None."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()
    if value is None or isinstance(value, bool | int | str):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError, RuntimeError):
        return str(value)
    return number if math.isfinite(number) else None


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


@dataclass(frozen=True, repr=False)
class Claim:
    """One tested claim: the verdict, the "Paper vs this run" values and the checks behind it.

    ``checks`` holds dicts ``{name, ours, paper, counted}`` (``ours``/``paper``: True, False or None);
    ``values`` holds dicts ``{quantity, paper, ours}`` (JSON-safe; None where missing).
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

    def record(self) -> dict[str, Any]:
        """The JSON-safe claim record, with ``ensdiv_version`` and ``notebook`` (``$ENSDIV_NOTEBOOK``)."""
        return {**asdict(self), "ensdiv_version": _version(), "notebook": os.environ.get("ENSDIV_NOTEBOOK") or None}

    def frame(self) -> pd.DataFrame:
        """The "Paper vs this run" table as shown: quantity | paper | this run (formatted strings)."""
        rows = [(v["quantity"], _fmt(v["paper"]), _fmt(v["ours"])) for v in self.values]
        return pd.DataFrame(rows, columns=["quantity", "paper", "this run"])

    def checks_frame(self) -> pd.DataFrame:
        """The checks table as shown: check | on the paper's numbers | this run | counted."""
        on_paper = {True: "pass", False: "fails on the paper's numbers", None: _MISSING}
        ours = {True: "pass", False: "fail", None: "not testable"}
        counted = {True: "yes", False: "no"}
        rows = [(c["name"], on_paper[c["paper"]], ours[c["ours"]], counted[c["counted"]]) for c in self.checks]
        return pd.DataFrame(rows, columns=["check", "on the paper's numbers", "this run", "counted"])

    def _summary(self) -> str:
        counted = [c["ours"] for c in self.checks if c["counted"]]
        parts = [f"{sum(counted)} of {len(counted)} checks"]
        excluded = sum(c["paper"] is False for c in self.checks)
        untestable = sum(c["ours"] is None and c["paper"] is not False for c in self.checks)
        if excluded:
            parts.append(f"{excluded} failing on the paper's numbers not counted")
        if untestable:
            parts.append(f"{untestable} not testable")
        return "; ".join([*parts, f"scale {self.scale}"])

    def __str__(self) -> str:
        text = [f"**Verdict: {self.verdict}** ({self._summary()})", "", self.frame().to_string(index=False), ""]
        text.append(self.checks_frame().to_string(index=False))
        return "\n".join(text + (["", self.notes] if self.notes else []))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        tables = [df.to_html(index=False, border=0) for df in (self.frame(), self.checks_frame())]
        parts = [f"<p><b>Verdict: {html.escape(self.verdict)}</b> ({html.escape(self._summary())})</p>", *tables]
        return "\n".join(parts + ([f"<p>{html.escape(self.notes)}</p>"] if self.notes else []))


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


def claim(*, paper: str, item: str, claim: str, checks: Sequence[Check], ours: Mapping[str, Any],
          paper_values: Mapping[str, Any] | None = None, scale: str, key: Sequence[str] | None = None,
          notes: str = "", write: bool = True, claim_id: str | None = None) -> Claim:
    """Test a paper's claim on this run's numbers (and on the paper's own), and record the result.

    Args:
        paper: Chapter slug, one of :data:`PAPERS`.
        item: The figure or table as the notebook names it (``"Table 1"``, ``"Fig. 2"``).
        claim: The claim under test, one sentence.
        checks: The checks that test it (distinct names).
        ours: This run's quantities by name.
        paper_values: The paper's reported quantities by name; each check is also run on them, and a
            check they fail is shown but not counted.
        scale: ``"smoke"``, ``"cpu"`` or ``"paper"``.
        key: Quantities shown in the "Paper vs this run" table (default: every key of ``ours`` and
            ``paper_values``, in order).
        notes: A paragraph shown after the tables.
        write: Write the record to ``claims_dir(scale) / "<paper>__<item slug>[__<claim_id slug>].json"``.
        claim_id: Distinguishes several claims about the same item.

    Returns:
        The :class:`Claim`; it renders itself in a notebook.

    >>> c = claim(paper="foundations", item="Fig. 1", claim="Ensembling lowers the error.",
    ...           checks=[less("err_ens", "err_single"), below("err_ens", 0.05)],
    ...           ours={"err_ens": 0.08, "err_single": 0.11}, paper_values={"err_ens": 0.06, "err_single": 0.09},
    ...           scale="cpu", write=False)
    >>> c.verdict
    'holds'
    >>> [(ch["paper"], ch["ours"], ch["counted"]) for ch in c.checks]
    [(True, True, True), (False, False, False)]
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
    results = []
    for check in checks:
        on_ours = evaluate(check, ours)
        on_paper = evaluate(check, paper_values) if paper_values is not None else None
        counted = on_ours is not None and on_paper is not False
        results.append({"name": check.name, "ours": on_ours, "paper": on_paper, "counted": counted})
    shown = list(key) if key is not None else list(dict.fromkeys([*ours, *(paper_values or {})]))
    values = [{"quantity": q, "paper": _plain((paper_values or {}).get(q)), "ours": _plain(ours.get(q))} for q in shown]
    result = Claim(paper=paper, item=item, claim=claim.strip(), scale=scale,
                   verdict=verdict([r["ours"] for r in results if r["counted"]], scale=scale),
                   checks=results, values=values, notes=notes, claim_id=claim_id)
    if write:
        suffix = f"__{slug(claim_id)}" if claim_id else ""
        _write_json(claims_dir(scale) / f"{paper}__{slug(item)}{suffix}.json", result.record())
    return result


def load_claims(scale: str) -> list[dict[str, Any]]:
    """Every claim record written at one scale, sorted by paper, then item.

    Raises:
        EnsdivError: If a record is not valid JSON (the message names the file).
    """
    _check_scale(scale)
    folder = build_dir() / "claims" / scale
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            problem = None if isinstance(record, dict) else "not a JSON object"
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            problem = str(err)
        if problem:
            raise EnsdivError(f"The claim record {path} is corrupt ({problem}); delete it and re-run its notebook.")
        records.append(record)
    return sorted(records, key=lambda r: (str(r.get("paper")), str(r.get("item")), str(r.get("claim_id") or "")))


def _page_link(nb: str, label: str) -> str:
    """A MyST ``{doc}`` link to the rendered page of a notebook (path relative to the book root)."""
    return f"{{doc}}`{label} </{Path(nb).with_suffix('').as_posix()}>`"


def _claim_rows(scale: str, notebooks: Sequence[str], failed: Mapping[str, str]) -> list[tuple[str, ...]]:
    """``(paper, page, claim, verdict, key numbers)`` per claim record of ``scale`` whose notebook is in
    ``notebooks`` and did not fail, then one row per notebook in ``failed``, shown as failed."""
    wanted = set(notebooks)
    rows = []
    for r in load_claims(scale) if (build_dir() / "claims" / scale).is_dir() else []:
        nb = r.get("notebook")
        if nb not in wanted or nb in failed:
            continue
        key = "; ".join(f"{v['quantity']}: {_fmt(v['ours'])} (paper {_fmt(v['paper'])})" for v in r["values"][:3])
        rows.append((r["paper"], _page_link(nb, r["item"]), r["claim"], f"**{r['verdict']}**", key))
    for nb, error in sorted(failed.items()):
        first = (error or "").strip().splitlines()[0] if error else ""
        rows.append((Path(nb).parent.name, _page_link(nb, Path(nb).stem), "the page did not run", "**failed**",
                     html.escape(first[:160])))
    return rows


def _table_lines(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in row) + " |"
                    for row in rows]


def _verdict_counts(rows: Sequence[Sequence[str]]) -> str:
    counts = {v: sum(row[3] == f"**{v}**" for row in rows) for v in (*VERDICTS, "failed")}
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n)


def claims_page(scale: str, *, notebooks: Sequence[str], failed: Mapping[str, str] | None = None) -> str:
    """The "Claims at a glance" page (MyST markdown): one row per claim record of ``scale`` whose
    notebook is in ``notebooks`` (paths relative to the book root, as ``ensdiv book`` runs them), and
    one row per notebook in ``failed`` (``{notebook: error}``), shown as failed, never left out.

    Returns:
        The page's markdown.

    Example:
        >>> "did not run" in claims_page("cpu", notebooks=["n/a.ipynb"], failed={"n/a.ipynb": "boom"})
        True
    """
    _check_scale(scale)
    rows = _claim_rows(scale, notebooks, dict(failed or {}))
    lines = [
        "# Claims at a glance",
        "",
        f"Every claim this book tests, with its verdict at the scale the book was built at (**{scale}**), by "
        "the book's one rule (`ed.report`). The key numbers are this run's, with the paper's in brackets. "
        f"{len(rows)} claims: {_verdict_counts(rows) or 'none yet'}.",
        "",
        *_table_lines(("paper", "page", "claim", "verdict", "key numbers"), rows),
    ]
    return "\n".join(lines) + "\n"


def chapter_summary(scale: str, *, chapter: str, notebooks: Sequence[str], failed: Mapping[str, str] | None = None,
                    key_page: str | None = None, thumbnail: str | None = None, claims_doc: str | None = None) -> str:
    """The generated part of a chapter's landing page (MyST markdown, meant for an ``{include}``): the
    chapter's verdicts at ``scale`` and a thumbnail of its key figure.

    The chapter's pages are the notebooks of ``notebooks`` in the folder ``notebooks/<chapter>/``; their
    claim records and failures are listed as on the claims page (:func:`claims_page`), without the
    paper column.

    Args:
        scale: The scale the book was built at.
        chapter: The chapter slug (the folder of its notebooks).
        notebooks: Every notebook of the book (paths relative to the book root).
        failed: ``{notebook: error}`` of the pages that failed to run; shown as failed.
        key_page: The notebook whose figure stands for the chapter.
        thumbnail: Path of that figure's image as the page's Sphinx source sees it (``/book/...png``),
            or None when the key page produced no image in this build.
        claims_doc: The claims page (``"book/claims"``) to link to, if the book has one.

    Returns:
        Markdown without a top-level heading.

    Example:
        >>> text = chapter_summary("cpu", chapter="sed", notebooks=["notebooks/sed/a.ipynb"],
        ...                        failed={"notebooks/sed/a.ipynb": "boom"}, key_page="notebooks/sed/a.ipynb")
        >>> "1 failed" in text and "key page" in text
        True
    """
    _check_scale(scale)
    mine = [nb for nb in notebooks if Path(nb).parent.name == chapter]
    failed = {nb: err for nb, err in (failed or {}).items() if nb in mine}
    rows = [row[1:] for row in _claim_rows(scale, mine, failed)]
    counts = _verdict_counts([("", *row) for row in rows])
    see = f" All claims of the book: {{doc}}`/{claims_doc}`." if claims_doc else ""
    lines = [f"Verdicts at the scale this book was built at (**{scale}**), by the book's one rule: "
             f"{len(rows)} claim{'' if len(rows) == 1 else 's'}, {counts or 'none recorded yet'}.{see}", ""]
    if key_page:
        label = Path(key_page).stem
        if thumbnail:
            # an image, not a figure: a numbered "Fig. N" caption would read as one of the paper's figures
            lines += [f"```{{image}} {thumbnail}", ":width: 420px", f":alt: key figure of {chapter} ({label})", "```",
                      "", f"*The chapter's key figure as this build drew it: {_page_link(key_page, label)} "
                      f"(scale {scale}).*", ""]
        else:
            state = "failed" if key_page in failed else "has no figure in this build"
            lines += [f"The chapter's key page {_page_link(key_page, label)} {state}.", ""]
    if rows:
        lines += _table_lines(("page", "claim", "verdict", "key numbers"), rows)
    return "\n".join(lines) + "\n"
