"""Time to build the whole book, cold cache and warm cache, at smoke (and optionally cpu) scale.

Cold: an empty cache and build folder (every model trained, every notebook executed). Warm: the same
command again (nothing changed, so every notebook is reused). Per-notebook wall times come from the
``timings-<scale>.json`` that ``ensdiv book`` writes into the build folder; the zoo notebook's time is
the zoo build's share. The 1-minute load average before and after each build says whether the
machine was idle. Run: ``python benchmarks/bench_book.py [--quick] [--scales smoke cpu] [--keep DIR]``;
writes ``benchmarks/results/book.json`` (``--keep`` builds in DIR and leaves cache and pages there).

The zoo's achieved training throughput (images seen / training time of each supervised zoo model, read
from the cold cache's model records) is set against the raw one-thread training step of
``results/train.json``; ``--zoo-throughput CACHE`` computes it alone from an existing cache and adds it to
``book.json``.

``--change docstring|code --target FILE:FUNCTION`` measures what a maintainer's edit costs (#34): it edits one
function of the package — a word added to its docstring, or a statement that does nothing (``pass``) added to
its body — times one ``ensdiv book --scale cpu`` on the current cache and build folder, restores the file, and
records which pages re-ran next to the pages predicted to (those whose executed copy says they ran the
function), under ``rebuild_after_docstring_edit`` or ``rebuild_after_code_change_in_one_function``.

``--warm SCALE`` times one ``ensdiv book`` with the current cache and build folder (``$ENSDIV_CACHE``,
``$ENSDIV_BUILD`` or the project's defaults) and stores it as that scale's warm build: run it right after a
build that finished, with nothing changed, to measure what a second ``make book`` costs without paying for
a cold build first. ``--record KEY`` stores that one build under another key of the scale instead, e.g. a
build after a change to the zoo's recipes (``--record rebuild_after_zoo_recipe_change --note ...``).

``--replay [--page-factor PAGE=F ...]`` replays the recorded one-run build (``scales.cpu.cold_one_run``) through
``ensdiv book --jobs N``'s scheduler (:mod:`ensdiv.book.schedule`: the recorded needs, critical-path priorities,
the pages that run alone) with each page's recorded seconds, optionally scaled (``...tab01_efficient_ensembles=0.8``:
four seeds of five), and prints the minutes of pages the schedule takes; no page runs. Each page's start and its
kernel cost a real run a few minutes more than the replay.

``--compare RUN_A RUN_B`` compares two runs' executed pages claim by claim (:mod:`verdict_stability`: same or
moved, and why) and stores the summary under ``verdict_stability``.

``--change ... --executed-only`` times ``ensdiv run`` over the pages that already have an executed copy instead of
``ensdiv book`` (a partly built book, e.g. one stopped before its slowest chapters).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write  # noqa: E402

from ensdiv.book.reference import reference_minutes  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def build(scale: str, cache: Path, build_dir: Path) -> dict:
    env = {**os.environ, "ENSDIV_CACHE": str(cache), "ENSDIV_BUILD": str(build_dir), "ENSDIV_PROGRESS": "lines"}
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ensdiv.book.cli", "book", "--scale", scale], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    (build_dir / f"bench-{scale}-{int(time.time())}.log").write_text(proc.stdout + proc.stderr)
    timings_file = build_dir / f"timings-{scale}.json"
    timings = json.loads(timings_file.read_text()) if timings_file.exists() else {}
    return {"seconds": round(seconds, 1), "exit_code": proc.returncode, "load_avg_1min_before": round(load_before, 2),
            "load_avg_1min_after": round(os.getloadavg()[0], 2), **timings}


def run_pages(scale: str, cache: Path, build_dir: Path) -> dict:
    """``ensdiv run`` over every page that has an executed copy in ``build_dir`` (a partly built book): what a
    rebuild of those pages costs, in the shape :func:`build` returns."""
    executed = build_dir / "executed" / scale
    pages = sorted(p.relative_to(executed).as_posix() for p in executed.rglob("*.ipynb") if ".partial-" not in p.name)
    env = {**os.environ, "ENSDIV_CACHE": str(cache), "ENSDIV_BUILD": str(build_dir), "ENSDIV_PROGRESS": "lines"}
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ensdiv.book.cli", "run", "--scale", scale, *pages], cwd=ROOT,
                          env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    rows = [{"notebook": m.group(2), "status": "cached" if m.group(1) == "cached" else "ok",
             "seconds": float(m.group(3) or 0)}
            for m in re.finditer(r"\[(cached|ok)\s*\] (\S+)(?: in ([\d.]+) s)?", proc.stdout)]
    return {"seconds": round(seconds, 1), "exit_code": proc.returncode, "load_avg_1min_before": round(load_before, 2),
            "load_avg_1min_after": round(os.getloadavg()[0], 2), "pages": len(pages), "notebooks": rows}


#: Where ``--change`` stores its build in ``book.json``.
CHANGE_KEYS = {"docstring": "rebuild_after_docstring_edit", "code": "rebuild_after_code_change_in_one_function"}


def edited(source: str, function: str, how: str) -> str:
    """``source`` with top-level ``function`` edited: ``"docstring"`` adds a sentence to its docstring (nothing a
    page ran changes), ``"code"`` adds a ``pass`` statement after it (the function's code changes, not what it
    does)."""
    node = next((n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if node is None or not (isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)):
        raise SystemExit(f"no top-level function {function!r} with a docstring in that file")
    lines = source.splitlines(keepends=True)
    end = node.body[0].end_lineno - 1  # the docstring's last line
    if how == "docstring":
        head, _, tail = lines[end].rpartition('"""')
        lines[end] = f'{head} (Edited by bench_book.)"""{tail}'
    else:
        indent = " " * node.body[0].col_offset
        lines.insert(end + 1, f"{indent}pass  # bench_book: a change to the code that does nothing\n")
    return "".join(lines)


