"""The ``ensdiv`` command: ``run``, ``book``, ``zoo``, ``bench``, ``cache``, ``fetch``, ``data``.

Errors that are the user's to fix (an unknown scale, a notebook that does not exist, a parameter a
notebook does not declare, missing data) are printed as one sentence, without a traceback, and the
command exits with status 2. A failing notebook makes ``run``/``book`` exit with status 1 after the
others have run.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from ensdiv.book.dry import dry_environment
from ensdiv.book.fetch import fetch_data, fetch_weights
from ensdiv.book.newpage import new_page
from ensdiv.book.parameters import parse_value
from ensdiv.book.processes import signals_as_interrupts
from ensdiv.book.run import resolve_notebook, run_notebooks, summary, toc_notebooks
from ensdiv.book.site import build_book, page_states
from ensdiv.book.stamps import cache_entries
from ensdiv.bundles import MAX_ENTRY_BYTES, export_bundle, import_bundle
from ensdiv.chapters import zoo
from ensdiv.config import check_scale
from ensdiv.data import list_datasets
from ensdiv.errors import EnsdivError
from ensdiv.paths import project_root
from ensdiv.seeding import SEED_BASE_ENV, check_seed_base
from ensdiv.store import RECOMPUTE_ENV, collect_temporary, default_store

__all__ = ["main"]


def _params(pairs: list[list[str]] | None) -> dict:
    out = {}
    for name, value in pairs or []:
        if name == "scale":
            raise EnsdivError(f"Set the scale with --scale {value}, not with -p scale.")
        if name in out:
            raise EnsdivError(f"Parameter {name!r} is given twice with -p; give it once.")
        out[name] = parse_value(name, value)
    return out


def _cmd_run(args: argparse.Namespace) -> int:
    if args.list:
        for nb in toc_notebooks():
            print(nb)
        return 0
    notebooks = args.notebooks or toc_notebooks()
    if args.dry_run:
        if args.scale not in (None, "paper"):
            raise EnsdivError(f"--dry-run runs the paper presets; leave out --scale {args.scale}.")
        for nb in notebooks:  # every path checked before a dry run writes its fake data
            resolve_notebook(nb)
        with dry_environment() as root:
            results = run_notebooks(notebooks, scale="paper", params=_params(args.param), force=True,
                                    out_root=root / "executed")
    else:
        if args.recompute:  # the kernels inherit it: each load of theirs is a miss (ensdiv.store.RECOMPUTE_ENV)
            os.environ[RECOMPUTE_ENV] = "1"
        _set_seed_base(args)
        results = run_notebooks(notebooks, scale=args.scale or "cpu", params=_params(args.param),
                                force=args.force or args.recompute, jobs=args.jobs)
    print(summary(results))
    return 1 if any(r.status == "failed" for r in results) else 0


def _set_seed_base(args: argparse.Namespace) -> None:
    """``--seed-base K``: every training seed, cache key and the build folder move (:mod:`ensdiv.seeding`); the
    pages' kernels inherit it."""
    if args.seed_base is not None:
        os.environ[SEED_BASE_ENV] = str(check_seed_base(args.seed_base))


def _cmd_book(args: argparse.Namespace) -> int:
    _set_seed_base(args)
    t0 = time.perf_counter()
    results, index = build_book(scale=args.scale, force=args.force, html_only=args.html_only, jobs=args.jobs)
    print(summary(results))
    failed = [r for r in results if r.status == "failed"]
    print(f"Book built in {time.perf_counter() - t0:.1f} s: open {index}")
    if failed:
        print(f"{len(failed)} notebook(s) failed; their pages show the error.", file=sys.stderr)
    if args.html_only:  # nothing ran: say which pages are not current, and fail when one failed
        states = page_states(args.scale)
        for page, state, why in states:
            print(f"  [{state}] {page}: {why}", file=sys.stderr)
        if any(state == "failed" for _, state, _ in states):
            print(f"{sum(s == 'failed' for _, s, _ in states)} page(s) failed; --html-only rendered them as "
                  "failed.", file=sys.stderr)
            return 1
    return 1 if failed else 0


