"""Representation similarity: CKA (Kornblith et al. 2019; Eq. 6 of design-diversity) and minibatch CKA.

:func:`cka` compares two full feature matrices (N × D1, N × D2) with an N × N Gram matrix each.
:class:`MinibatchCKA` (Nguyen et al. 2021) accumulates the *unbiased* HSIC estimator (Song et al.
2012) batch by batch, so memory grows with the batch size, not with N; :func:`cka_map` uses it
with forward hooks to compare every layer of one model with every layer of another.

Everything is computed in float64 (Gram-matrix centring cancels badly in float32); :func:`cka`
returns a 0-d tensor in :func:`~ensdiv.metrics.checks.compute_dtype` of its inputs, the Gram and
HSIC helpers return their inputs' compute dtype, and :func:`cka_map` and :class:`MinibatchCKA`
return float64.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import torch
from torch import nn

from ensdiv.errors import InvalidInputError
from ensdiv.metrics.checks import as_tensor, compute_dtype

__all__ = ["gram_linear", "gram_rbf", "hsic", "cka", "MinibatchCKA", "cka_map"]


def _features(x: Any, name: str, validate: bool = True) -> torch.Tensor:
    x = as_tensor(x, name, validate=validate)
    if validate and x.ndim < 2:
        raise InvalidInputError(
            f"{name} must be features shaped (N, D) (or (N, ...) to flatten), got {tuple(x.shape)}."
        )
    return x.reshape(x.shape[0], -1).double()


def _matrix(x: Any, name: str, validate: bool) -> torch.Tensor:
    x = as_tensor(x, name, validate=validate)
    if validate and x.ndim != 2:
        raise InvalidInputError(f"{name} must be shaped (N, D), got {tuple(x.shape)}.")
    return x.to(compute_dtype(x.dtype))


def gram_linear(x: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Linear-kernel Gram matrix K = X Xᵀ of features (the kernel of linear CKA, Eq. 6 of design-diversity).

    Args:
        x: features, shape (N, D).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        Symmetric positive semi-definite Gram matrix.

    Shape:
        (N, D) -> (N, N).

    Example:
        >>> gram_linear(torch.tensor([[1.0, 0.0], [1.0, 2.0]]))
        tensor([[1., 1.],
                [1., 5.]])
    """
    x = _matrix(x, "x", validate_args)
    return x @ x.T


