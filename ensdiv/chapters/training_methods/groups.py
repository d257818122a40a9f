"""Fig. 4's groups of classes: which group each Fashion-MNIST class belongs to, and an exact permutation test
over every grouping of the classes into groups of the same sizes."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

#: Fig. 4's groups of Fashion-MNIST classes, our analogue of the paper's "anthropogenic" / "nature" split (§4.4): what
#: is worn on the upper body, footwear, and the rest (trousers, bags)
FMNIST_CLASS_GROUPS = {"tops": ("T-shirt/top", "Pullover", "Dress", "Coat", "Shirt"),
                       "footwear": ("Sandal", "Sneaker", "Ankle boot"), "trousers and bags": ("Trouser", "Bag")}


def class_groups(classes: Sequence[str]) -> np.ndarray | None:
    """The group index of each class (:data:`FMNIST_CLASS_GROUPS`), or None when ``classes`` are not Fashion-MNIST's
    (ImageNet's anthropogenic / nature split is not shipped; the group checks are then not computable)."""
    where = {c: g for g, names in enumerate(FMNIST_CLASS_GROUPS.values()) for c in names}
    if sorted(classes) != sorted(where):
        return None
    return np.array([where[c] for c in classes])


def _between(d: np.ndarray, y: np.ndarray, onehot: np.ndarray) -> np.ndarray:
    """Between-group sums of squares of ``d`` for each grouping of the classes in ``onehot`` (P, classes, groups)."""
    n_cls = onehot.shape[1]
    sums, counts = np.bincount(y, weights=d, minlength=n_cls), np.bincount(y, minlength=n_cls).astype(float)
    g_sum, g_n = sums @ onehot, counts @ onehot  # (P, groups)
    mean = d.mean()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nansum(np.where(g_n > 0, g_sum**2 / g_n, 0.0), axis=-1) - len(d) * mean**2


def same_size_groupings(groups: np.ndarray) -> np.ndarray:
    """Every assignment of the classes to groups of the sizes of ``groups``, one-hot: (P, classes, groups)."""
    sizes = np.bincount(groups)
    n = len(groups)
    out: list[np.ndarray] = []

    def fill(assign: np.ndarray, free: list[int], g: int) -> None:
        if g == len(sizes) - 1:
            a = assign.copy()
            a[free] = g
            out.append(a)
            return
        for chosen in itertools.combinations(free, int(sizes[g])):
            a = assign.copy()
            a[list(chosen)] = g
            fill(a, [i for i in free if i not in chosen], g + 1)

    fill(np.zeros(n, dtype=int), list(range(n)), 0)
    return np.eye(len(sizes))[np.stack(out)]


def group_p(dtheta: np.ndarray, labels: np.ndarray, groups: np.ndarray, _groupings: np.ndarray | None = None
            ) -> float:
    """Whether the pair's class effect follows *these* groups: the fraction of every assignment of the classes to
    groups of the same sizes (2,520 for 5 / 3 / 2 classes) whose between-group sum of squares of θ is at least the
    real grouping's (an exact permutation p-value over groupings, the real one counted). Uniform when the class
    effect ignores the groups, however large the test set: the permutation is over the 10 classes, not over
    samples. NaN when θ does not vary."""
    if len(dtheta) < 2 or float(np.std(dtheta)) < 1e-6:
        return np.nan
    groupings = same_size_groupings(groups) if _groupings is None else _groupings
    ours = float(_between(dtheta, labels, np.eye(int(groups.max()) + 1)[groups][None])[0])
    return float((_between(dtheta, labels, groupings) >= ours * (1 - 1e-12)).mean())
