"""The book's generated pages: "Claims at a glance" and the verdict part of each chapter's landing page.

Both are built from :class:`PageRun` objects, one per notebook of the book, which the build (:mod:`ensdiv.book`)
reads from the *executed copies* themselves (their status and the claim records promoted into them when their run
finished), so a page that failed is shown as failed in every build mode, a claim a page no longer makes is
gone, and nothing written outside a finished run of the page reaches the book.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ensdiv.report.checks import RULE, VERDICTS, _check_scale
from ensdiv.report.claims import _fmt, _fmt_interval, strength_of

__all__ = ["PageRun", "chapter_summary", "claims_page", "smoke_note", "verdict_box"]

#: What a page's state can be: ran to the end, failed, or has no executed copy at this scale.
PAGE_STATES = ("ok", "failed", "not run")


@dataclass(frozen=True)
class PageRun:
    """One notebook of the book as its executed copy shows it.

    Args:
        notebook: Path relative to the book root (``notebooks/sed/fig02.ipynb``).
        status: ``"ok"``, ``"failed"`` or ``"not run"``.
        error: The failure, for a failed page.
        records: The claim records of its last finished run (``[]`` unless ``status == "ok"``).
        note: What the claims page says beside its rows ("run with -p epochs 20": not the book's preset).
    """

    notebook: str
    status: str
    error: str = ""
    records: Sequence[dict[str, Any]] = field(default_factory=tuple)
    note: str = ""


def _page_link(nb: str, label: str) -> str:
    """A MyST ``{doc}`` link to the rendered page of a notebook (path relative to the book root)."""
    return f"{{doc}}`{label} </{Path(nb).with_suffix('').as_posix()}>`"


def _strength(record: dict[str, Any]) -> str:
    """``2/3 pass, 1 inconclusive`` (of the counted checks), then the key check: its value and interval, what
    the interval resampled, and its p-value against its null data."""
    st = strength_of(record["checks"])
    text = f"{st['passed']}/{st['counted']} pass" + "".join(
        f", {st[k]} {w}" for k, w in (("failed", "fail"), ("inconclusive", "inconclusive"), ("untestable",
                                                                                          "not testable")) if st[k])
    key = record.get("key_check")
    shown = next((c for c in record["checks"] if c["name"] == key), None) or next(
        (c for c in record["checks"] if c["counted"] and c.get("interval")), None)
    if shown:
        text += f"; {shown['name']}: {_fmt(shown.get('value'))} {_fmt_interval(shown.get('interval'))}"
        if shown.get("source"):
            text += f" over {shown['source']}"
        if shown.get("p") is not None:
            text += f", p = {_fmt(shown['p'])} against its null"
    if record.get("unit"):
        text += f"; about {record['unit']}"
    return text


def _findings(pages: Sequence[PageRun]) -> list[str]:
    """One line per check a paper's own numbers fail: a finding about the paper, never dropped silently."""
    lines = []
    for page in pages:
        for r in page.records if page.status == "ok" else ():
            for name in r.get("paper_findings", []):
                lines.append(f"- {_page_link(page.notebook, r['item'])} ({r['paper']}): the paper's own numbers "
                             f"fail \"{name}\", so its table does not support this sentence as tested here.")
    return sorted(lines)


def _badge(verdict: str) -> str:
    """A coloured verdict badge (inline HTML; ``book/_static/ensdiv.css`` colours it); a page that tests no
    claim gets words, not a badge (every badge on the claims page is a claim record)."""
    if verdict == "no claim":
        return "<em>no claim</em>"
    return f'<span class="ensdiv-badge {verdict.replace(" ", "-")}">{html.escape(verdict)}</span>'


def _claim_rows(pages: Sequence[PageRun]) -> list[dict[str, str]]:
    """One row per claim record of a page that ran (sorted by paper, page), then one per page that failed or
    has not run at this scale: ``paper``, ``page`` (a link), ``claim``, ``verdict``, ``strength``, ``key`` and,
    for a claim record, ``why`` (its ``undecided`` reason, empty when it decided)."""
    rows = []
    for page in pages:
        if page.status != "ok":
            continue
        note = f" ({page.note})" if page.note else ""
        for r in sorted(page.records, key=lambda r: (r["paper"], r["item"], r.get("claim_id") or "")):
            rows.append({"paper": r["paper"], "page": _page_link(page.notebook, r["item"]), "claim": r["claim"],
                         "verdict": r["verdict"], "strength": _strength(r), "key": _key_numbers(r, 3) + note,
                         "why": r.get("undecided") or "", "moved": r.get("moved") or ""})
        if not page.records:  # a page of measurements or a worked example: listed, with no verdict to show
            rows.append({"paper": Path(page.notebook).parent.name, "verdict": "no claim", "strength": "",
                         "page": _page_link(page.notebook, Path(page.notebook).stem), "key": note.strip(" ()"),
                         "claim": "reports measurements or a worked example; tests no claim"})
    rows.sort(key=lambda row: (row["paper"], row["page"]))
    for page in sorted(pages, key=lambda p: p.notebook):
        if page.status == "ok":
            continue
        nb = page.notebook
        link = _page_link(nb, Path(nb).stem)
        if page.status == "failed":
            first = page.error.strip().splitlines()[0] if page.error.strip() else ""
            rows.append({"paper": Path(nb).parent.name, "page": link, "claim": "the page did not run",
                         "verdict": "failed", "strength": "", "key": html.escape(first[:160])})
        else:
            rows.append({"paper": Path(nb).parent.name, "page": link, "verdict": "not run", "strength": "",
                         "claim": "the page has not been run at this scale", "key": ""})
    return rows


def _table_lines(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in row) + " |"
                    for row in rows]


