""""Paper vs this run": the book's one verdict rule, its tables and its claim records.

Every notebook ends by testing the paper's claim on this run's numbers. A claim is tested by a few
:class:`Check` objects, each a named question over named quantities ("the ensemble's error is below the
single model's"). Quantities are numbers or :class:`Estimate` objects: a value with replicates from a
paired bootstrap over the test images (:func:`paired_bootstrap`; :func:`sample_bootstrap` when the quantities
come from independent test sets) or from training seeds
(:func:`from_seeds`), or a correlation with its interval (:func:`correlation`). Each check runs on three
rows of values:

- **this run**: ``pass``, ``fail``, or — when its statistic has a 90 % interval (:data:`LEVEL`) that
  straddles the bound — ``inconclusive``; not computable when a quantity is missing, NaN or infinite;
- **the paper's numbers** (the calibration row): a check the paper's own numbers fail is stricter than,
  or different from, what the paper showed; it is shown, marked "fails on the paper's numbers", and not
  counted (a quantity the paper does not report leaves it counted);
- **no effect** (the null row: ``a = b`` for a comparison, ``0`` for a sign or a correlation, one for a
  ratio, the page's stated value for a threshold): a check that passes there cannot tell an effect from
  none; it is shown, marked "passes with no effect", and not counted.

Facts (parameter counts, mult-adds, identities, costs) are shown in a facts table (``facts=``) and never
enter a verdict. The verdict comes from one rule, the same on every page, over the *counted* checks:

1. At ``smoke`` scale, and in a dry run of the ``paper`` preset (fake data, random weights:
   :func:`ensdiv.config.dry_run`), the verdict is always *not testable at this scale*: those runs show that the
   code path works, and whatever their numbers say about the science is noise.
2. If fewer than half of the checks that could count were computable (none, in particular), the claim is
   *not testable at this scale*: nothing vanishes silently, and the verdict line says how many counted.
3. Otherwise, with P passes, F fails and I inconclusive among the computed checks:

   - *holds*: every one passes (F = I = 0);
   - *holds partly*: some pass, none fails, some are inconclusive (P > 0, F = 0, I > 0);
   - *inconclusive*: none passes and none fails (every interval straddles its bound);
   - *does not hold*: at least half fail (2F >= P + F + I);
   - *mixed*: some fail, but fewer than half.

>>> verdict(["pass", "pass", "inconclusive", None], scale="cpu")
'holds partly'
>>> evaluate(less("err_ensemble", "err_single"), {"err_ensemble": 0.08, "err_single": 0.1}).result
'pass'
>>> verdict(["pass", "pass"], scale="smoke")
'not testable at this scale'

The package: :mod:`ensdiv.report.checks` (checks and the rule), :mod:`ensdiv.report.claims` (a claim and its
record), :mod:`ensdiv.report.pages` (the claims page and the chapter summaries the book generates).
"""

from __future__ import annotations

from ensdiv.report.checks import (
    OUTCOMES,
    SCALES,
    VERDICTS,
    Check,
    Outcome,
    above,
    below,
    correlated,
    evaluate,
    greater,
    less,
    negative,
    noninferior,
    null_values,
    positive,
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
    facts_table,
    load_claims,
    read_records,
    slug,
    strength_of,
)
from ensdiv.report.pages import PageRun, chapter_summary, claims_page, verdict_box
from ensdiv.report.uncertainty import (
    LEVEL,
    SOURCES,
    Estimate,
    correlation,
    fisher_interval,
    from_seeds,
    nan_mean,
    paired_bootstrap,
    sample_bootstrap,
)

__all__ = [
    "LEVEL", "OUTCOMES", "PAPERS", "SCALES", "SOURCES", "STAGING_ENV", "VERDICTS", "Check", "Claim", "Estimate",
    "Outcome", "PageRun", "above", "audit", "below", "chapter_summary", "check_record", "claim", "claims_dir",
    "claims_page", "correlated", "correlation", "describe_strength", "evaluate", "facts_table", "fisher_interval",
    "from_seeds", "greater", "less", "load_claims", "nan_mean", "negative", "noninferior", "null_values",
    "paired_bootstrap", "positive", "ratio_above", "read_records", "sample_bootstrap", "significant", "slug",
    "strength_of", "verdict", "verdict_box", "within",
]
