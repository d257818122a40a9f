"""The book's generated pages: "Claims at a glance" and the verdict part of each chapter's landing page.

Both are built from :class:`PageRun` objects, one per notebook of the book, which the runner reads from the
*executed copies* themselves (their status and the claim records promoted into them when their run
finished), so a page that failed is shown as failed in every build mode, a claim a page no longer makes is
gone, and nothing written outside a finished run of the page reaches the book.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ensdiv.report.checks import VERDICTS, _check_scale
from ensdiv.report.claims import _fmt, _fmt_interval, strength_of

__all__ = ["PageRun", "chapter_summary", "claims_page"]

#: The rule as the claims page states it (the same as :mod:`ensdiv.report`'s docstring).
RULE = (
    "Each check runs on this run's numbers (*pass*, *fail*, or *inconclusive* when its 90 % interval straddles "
    "the bound), on the paper's own numbers and on *no effect* (the null: equal quantities, a zero correlation, "
    "a ratio of one, or the value the page states). A check the paper's numbers fail, or that passes with no "
    "effect, is shown but not counted; facts (parameter counts, costs, identities) never count. Over the counted "
    "checks: **holds** — all pass; **holds partly** — some pass, none fails, the rest inconclusive; "
    "**inconclusive** — none passes or fails; **does not hold** — at least half fail; **mixed** — some fail, "
    "fewer than half. Fewer than half of the checks computable, or a smoke build: **not testable at this scale**."
)

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
    """

    notebook: str
    status: str
    error: str = ""
    records: Sequence[dict[str, Any]] = field(default_factory=tuple)


def _page_link(nb: str, label: str) -> str:
    """A MyST ``{doc}`` link to the rendered page of a notebook (path relative to the book root)."""
    return f"{{doc}}`{label} </{Path(nb).with_suffix('').as_posix()}>`"


def _strength(record: dict[str, Any]) -> str:
    """``2/3 pass, 1 inconclusive`` (of the counted checks), and the first counted check's interval."""
    st = strength_of(record["checks"])
    text = f"{st['passed']}/{st['counted']} pass" + "".join(
        f", {st[k]} {w}" for k, w in (("failed", "fail"), ("inconclusive", "inconclusive"), ("untestable",
                                                                                          "not testable")) if st[k])
    shown = next((c for c in record["checks"] if c["counted"] and c.get("interval")), None)
    if shown:
        text += f"; {shown['name']}: {_fmt(shown.get('value'))} {_fmt_interval(shown['interval'])}"
    return text


def _claim_rows(pages: Sequence[PageRun]) -> list[tuple[str, ...]]:
    """``(paper, page, claim, verdict, strength, key numbers)`` per claim record of a page that ran, then one
    row per page that failed or has not run at this scale."""
    rows = []
    for page in pages:
        if page.status != "ok":
            continue
        for r in sorted(page.records, key=lambda r: (r["paper"], r["item"], r.get("claim_id") or "")):
            key = "; ".join(f"{v['quantity']}: {_fmt(v['ours'])} (paper {_fmt(v['paper'])})" for v in r["values"][:3])
            rows.append((r["paper"], _page_link(page.notebook, r["item"]), r["claim"], f"**{r['verdict']}**",
                         _strength(r), key))
    rows.sort(key=lambda row: (row[0], row[1]))
    for page in sorted(pages, key=lambda p: p.notebook):
        if page.status == "ok":
            continue
        nb = page.notebook
        if page.status == "failed":
            first = page.error.strip().splitlines()[0] if page.error.strip() else ""
            rows.append((Path(nb).parent.name, _page_link(nb, Path(nb).stem), "the page did not run", "**failed**",
                         "", html.escape(first[:160])))
        else:
            rows.append((Path(nb).parent.name, _page_link(nb, Path(nb).stem), "the page has not been run at this "
                         "scale", "**not run**", "", ""))
    return rows


def _table_lines(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in row) + " |"
                    for row in rows]


def _verdict_counts(rows: Sequence[Sequence[str]]) -> str:
    counts = {v: sum(row[3] == f"**{v}**" for row in rows) for v in (*VERDICTS, "failed", "not run")}
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n)


def claims_page(scale: str, pages: Sequence[PageRun]) -> str:
    """The "Claims at a glance" page (MyST markdown): one row per claim record of the pages that ran, and
    one row per page that failed (shown as failed, never left out) or has not run at ``scale``.

    Returns:
        The page's markdown.

    Example:
        >>> "did not run" in claims_page("cpu", [PageRun("n/a.ipynb", "failed", "boom")])
        True
    """
    _check_scale(scale)
    rows = _claim_rows(pages)
    lines = [
        "# Claims at a glance",
        "",
        f"Every claim this book tests, with its verdict at the scale the book was built at (**{scale}**), by "
        "the book's one rule (`ed.report`, below). *Strength* counts the checks that entered the verdict "
        "and gives the first one's 90 % interval; the key numbers are this run's, with the paper's in brackets. "
        f"{len(rows)} claims: {_verdict_counts(rows) or 'none yet'}.",
        "",
        *_table_lines(("paper", "page", "claim", "verdict", "strength", "key numbers"), rows),
        "",
        "## The verdict rule",
        "",
        RULE,
    ]
    return "\n".join(lines) + "\n"


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
    rows = [row[1:] for row in _claim_rows(mine)]
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
            state = next((p.status for p in mine if p.notebook == key_page), "not run")
            state = {"failed": "failed", "not run": "has not been run at this scale"}.get(state, "has no figure in "
                                                                                          "this build")
            lines += [f"The chapter's key page {_page_link(key_page, label)} {state}.", ""]
    if rows:
        lines += _table_lines(("page", "claim", "verdict", "strength", "key numbers"), rows)
    return "\n".join(lines) + "\n"