def gram_rbf(x: Any, *, threshold: float = 1.0, validate_args: bool = True) -> torch.Tensor:
    """RBF Gram matrix exp(-‖x_i - x_j‖² / (2σ²)), σ² = (``threshold``)² × median squared distance.

    The median heuristic of Kornblith et al. (2019) (median over the full distance matrix,
    diagonal included, as numpy defines the median) makes RBF-CKA invariant to isotropic scaling.

    Args:
        x: features, shape (N, D).
        threshold: bandwidth as a multiple of the median distance.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        Gram matrix with ones on the diagonal.

    Shape:
        (N, D) -> (N, N).

    Example:
        >>> gram_rbf(torch.tensor([[0.0], [1.0]]))  # distances (0, 1, 1, 0): median 0.5
        tensor([[1.0000, 0.3679],
                [0.3679, 1.0000]])
    """
    x = _matrix(x, "x", validate_args)
    sq = x.pow(2).sum(1)
    d2 = (sq[:, None] + sq[None, :] - 2 * x @ x.T).clamp_min(0)
    flat = d2.flatten()
    k = flat.numel()  # median as numpy defines it (mean of the two middle values when k is even)
    med = 0.5 * (flat.kthvalue((k + 1) // 2).values + flat.kthvalue(k // 2 + 1).values)
    sigma2 = (threshold**2) * med
    if float(sigma2) <= 0:
        raise InvalidInputError("RBF kernel bandwidth is zero (most feature rows are identical); use kernel='linear'.")
    return torch.exp(-d2 / (2 * sigma2))


def _prep_unbiased(k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    kt = k.clone()
    kt.diagonal().zero_()
    rows = kt.sum(1)
    return kt, rows, rows.sum()


def hsic(k: Any, l: Any, *, unbiased: bool = False, validate_args: bool = True) -> torch.Tensor:
    """HSIC of two N × N Gram matrices (Gretton et al. 2005), the building block of Eq. 6 of design-diversity.

    Biased: tr(K H L H) / (N-1)², H = I - 11ᵀ/N. Unbiased (Song et al. 2012, needs N >= 4), with
    K̃, L̃ the Gram matrices with zeroed diagonals:
    [tr(K̃L̃) + 1ᵀK̃1 · 1ᵀL̃1 / ((N-1)(N-2)) - 2/(N-2) · 1ᵀK̃L̃1] / (N(N-3)).

    Args:
        k: Gram matrix of model A, shape (N, N).
        l: Gram matrix of model B on the same inputs, shape (N, N).
        unbiased: use the unbiased estimator.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        The HSIC estimate.

    Shape:
        (N, N), (N, N) -> () (0-d).

    Example:
        >>> k = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # centred: [[.5, -.5], [-.5, .5]]
        >>> hsic(k, k)  # sum of squares 1, divided by (N - 1)^2 = 1
        tensor(1.)
    """
    k, l = _matrix(k, "k", validate_args), _matrix(l, "l", validate_args)
    n = k.shape[0]
    if validate_args and (k.shape != (n, n) or l.shape != (n, n)):
        raise InvalidInputError(
            f"k and l must be square Gram matrices of the same N, got {tuple(k.shape)} and {tuple(l.shape)}."
        )
    if unbiased:
        if n < 4:
            raise InvalidInputError(f"The unbiased HSIC estimator needs at least 4 samples, got {n}.")
        kt, rk, sk = _prep_unbiased(k)
        lt, rl, sl = _prep_unbiased(l)
        val = (kt * lt).sum() + sk * sl / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (rk @ rl)
        return val / (n * (n - 3))
    kc = k - k.mean(0, keepdim=True) - k.mean(1, keepdim=True) + k.mean()
    lc = l - l.mean(0, keepdim=True) - l.mean(1, keepdim=True) + l.mean()
    return (kc * lc).sum() / (n - 1) ** 2


def cka(
    x: Any,
    y: Any,
    *,
    kernel: Literal["linear", "rbf"] = "linear",
    unbiased: bool = False,
    threshold: float = 1.0,
    validate_args: bool = True,
) -> torch.Tensor:
    """Centered kernel alignment CKA = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)), Eq. 6 of design-diversity.

    Args:
        x: features of model A, shape (N, D1) (extra dims are flattened).
        y: features of model B on the same N inputs, shape (N, D2).
        kernel: ``"linear"`` (default, Kornblith et al.'s main choice) or ``"rbf"`` (median heuristic).
        unbiased: use the unbiased HSIC estimator (what :class:`MinibatchCKA` accumulates); the
            default biased estimator is the original CKA.
        threshold: RBF bandwidth as a multiple of the median distance.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        1 for identical representations (up to rotation and isotropic scale), ~0 for unrelated ones.

    Shape:
        (N, D1), (N, D2) -> () (0-d).

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
        >>> cka(x, 3 * x.flip(1))  # a rotation and a scaling: CKA 1
        tensor(1.)
    """
    x, y = as_tensor(x, "x", validate=validate_args), as_tensor(y, "y", validate=validate_args)
    dt = compute_dtype(torch.promote_types(x.dtype, y.dtype))
    xf, yf = _features(x, "x", False), _features(y, "y", False)
    if validate_args and (x.ndim < 2 or y.ndim < 2):
        raise InvalidInputError(
            f"x and y must be features shaped (N, D) (or (N, ...) to flatten), "
            f"got {tuple(x.shape)} and {tuple(y.shape)}."
        )
    if validate_args and xf.shape[0] != yf.shape[0]:
        raise InvalidInputError(
            f"x and y must hold features of the same N inputs, got {xf.shape[0]} and {yf.shape[0]} rows."
        )
    if kernel == "linear":
        k, l = gram_linear(xf, validate_args=False), gram_linear(yf, validate_args=False)
    elif kernel == "rbf":
        k, l = (
            gram_rbf(xf, threshold=threshold, validate_args=False),
            gram_rbf(yf, threshold=threshold, validate_args=False),
        )
    else:
        raise InvalidInputError(f"kernel must be 'linear' or 'rbf', got {kernel!r}.")
    kl, kk, ll = (hsic(a, b, unbiased=unbiased, validate_args=False) for a, b in ((k, l), (k, k), (l, l)))
    den = (kk * ll).sqrt()
    if float(den) <= 0:
        raise InvalidInputError("CKA is undefined for constant features (zero self-similarity).")
    return (kl / den).to(dt)


class MinibatchCKA:
    """Streaming linear CKA over minibatches (Nguyen et al. 2021): averages unbiased HSIC per batch.

    ``update`` takes the features of one batch for La layers of model A and Lb layers of model B;
    ``compute`` returns CKA = mean HSIC(K, L) / sqrt(mean HSIC(K, K) · mean HSIC(L, L)) for every
    layer pair. Memory holds only B × B Gram matrices of the current batch. Batches need B >= 4;
    the estimate converges to the full-data unbiased CKA (each batch HSIC is an unbiased estimate).

    ``compute`` returns a float64 0-d tensor when single tensors were passed to ``update``, else
    an (La, Lb) tensor.

    Example:
        >>> x = torch.arange(16.0).reshape(8, 2) ** 0.5
        >>> acc = MinibatchCKA()
        >>> for b in (slice(0, 4), slice(4, 8)):  # tensors, or lists of tensors (one per layer)
        ...     acc.update(x[b], 2 * x[b])
        >>> acc.compute()
        tensor(1., dtype=torch.float64)
    """

    def __init__(self, *, validate_args: bool = True) -> None:
        self.validate_args = validate_args
        self.hsic_xy: torch.Tensor | None = None
        self.hsic_xx: torch.Tensor | None = None
        self.hsic_yy: torch.Tensor | None = None
        self.num_batches = 0
        self.single = True

    @staticmethod
    def _stats(feats: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        kts, rows, sums = [], [], []
        for f in feats:
            kt, r, s = _prep_unbiased(gram_linear(f, validate_args=False))
            kts.append(kt.reshape(-1))
            rows.append(r)
            sums.append(s)
        return torch.stack(kts), torch.stack(rows), torch.stack(sums)

    @staticmethod
    def _hsic(a: tuple, b: tuple, n: int) -> torch.Tensor:
        (ka, ra, sa), (kb, rb, sb) = a, b
        val = ka @ kb.T + sa[:, None] * sb[None, :] / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (ra @ rb.T)
        return val / (n * (n - 3))

    def update(self, xs: torch.Tensor | Sequence[torch.Tensor], ys: torch.Tensor | Sequence[torch.Tensor]) -> None:
        """Add one batch: features of model A's layers ``xs`` and model B's layers ``ys``, each (B, ...)."""
        single = isinstance(xs, torch.Tensor) and isinstance(ys, torch.Tensor)
        xl = [xs] if isinstance(xs, torch.Tensor) else list(xs)
        yl = [ys] if isinstance(ys, torch.Tensor) else list(ys)
        xl = [_features(x, "features of model A", self.validate_args).detach() for x in xl]
        yl = [_features(y, "features of model B", self.validate_args).detach() for y in yl]
        n = xl[0].shape[0]
        if any(f.shape[0] != n for f in xl + yl):
            raise InvalidInputError(
                "All features passed to MinibatchCKA.update must come from the same batch (same B)."
            )
        if n < 4:
            raise InvalidInputError(f"MinibatchCKA needs batches of at least 4 samples, got {n}.")
        sx, sy = self._stats(xl), self._stats(yl)
        xy, xx, yy = self._hsic(sx, sy, n), self._hsic(sx, sx, n).diagonal(), self._hsic(sy, sy, n).diagonal()
        if self.hsic_xy is None:
            self.hsic_xy, self.hsic_xx, self.hsic_yy, self.single = xy, xx, yy, single
        else:
            if xy.shape != self.hsic_xy.shape:
                raise InvalidInputError(
                    f"Every batch must give the same number of layers: the first gave "
                    f"{tuple(self.hsic_xy.shape)}, this one {tuple(xy.shape)}."
                )
            self.hsic_xy += xy
            self.hsic_xx += xx
            self.hsic_yy += yy
        self.num_batches += 1

    def compute(self) -> torch.Tensor:
        """CKA for every layer pair, shape (La, Lb) (0-d when single tensors were passed), float64."""
        if self.hsic_xy is None:
            raise InvalidInputError("MinibatchCKA.compute was called before any update.")
        den = (self.hsic_xx.clamp_min(0)[:, None] * self.hsic_yy.clamp_min(0)[None, :]).sqrt()
        out = self.hsic_xy / den
        return out[0, 0] if self.single else out


def _resolve(model: nn.Module, names: Sequence[str], which: str) -> list[nn.Module]:
    modules = dict(model.named_modules())
    missing = [n for n in names if n not in modules]
    if missing:
        valid = [n for n in modules if n][:30]
        raise InvalidInputError(
            f"Model {which} has no layer named {missing[0]!r}; some valid names: {', '.join(valid)}."
        )
    return [modules[n] for n in names]


@torch.no_grad()
def cka_map(
    model_a: nn.Module,
    model_b: nn.Module,
    loader: Iterable[Any],
    layers_a: Sequence[str],
    layers_b: Sequence[str],
    *,
    device: str | torch.device = "cpu",
    validate_args: bool = True,
) -> torch.Tensor:
    """Linear minibatch CKA (Eq. 6 of design-diversity) of each layer in ``layers_a`` with each in ``layers_b``.

    design-diversity Fig. 12. Layer outputs are captured with forward hooks (a tuple output uses
    its first tensor) and flattened per sample. Models run in eval mode (their mode is restored);
    batches smaller than 4 are skipped (the unbiased HSIC needs 4 samples).

    Args:
        model_a: the first network.
        model_b: the second network.
        loader: yields input batches ``x`` or ``(x, y, ...)`` tuples.
        layers_a: module names of model A, as in ``model.named_modules()``.
        layers_b: module names of model B.
        device: where to run the models.
        validate_args: check the captured features (``False`` skips the NaN check).

    Returns:
        float64 CKA values.

    Shape:
        -> (len(layers_a), len(layers_b)).

    Example:
        >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        >>> x = torch.randn(8, 3, generator=torch.Generator().manual_seed(0))
        >>> cka_map(net, net, [x], ["0", "2"], ["0"]).shape
        torch.Size([2, 1])
    """
    if not layers_a or not layers_b:
        raise InvalidInputError("cka_map needs at least one layer name for each model.")
    mods_a, mods_b = _resolve(model_a, layers_a, "A"), _resolve(model_b, layers_b, "B")
    store: dict[tuple[str, int], torch.Tensor] = {}

    def hook(key: tuple[str, int]):
        def fn(_m: nn.Module, _i: Any, out: Any) -> None:
            # clone: a later in-place op (e.g. ReLU(inplace=True)) would otherwise change the capture
            store[key] = (out[0] if isinstance(out, tuple | list) else out).detach().cpu().clone()

        return fn

    handles = [m.register_forward_hook(hook(("a", i))) for i, m in enumerate(mods_a)]
    handles += [m.register_forward_hook(hook(("b", i))) for i, m in enumerate(mods_b)]
    modes = (model_a.training, model_b.training)
    model_a.eval()
    model_b.eval()
    acc = MinibatchCKA(validate_args=validate_args)
    try:
        for batch in loader:
            x = batch[0] if isinstance(batch, tuple | list) else batch
            if x.shape[0] < 4:
                continue
            store.clear()
            model_a(x.to(device))
            model_b(x.to(device))
            acc.update([store[("a", i)] for i in range(len(mods_a))], [store[("b", i)] for i in range(len(mods_b))])
    finally:
        for h in handles:
            h.remove()
        model_a.train(modes[0])
        model_b.train(modes[1])
    if acc.num_batches == 0:
        raise InvalidInputError("cka_map saw no batch of at least 4 samples; use a loader with batch_size >= 4.")
    return acc.compute()
