"""The seed base: one number that moves every training seed, for a second, independent run of the book.

Whether a verdict would come out the same on re-trained models is a number the book reports (``bench_book.py
--compare``). ``ensdiv run --seed-base K`` and ``ensdiv book --seed-base K`` set :data:`SEED_BASE_ENV` to ``K``
(the pages' kernels inherit it). With ``K = 0``, the default, nothing changes. With ``K`` above 0:

- every seed the training derives (:func:`ensdiv.train.derive_seed`: weight initialisation, data order,
  augmentation, dropout, the pair draws and feature passes of SED's heads) mixes ``K`` in, and so do the seeds the
  training uses directly (:func:`ensdiv.train.moved`: a probe's or a head's fresh draw);
- every cache key (:func:`ensdiv.store.config_key`) carries ``K``, so the entries of two seed bases never mix;
- the build folder, unless ``$ENSDIV_BUILD`` names one, is ``_build/seed-base-K`` (``ensdiv.paths.build_dir``)
  and every page's stamp carries ``K``, so the two runs' pages sit side by side.

What stays fixed: which images a training subset keeps (``Seeds.subset``), the evaluation data and its
corruptions, and the seeds of the nulls and bootstraps; so two seed bases differ by the training alone, which is
what a reader re-running the book would change.
"""

from __future__ import annotations

import os

from ensdiv.errors import InvalidInputError

__all__ = ["SEED_BASE_ENV", "MAX_SEED_BASE", "seed_base", "check_seed_base"]

#: the environment variable holding the seed base (``ensdiv run --seed-base`` sets it)
SEED_BASE_ENV = "ENSDIV_SEED_BASE"
#: the largest seed base accepted (a bound, so a typo cannot make a key or a folder name of any length)
MAX_SEED_BASE = 1_000_000


def check_seed_base(value: object) -> int:
    """``value`` as a seed base: a whole number from 0 to :data:`MAX_SEED_BASE` (a string of one is accepted).

    >>> check_seed_base("3")
    3

    Raises:
        InvalidInputError: anything else, in one sentence.
    """
    text = str(value).strip()
    if isinstance(value, bool) or not (text.isdigit() and text.isascii()) or int(text) > MAX_SEED_BASE:
        raise InvalidInputError(f"The seed base must be a whole number from 0 to {MAX_SEED_BASE}, got {value!r} "
                                f"(--seed-base or ${SEED_BASE_ENV}).")
    return int(text)


def seed_base() -> int:
    """The seed base of this process: :data:`SEED_BASE_ENV`, 0 when it is unset or empty."""
    raw = os.environ.get(SEED_BASE_ENV, "")
    return check_seed_base(raw) if raw else 0
