"""Which page waits for which in ``ensdiv book --jobs N``, and which ready page starts first.

Pages share cached work: the zoo page trains the models a dozen pages read, Packed-Ensembles' Table 1 trains the
models Fig. 1 times. The per-key store lock (:meth:`ensdiv.store.Store.computing`) already makes a page that
needs an entry another page is computing wait for it instead of computing it twice, but a page that waits holds
one of the ``N`` slots idle the whole time. So a parallel run starts a page only after the earlier pages (in book
order) it shares cached work with have finished, and among the pages that may start it picks the one with the
longest chain of recorded work behind it (list scheduling by critical path).

Who shares what is read off executed copies: each records the cache entries its run used
(``metadata.ensdiv.cache``). A page *needs* the earlier page that first used (so, in a cold build, computed) an
entry it uses (a model, a checkpoint, predictions, a chapter's own computed data), not the other pages that read it
too; datasets are left out (every page reads the Fashion-MNIST tensors, built in seconds). A cold build has no
executed copies, so :func:`recorded_needs` reads the relation ``benchmarks/bench_book.py --record-run`` saved from
the last recorded build in ``benchmarks/results/book.json``. A wrong or missing relation costs only time: the
store lock keeps every entry computed once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ensdiv.paths import project_root

__all__ = ["ALONE_PAGES", "SELF_PARALLEL_PAGES", "SHARED_KINDS_IGNORED", "TIMED_PAGES", "first_first", "first_users",
           "needs_from_entries", "recorded_needs", "critical_path", "next_page"]

#: pages whose results include wall-clock timings (a claim on a speed ratio, or seconds shown as facts): in a
#: parallel run each runs alone, so that no other page shares its cores while it times
TIMED_PAGES = frozenset({
    "notebooks/packed-ensembles/fig01_accuracy_vs_speed.ipynb",  # inference throughput against accuracy
    "notebooks/packed-ensembles/fig03_equivalent_forms.ipynb",  # the three forms' speed ratios
    "notebooks/packed-ensembles/appH_training_speed.ipynb",  # training and inference speed ratios
    "notebooks/sed/cost_step_time.ipynb",  # step time against ensemble size
    "notebooks/design-diversity/fig09_saliency_vs_ig.ipynb",  # the two attributions' cost ratio
    "notebooks/synthesis/measures_vs_outcomes.ipynb",  # each measure's seconds
})

#: pages that train with a pool of their own one-thread processes, one per core (the zoo page, through
#: :func:`ensdiv.workers.build_many`): in a parallel run each starts before any other ready page and runs alone,
#: with every core. Beside other pages (the cold ``--jobs 2`` run of 28 Nov 2026) the zoo's models took 2.0 to 2.2
#: times their idle time (the ResNet hyper-parameter variants 131-139 s against 60-62 s), three or four processes
#: sharing two cores; alone, its two workers keep both cores busy, so running it by itself loses nothing.
SELF_PARALLEL_PAGES = frozenset({"notebooks/foundations/zoo.ipynb"})

#: every page that runs alone in a parallel run
ALONE_PAGES = TIMED_PAGES | SELF_PARALLEL_PAGES

#: cache entry kinds (the first folder of an entry's key) that do not make two pages depend on each other
SHARED_KINDS_IGNORED = frozenset({"datasets"})

#: entry kinds a page may share with an earlier page without waiting for that page to finish, as long as it shares
#: at most :data:`FEW_SHARED` of them: a trained model (a couple of minutes at ``cpu``) and its predictions. A page
#: that shares only a backbone or a reference model with the zoo page starts beside it, and the store's per-key
#: lock makes whichever page reaches the model second wait for that model only (it is still computed once).
#: Measured on 28 Nov 2026 (a cold ``--jobs 2`` run stopped after 64 min): with every shared entry a reason to
#: wait, the zoo page (one model shared with deep-ensemble basics) started only after that page's 18 minutes,
#: and Packed-Ensembles' Table 1 (one model shared with the zoo) would have started after the zoo's hour.
FEW_SHARED_KINDS = frozenset({"model", "predictions"})
FEW_SHARED = 2


def first_users(pages: Sequence[str], entries: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Each cache entry the pages used (datasets aside), with the first page, in the order of ``pages``, that used
    it: the page that computed it in a cold build.

    >>> first_users(["zoo", "tab2"], {"zoo": ["model/a.pt", "datasets/f.pt"], "tab2": ["model/a.pt", "model/b.pt"]})
    {'model/a.pt': 'zoo', 'model/b.pt': 'tab2'}
    """
    first: dict[str, str] = {}
    for p in pages:
        for e in entries.get(p, ()):
            if e.split("/", 1)[0] not in SHARED_KINDS_IGNORED:
                first.setdefault(e, p)
    return first