def _cmd_zoo(args: argparse.Namespace) -> int:
    if args.only is not None and not args.only:
        raise EnsdivError("--only needs at least one recipe name (list them with `ensdiv zoo list`); without "
                          "--only every recipe is meant.")
    if args.action == "build":
        table = zoo.zoo_build(args.scale, only=args.only, workers=args.workers)
    else:
        table = zoo.zoo_list(args.scale, only=args.only)
    print(table.to_string())
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    benches = sorted((project_root() / "benchmarks").glob("bench_*.py"))
    if args.only:
        benches = [b for b in benches if any(o in b.stem for o in args.only)]
    status = 0
    for b in benches:
        print(f"== {b.name}", flush=True)
        cmd = [sys.executable, str(b)] + (["--quick"] if args.quick else [])
        status |= subprocess.call(cmd, cwd=str(project_root()))
    return status


def _cmd_cache(args: argparse.Namespace) -> int:
    store = default_store()
    if args.action == "export":
        check_scale(args.scale)
        target = Path(args.file)
        if target.is_dir():
            raise EnsdivError(f"{args.file} is a folder; give the bundle's file name (e.g. {target / 'cache.tar.gz'}).")
        if target.name.endswith(".tgz"):
            raise EnsdivError(f"Name the bundle {target.name[:-4]}.tar.gz (compressed) or .tar: a bundle is compressed "
                              "when its name ends in .gz.")
        entries = cache_entries(args.scale)
        if not entries:
            raise EnsdivError(f"No finished page of scale {args.scale} recorded a cache entry; build the book at that "
                              "scale first (ensdiv book --scale ...).")
        out = export_bundle(store, entries, args.file, scale=args.scale)
        print(f"{out['entries']} entries, {out['bytes'] / 2**20:.1f} MiB in {out['file']}"
              + (f"; {len(out['skipped'])} recorded entries were missing or unsound and left out" if out["skipped"]
                 else ""))
    elif args.action == "gc":
        removed = collect_temporary(store, min_age=args.min_age)
        if removed:
            print(f"{len(removed)} temporary file(s) of killed writers and lock(s) of ended computations removed "
                  f"from {store.root}; files a live process holds open were left alone.")
        else:
            print(f"No temporary file of a killed writer or lock of an ended computation in {store.root}.")
    else:
        store.check_writable()
        cap = MAX_ENTRY_BYTES if args.max_entry_size is None else int(args.max_entry_size * 2**30)
        out = import_bundle(store, args.file, max_entry_bytes=cap)
        print(f"{out['entries']} entries of a {out['scale']}-scale bundle (SHA-256 {out['bundle'][:12]}) checked; "
              f"{out['added']} added to {store.root}, {out['present']} already there. The pages that use them say so "
              "in their verdict box.")
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    if args.what == "weights":
        fetch_weights(args.target, download=not args.list)
    else:
        fetch_data(args.target)
    return 0


def _cmd_data(args: argparse.Namespace) -> int:
    for name, desc in list_datasets():
        print(f"{name:<40} {desc}")
    return 0


def _cmd_new_page(args: argparse.Namespace) -> int:
    nb = new_page(args.name, title=args.title)
    slug, stem = args.name.split("/", 1)
    print(f"Wrote {nb}, its preset {args.name!r} in the {slug} chapter's module and its line in _toc.yml.\n"
          f"Next (CONTRIBUTING.md): write the idea, the run and the claim; then `ensdiv run {nb} --scale smoke` "
          f"and `make dry-run`.")
    return 0


