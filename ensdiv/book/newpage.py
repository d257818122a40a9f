"""``ensdiv new-page <chapter>/<stem>``: a new paper page in one command (the first step of ``CONTRIBUTING.md``).

It writes the three things every page needs, each where the book looks for it:

- the notebook ``notebooks/<chapter>/<stem>.ipynb``, already in the book's template (title, "The idea" with its
  formula and a worked example, the parameters cell, the run, "Paper vs this run" with a claim on evidence: seeds
  as the unit, a seed-flip null, an evidence key). Its run is a small example on synthetic data (bagged logistic
  regressions against one, on scikit-learn's ``make_classification``) that builds at every scale in seconds;
  the author replaces it with the paper's experiment;
- its preset ``PRESETS["<chapter>/<stem>"]`` (smoke, cpu and paper blocks), inserted in the chapter's module
  just before the module gives its presets their dry-run blocks (``add_dry_blocks(PRESETS, ...)``);
- its line in ``_toc.yml``, after the chapter's last page.

Nothing else is registered by hand: the runner, the claims page and the tests find the page through the table
of contents, and ``make dry-run`` records its ledger entry.
"""

from __future__ import annotations

import ast
import json
import re
import uuid
from pathlib import Path

from ensdiv.chapters import CHAPTERS, list_presets
from ensdiv.errors import EnsdivError, InvalidInputError, unknown_name
from ensdiv.paths import project_root

__all__ = ["new_page"]

_STEM = re.compile(r"[a-z][a-z0-9_]*")


def _cell(kind: str, text: str, *, tags: tuple[str, ...] = ()) -> dict:
    cell = {"cell_type": kind, "id": uuid.uuid4().hex[:8], "metadata": {"tags": list(tags)} if tags else {},
            "source": text.strip("\n").splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def _notebook(slug: str, stem: str, module: str, title: str) -> dict:
    short = module.rsplit(".", 1)[-1]
    idea = r"""
## The idea

An ensemble averages the class probabilities of its $M$ members,

$$
\bar p(y \mid x) = \frac{1}{M} \sum_{m=1}^{M} p_m(y \mid x),
$$

and predicts the class of largest $\bar p$. Where the members err on different images, the average can be right
where a member is wrong. (Replace this section with the paper's idea: its formula, the equation the package's
docstring cites, and a worked example a student can follow by hand.)
"""
    example = """
import ensdiv as ed
import torch

# three members' probabilities for two classes on two images, and the labels
toy_probs = torch.tensor([[[0.6, 0.4], [0.6, 0.4]], [[0.3, 0.7], [0.2, 0.8]], [[0.7, 0.3], [0.3, 0.7]]])
toy_labels = torch.tensor([0, 1])
toy_members = [float(ed.metrics.accuracy(p, toy_labels)) for p in toy_probs]  # 0.5, 0.5, 1.0
toy_ensemble = float(ed.metrics.accuracy(toy_probs.mean(0), toy_labels))  # mean [[0.53, 0.47], [0.37, 0.63]]: 1.0
print(f"members: {toy_members}, ensemble: {toy_ensemble}")
"""
    params = """
scale = "cpu"  # smoke | cpu | paper
seed = None  # int: seed of the data and of the first training run; None: the preset value
seeds = None  # int: training runs per method (the unit of the comparison); None: the preset value
"""
    setup = f"""
import ensdiv as ed
import numpy as np
from ensdiv.chapters import {short} as ch
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression

cfg = ch.preset("{stem}", scale, seed=seed, seeds=seeds)
"""
    run = """
## The run

Each training run $s$ draws its own bootstrap samples of one training set: a single logistic regression fits one,
the ensemble averages the probabilities of `cfg.members` fitted on `cfg.members` others. Both are scored image by
image on one test set, so the runs (seeds) are the unit the comparison resamples.
"""
    train = """
x, y = make_classification(n_samples=cfg.n_train + cfg.n_test, n_features=20, n_informative=4, flip_y=0.1,
                           random_state=cfg.seed)
x_train, y_train, x_test, y_test = x[: cfg.n_train], y[: cfg.n_train], x[cfg.n_train :], y[cfg.n_train :]


def fitted(rng):
    rows = ed.report.resample_indices(cfg.n_train, n_resamples=1, seed=rng)[0]  # a bootstrap of the training set
    return LogisticRegression(C=cfg.c).fit(x_train[rows], y_train[rows])


right = {"single": [], "ensemble": []}  # (seeds, test images): 1 where the prediction is right
for s in range(cfg.seeds):
    rng = np.random.default_rng(cfg.seed + s)
    single = fitted(rng).predict_proba(x_test)
    mean = np.mean([fitted(rng).predict_proba(x_test) for _ in range(cfg.members)], axis=0)
    right["single"].append(single.argmax(1) == y_test)
    right["ensemble"].append(mean.argmax(1) == y_test)
rows = {f"acc_{k}": 100 * np.array(v, dtype=float) for k, v in right.items()}
print({k: round(float(v.mean()), 2) for k, v in rows.items()})
"""
    paper = """
## Paper vs this run

The claim is tested on the runs: the accuracies' intervals resample the seeds and the test images, and the null
swaps the two methods at random within each seed (with the effect removed, the check must fail).
"""
    claim = f"""
ours = ed.report.nested_bootstrap(rows, unit="seeds", n_resamples=cfg.n_resamples, seed=cfg.seed, paired_rows=True)
result = ed.report.claim(
    paper="{slug}",
    item="{title}",
    claim="An ensemble of bagged members is more accurate than a single member.",
    unit="trained methods",
    checks=[
        ed.report.greater(
            "acc_ensemble",
            "acc_single",
            null=ed.report.seed_flips(ours, "acc_ensemble", "acc_single", seed=cfg.seed),
            evidence="{slug}/{stem}/ensemble-vs-single",
            cites="the paper's sentence this check tests",
        ),
    ],
    ours=ours,
    facts={{"members": cfg.members, "training runs per method": cfg.seeds}},
    paper_values={{}},
    variance="training seeds × test images (nested bootstrap)",
    scale=cfg.scale,
)
result
"""
    cells = [_cell("markdown", f"# {title}\n\nWhat the paper claims here, in two sentences, and what this page runs."),
             _cell("markdown", idea), _cell("code", example), _cell("code", params, tags=("parameters",)),
             _cell("code", setup), _cell("markdown", run), _cell("code", train), _cell("markdown", paper),
             _cell("code", claim)]
    return {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                         "language_info": {"name": "python"}}}