def needs_from_entries(pages: Sequence[str], entries: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Each page's earlier pages (in the order of ``pages``) that first used, and so computed in a cold build, an
    entry it uses, datasets aside, and unless all it shares with that page is one or two models or predictions
    (:data:`FEW_SHARED_KINDS`: it starts beside it and waits on the store's lock for those entries only).

    Args:
        pages: page names in book order.
        entries: per page, the cache entries its run used (``"model/ab/abcd.pt"``); a page without a record has
            no needs and is needed by no one.

    >>> needs_from_entries(["zoo", "fig1", "tab2", "tab3", "tab4"],
    ...                    {"zoo": ["model/a.pt", "model/b.pt", "model/c.pt", "sat-matrix/s.pt", "datasets/f.pt"],
    ...                     "fig1": ["datasets/f.pt"], "tab2": ["model/a.pt", "model/b.pt", "model/c.pt"],
    ...                     "tab3": ["model/a.pt"], "tab4": ["sat-matrix/s.pt"]})
    {'zoo': [], 'fig1': [], 'tab2': ['zoo'], 'tab3': [], 'tab4': ['zoo']}
    """
    first = first_users(pages, entries)
    out = {}
    for p in pages:
        shared: dict[str, list[str]] = {}
        for e in entries.get(p, ()):
            if e in first and first[e] != p:
                shared.setdefault(first[e], []).append(e)
        out[p] = [q for q in pages if q in shared and not _few(shared[q])]
    return out


def _few(shared: Sequence[str]) -> bool:
    """Whether entries a page shares with an earlier page are few enough to start beside it (:data:`FEW_SHARED`
    entries at most, all of :data:`FEW_SHARED_KINDS`)."""
    return len(shared) <= FEW_SHARED and all(e.split("/", 1)[0] in FEW_SHARED_KINDS for e in shared)


def recorded_needs(scale: str, *, book_json: Path | None = None) -> dict[str, list[str]]:
    """The needs ``benchmarks/results/book.json`` records at ``scale`` (``scales.<scale>.page_needs``, written by
    ``benchmarks/bench_book.py --record-run`` from a build's executed copies): ``{"notebooks/<chapter>/<page>.ipynb":
    [earlier pages]}``, ``{}`` where none is recorded."""
    path = book_json or project_root() / "benchmarks" / "results" / "book.json"
    try:
        needs = json.loads(path.read_text())["scales"][scale]["page_needs"]
        return {str(page): [str(q) for q in before] for page, before in needs.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def critical_path(pages: Sequence[str], needs: Mapping[str, Iterable[str]],
                  seconds: Mapping[str, float]) -> dict[str, float]:
    """Each page's own estimated seconds plus the longest chain of pages that need it, directly or not.

    A page without an estimate counts the mean of the known ones (one second where none is known). ``pages`` may
    come in any order (the order ``ensdiv run`` was given them); a need that would close a cycle is not followed.

    >>> critical_path(["zoo", "a", "b", "c"], {"a": ["zoo"], "b": ["a"], "c": []},
    ...               {"zoo": 30, "a": 5, "b": 1, "c": 20})
    {'c': 20.0, 'b': 1.0, 'a': 6.0, 'zoo': 36.0}
    """
    known = [float(seconds[p]) for p in pages if seconds.get(p)]
    default = sum(known) / len(known) if known else 1.0
    after: dict[str, list[str]] = {p: [] for p in pages}
    for p in pages:
        for q in needs.get(p, ()):
            if q in after:
                after[q].append(p)
    out: dict[str, float] = {}

    def score(page: str, chain: frozenset[str]) -> float:
        # pages may come in any order (``ensdiv run b a`` where b needs a), so a page's dependents are scored
        # first, depth first; a need that closes a cycle is ignored rather than followed for ever
        if page not in out:
            chain = chain | {page}
            below = [score(q, chain) for q in after[page] if q not in chain]
            out[page] = float(seconds.get(page) or default) + max(below, default=0.0)
        return out[page]

    return {p: score(p, frozenset()) for p in reversed(pages)}


def next_page(waiting: Sequence[str], needs: Mapping[str, Iterable[str]], unfinished: Iterable[str],
              priority: Mapping[str, float], *, running: Iterable[str] = (),
              alone: Iterable[str] = ALONE_PAGES) -> str | None:
    """The waiting page to start now: of those none of whose needs is ``unfinished`` (a page of this run waiting
    or running), the one with the highest ``priority``, the earliest in book order on a tie; ``None`` while every
    waiting page waits for a running one. A need that is not part of this run is no obstacle. A page of ``alone``
    starts only when nothing is ``running``, and nothing starts beside it.

    >>> next_page(["a", "b", "c"], {"b": ["zoo"], "c": []}, {"zoo", "a", "b", "c"}, {"a": 1, "b": 9, "c": 5})
    'c'
    >>> next_page(["b"], {"b": ["zoo"]}, {"b"}, {"b": 9})
    'b'
    >>> next_page(["b"], {"b": ["zoo"]}, {"zoo", "b"}, {"b": 9}) is None
    True
    >>> next_page(["t", "c"], {}, {"t", "c", "x"}, {"t": 9, "c": 1}, running=["x"], alone={"t"})
    'c'
    """
    busy = set(unfinished)
    solo = set(alone)
    now = set(running)
    if now & solo:
        return None
    order = list(waiting)
    ready = [p for p in order if not busy.intersection(needs.get(p, ())) and not (now and p in solo)]
    if not ready:
        return None
    return max(ready, key=lambda p: (priority.get(p, 0.0), -order.index(p)))


def first_first(priority: Mapping[str, float], first: Iterable[str] = SELF_PARALLEL_PAGES) -> dict[str, float]:
    """``priority`` with the pages of ``first`` above every other page (in their own order among themselves), so
    that a parallel run starts them before the rest while they are ready.

    >>> first_first({"a": 9.0, "zoo": 2.0, "b": 1.0}, {"zoo"})
    {'a': 9.0, 'zoo': 12.0, 'b': 1.0}
    """
    top, first = max(priority.values(), default=0.0), set(first)
    return {p: v + top + 1 if p in first else v for p, v in priority.items()}


def pace(finished: Iterable[tuple[float, float | None]], left: Iterable[float | None]) -> tuple[float, float] | None:
    """This run's pace against the recorded page times, and the page time left at that pace: the ``finished``
    pages' seconds over their estimates (a ratio of sums, so the long pages weigh most), and the estimates of the
    pages ``left`` times that ratio. A page without an estimate (None or 0: it never ran here and has no
    record) is left out on both sides; None until a page with one has finished. On another processor the
    recorded times are off by a factor (the zoo page took 2.16 times its record on a Zen 3 without AVX-512), and
    the first finished pages measure it.

    >>> pace([(120.0, 60.0), (30.0, None)], [600.0, None])
    (2.0, 1200.0)
    """
    pairs = [(seconds, est) for seconds, est in finished if est]
    if not pairs:
        return None
    ratio = sum(s for s, _ in pairs) / sum(e for _, e in pairs)
    return ratio, ratio * sum(e for e in left if e)