def pages_that_ran(executed: Path, file: Path, function: str) -> list[str]:
    """The executed pages whose record says they ran ``function`` of ``file`` (:mod:`ensdiv.tracing` units)."""
    found = []
    for nb in sorted(executed.rglob("*.ipynb")):
        meta = json.loads(nb.read_text()).get("metadata", {}).get("ensdiv", {})
        units = (meta.get("code") or {}).get("units") or []
        if any(Path(f).resolve() == file.resolve() and q == function for f, q in units):
            found.append(nb.relative_to(executed).as_posix())
    return found


def rebuild_after_change(how: str, target: str, *, executed_only: bool = False) -> dict:
    """Edit one function (:func:`edited`), time one cpu build (with ``executed_only``, :func:`run_pages` over the
    pages already executed instead of ``ensdiv book``), restore the file; which pages re-ran against the pages
    predicted to."""
    from ensdiv.paths import build_dir
    from ensdiv.store import default_store

    rel, _, function = target.partition(":")
    file = ROOT / rel
    original = file.read_text()
    executed = build_dir() / "executed" / "cpu"
    predicted = pages_that_ran(executed, file, function) if how == "code" else []
    file.write_text(edited(original, function, how))
    try:
        row = (run_pages if executed_only else build)("cpu", Path(default_store().root), build_dir())
    finally:
        file.write_text(original)
    ran = [n["notebook"].removeprefix("notebooks/") for n in row.get("notebooks", []) if n["status"] != "cached"]
    predicted = [p.removeprefix("notebooks/") for p in predicted]
    return {**row, "change": f"{how} of {target}", "pages_rerun": ran, "pages_predicted": predicted,
            "rerun_as_predicted": sorted(ran) == sorted(predicted),
            "rerun_s": round(sum(n["seconds"] for n in row.get("notebooks", [])), 1)}


