"""Linear probes on frozen features (training-methods App. A.5, after Kornblith et al. 2019), and the
feature selections of training-methods Fig. 6.

:func:`linear_probe` fits L2-regularised multinomial logistic regression with full-batch L-BFGS for
every strength of a log-spaced grid and keeps the one with the best accuracy on a validation split
(ties go to the stronger regulariser); the validation split never trains the head and the test split
is never seen. The objective at strength λ is

    (1/N) Σ_n -ln softmax(W x_n + b)_{y_n} + (λ/2) ||W||²_F       (bias not penalised),

which is scikit-learn's ``LogisticRegression(C=1/(λN))`` (``tests/test_probe.py`` checks the two agree).
We use ``torch.optim.LBFGS`` (strong-Wolfe line search) rather than scikit-learn because (a) the grid is
walked from the strongest to the weakest λ, each fit warm-started from the previous solution, which
makes a 10-point grid cost little more than one fit; (b) the same code runs in float64 on a CPU and on
a GPU at paper scale (1.28 M ImageNet images x 2-4 k dimensions x 1,000 classes, where scikit-learn's
single-threaded lbfgs takes hours); (c) it reads the cached torch tensors directly.

Normalisation (:func:`normalize_features`): the paper "normalize[s] each representation before any
operations (concatenation, subsampling, etc)" without saying how. Our default, ``"l2"``, divides each
sample's representation by its Euclidean norm: every model's vector then has norm 1, so two
representations enter a concatenation with equal total weight, and, unlike per-dimension
standardisation, the dimensions keep their relative variances, so the variance ranking of
:func:`rank_dimensions` still means something (after standardisation every variance is 1).
``"standardize"`` (z-scores with the training split's statistics) is the other reading, kept as an option.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ensdiv.errors import InvalidInputError

__all__ = [
    "NORMALIZATIONS",
    "RANKINGS",
    "DEFAULT_L2_GRID",
    "ProbeResult",
    "normalize_features",
    "fit_logistic",
    "fit_logistic_multilabel",
    "linear_probe",
    "rank_dimensions",
    "subsample_concat",
]

NORMALIZATIONS = ("l2", "standardize", "none")
RANKINGS = ("covariance", "variance")
#: λ grid of :func:`linear_probe`: 10 values, 1e-7 ... 1e2 (one per decade)
DEFAULT_L2_GRID: tuple[float, ...] = tuple(10.0**k for k in range(2, -8, -1))


def _features(x: Any, name: str) -> torch.Tensor:
    x = torch.as_tensor(x)
    if x.ndim != 2:
        raise InvalidInputError(f"{name} must be features shaped (N, D), got shape {tuple(x.shape)}.")
    if not x.is_floating_point():
        x = x.double()
    if not bool(torch.isfinite(x).all()):
        raise InvalidInputError(f"{name} holds NaN or infinite values.")
    return x


def _labels(y: Any, n: int, name: str) -> torch.Tensor:
    y = torch.as_tensor(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise InvalidInputError(f"{name} must be {n} labels shaped ({n},), got shape {tuple(y.shape)}.")
    if y.is_floating_point() or y.dtype == torch.bool:
        raise InvalidInputError(f"{name} must be integer class indices, got {y.dtype}.")
    if n and int(y.min()) < 0:
        raise InvalidInputError(f"{name} must be class indices >= 0, got {int(y.min())}.")
    return y.long()


def normalize_features(x: Any, method: str = "l2", *, reference: Any = None) -> torch.Tensor:
    """Normalise one model's representation before any concatenation or subsampling (App. A.5).

    Args:
        x: features, shape (N, D).
        method: ``"l2"`` (each row divided by its Euclidean norm; a zero row stays zero),
            ``"standardize"`` (each column minus the mean, over the standard deviation, of ``reference``)
            or ``"none"``.
        reference: the training split's features for ``"standardize`` (required there, unused otherwise).

    Returns:
        Normalised features, same shape and dtype.

    Shape:
        (N, D) -> (N, D).

    Example:
        >>> normalize_features(torch.tensor([[3.0, 4.0], [0.0, 2.0]])).tolist()
        [[0.6000000238418579, 0.800000011920929], [0.0, 1.0]]
    """
    x = _features(x, "features")
    if method == "l2":
        return x / x.norm(dim=1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
    if method == "standardize":
        if reference is None:
            raise InvalidInputError("normalize_features(method='standardize') needs the training split as reference=.")
        ref = _features(reference, "reference")
        if ref.shape[1] != x.shape[1]:
            raise InvalidInputError(f"reference has {ref.shape[1]} dimensions, features have {x.shape[1]}.")
        return (x - ref.mean(0)) / ref.std(0).clamp_min(1e-12)
    if method == "none":
        return x
    raise InvalidInputError(f"Unknown normalisation {method!r}; valid: {', '.join(NORMALIZATIONS)}.")


def fit_logistic(x: Any, y: Any, *, l2: float, num_classes: int | None = None, max_iter: int = 200,
                 init: tuple[torch.Tensor, torch.Tensor] | None = None, dtype: torch.dtype = torch.float64,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """One L2-regularised multinomial logistic regression fitted by full-batch L-BFGS (module objective).

    Args:
        x: features, shape (N, D).
        y: labels in ``0..num_classes-1``, shape (N,).
        l2: λ >= 0 of the module docstring's objective.
        num_classes: C (default ``max(y) + 1``).
        max_iter: L-BFGS iterations.
        init: ``(weight, bias)`` to start from (warm start); zeros by default.
        dtype: optimisation dtype (float64 by default).

    Returns:
        ``(weight (C, D), bias (C,))`` in ``dtype``, on the device of ``x``.

    Shape:
        x (N, D), y (N,) -> weight (C, D), bias (C,).

    Example:
        >>> x = torch.tensor([[-2.0], [-1.0], [1.0], [2.0]])
        >>> w, b = fit_logistic(x, torch.tensor([0, 0, 1, 1]), l2=0.1)
        >>> (x.double() @ w.T + b).argmax(1).tolist()
        [0, 0, 1, 1]
    """
    x = _features(x, "features").to(dtype)
    y = _labels(y, x.shape[0], "labels").to(x.device)
    if l2 < 0 or not math.isfinite(l2):
        raise InvalidInputError(f"l2 must be a finite number >= 0, got {l2}.")
    c = int(num_classes or int(y.max()) + 1)
    if int(y.max()) >= c:
        raise InvalidInputError(f"labels go up to {int(y.max())} but num_classes is {c}.")
    return _lbfgs(x, lambda logits: F.cross_entropy(logits, y), c, l2=l2, max_iter=max_iter, init=init)


def _lbfgs(x: torch.Tensor, data_loss: Any, c: int, *, l2: float, max_iter: int,
           init: tuple[torch.Tensor, torch.Tensor] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Minimise ``data_loss(x W^T + b) + (λ/2) ||W||²`` over (W (C, D), b (C,)) by full-batch L-BFGS (strong-Wolfe
    line search), from ``init`` or zeros, in the dtype and on the device of ``x``."""
    if init is None:
        w = torch.zeros(c, x.shape[1], dtype=x.dtype, device=x.device)
        b = torch.zeros(c, dtype=x.dtype, device=x.device)
    else:
        w, b = (t.detach().to(dtype=x.dtype, device=x.device).clone() for t in init)
    w.requires_grad_(True)
    b.requires_grad_(True)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=max_iter, history_size=20, tolerance_grad=1e-9,
                            tolerance_change=1e-12, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = data_loss(x @ w.T + b) + 0.5 * l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), b.detach()


