"""How the book is built: ``ensdiv run`` and ``ensdiv book``, above the chapters.

The build sits above every chapter (it imports them to check a page's parameters against its preset)
and nothing in the library imports it:

- :mod:`ensdiv.book.parameters` — ``-p`` values as plain data, written into the notebook as Python literals;
- :mod:`ensdiv.book.run` — papermill execution of notebooks into ``_build/executed/<scale>/``, the checks
  made before anything runs, staging of claim records, interrupts;
- :mod:`ensdiv.book.stamps` — the record each executed copy keeps of its last run (stamp, data reads, the
  package code it ran, claims, cache entries) and the rule that reuses it;
- :mod:`ensdiv.book.site` — the rendered book: staging, the verdict box, the claims page, chapter summaries,
  Jupyter Book;
- :mod:`ensdiv.book.processes` — signals and child processes;
- :mod:`ensdiv.book.fetch` — ``ensdiv fetch``: the pretrained weights and the data a paper preset needs;
- :mod:`ensdiv.book.cli` — the ``ensdiv`` command.
"""

from ensdiv.book.processes import end_process_group, signals_as_interrupts
from ensdiv.book.run import (
    NotebookResult,
    check_parameters,
    notebook_parameters,
    run_notebooks,
    summary,
    toc_notebooks,
)
from ensdiv.book.site import KEY_FIGURES, build_book, mathjax_source
from ensdiv.book.stamps import cache_entries, page_run

__all__ = ["KEY_FIGURES", "NotebookResult", "run_notebooks", "toc_notebooks", "build_book", "notebook_parameters",
           "check_parameters", "mathjax_source", "page_run", "end_process_group", "signals_as_interrupts",
           "cache_entries", "summary"]
