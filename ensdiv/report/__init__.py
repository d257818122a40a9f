""""Paper vs this run": the book's one verdict rule, its evidence, its tables and its claim records.

Every notebook ends by testing the paper's claim on this run's numbers. A claim (:func:`claim`) states what
it is about — its *unit*: trained methods, groups of models, these models, timings, one released artefact
(:data:`UNITS`) — and is tested by a few :class:`Check` objects, each a named question over named quantities
("the ensemble's error is below the single model's"). Quantities are numbers or :class:`Estimate` objects whose
replicates say what they resample: test images (:func:`paired_bootstrap`, :func:`sample_bootstrap`), seeds
(:func:`from_seeds`), seeds or models *and* test images (:func:`nested_bootstrap`), models within groups
(:func:`model_bootstrap`), or the pairs of a correlation (:func:`correlation`).

A check is evidence only if it fails without the effect, and that is measured, not argued: each check carries
null data built from this run's own data with the effect removed (:class:`Null`; :func:`seed_flips`,
:func:`aa_null`, :func:`partition_null`, :func:`null_draws`), and its statistic on this run is ranked among
its values on every draw: a randomisation p-value (:func:`randomisation_p`). The rule, as the claims page and
``book/intro.md`` state it (:data:`RULE`):

{rule}

>>> verdict(["pass", "pass", "inconclusive", None], scale="cpu")
'holds partly'
>>> evaluate(less("err_ensemble", "err_single"), {{"err_ensemble": 0.08, "err_single": 0.1}}).result
'pass'
>>> verdict(["pass", "pass"], scale="smoke")
'not testable at this scale'

The package: :mod:`ensdiv.report.checks` (checks and the rule), :mod:`ensdiv.report.nulls` (null data),
:mod:`ensdiv.report.replication` (units and the bootstraps that resample them), :mod:`ensdiv.report.claims`
(a claim, its record and the audit), :mod:`ensdiv.report.pages` (the claims page and the chapter summaries).
"""

from __future__ import annotations

from ensdiv.report.checks import (
    ALPHA,
    KEEPS,
    OUTCOMES,
    RULE,
    SCALES,
    UNDECIDED,
    VERDICTS,
    Check,
    Outcome,
    above,
    at_bound,
    below,
    correlated,
    evaluate,
    greater,
    holm,
    kept_share,
    less,
    negative,
    noninferior,
    null_p,
    positive,
    randomisation_p,
    ratio_above,
    significant,
    verdict,
    within,
)
from ensdiv.report.claims import (
    PAPERS,
    STAGING_ENV,
    Claim,
    audit,
    check_record,
    claim,
    claims_dir,
    describe_strength,
    evidence_clashes,
    facts_table,
    load_claims,
    read_records,
    slug,
    strength_of,
)
from ensdiv.report.nulls import (
    NULL_DRAWS,
    Null,
    aa_null,
    centred_null,
    deal_within,
    needed_replicates,
    null_draws,
    partition_null,
    seed_flips,
)
from ensdiv.report.pages import PageRun, chapter_summary, claims_page, smoke_note, verdict_box
from ensdiv.report.replication import UNITS, covers, extreme_of, member_weights, model_bootstrap, nested_bootstrap
from ensdiv.report.uncertainty import (
    LEVEL,
    SOURCES,
    Estimate,
    correlation,
    fisher_interval,
    from_seeds,
    nan_mean,
    paired_bootstrap,
    resample_counts,
    resample_indices,
    sample_bootstrap,
)

__doc__ = __doc__.format(rule=RULE)

__all__ = [
    "ALPHA", "KEEPS", "LEVEL", "NULL_DRAWS", "OUTCOMES", "PAPERS", "RULE", "SCALES", "SOURCES", "STAGING_ENV",
    "UNDECIDED", "UNITS", "VERDICTS", "Check", "Claim", "Estimate", "Null", "Outcome", "PageRun", "aa_null", "above",
    "at_bound", "audit", "below", "centred_null", "chapter_summary", "check_record", "claim", "claims_dir",
    "claims_page", "correlated", "correlation", "covers", "deal_within", "describe_strength", "evaluate",
    "evidence_clashes", "extreme_of", "facts_table", "fisher_interval", "from_seeds", "greater", "holm", "kept_share",
    "less", "load_claims", "member_weights", "model_bootstrap", "nan_mean", "needed_replicates", "negative",
    "nested_bootstrap", "noninferior", "null_draws", "null_p", "paired_bootstrap", "partition_null", "positive",
    "randomisation_p", "ratio_above", "read_records", "resample_counts", "resample_indices", "sample_bootstrap",
    "seed_flips", "significant", "slug", "smoke_note", "strength_of", "verdict", "verdict_box", "within",
]