def fit_logistic_multilabel(x: Any, y: Any, *, l2: float, max_iter: int = 200,
                            init: tuple[torch.Tensor, torch.Tensor] | None = None, dtype: torch.dtype = torch.float64,
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """One L2-regularised *multi-label* logistic regression (one sigmoid per class) fitted by full-batch L-BFGS.

    The objective at strength λ is (1/N) Σ_n Σ_c BCE(w_c·x_n + b_c, y_nc) + (λ/2) ||W||²_F (bias not penalised):
    the classes separate, each one scikit-learn's binary ``LogisticRegression(C=1/(λN))`` (one-vs-rest), the probe
    of training-methods Fig. 7 on Pascal VOC, whose images carry several of 20 labels.

    Args:
        x: features, shape (N, D).
        y: 0/1 indicators, shape (N, C).
        l2: λ >= 0.
        max_iter: L-BFGS iterations.
        init: ``(weight, bias)`` to start from (warm start); zeros by default.
        dtype: optimisation dtype (float64 by default).

    Returns:
        ``(weight (C, D), bias (C,))`` in ``dtype``, on the device of ``x``.

    Raises:
        InvalidInputError: labels not shaped (N, C) or not 0/1, or a negative or infinite λ.

    Shape:
        x (N, D), y (N, C) -> weight (C, D), bias (C,).

    Example:
        >>> x = torch.tensor([[-2.0], [-1.0], [1.0], [2.0]])
        >>> w, b = fit_logistic_multilabel(x, torch.tensor([[1, 0], [1, 1], [0, 1], [0, 1]]), l2=0.01)
        >>> ((x.double() @ w.T + b) > 0).long().tolist()  # the second sample carries both labels
        [[1, 0], [1, 1], [0, 1], [0, 1]]
    """
    x = _features(x, "features").to(dtype)
    y = torch.as_tensor(y)
    if y.ndim != 2 or y.shape[0] != x.shape[0]:
        raise InvalidInputError(f"multi-label targets must be shaped ({x.shape[0]}, C), got {tuple(y.shape)}.")
    if not bool(((y == 0) | (y == 1)).all()):
        raise InvalidInputError("multi-label targets must be 0/1 indicators.")
    if l2 < 0 or not math.isfinite(l2):
        raise InvalidInputError(f"l2 must be a finite number >= 0, got {l2}.")
    y = y.to(dtype=dtype, device=x.device)
    n = x.shape[0]

    def bce(logits: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(logits, y, reduction="sum") / n

    return _lbfgs(x, bce, y.shape[1], l2=l2, max_iter=max_iter, init=init)


@dataclass(frozen=True)
class ProbeResult:
    """A fitted linear probe and its L2 sweep.

    Attributes:
        weight: (C, D) weights.
        bias: (C,) biases.
        l2: the chosen λ.
        l2_grid: the λ tried, strongest first.
        val_accuracy: validation accuracy at each λ of ``l2_grid`` (float64, same order).
    """

    weight: torch.Tensor
    bias: torch.Tensor
    l2: float
    l2_grid: tuple[float, ...]
    val_accuracy: torch.Tensor

    def logits(self, x: Any) -> torch.Tensor:
        """Logits of features ``x`` (N, D) -> (N, C)."""
        x = _features(x, "features")
        if x.shape[1] != self.weight.shape[1]:
            raise InvalidInputError(f"The probe takes {self.weight.shape[1]} dimensions, got {x.shape[1]}.")
        return x.to(self.weight) @ self.weight.T + self.bias

    def accuracy(self, x: Any, y: Any) -> torch.Tensor:
        """Top-1 accuracy (0-d float64) on features ``x`` (N, D) with labels ``y`` (N,)."""
        logits = self.logits(x)
        y = _labels(y, logits.shape[0], "labels").to(logits.device)
        return (logits.argmax(1) == y).double().mean().cpu()


def linear_probe(train_x: Any, train_y: Any, val_x: Any, val_y: Any, *, l2_grid: Sequence[float] | None = None,
                 num_classes: int | None = None, max_iter: int = 200, dtype: torch.dtype = torch.float64,
                 ) -> ProbeResult:
    """Multinomial logistic regression with λ chosen on a validation split (App. A.5, Kornblith et al.).

    Fits :func:`fit_logistic` on the training split for every λ of ``l2_grid`` (walked from the strongest
    to the weakest, each fit warm-started from the previous one) and keeps the λ with the best
    validation accuracy (ties: the stronger λ). Normalise the features first (:func:`normalize_features`).

    Args:
        train_x: training features, shape (N, D).
        train_y: training labels, shape (N,).
        val_x: validation features, shape (Nv, D).
        val_y: validation labels, shape (Nv,).
        l2_grid: λ values (default :data:`DEFAULT_L2_GRID`).
        num_classes: C (default: one more than the largest label of either split).
        max_iter: L-BFGS iterations per λ.
        dtype: optimisation dtype.

    Returns:
        A :class:`ProbeResult` (call ``.accuracy(test_x, test_y)`` to report on test data).

    Shape:
        train (N, D), (N,); val (Nv, D), (Nv,) -> weight (C, D).

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> x = torch.randn(200, 3, generator=g); y = (x[:, 0] > 0).long()
        >>> p = linear_probe(x[:100], y[:100], x[100:], y[100:], l2_grid=[1.0, 1e-3])
        >>> float(p.accuracy(x[100:], y[100:])) > 0.95
        True
    """
    tx, vx = _features(train_x, "train features"), _features(val_x, "validation features")
    if tx.shape[1] != vx.shape[1]:
        raise InvalidInputError(
            f"Training features have {tx.shape[1]} dimensions but validation features have {vx.shape[1]}."
        )
    ty = _labels(train_y, tx.shape[0], "train labels")
    vy = _labels(val_y, vx.shape[0], "validation labels")
    if tx.shape[0] == 0 or vx.shape[0] == 0:
        raise InvalidInputError("linear_probe needs at least one training and one validation sample.")
    c = int(num_classes or max(int(ty.max()), int(vy.max())) + 1)
    grid = tuple(sorted((float(v) for v in (l2_grid or DEFAULT_L2_GRID)), reverse=True))
    if any(v < 0 or not math.isfinite(v) for v in grid):
        raise InvalidInputError(f"l2_grid must hold finite values >= 0, got {grid}.")
    vy_dev = vy.to(tx.device)
    best: tuple[float, float, tuple[torch.Tensor, torch.Tensor]] | None = None
    accs, params = [], None
    for lam in grid:
        params = fit_logistic(tx, ty, l2=lam, num_classes=c, max_iter=max_iter, init=params, dtype=dtype)
        w, b = params
        acc = float(((vx.to(w) @ w.T + b).argmax(1) == vy_dev).double().mean())
        accs.append(acc)
        if best is None or acc > best[0]:
            best = (acc, lam, params)
    assert best is not None
    return ProbeResult(best[2][0], best[2][1], best[1], grid, torch.tensor(accs, dtype=torch.float64))


def rank_dimensions(feats_a: Any, feats_b: Any, *, by: str = "variance") -> torch.Tensor:
    """Order the dimensions of the concatenation ``[feats_a, feats_b]``, most diverse first (Fig. 6 right).

    The paper computes "the covariance of each dimension of embeddings from both models", ranks
    "highest to lowest covariance" and selects "from most diverse to least diverse". Two readings:

    * ``"variance"`` (the literal reading, Fig. 6's headline): "the covariance of each dimension" of the
      concatenated embeddings is the diagonal of their covariance matrix, each dimension's own variance,
      ranked "highest to lowest"; highest first.
    * ``"covariance"`` (a labelled variant, our own notion of diversity): a dimension is diverse when it
      covaries little with the *other* model's features. Its score is the mean squared correlation with
      every dimension of the other model (correlations, i.e. covariances of standardised columns, so that
      a dimension's scale does not decide its rank); lowest score first — the reverse of the paper's
      stated order. Summed over one model's dimensions the scores give ||C_ab||²_F, the numerator of
      linear CKA on standardised features. A constant dimension carries nothing: it goes last.

    Args:
        feats_a: normalised features of model A on the probe's training split, shape (N, Da).
        feats_b: normalised features of model B on the same samples in the same order, shape (N, Db).
        by: ``"covariance"`` or ``"variance"``.

    Returns:
        Long tensor (Da + Db,): indices into the concatenation (``< Da``: model A), most diverse first;
        ties keep index order.

    Shape:
        (N, Da), (N, Db) -> (Da + Db,).

    Example:
        >>> a = torch.tensor([[1.0, 0.0], [2.0, 1.0], [3.0, 1.0], [4.0, 0.0]])  # a0 = b0, a1 uncorrelated
        >>> b = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
        >>> rank_dimensions(a, b).tolist()  # variances: a0 5/3, a1 1/3, b0 5/3 (ties keep order)
        [0, 2, 1]
        >>> rank_dimensions(a, b, by="covariance").tolist()  # scores: a1 0, b0 (1 + 0) / 2, a0 1
        [1, 2, 0]
    """
    a, b = _features(feats_a, "feats_a"), _features(feats_b, "feats_b")
    if a.shape[0] != b.shape[0]:
        raise InvalidInputError(
            f"feats_a has {a.shape[0]} samples but feats_b has {b.shape[0]}: both must hold the same samples "
            "in the same order."
        )
    if a.shape[0] < 2:
        raise InvalidInputError("rank_dimensions needs at least two samples.")
    z = torch.cat([a.double(), b.double()], 1)
    if by == "variance":
        return torch.sort(-z.var(0), stable=True).indices
    if by != "covariance":
        raise InvalidInputError(f"Unknown ranking {by!r}; valid: {', '.join(RANKINGS)}.")
    std = z.std(0)
    dead = std <= 1e-12 * z.abs().max().clamp_min(1.0)
    zs = (z - z.mean(0)) / torch.where(dead, torch.ones_like(std), std)
    zs[:, dead] = 0.0
    da = a.shape[1]
    cross = zs[:, :da].T @ zs[:, da:] / (z.shape[0] - 1)  # (Da, Db) correlations
    alive_a, alive_b = (~dead[:da]).sum().clamp_min(1), (~dead[da:]).sum().clamp_min(1)
    score = torch.cat([(cross**2).sum(1) / alive_b, (cross**2).sum(0) / alive_a])
    score = torch.where(dead, torch.full_like(score, math.inf), score)
    return torch.sort(score, stable=True).indices


def subsample_concat(dim_a: int, dim_b: int, frac_a: float, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random dimensions of two representations at inverse proportions (Fig. 6 centre, App. A.5).

    Keeps ``round(frac_a * dim_a)`` random dimensions of A and ``round((1 - frac_a) * dim_b)`` of B, so
    the concatenation has at most ``max(dim_a, dim_b)`` dimensions ("25 % of ResNet-50 features with
    75 % of CLIP-S features"; exactly ``dim_a`` when the two have the same width).

    Args:
        dim_a: dimensions of A.
        dim_b: dimensions of B.
        frac_a: fraction of A's dimensions kept, in [0, 1].
        seed: seed of the random choice.

    Returns:
        ``(idx_a, idx_b)``: sorted long tensors of the kept dimensions of A and of B.

    Shape:
        -> (round(frac_a·Da),), (round((1-frac_a)·Db),).

    Example:
        >>> ia, ib = subsample_concat(8, 8, 0.25)
        >>> len(ia), len(ib)
        (2, 6)
    """
    if not 0.0 <= frac_a <= 1.0:
        raise InvalidInputError(f"frac_a must be in [0, 1], got {frac_a}.")
    if dim_a < 1 or dim_b < 1:
        raise InvalidInputError(f"Both representations need at least one dimension, got {dim_a} and {dim_b}.")
    g = torch.Generator().manual_seed(seed)
    ka, kb = round(frac_a * dim_a), round((1.0 - frac_a) * dim_b)
    idx_a = torch.randperm(dim_a, generator=g)[:ka].sort().values
    idx_b = torch.randperm(dim_b, generator=g)[:kb].sort().values
    return idx_a, idx_b