#: The edits ``--ledger-edits`` measures: (what, file, how), ``how`` as :func:`apply_edit` reads it.
LEDGER_EDITS = {
    "a_function_added_to_a_metric_module": ("ensdiv/metrics/diversity.py", "append"),
    "a_docstring_edit": ("ensdiv/metrics/diversity.py:disagreement", "docstring"),
    "a_change_to_one_metric": ("ensdiv/metrics/diversity.py:disagreement", "code"),
    "a_change_to_the_training_loop": ("ensdiv/train/loop.py:fit", "code"),
    "a_change_to_one_pages_preset": ("ensdiv/chapters/sed/__init__.py", "preset"),
}


def apply_edit(source: str, target: str, how: str) -> str:
    """``source`` edited as ``how`` says: ``append`` adds a new function at the end of the module, ``preset``
    changes one value of one page's preset (SED Table 1's ``"show"``), ``docstring``/``code`` as :func:`edited`."""
    if how == "append":
        return source + "\n\ndef _bench_added(x):\n    return x\n"
    if how == "preset":
        old = '"sed/tab01_unique": _scaled(),'
        if old not in source:
            raise SystemExit("SED Table 1's preset line is not where bench_book expects it")
        return source.replace(old, '"sed/tab01_unique": {**_scaled(), "bench_added": 1},', 1)
    return edited(source, target.partition(":")[2], how)


def ledger_rebuild() -> dict:
    """For each edit of :data:`LEDGER_EDITS`: make it on disk, ask the dry-run ledger which pages are stale
    (:func:`ensdiv.book.ledger.stale_reason`, the same code ``make test`` asks), restore the file. What that
    costs is the sum of those pages' recorded dry-run seconds; the same records decide the book's pages (their
    executed copies keep the same kind of record)."""
    from ensdiv.book import ledger

    book = ledger.read_ledger(ROOT / ledger.LEDGER)
    pages = sorted(book["pages"])
    before = {p: ledger.stale_reason(book, ROOT / p, root=ROOT) for p in pages}
    if any(before.values()):
        raise SystemExit(f"the ledger is not current ({sum(map(bool, before.values()))} stale pages): "
                         "run make dry-run first")
    rows = {}
    for name, (target, how) in LEDGER_EDITS.items():
        file = ROOT / target.partition(":")[0]
        original = file.read_text()
        t0 = time.perf_counter()
        file.write_text(apply_edit(original, target, how))
        try:
            stale = {p: ledger.stale_reason(book, ROOT / p, root=ROOT) for p in pages}
        finally:
            file.write_text(original)
        rerun = sorted(p for p, why in stale.items() if why)
        rows[name] = {"edit": f"{how} of {target}", "pages_rerun": len(rerun), "of": len(pages),
                      "dry_run_s": round(sum(book["pages"][p].get("seconds", 0) for p in rerun), 1),
                      "pages": [p.removeprefix("notebooks/") for p in rerun],
                      "reasons": sorted({stale[p] for p in rerun}),
                      "decided_in_s": round(time.perf_counter() - t0, 1)}
        print(f"{name}: {len(rerun)} of {len(pages)} pages re-run, "
              f"{rows[name]['dry_run_s'] / 60:.1f} min of dry runs", flush=True)
    return {"note": "pages whose dry-run ledger entry an edit makes stale (make test / make dry-run re-run them); "
                    "dry_run_s: the sum of their recorded dry-run times", "edits": rows,
            "all_pages_dry_run_s": round(sum(e.get("seconds", 0) for e in book["pages"].values()), 1),
            "time": time.strftime("%F %T")}