_ORDER = (*VERDICTS, "failed", "not run", "no claim")


def _verdict_counts(rows: Sequence[dict[str, str]]) -> str:
    counts = {v: sum(row["verdict"] == v for row in rows) for v in _ORDER}
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n)


def _short(text: str, limit: int = 90) -> str:
    """The claim cut at a word boundary to ``limit`` characters (the page has it in full)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"


#: The page that measures the rule (linked from the claims page when the book has it).
CALIBRATION_PAGE = "notebooks/foundations/calibration.ipynb"


def _calibration_link(pages: Sequence[PageRun]) -> str:
    """The sentence pointing to the calibration page, when the book built has it (a test book may not)."""
    if not any(p.notebook == CALIBRATION_PAGE for p in pages):
        return ""
    return (f"{_page_link(CALIBRATION_PAGE, 'How the verdicts are calibrated')} measures how often the rule calls "
            "equal methods different, and how its power grows with the effect. ")


def claims_page(scale: str, pages: Sequence[PageRun]) -> str:
    """The "Claims at a glance" page (MyST markdown): one section per chapter, one line per claim — badge and
    item (a link to the page), the claim in short, its key number with the interval beside the paper's — and a
    line per page that failed (never left out) or has not run at ``scale``; the counts by verdict on top; the
    findings about the papers (checks their own numbers fail) and the rule below. The strength of each verdict
    (checks counted, null pass rate, unit) is one click away, in the page's verdict box.

    Returns:
        The page's markdown.

    Example:
        >>> "did not run" in claims_page("cpu", [PageRun("n/a.ipynb", "failed", "boom")])
        True
    """
    _check_scale(scale)
    rows = _claim_rows(pages)
    counts = _verdict_counts(rows)
    chapters = list(dict.fromkeys(r["paper"] for r in rows))
    jump = " · ".join(f"{{ref}}`{c} <claims-{slug_anchor(c)}>`" for c in chapters)
    lines = [
        "# Claims at a glance",
        "",
        f"Every claim this book tests, with its verdict at the scale the book was built at (**{scale}**), by "
        "the book's one rule (below). Each line gives the key number of the claim with its 90 % interval, the "
        "paper's in brackets, and, for a claim not decided, why; the page's verdict box says how many checks "
        "counted, the key check's p-value against its null data and what the claim is about. "
        f"{_calibration_link(pages)}"
        f"{sum(r['verdict'] != 'no claim' for r in rows)} claims: {counts or 'none yet'}.",
        "",
        f"Chapters: {jump or 'none yet'}.",
    ]
    for c in chapters:
        mine = [r for r in rows if r["paper"] == c]
        lines += ["", f"(claims-{slug_anchor(c)})=", f"## {c} ({_verdict_counts(mine)})", "",
                  *_table_lines(("page", "claim", "key number"),
                                [(f"{_badge(r['verdict'])} {r['page']}", _short(r["claim"]), _key_cell(r))
                                 for r in mine])]
    findings = _findings(pages)
    if findings:
        lines += ["", "## Findings about the papers", "",
                  "Checks the paper's own reported numbers fail: shown on the page, left out of its verdict.", "",
                  *findings]
    lines += ["", "## The verdict rule", "", RULE]
    return "\n".join(lines) + "\n"


def _key_cell(row: Mapping[str, str]) -> str:
    """A claims-page row's last cell: the key number (all of it for a page that failed or did not run), for a
    claim not decided, why (a premise the scale fails, a gate, too few seeds), as its record says, and for a claim
    whose verdict moved in a recorded independent run, that it did."""
    key = row["key"].split("; ")[0] if row["verdict"] not in ("failed", "not run") else row["key"]
    why = f" — why: {row['why']}" if row.get("why") else ""
    return key + why + (f" — {row['moved']}" if row.get("moved") else "")


def slug_anchor(text: str) -> str:
    """The anchor Sphinx gives a section titled ``text`` (lower case, runs of other characters a hyphen)."""
    import re

    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def chapter_summary(scale: str, *, chapter: str, pages: Sequence[PageRun], key_page: str | None = None,
                    thumbnail: str | None = None, claims_doc: str | None = None) -> str:
    """The generated part of a chapter's landing page (MyST markdown, meant for an ``{include}``): the
    chapter's verdicts at ``scale`` and a thumbnail of its key figure.

    The chapter's pages are those of ``pages`` in the folder ``notebooks/<chapter>/``; their claim records
    and failures are listed as on the claims page (:func:`claims_page`), without the paper column.

    Args:
        scale: The scale the book was built at.
        chapter: The chapter slug (the folder of its notebooks).
        pages: Every page of the book.
        key_page: The notebook whose figure stands for the chapter.
        thumbnail: Path of that figure's image as the page's Sphinx source sees it (``/book/...png``),
            or None when the key page produced no image in this build.
        claims_doc: The claims page (``"book/claims"``) to link to, if the book has one.

    Returns:
        Markdown without a top-level heading.

    Example:
        >>> text = chapter_summary("cpu", chapter="sed", pages=[PageRun("notebooks/sed/a.ipynb", "failed", "boom")],
        ...                        key_page="notebooks/sed/a.ipynb")
        >>> "1 failed" in text and "key page" in text
        True
    """
    _check_scale(scale)
    mine = [p for p in pages if Path(p.notebook).parent.name == chapter]
    rows = _claim_rows(mine)
    counts = _verdict_counts(rows)
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
            state = next((p.status for p in mine if p.notebook == key_page), "not run")
            state = {"failed": "failed", "not run": "has not been run at this scale"}.get(state, "has no figure in "
                                                                                          "this build")
            lines += [f"The chapter's key page {_page_link(key_page, label)} {state}.", ""]
    if rows:
        lines += _table_lines(("page", "claim", "verdict", "strength", "key numbers"),
                              [(r["page"], r["claim"], _badge(r["verdict"]), r["strength"], r["key"]) for r in rows])
    return "\n".join(lines) + "\n"


def _key_numbers(record: dict[str, Any], limit: int = 2) -> str:
    """The first ``limit`` quantities of a record: this run's value, its interval, the paper's."""
    parts = []
    for v in record["values"][:limit]:
        iv = f" {_fmt_interval(v['interval'])}" if v.get("interval") else ""
        paper = f" (paper {_fmt(v['paper'])})" if v.get("paper") is not None else ""
        parts.append(f"{v['quantity']}: {_fmt(v['ours'])}{iv}{paper}")
    return "; ".join(parts)


def verdict_box(page: PageRun, *, target: str | None = None) -> str:
    """The box a paper page opens with (MyST markdown): per claim of its last run, the verdict, its strength
    and one or two key numbers beside the paper's, and a link down to "Paper vs this run" (the label
    ``target``); for a page that failed, the failure.

    >>> box = verdict_box(PageRun("n/a.ipynb", "failed", "cell [3] raised ValueError: boom"))
    >>> "did not run" in box and "ValueError" in box
    True
    """
    if page.status == "failed":
        first = page.error.strip().splitlines()[0] if page.error.strip() else "the run did not finish"
        return ("```{admonition} Verdict: this page did not run\n:class: ensdiv-verdict ensdiv-failed\n"
                f"{first}\n```\n")
    if not page.records:
        return ""
    lines = []
    for r in sorted(page.records, key=lambda r: (r["item"], r.get("claim_id") or "")):
        lines += [f"**{r['verdict']}** ({_strength(r).split(';')[0]}) — {r['claim']}", ""]
        if r.get("undecided"):
            lines += [f"Not decided: {r['undecided']}.", ""]
        if r.get("moved"):  # set by the book from a recorded second run (ensdiv.book.site.moved_claims)
            lines += [f"{r['moved'][0].upper()}{r['moved'][1:]}.", ""]
        numbers = _key_numbers(r)
        if numbers:
            lines += [numbers, ""]
    link = f"{{ref}}`Paper vs this run <{target}>` below gives every check." if target else ""
    verdicts = sorted({r["verdict"] for r in page.records})
    title = f"Verdict: {verdicts[0]}" if len(verdicts) == 1 else "Verdicts: " + ", ".join(verdicts)
    classes = " ".join(f"ensdiv-{v.replace(' ', '-')}" for v in verdicts)
    scale = page.records[0]["scale"]
    body = "\n".join([*lines, f"Scale **{scale}**, by the book's one rule. {link}".rstrip()])
    return f"```{{admonition}} {title}\n:class: ensdiv-verdict {classes}\n{body}\n```\n"


def smoke_note(scale: str, run: str) -> None:
    """A page's closing line at smoke scale: what the run trained (``run``) and that its numbers check the code
    path, not the paper; nothing at another scale. One sentence for every page, so a reader learns it once.

    >>> smoke_note("smoke", "one epoch")
    Smoke scale: one epoch; the numbers check the code path and say nothing about the paper's claim.
    >>> smoke_note("cpu", "one epoch")
    """
    if scale == "smoke":
        print(f"Smoke scale: {run}; the numbers check the code path and say nothing about the paper's claim.")
