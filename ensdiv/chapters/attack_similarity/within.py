"""Fig. 4 and Tab. D.1's evidence (issue #50): copies of one architecture trained differently (the variants of
:func:`~ensdiv.chapters.attack_similarity.chapter_variants`), compared with different architectures, with the
variants and the models as the unit.

Tab. D.1 (similarity): one number per *unit* — a variant's SAT score with its base model, or a zoo model's mean
score with the other zoo models (the "All" column averages the scores of every ordered pair of different zoo
architectures, which is the mean of these per-model means when no score is missing) — and group means with a
bootstrap over the units within each group (:func:`ensdiv.report.model_bootstrap`).

* :func:`variant_scores`, :func:`model_means` — the units' numbers.
* :func:`group_estimates` — the group means and the two derived quantities of Tab. D.1's checks, paired.
* :func:`deal_within` — labels dealt at random within strata (the variants of each base among its groups;
  :func:`ensdiv.report.deal_within`).

Fig. 4 (ensembles): one row per ensemble, its error at a given mean member error (the ensemble tables of
:func:`ensdiv.chapters.attack_similarity.evidence.ensemble_rows`), and the effect of a kind of diversity as the
coefficient of its indicator (:func:`kind_table` with :func:`~ensdiv.chapters.attack_similarity.evidence.k_slope`).

* :func:`variant_ensembles` — every ensemble of a base model and its variants of one group.
* :func:`kind_table` — the rows of some kinds with ``k`` the indicator of one kind and ``N`` the stratum.
* :func:`permute_within` — a column permuted within strata (the kinds of the ensembles of each size).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

import ensdiv as ed
from ensdiv.chapters.attack_similarity.evidence import ensemble_rows
from ensdiv.chapters.attack_similarity.intervals import new_group
from ensdiv.report.nulls import deal_within

__all__ = ["ALL", "LOWER_INIT_HPARAM", "LOWEST_WITHIN", "WITHIN_GROUPS", "deal_within", "group_estimates",
           "kind_table", "model_means", "permute_within", "variant_ensembles", "variant_scores"]

#: The within-architecture groups of Tab. D.1, in the paper's order.
WITHIN_GROUPS = ("init", "hparam", "regime")
#: Names of Tab. D.1's quantities.
ALL = "All (different architectures)"
LOWEST_WITHIN = "lowest within-architecture group"
LOWER_INIT_HPARAM = "lower of init / hparam"


def variant_scores(scores: Any, groups: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """The SAT score of the base model (row 0) with each variant, and the variants' groups (``groups[1:]``).

    >>> variant_scores(np.array([[4.6, 4.1, 3.2], [4.1, 4.6, 3.0], [3.2, 3.0, 4.6]]), ["base", "init", "regime"])
    ([4.1, 3.2], ['init', 'regime'])
    """
    s = np.asarray(scores, dtype=float)
    return [float(v) for v in s[0, 1:]], list(groups[1:])


def model_means(scores: Any) -> np.ndarray:
    """Each model's mean score with the other models (both attack directions are in a two-side score; the
    diagonal left out, NaN scores skipped).

    >>> model_means(np.array([[4.6, 2.0, 3.0], [2.0, 4.6, 1.0], [3.0, 1.0, 4.6]])).tolist()
    [2.5, 1.5, 2.0]
    """
    s = np.array(scores, dtype=float)
    np.fill_diagonal(s, np.nan)
    return np.nanmean(s, axis=1)


def group_estimates(values: Any, labels: Sequence[str], *, n_resamples: int, seed: int
                    ) -> dict[str, ed.report.Estimate]:
    """Tab. D.1's quantities from one number per unit and its group (``init``, ``hparam``, ``regime`` or
    :data:`ALL`): the group means bootstrapped over their units (:func:`ensdiv.report.model_bootstrap`), the
    lowest of the three within-architecture means (:data:`LOWEST_WITHIN`) and the lower of init and hparam
    (:data:`LOWER_INIT_HPARAM`), each replicate from the same resample (paired), the replicates of a lowest moved
    so that their mean is its value (:func:`ed.report.extreme_of`).

    >>> est = group_estimates([4.4, 4.2, 4.3, 4.1, 3.4, 3.2, 2.5, 2.9, 2.7],
    ...                       ["init"] * 2 + ["hparam"] * 2 + ["regime"] * 2 + [ALL] * 3, n_resamples=50, seed=0)
    >>> round(est[LOWEST_WITHIN].value, 2), round(est[LOWER_INIT_HPARAM].value, 2), est[ALL].source
    (3.3, 4.2, 'models')

    A group with fewer than two units (or none: units whose scores are not finite, as in a dry run with random
    weights) leaves every quantity not computable (NaN), since the groups are compared replicate by replicate:

    >>> est = group_estimates([4.4, 4.2, 4.3, 3.4, 3.2, 2.5, 2.9], ["init"] * 2 + ["hparam", "regime", "regime"]
    ...                       + [ALL] * 2, n_resamples=50, seed=0)
    >>> bool(np.isnan(est[LOWEST_WITHIN].value)), bool(np.isnan(est[ALL].value))
    (True, True)
    >>> bool(np.isnan(group_estimates([4.4, 4.2, 4.3, 4.1, 3.4, 3.2], ["init"] * 2 + ["hparam"] * 2 + ["regime"] * 2,
    ...                               n_resamples=50, seed=0)[ALL].value))
    True
    """
    labels = [str(g) for g in labels]
    if any(labels.count(g) < 2 for g in (*WITHIN_GROUPS, ALL)):
        group = new_group("models")
        return {g: ed.report.Estimate(float("nan"), np.full(int(n_resamples), np.nan), "models", "bootstrap", group)
                for g in (*dict.fromkeys([*WITHIN_GROUPS, ALL, *labels]), LOWEST_WITHIN, LOWER_INIT_HPARAM)}
    found = ed.report.model_bootstrap(values, labels, n_resamples=n_resamples, seed=seed)
    return {**found, LOWEST_WITHIN: ed.report.extreme_of(found, WITHIN_GROUPS, lowest=True),
            LOWER_INIT_HPARAM: ed.report.extreme_of(found, ("init", "hparam"), lowest=True)}


def variant_ensembles(logits: Any, labels: Any, groups: Sequence[str], *, base: str,
                      ids: Sequence[Any] | None = None) -> pd.DataFrame:
    """Every ensemble of Fig. 4 from one base model and its variants: for each group of ``groups`` (``"base"``
    first, then each variant's group), every subset of two or more of the base and that group's variants, as a
    row of :func:`~ensdiv.chapters.attack_similarity.evidence.ensemble_rows` with its ``base`` and its
    ``kind`` (the group); its ``members`` are ``ids`` (the models' names; default ``"{base}/{index}"``).

    >>> lg = torch.tensor([[[2.0, 0.0]], [[0.0, 1.0]], [[1.0, 0.0]]])  # 3 models, 1 image of class 0
    >>> t = variant_ensembles(lg, torch.tensor([0]), ["base", "init", "regime"], base="b")
    >>> t[["kind", "N", "mean member error (%)"]].values.tolist()
    [['init', 2, 50.0], ['regime', 2, 0.0]]
    """
    rows = []
    names = [f"{base}/{i}" for i in range(len(groups))] if ids is None else list(ids)
    for kind in dict.fromkeys(groups[1:]):
        members = [0] + [i for i, g in enumerate(groups) if g == kind and i > 0]
        for n in range(2, len(members) + 1):
            combos = torch.tensor(list(itertools.combinations(members, n)), dtype=torch.long)
            rows += [{"base": base, "kind": kind, **r} for r in ensemble_rows(logits, labels, combos, ids=names)]
    return pd.DataFrame(rows)


def kind_table(table: pd.DataFrame, kind: str, among: Sequence[str], *, strata: Sequence[str] = ("N",)
               ) -> pd.DataFrame:
    """The rows of ``table`` whose ``kind`` is among ``among``, with ``k`` = 1 for ``kind`` and 0 for the others
    and ``N`` the stratum (the ``strata`` columns joined), for :func:`~ensdiv.chapters.attack_similarity.evidence
    .k_slope`: its coefficient is then the change of an outcome for ``kind`` against the others at equal mean
    member error within a stratum.

    >>> t = pd.DataFrame({"kind": ["a", "b", "c"], "N": [2, 2, 3], "base": ["r", "r", "v"]})
    >>> kind_table(t, "a", ["a", "b"], strata=("base", "N"))[["k", "N"]].values.tolist()
    [[1, 'r:2'], [0, 'r:2']]
    """
    out = table[table["kind"].isin(list(among))].copy()
    out["k"] = (out["kind"] == kind).astype(int)
    out["N"] = out[list(strata)].astype(str).agg(":".join, axis=1) if len(out) else []
    return out.reset_index(drop=True)


def permute_within(table: pd.DataFrame, column: str, strata: str, rng: np.random.Generator) -> pd.DataFrame:
    """A copy of ``table`` with ``column`` permuted at random among the rows of each value of ``strata``."""
    out = table.copy()
    out[column] = deal_within(table[column].tolist(), table[strata].tolist(), rng)
    return out