_PRESET = """\
# {name}: written by `ensdiv new-page`; the sizes of the page's example run
PRESETS["{name}"] = {{
    "common": {{"seed": 0, "seeds": 8, "members": 5, "n_train": 300, "n_test": 1000, "c": 1.0, "n_resamples": 1000}},
    "smoke": {{"seeds": 6, "n_test": 300, "n_resamples": 200}},
    "cpu": {{}},
    "paper": {{"n_test": 5000}},
}}

"""


def _insert_preset(module_file: Path, name: str) -> None:
    """Insert the page's preset before the module's ``add_dry_blocks(PRESETS, ...)`` call (a top-level one)."""
    text = module_file.read_text()
    tree = ast.parse(text)
    calls = [n for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
             and getattr(n.value.func, "id", None) == "add_dry_blocks"
             and getattr(n.value.args[0] if n.value.args else None, "id", None) == "PRESETS"]
    if not calls:
        raise EnsdivError(f"{module_file} has no top-level add_dry_blocks(PRESETS, ...) call to put the preset "
                          f"of {name!r} before; add it to the module's PRESETS by hand.")
    lines = text.splitlines(keepends=True)
    at = calls[0].lineno - 1
    while at > 0 and lines[at - 1].lstrip().startswith("#"):  # above the call's own comment
        at -= 1
    module_file.write_text("".join(lines[:at]) + _PRESET.format(name=name) + "".join(lines[at:]))


def _insert_toc(toc: Path, slug: str, stem: str) -> None:
    """Add ``- file: notebooks/<slug>/<stem>`` after the chapter's last page in ``_toc.yml``."""
    lines = toc.read_text().splitlines(keepends=True)
    mine = [i for i, ln in enumerate(lines) if ln.strip().startswith(f"- file: notebooks/{slug}/")]
    if not mine:
        raise EnsdivError(f"{toc} lists no page of the {slug} chapter; add '- file: notebooks/{slug}/{stem}' under "
                          "its part by hand.")
    last = lines[mine[-1]]
    indent = last[: len(last) - len(last.lstrip())]
    lines.insert(mine[-1] + 1, f"{indent}- file: notebooks/{slug}/{stem}\n")
    toc.write_text("".join(lines))


def new_page(name: str, *, title: str, root: Path | None = None) -> Path:
    """Write a new page ``<chapter>/<stem>``: its notebook, its preset and its table-of-contents line.

    Args:
        name: ``"<chapter slug>/<notebook stem>"``, e.g. ``"sed/fig05_new_figure"`` (the stem in lower case,
            letters, digits and underscores).
        title: The page's title (``"Fig. 5 — what it shows"``); also the claim's item until the author names it.
        root: The project (default :func:`ensdiv.paths.project_root`).

    Returns:
        The notebook's path.

    Raises:
        UnknownNameError: a chapter that is not one of the book's.
        InvalidInputError: a name without ``/``, a stem that is not a plain lower-case name, a page or preset
            that exists already, an empty title.
    """
    root = Path(root) if root is not None else project_root()
    slug, _, stem = name.partition("/")
    if not stem:
        raise InvalidInputError(f"A page is named '<chapter>/<stem>' (e.g. 'sed/fig05_new_figure'), got {name!r}.")
    if slug not in CHAPTERS:
        raise unknown_name("chapter", slug, CHAPTERS)
    if not _STEM.fullmatch(stem):
        raise InvalidInputError(f"The page's stem {stem!r} must be lower-case letters, digits and underscores, "
                                "starting with a letter (it names the notebook and its preset).")
    if not title.strip():
        raise InvalidInputError("The page needs a title (--title 'Fig. 5 — what it shows').")
    module = CHAPTERS[slug]
    notebook = root / "notebooks" / slug / f"{stem}.ipynb"
    if notebook.exists():
        raise InvalidInputError(f"{notebook} exists already; choose another stem.")
    if f"{slug}/{stem}" in list_presets():
        raise InvalidInputError(f"The preset {slug}/{stem} exists already; choose another stem.")
    module_file = root / Path(*module.__name__.split("."))
    module_file = module_file / "__init__.py" if module_file.is_dir() else module_file.with_suffix(".py")
    _insert_preset(module_file, f"{slug}/{stem}")
    _insert_toc(root / "_toc.yml", slug, stem)
    notebook.parent.mkdir(parents=True, exist_ok=True)
    notebook.write_text(json.dumps(_notebook(slug, stem, module.__name__, title.strip()), indent=1) + "\n")
    return notebook
