"""Representation similarity: CKA (Kornblith et al. 2019; Eq. 6 of design-diversity) and minibatch CKA.

:func:`cka` compares two full feature matrices (N × D1, N × D2) with an N × N Gram matrix each.
:class:`MinibatchCKA` (Nguyen et al. 2021) accumulates the *unbiased* HSIC estimator (Song et al.
2012) batch by batch, so memory grows with the batch size, not with N; :func:`cka_map` uses it
with forward hooks to compare every layer of one model with every layer of another.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import torch
from torch import nn

from ensdiv.errors import EnsdivError
from ensdiv.metrics._checks import as_tensor

__all__ = ["gram_linear", "gram_rbf", "hsic", "cka", "MinibatchCKA", "cka_map"]


def _features(x: Any, name: str) -> torch.Tensor:
    x = as_tensor(x, name)
    if x.ndim < 2:
        raise EnsdivError(
            f"{name} must be features shaped (N, D) (or (N, ...) to flatten), got {tuple(x.shape)}."
        )
    return x.reshape(x.shape[0], -1).double()


def gram_linear(x: torch.Tensor) -> torch.Tensor:
    """Linear kernel Gram matrix X Xᵀ of features (N, D)."""
    return x @ x.T


def gram_rbf(x: torch.Tensor, *, threshold: float = 1.0) -> torch.Tensor:
    """RBF Gram matrix exp(-‖xi - xj‖² / (2σ²)), σ = ``threshold`` × sqrt(median squared distance).

    The median heuristic of Kornblith et al. (2019) (median over the full distance matrix) makes
    RBF-CKA invariant to isotropic scaling.
    """
    sq = x.pow(2).sum(1)
    d2 = (sq[:, None] + sq[None, :] - 2 * x @ x.T).clamp_min(0)
    flat = d2.flatten()
    k = flat.numel()  # median as numpy defines it (mean of the two middle values when k is even)
    med = 0.5 * (flat.kthvalue((k + 1) // 2).values + flat.kthvalue(k // 2 + 1).values)
    sigma2 = (threshold**2) * med
    if float(sigma2) <= 0:
        raise EnsdivError(
            "RBF kernel bandwidth is zero (most feature rows are identical); use kernel='linear'."
        )
    return torch.exp(-d2 / (2 * sigma2))


def _prep_unbiased(k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    kt = k.clone()
    kt.diagonal().zero_()
    rows = kt.sum(1)
    return kt, rows, rows.sum()


def hsic(k: torch.Tensor, l: torch.Tensor, *, unbiased: bool = False) -> torch.Tensor:
    """HSIC of two N × N Gram matrices.

    Biased: tr(K H L H) / (N-1)². Unbiased (Song et al. 2012, needs N >= 4), with K̃, L̃ the Gram
    matrices with zeroed diagonals:
    [tr(K̃L̃) + 1ᵀK̃1 · 1ᵀL̃1 / ((N-1)(N-2)) - 2/(N-2) · 1ᵀK̃L̃1] / (N(N-3)).
    """
    n = k.shape[0]
    if unbiased:
        if n < 4:
            raise EnsdivError(f"The unbiased HSIC estimator needs at least 4 samples, got {n}.")
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
) -> float:
    """Centered kernel alignment CKA = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)), Eq. 6 of design-diversity.

    Args:
        x: features of model A, shape (N, D1) (extra dims are flattened).
        y: features of model B on the same N inputs, shape (N, D2).
        kernel: ``"linear"`` (default, Kornblith et al.'s main choice) or ``"rbf"`` (median heuristic).
        unbiased: use the unbiased HSIC estimator (what :class:`MinibatchCKA` accumulates); the
            default biased estimator is the original CKA.
        threshold: RBF bandwidth as a multiple of the median distance.

    Returns:
        A float, 1 for identical representations (up to rotation and scale), ~0 for unrelated ones.
    """
    xf, yf = _features(x, "x"), _features(y, "y")
    if xf.shape[0] != yf.shape[0]:
        raise EnsdivError(
            f"x and y must hold features of the same N inputs, got {xf.shape[0]} and {yf.shape[0]} rows."
        )
    if kernel == "linear":
        k, l = gram_linear(xf), gram_linear(yf)
    elif kernel == "rbf":
        k, l = gram_rbf(xf, threshold=threshold), gram_rbf(yf, threshold=threshold)
    else:
        raise EnsdivError(f"kernel must be 'linear' or 'rbf', got {kernel!r}.")
    kl, kk, ll = hsic(k, l, unbiased=unbiased), hsic(k, k, unbiased=unbiased), hsic(l, l, unbiased=unbiased)
    den = (kk * ll).sqrt()
    if float(den) <= 0:
        raise EnsdivError("CKA is undefined for constant features (zero self-similarity).")
    return float(kl / den)


class MinibatchCKA:
    """Streaming linear CKA over minibatches (Nguyen et al. 2021): averages unbiased HSIC per batch.

    ``update`` takes the features of one batch for La layers of model A and Lb layers of model B;
    ``compute`` returns CKA = mean HSIC(K, L) / sqrt(mean HSIC(K, K) · mean HSIC(L, L)) for every
    layer pair. Memory holds only B × B Gram matrices of the current batch. Batches need B >= 4;
    the estimate converges to the full-data unbiased CKA (each batch HSIC is an unbiased estimate).

    Example:
        >>> acc = MinibatchCKA()
        >>> for xb, yb in batches: acc.update(xb, yb)   # tensors, or lists of tensors (one per layer)
        >>> acc.compute()                              # float, or (La, Lb) tensor for lists
    """

    def __init__(self) -> None:
        self.hsic_xy: torch.Tensor | None = None
        self.hsic_xx: torch.Tensor | None = None
        self.hsic_yy: torch.Tensor | None = None
        self.num_batches = 0
        self.single = True

    @staticmethod
    def _stats(feats: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        kts, rows, sums = [], [], []
        for f in feats:
            kt, r, s = _prep_unbiased(gram_linear(f))
            kts.append(kt.reshape(-1))
            rows.append(r)
            sums.append(s)
        return torch.stack(kts), torch.stack(rows), torch.stack(sums)

    @staticmethod
    def _hsic(a: tuple, b: tuple, n: int) -> torch.Tensor:
        (ka, ra, sa), (kb, rb, sb) = a, b
        val = ka @ kb.T + sa[:, None] * sb[None, :] / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (ra @ rb.T)
        return val / (n * (n - 3))

    def update(
        self, xs: torch.Tensor | Sequence[torch.Tensor], ys: torch.Tensor | Sequence[torch.Tensor]
    ) -> None:
        """Add one batch: features of model A's layers ``xs`` and model B's layers ``ys``, each (B, ...)."""
        single = isinstance(xs, torch.Tensor) and isinstance(ys, torch.Tensor)
        xl = [xs] if isinstance(xs, torch.Tensor) else list(xs)
        yl = [ys] if isinstance(ys, torch.Tensor) else list(ys)
        xl = [_features(x, "features of model A").detach() for x in xl]
        yl = [_features(y, "features of model B").detach() for y in yl]
        n = xl[0].shape[0]
        if any(f.shape[0] != n for f in xl + yl):
            raise EnsdivError(
                "All features passed to MinibatchCKA.update must come from the same batch (same B)."
            )
        if n < 4:
            raise EnsdivError(f"MinibatchCKA needs batches of at least 4 samples, got {n}.")
        sx, sy = self._stats(xl), self._stats(yl)
        xy, xx, yy = self._hsic(sx, sy, n), self._hsic(sx, sx, n).diagonal(), self._hsic(sy, sy, n).diagonal()
        if self.hsic_xy is None:
            self.hsic_xy, self.hsic_xx, self.hsic_yy, self.single = xy, xx, yy, single
        else:
            if xy.shape != self.hsic_xy.shape:
                raise EnsdivError(
                    f"Every batch must give the same number of layers: the first gave "
                    f"{tuple(self.hsic_xy.shape)}, this one {tuple(xy.shape)}."
                )
            self.hsic_xy += xy
            self.hsic_xx += xx
            self.hsic_yy += yy
        self.num_batches += 1

    def compute(self) -> torch.Tensor | float:
        """CKA for every layer pair, shape (La, Lb) (a float when single tensors were passed)."""
        if self.hsic_xy is None:
            raise EnsdivError("MinibatchCKA.compute was called before any update.")
        den = (self.hsic_xx.clamp_min(0)[:, None] * self.hsic_yy.clamp_min(0)[None, :]).sqrt()
        out = self.hsic_xy / den
        return float(out[0, 0]) if self.single else out


def _resolve(model: nn.Module, names: Sequence[str], which: str) -> list[nn.Module]:
    modules = dict(model.named_modules())
    missing = [n for n in names if n not in modules]
    if missing:
        valid = [n for n in modules if n][:30]
        raise EnsdivError(
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
) -> torch.Tensor:
    """Linear minibatch CKA of each layer in ``layers_a`` with each in ``layers_b`` (design-diversity Fig 12).

    Layer outputs are captured with forward hooks (a tuple output uses its first tensor) and
    flattened per sample. Models run in eval mode; batches smaller than 4 are skipped.

    Args:
        model_a, model_b: the two networks.
        loader: yields input batches ``x`` or ``(x, y, ...)`` tuples.
        layers_a, layers_b: module names as in ``model.named_modules()``.
        device: where to run the models.

    Returns:
        Shape (len(layers_a), len(layers_b)), float64.
    """
    if not layers_a or not layers_b:
        raise EnsdivError("cka_map needs at least one layer name for each model.")
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
    acc = MinibatchCKA()
    try:
        for batch in loader:
            x = batch[0] if isinstance(batch, tuple | list) else batch
            if x.shape[0] < 4:
                continue
            store.clear()
            model_a(x.to(device))
            model_b(x.to(device))
            acc.update(
                [store[("a", i)] for i in range(len(mods_a))], [store[("b", i)] for i in range(len(mods_b))]
            )
    finally:
        for h in handles:
            h.remove()
        model_a.train(modes[0])
        model_b.train(modes[1])
    if acc.num_batches == 0:
        raise EnsdivError("cka_map saw no batch of at least 4 samples; use a loader with batch_size >= 4.")
    out = acc.compute()
    return out if isinstance(out, torch.Tensor) else torch.tensor([[out]], dtype=torch.float64)