_SEED_BASE_HELP = ("move every training seed by a base K (default 0): a second, independent run into "
                   "_build/seed-base-K with its own cache entries; compare two runs with benchmarks/bench_book.py "
                   "--compare")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ensdiv", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute notebooks with papermill into _build/executed/<scale>/")
    run.add_argument("notebooks", nargs="*", help="notebook paths (default: every notebook of _toc.yml)")
    run.add_argument("--scale", default=None, help="smoke | cpu | paper (default cpu)")
    run.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"),
                     help="a notebook parameter, e.g. -p data_root /data (repeatable)")
    run.add_argument("--force", action="store_true", help="re-run even if source and parameters did not change")
    run.add_argument("--recompute", action="store_true",
                     help="re-run and recompute every cache entry the pages load (each once per page), overwriting "
                          "it; --force alone re-runs the pages and serves their entries from the cache")
    run.add_argument("--jobs", type=int, default=1, metavar="N",
                     help="pages run at once, each with cores/N threads (default 1)")
    run.add_argument("--list", action="store_true", help="list the notebooks of the book and exit")
    run.add_argument("--seed-base", default=None, metavar="K", help=_SEED_BASE_HELP)
    run.add_argument("--dry-run", action="store_true",
                     help="run the paper preset on generated fake data with random weights and each preset's dry "
                          "sizes, into _build/dry-run/ (every verdict not testable): finds a broken paper path")
    run.set_defaults(func=_cmd_run)

    book = sub.add_parser("book", help="run every notebook of _toc.yml, then build the book into _build/html")
    book.add_argument("--scale", default="cpu")
    book.add_argument("--force", action="store_true")
    book.add_argument("--jobs", type=int, default=1, metavar="N",
                      help="pages run at once, each with cores/N threads (default 1)")
    book.add_argument("--html-only", action="store_true", help="render the notebooks already executed")
    book.add_argument("--seed-base", default=None, metavar="K", help=_SEED_BASE_HELP)
    book.set_defaults(func=_cmd_book)

    zoo = sub.add_parser("zoo", help="train (build) or list the model zoo")
    zoo.add_argument("action", choices=["build", "list"])
    zoo.add_argument("--scale", default="cpu")
    zoo.add_argument("--only", nargs="*", help="only these recipe names")
    zoo.add_argument("--workers", type=int, default=1,
                     help="training processes, one thread each (2 keeps two cores busy with small models)")
    zoo.set_defaults(func=_cmd_zoo)

    bench = sub.add_parser("bench", help="run the benchmarks (JSON into benchmarks/results/)")
    bench.add_argument("--only", nargs="*")
    bench.add_argument("--quick", action="store_true")
    bench.set_defaults(func=_cmd_bench)

    page = sub.add_parser("new-page", help="write a new page: its notebook, its preset and its table-of-contents "
                                           "line (CONTRIBUTING.md)")
    page.add_argument("name", help="<chapter>/<stem>, e.g. sed/fig05_new_figure")
    page.add_argument("--title", required=True, help="the page's title ('Fig. 5 — what it shows')")
    page.set_defaults(func=_cmd_new_page)

    cache = sub.add_parser("cache", help="export the cache entries a build used as a bundle, or import one")
    cache_sub = cache.add_subparsers(dest="action", required=True)
    export = cache_sub.add_parser("export", help="write the entries the finished pages of a scale used")
    export.add_argument("file", help="the bundle to write (.tar, or .tar.gz to compress)")
    export.add_argument("--scale", default="cpu")
    imp = cache_sub.add_parser("import", help="check a bundle entry by entry and add what the cache lacks")
    imp.add_argument("file", help="a bundle file or an http(s) URL")
    imp.add_argument("--max-entry-size", type=float, default=None, metavar="GIB",
                     help="the largest entry to accept, in GiB (default 4: a member stated larger is refused before "
                          "it is read)")
    gc = cache_sub.add_parser("gc", help="remove the temporary files killed writers left in the cache")
    gc.add_argument("--min-age", type=float, default=3600.0,
                    help="only files not written to for this many seconds (default 3600)")
    cache.set_defaults(func=_cmd_cache)

    fetch = sub.add_parser("fetch", help="download, once, the pretrained weights or the data a paper-scale run needs")
    fetch.add_argument("what", choices=["weights", "data"])
    fetch.add_argument("target", help="weights: a notebook path or a chapter (e.g. attack-similarity); data: a set "
                                      "(cifar10, cifar100, svhn; ImageNet-family sets say where to get them)")
    fetch.add_argument("--list", action="store_true", help="weights: list what is needed and missing, fetch nothing")
    fetch.set_defaults(func=_cmd_fetch)

    data = sub.add_parser("data", help="list the registered datasets")
    data.set_defaults(func=_cmd_data)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command in ("run", "book", "zoo"):  # SIGTERM/SIGHUP end kernels, workers, jupyter-book, partials
            with signals_as_interrupts():
                return args.func(args)
        return args.func(args)
    except EnsdivError as exc:
        print(f"ensdiv: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # the page's cell, interrupted with its kernel, still answers into nbclient's event loop; asyncio would
        # report that unread answer at exit ("Task exception was never retrieved", a traceback of the cell)
        logging.getLogger("asyncio").disabled = True
        print("ensdiv: interrupted; finished work is cached and a re-run resumes.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
