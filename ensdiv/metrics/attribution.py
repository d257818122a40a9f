"""Input-attribution diversity: Eq. 7 (measure) and Eq. 8 (training penalty) of design-diversity.

Attributions come from captum. Conventions: ``"saliency"`` returns |∂ logit_target / ∂x| (captum's
default ``abs=True``, the paper's Saliency maps); ``"integrated_gradients"`` returns *signed*
attributions (x - 0) ⊙ ∫ ∂ logit / ∂x along the straight path from a black (all-zero) baseline.
Pass ``abs=`` to override either. Attributions are with respect to the target class's logit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import nn

from ensdiv.errors import InvalidInputError
from ensdiv.metrics.checks import as_tensor, compute_dtype

__all__ = ["attributions", "attribution_diversity"]

Method = Literal["saliency", "integrated_gradients"]


def _target(target: Any, n: int) -> torch.Tensor:
    t = torch.as_tensor(target).long()
    if t.ndim == 0:
        t = t.expand(n)
    if t.shape != (n,):
        raise InvalidInputError(f"target must be one class per input, shaped (N,) = ({n},), got {tuple(t.shape)}.")
    return t


def attributions(
    model: nn.Module | Sequence[nn.Module],
    x: torch.Tensor,
    target: Any,
    *,
    method: Method = "saliency",
    n_steps: int = 50,
    abs: bool | None = None,
    batch_size: int | None = None,
    validate_args: bool = True,
) -> torch.Tensor:
    """Input attributions of one model or of several models stacked (the a_{c,p} of Eq. 7 of design-diversity).

    Not a metric but its input; computed by captum (``Saliency``, ``IntegratedGradients``).

    Args:
        model: a network, or a sequence of M networks (put them in eval mode first).
        x: inputs, shape (N, C, H, W).
        target: class to explain per input, shape (N,) (e.g. the labels or the ensemble's prediction).
        method: ``"saliency"`` or ``"integrated_gradients"``.
        n_steps: integration steps of integrated gradients (the paper's Fig. 9 uses 1, 2, 10, 50), with
            captum's default rule, Gauss–Legendre (the paper does not name its rule).
        abs: take absolute values (default: True for saliency, False for integrated gradients).
        batch_size: process inputs in chunks of this size (memory); default all at once.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        Detached attributions in the inputs' dtype.

    Shape:
        x (N, C, H, W) -> (N, C, H, W) for one model, (M, N, C, H, W) for M models.

    Example:
        >>> lin = nn.Linear(2, 2)
        >>> with torch.no_grad():
        ...     _ = lin.weight.copy_(torch.tensor([[1.0, -2.0], [3.0, 4.0]]))
        >>> attributions(lin, torch.zeros(1, 2), torch.tensor([0]))  # |d logit_0 / dx| = |w_0|
        tensor([[1., 2.]])
    """
    if not isinstance(model, nn.Module):
        return torch.stack(
            [
                attributions(
                    m,
                    x,
                    target,
                    method=method,
                    n_steps=n_steps,
                    abs=abs,
                    batch_size=batch_size,
                    validate_args=validate_args,
                )
                for m in model
            ]
        )
    x = as_tensor(x, "x", validate=validate_args)
    t = _target(target, x.shape[0])
    use_abs = (method == "saliency") if abs is None else abs
    if method == "saliency":
        from captum.attr import Saliency  # imported on use: captum is slow to import

        explainer = Saliency(model)

        def run(xb: torch.Tensor, tb: torch.Tensor) -> torch.Tensor:
            return explainer.attribute(xb, target=tb, abs=use_abs)
    elif method == "integrated_gradients":
        if not isinstance(n_steps, int) or n_steps < 1:
            raise InvalidInputError(f"n_steps must be a positive int, got {n_steps!r}.")
        from captum.attr import IntegratedGradients

        explainer = IntegratedGradients(model)

        def run(xb: torch.Tensor, tb: torch.Tensor) -> torch.Tensor:
            a = explainer.attribute(xb, baselines=0.0, target=tb, n_steps=n_steps)
            return a.abs() if use_abs else a
    else:
        raise InvalidInputError(f"method must be 'saliency' or 'integrated_gradients', got {method!r}.")
    bs = x.shape[0] if not batch_size else int(batch_size)
    parts = [
        run(x[i : i + bs].detach().clone().requires_grad_(True), t[i : i + bs]).detach()
        for i in range(0, x.shape[0], max(bs, 1))
    ]
    return torch.cat(parts) if parts else torch.zeros_like(x)


def attribution_diversity(
    attr: Any,
    *,
    reduction: Literal["mean", "none"] = "mean",
    unbiased: bool = False,
    validate_args: bool = True,
) -> torch.Tensor:
    """Attribution diversity A = Σ_c Σ_p Var_m(a_{c,p}), Eq. 7 of design-diversity.

    The variance runs over the M members' attribution of the same channel c and pixel p of one
    sample; A is summed over channels and pixels, then averaged over samples. Ambiguity resolved:
    ``unbiased=False`` (default) is the population variance of the M values (the paper writes
    "Var" without a correction; with M = 1 this gives 0).

    Args:
        attr: attributions, shape (M, N, C, H, W) (any trailing feature shape works).
        reduction: ``"mean"`` over samples or ``"none"`` (one value per sample).
        unbiased: divide by M - 1 instead of M.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        Non-negative, in :func:`~ensdiv.metrics.checks.compute_dtype` of ``attr``.

    Shape:
        attr (M, N, ...) -> () (0-d) with ``reduction="mean"``, (N,) with ``"none"``.

    Example:
        >>> a = torch.tensor([[[1.0, 0.0]], [[3.0, 0.0]]])  # M=2, N=1, two pixels
        >>> attribution_diversity(a)  # Var(1, 3) + Var(0, 0) = 1
        tensor(1.)
    """
    a = as_tensor(attr, "attr", validate=validate_args)
    if validate_args and a.ndim < 3:
        raise InvalidInputError(f"attr must be shaped (M, N, C, H, W) (members first), got {tuple(a.shape)}.")
    if unbiased and a.shape[0] < 2:
        raise InvalidInputError(f"The unbiased variance needs at least 2 members, got M = {a.shape[0]}.")
    a = a.to(compute_dtype(a.dtype))
    per = a.var(dim=0, correction=1 if unbiased else 0).reshape(a.shape[1], -1).sum(1)
    if reduction == "none":
        return per
    if reduction == "mean":
        return per.mean()
    raise InvalidInputError(f"reduction must be 'mean' or 'none', got {reduction!r}.")