def zoo_throughput(cache: Path, scale: str = "cpu") -> dict:
    """Achieved images/s of each supervised zoo model in ``cache`` vs the raw training step (train.json)."""
    from ensdiv.chapters import zoo
    from ensdiv.store import Store
    from ensdiv.train import Supervised

    raw_file = ROOT / "benchmarks" / "results" / "train.json"
    raw = json.loads(raw_file.read_text()).get("architectures", {}) if raw_file.exists() else {}
    table = zoo.zoo_list(scale, store=Store(cache))
    recipes = zoo.zoo_recipes(scale)
    rows = []
    for _, row in table.iterrows():
        r = recipes[row["key"]]
        if not row["trained"] or not isinstance(r.method, Supervised) or not row["train_time_s"]:
            continue  # pre-training and distillation do other work per image than a training step
        achieved = zoo.images_seen(r) / row["train_time_s"]
        raw_step = raw.get(r.model.name, {}).get("raw_step_img_s")
        rows.append({"key": row["key"], "model": r.model.name, "train_time_s": round(row["train_time_s"], 1),
                     "achieved_img_s": round(achieved), "raw_step_img_s_one_thread": raw_step and round(raw_step),
                     "achieved_over_raw": raw_step and round(achieved / raw_step, 2)})
    ratios = [x["achieved_over_raw"] for x in rows if x["achieved_over_raw"]]
    return {"note": "achieved: images seen / training time of each supervised zoo model in the cold build "
                    "(torch's default threads, evaluation excluded); raw: one training step, one thread "
                    "(bench_train.py)", "models": rows,
            "median_achieved_over_raw": sorted(ratios)[len(ratios) // 2] if ratios else None,
            "zoo_train_time_s": round(sum(x for x in table["train_time_s"].fillna(0)), 1)}


def one_run(build_dir: Path, *, commit: str, scale: str = "cpu", started: str = "", note: str = "",
            only: list[str] | None = None, jobs: int | None = None, earlier_s: float = 0.0,
            earlier_img_s: float | None = None) -> dict:
    """The record of one ``ensdiv book`` run from its build folder, finished or stopped: per page its status, its
    seconds (papermill's duration of the executed copy) and its claims' verdicts (the records the page
    promoted), the ``commit`` the run was made of (its checkout), the machine that records it (the run's, when
    recorded right after it: a time compares only with times of the same processor, :func:`_common.cpu_of`), and
    ``status`` "one run" only when every page of the table of contents finished ok in that run, else "partial one
    run" with the pages it did not reach; a page the run's timings file lists as cached (a build resumed on the
    executed copies of an earlier run) ran in another run, so it makes the run partial too. The timings file holds
    the last invocation only: ``earlier_s``, the wall seconds of a resumed build's interrupted invocations (read
    off their logs), is added to its wall time and recorded as ``earlier_legs_s``; ``earlier_img_s``, the reference
    speed those invocations measured at their start (their logs' first line), converts their seconds and their
    pages' (the pages the last invocation found cached) to reference minutes, where the last invocation's speed
    converts its own: one processor model measured 1,604 and 2,075 img/s at the two starts of one build."""
    from ensdiv.book import stamps, toc_notebooks

    if not earlier_s >= 0:  # also NaN
        raise SystemExit(f"--earlier-wall is the wall seconds of a build's interrupted invocations, a number >= 0; "
                         f"got {earlier_s!r}.")
    if earlier_img_s is not None and not (earlier_img_s > 0 and earlier_s > 0):
        raise SystemExit(f"--earlier-img-s is the reference speed the interrupted invocations measured, a number > 0 "
                         f"given with their --earlier-wall; got {earlier_img_s!r} with {earlier_s!r} s.")
    executed = build_dir / "executed" / scale
    pages, missing, made = [], [], {}
    for nb in toc_notebooks(root=ROOT):
        rel = nb.relative_to(ROOT).as_posix()
        if only is not None and rel not in only:
            continue
        copy = executed / rel
        if not copy.exists():
            missing.append(rel)
            continue
        page = stamps.page_run(copy, rel, scale=scale)
        nbjson = json.loads(copy.read_text())
        made[rel] = (nbjson.get("metadata", {}).get("ensdiv") or {}).get("made")
        seconds = nbjson.get("metadata", {}).get("papermill", {}).get("duration")
        pages.append({"notebook": rel.removeprefix("notebooks/"), "status": page.status,
                      "seconds": round(float(seconds), 1) if seconds is not None else None,
                      "claims": [{"item": r.get("item"), "claim_id": r.get("claim_id") or "",
                                  "verdict": r.get("verdict"), "undecided": r.get("undecided") or "",
                                  **{k: (r.get("strength") or {}).get(k) for k in ("counted", "passed", "failed",
                                                                                  "inconclusive", "excluded")}}
                                 for r in page.records]})
    timings = build_dir / f"timings-{scale}.json"
    run = json.loads(timings.read_text()) if timings.exists() else {}
    done = sum(p["seconds"] or 0 for p in pages)
    earlier_pages = {n["notebook"].removeprefix("notebooks/") for n in run.get("notebooks", [])
                     if n.get("status") == "cached"}  # they ran in an earlier invocation
    resumed = bool(earlier_pages)
    same = one_commit(made)
    whole = not missing and all(p["status"] == "ok" for p in pages) and bool(run)
    status = ("one run" if whole and not resumed else "one commit, resumed" if whole and same
              else "partial one run")
    reference = run.get("reference")
    img_s = (reference or {}).get("img_s")
    before_img_s = earlier_img_s or img_s
    last = run["run_s"] + run["render_s"] if run.get("run_s") and run.get("render_s") else None
    wall = None if last is None else round(last + earlier_s, 1)

    def ref_min(pairs: list[tuple[float | None, float | None]]) -> float | None:
        parts = [reference_minutes(seconds, speed) for seconds, speed in pairs]
        return None if any(x is None for x in parts) else sum(parts)
    return {"status": status, "started": started, "note": note, "commit": commit, "made": same,
            "pages_finished": len(pages), "pages_not_reached": missing,
            "finished_pages_s": round(done, 1), "jobs": run.get("jobs") or jobs, "run_s": run.get("run_s"),
            **({"earlier_legs_s": round(earlier_s, 1)} if earlier_s else {}),
            **({"earlier_legs_reference": {"img_s": earlier_img_s}} if earlier_img_s else {}),
            "render_s": run.get("render_s"), "wall_s": wall, "reference": reference,
            "reference_min": {"wall": _rounded(ref_min([(last, img_s), (earlier_s, before_img_s)])),
                              "pages": _rounded(ref_min([(p["seconds"] or 0, before_img_s if p["notebook"] in
                                                          earlier_pages else img_s) for p in pages]))},
            "machine": machine(), "pages": pages}


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def one_commit(made: dict[str, dict | None]) -> dict | None:
    """The commit and processor every page of a build was made on (``made`` per page, from its executed copy), or
    None when some page does not say (an older copy).

    Raises:
        SystemExit: pages of two commits, of a commit and its edited checkout, or of two processors: such a record
            would time no one build (one sentence naming two of the pages).
    """
    if not made or any(m is None for m in made.values()):
        return None

    def key(m: dict) -> tuple:
        return m.get("commit"), m.get("dirty"), json.dumps(m.get("cpu"), sort_keys=True)
    first, where = next(iter(made.values())), next(iter(made))
    for page, m in made.items():
        if key(m) != key(first):
            what = ("commit" if key(m)[0] != key(first)[0] else "checkout (one of them edited)"
                    if key(m)[1] != key(first)[1] else "processor")
            raise SystemExit(f"{where} and {page} were not run on the same {what}: a build's record times one "
                             "commit on one machine; re-run the other pages (ensdiv run --force) first.")
    return first


def page_needs(build_dir: Path, *, scale: str = "cpu") -> dict[str, list[str]]:
    """Which earlier page each page of the book needs (:func:`ensdiv.book.schedule.needs_from_entries`), read off
    the cache entries the executed copies of ``build_dir`` record: the order ``ensdiv book --jobs N`` keeps."""
    from ensdiv.book import schedule, stamps, toc_notebooks

    executed = build_dir / "executed" / scale
    pages = [nb.relative_to(ROOT).as_posix() for nb in toc_notebooks(root=ROOT)]
    needs = schedule.needs_from_entries(pages, {p: stamps.meta_of(executed / p).get("cache") or [] for p in pages})
    return {p: before for p, before in needs.items() if before}


def replay(record: dict, needs: dict[str, list[str]], *, factors: dict[str, float] | None = None) -> float:
    """Minutes of pages ``ensdiv book --jobs N`` takes on ``record``'s page seconds (each scaled by ``factors``,
    keyed by a suffix of the page's name) under the book's scheduler: the zoo first and alone, a page after the
    pages it needs, the longest chain first, the timed pages alone (:mod:`ensdiv.book.schedule`)."""
    from ensdiv.book import schedule, toc_notebooks

    seconds = {f"notebooks/{p['notebook']}": float(p["seconds"]) for p in record["pages"]}
    for suffix, f in (factors or {}).items():
        matched = [page for page in seconds if page.endswith((suffix, suffix + ".ipynb"))]
        if not matched:
            raise SystemExit(f"--page-factor: no page of the recorded run ends with {suffix!r}.")
        for page in matched:
            seconds[page] *= f
    toc = [nb.relative_to(ROOT).as_posix() for nb in toc_notebooks(root=ROOT)]
    order = [p for p in toc if p in seconds] + [p for p in seconds if p not in toc]
    priority = schedule.first_first(schedule.critical_path(order, needs, seconds))
    waiting, running, now = list(order), {}, 0.0
    while waiting or running:
        while len(running) < int(record.get("jobs") or 2) and waiting:
            page = schedule.next_page(waiting, needs, set(waiting) | set(running), priority, running=running)
            if page is None:
                break
            waiting.remove(page)
            running[page] = now + seconds[page]
        page = min(running, key=running.get)
        now = running.pop(page)
    return now / 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", nargs="*", default=["smoke"])
    parser.add_argument("--compare", nargs=2, type=Path, default=None, metavar=("RUN_A", "RUN_B"),
                        help="compare two runs' executed pages claim by claim (verdict_stability.py)")
    parser.add_argument("--quick", action="store_true", help="smoke scale only")
    parser.add_argument("--keep", type=Path, default=None, help="build here and keep cache and pages")
    parser.add_argument("--zoo-throughput", type=Path, default=None, metavar="CACHE",
                        help="only add the zoo's achieved throughput from this cache to book.json")
    parser.add_argument("--warm", default=None, metavar="SCALE",
                        help="only time one build with the current cache and build folder, as SCALE's warm build")
    parser.add_argument("--record", default="warm", metavar="KEY",
                        help="with --warm: store that build under this key of SCALE instead of 'warm' (e.g. "
                             "rebuild_after_zoo_recipe_change, a build after a change that retrains part of the zoo)")
    parser.add_argument("--note", default="", help="with --warm or --change: a note stored with the build")
    parser.add_argument("--change", choices=["docstring", "code"], default=None,
                        help="time a cpu rebuild after editing one function's docstring or code (--target)")
    parser.add_argument("--target", default="ensdiv/metrics/diversity.py:disagreement", metavar="FILE:FUNCTION",
                        help="with --change: the top-level function to edit")
    parser.add_argument("--executed-only", action="store_true",
                        help="with --change: `ensdiv run` the pages already executed, not the whole book")
    parser.add_argument("--record-run", type=Path, default=None, metavar="BUILD",
                        help="only record the book run whose build folder is BUILD (finished or stopped) as the "
                             "scale's cold_one_run (per-page times and verdicts), and the pages' needs "
                             "(page_needs: what ensdiv book --jobs N waits for)")
    parser.add_argument("--as", dest="record_as", default="cold_one_run", metavar="KEY",
                        help="with --record-run: the key of the scale's record (cold_continuation: the pages a "
                             "stopped one-run build did not reach, run afterwards on its cache; remeasured_<chapter>: "
                             "a chapter run cold again after a change to its budget, which ensdiv book's estimates "
                             "read)")
    parser.add_argument("--pages", type=Path, default=None, metavar="FILE",
                        help="with --record-run: record only the pages FILE lists (one notebooks/... path a line); "
                             "page_needs is then left as it is")
    parser.add_argument("--started", default="", help="with --record-run: when the run started")
    parser.add_argument("--earlier-wall", type=float, default=0.0, metavar="SECONDS",
                        help="with --record-run of a resumed build: the wall seconds of its interrupted invocations, "
                             "added to its wall time (the timings file holds the last invocation only)")
    parser.add_argument("--earlier-img-s", type=float, default=None, metavar="IMG_S",
                        help="with --earlier-wall: the reference speed those invocations measured at their start "
                             "(their log's first line); their time converts at it, the last invocation's at its own")
    parser.add_argument("--commit", default="", help="with --record-run: the commit the run was made of")
    parser.add_argument("--jobs", type=int, default=None,
                        help="with --record-run: the run's --jobs, where its timings file does not say")
    parser.add_argument("--since", default=None, metavar="KEY",
                        help="only compare the scale's cold_one_run with the record KEY of an earlier commit (e.g. "
                             "cold_one_run_2235892), claim by claim with the commits that changed each moved "
                             "claim's page, into book.json's verdicts_since")
    parser.add_argument("--replay", action="store_true",
                        help="only replay the recorded one-run build through the scheduler and print its minutes")
    parser.add_argument("--page-factor", nargs="*", default=[], metavar="PAGE=F",
                        help="with --replay: scale a page's recorded seconds (a suffix of its name)")
    parser.add_argument("--ledger-edits", action="store_true",
                        help="only measure which pages five kinds of edit re-run, from the dry-run ledger")
    args = parser.parse_args()
    out = ROOT / "benchmarks" / "results" / "book.json"
    if args.replay:
        cpu = json.loads(out.read_text())["scales"]["cpu"]
        factors = {}
        for item in args.page_factor:
            page, _, factor = item.partition("=")
            try:
                factors[page] = float(factor)
            except ValueError:
                parser.error(f"--page-factor takes PAGE=FACTOR with a number, got {item!r}")
        minutes = replay(cpu["cold_one_run"], cpu.get("page_needs", {}), factors=factors)
        print(f"{minutes:.1f} min of pages (recorded run: {cpu['cold_one_run']['run_s'] / 60:.1f})")
        return
    if args.record_run:
        payload = json.loads(out.read_text()) if out.exists() else {}
        only = [line.strip() for line in args.pages.read_text().splitlines() if line.strip()] if args.pages else None
        row = one_run(args.record_run, commit=args.commit, started=args.started, note=args.note, only=only,
                      jobs=args.jobs, earlier_s=args.earlier_wall, earlier_img_s=args.earlier_img_s)
        scale_row = payload.setdefault("scales", {}).setdefault("cpu", {})
        scale_row[args.record_as] = row
        if only is None:  # a run of some pages (--pages) cannot say what the other pages need: keep the book's
            scale_row["page_needs"] = page_needs(args.record_run)
        out.write_text(json.dumps(payload, indent=2))
        print(f"{row['status']}: {row['pages_finished']} pages, {row['finished_pages_s'] / 60:.1f} min")
        return
    if args.since:
        from verdict_stability import since

        payload = json.loads(out.read_text())
        cpu = payload["scales"]["cpu"]
        if args.since not in cpu or "cold_one_run" not in cpu:
            parser.error(f"--since needs the records {args.since!r} and 'cold_one_run' in {out}")
        result = since(cpu[args.since], cpu["cold_one_run"])
        for r in result["rows"]:
            if not r["same"]:
                label = " ".join(x for x in (r["page"], r["item"], r["claim_id"] and f"[{r['claim_id']}]") if x)
                print(f"{label}: {r['a'] or '(no claim)'} -> {r['b'] or '(no claim)'}  "
                      f"({len(r['commits'])} commits to the page or its chapter)")
        print(f"{result['same']} of {result['claims']} verdicts the same ({result['only_in_one']} claims in one "
              "record only)")
        payload["verdicts_since"] = result | {"old_key": args.since, "note": args.note}
        out.write_text(json.dumps(payload, indent=2))
        return
    if args.compare:
        from verdict_stability import compare, table

        result = compare(*args.compare)
        print(table(result["rows"]) or "no claim moved")
        print(f"{result['same']} of {result['claims']} verdicts the same ({result['only_in_one']} claims in one run "
              "only)")
        payload = json.loads(out.read_text()) if out.exists() else {}
        payload["verdict_stability"] = {k: v for k, v in result.items() if k != "rows"} | {
            "moved": [r for r in result["rows"] if not r["same"]], "note": args.note}
        out.write_text(json.dumps(payload, indent=2))
        return
    if args.ledger_edits:
        payload = json.loads(out.read_text()) if out.exists() else {}
        payload["rebuild_by_edit"] = ledger_rebuild()
        out.write_text(json.dumps(payload, indent=2))
        return
    if args.change:
        row = rebuild_after_change(args.change, args.target, executed_only=args.executed_only)
        if args.note:
            row["note"] = args.note
        key = CHANGE_KEYS[args.change]
        payload = json.loads(out.read_text()) if out.exists() else {}
        payload.setdefault("scales", {}).setdefault("cpu", {})[key] = row
        out.write_text(json.dumps(payload, indent=2))
        print(f"{key}: {row['seconds']:.1f} s, {len(row['pages_rerun'])} page(s) re-ran "
              f"({'as predicted' if row['rerun_as_predicted'] else 'predicted: ' + ', '.join(row['pages_predicted'])})")
        return
    if args.warm:
        from ensdiv.paths import build_dir
        from ensdiv.store import default_store

        warm = build(args.warm, Path(default_store().root), build_dir())
        payload = json.loads(out.read_text()) if out.exists() else {}
        row = payload.setdefault("scales", {}).setdefault(args.warm, {})
        if args.note:
            warm["note"] = args.note
        if args.record == "warm":
            row.update(warm_s=warm["seconds"], warm=warm)
        else:
            row[args.record] = warm
        out.write_text(json.dumps(payload, indent=2))
        print(f"{args.warm}: {args.record} {warm['seconds']:.1f} s (exit {warm['exit_code']})")
        return
    if args.zoo_throughput:
        payload = json.loads(out.read_text()) if out.exists() else {}
        result = zoo_throughput(args.zoo_throughput)
        payload.setdefault("scales", {}).setdefault("cpu", {})["zoo_throughput"] = result
        out.write_text(json.dumps(payload, indent=2))
        print(json.dumps(result, indent=2))
        return
    scales = ["smoke"] if args.quick else args.scales
    rows = {}
    for scale in scales:
        with tempfile.TemporaryDirectory() as tmp:
            where = (args.keep / scale) if args.keep else Path(tmp)
            where.mkdir(parents=True, exist_ok=True)
            cache, build_dir = where / "cache", where / "_build"
            build_dir.mkdir(parents=True, exist_ok=True)
            cold = build(scale, cache, build_dir)
            print(f"{scale}: cold {cold['seconds']:.1f} s (exit {cold['exit_code']})", flush=True)
            warm = build(scale, cache, build_dir)
            print(f"{scale}: warm {warm['seconds']:.1f} s (exit {warm['exit_code']})", flush=True)
            throughput = zoo_throughput(cache, scale) if scale == "cpu" else None
        zoo = [n["seconds"] for n in cold.get("notebooks", []) if n["notebook"].endswith("foundations/zoo.ipynb")]
        rows[scale] = {"cold_s": cold["seconds"], "warm_s": warm["seconds"],
                       "speedup": round(cold["seconds"] / max(warm["seconds"], 1e-9), 1),
                       "zoo_build_s": zoo[0] if zoo else None, "cold": cold, "warm": warm}
        if throughput:
            rows[scale]["zoo_throughput"] = throughput
    write("book", {"description": "whole-book build time (ensdiv book), cold vs warm cache, per notebook",
                   "scales": rows})


if __name__ == "__main__":
    main()
