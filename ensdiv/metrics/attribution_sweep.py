"""Attribution diversity (Eq. 7 of design-diversity) of many ensembles at once, from per-member maps.

Each member's maps are computed once (and cached by the caller); the Eq. 7 score of any ensemble is
then a function of the (M, M) Gram matrix of the members' maps, G_ij = mean_n <a_i(n), a_j(n)>:

    A(e) = mean_n Σ_p Var_{m in e} a_{m,p}(n) = (1/k) Σ_{i in e} G_ii - (1/k²) Σ_{i, j in e} G_ij

(population variance over the k members), so the K ensembles cost one Gram matrix plus a gather.
:func:`normalize_attributions` gives the per-map-normalised ablation (each member's map of each
sample scaled to unit L2 norm), which removes the members' logit scale from the score.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from ensdiv.errors import InvalidInputError
from ensdiv.metrics.checks import as_tensor, compute_dtype

__all__ = ["attribution_gram", "ensemble_attribution_diversity", "normalize_attributions"]


def _members_maps(attr: Any, validate: bool) -> torch.Tensor:
    a = as_tensor(attr, "attr", validate=validate)
    if validate and (a.ndim < 3 or not a.is_floating_point()):
        raise InvalidInputError(
            f"attr must be floating maps shaped (M, N, C, H, W) (members first), got {tuple(a.shape)} {a.dtype}."
        )
    return a


def normalize_attributions(
    attr: Any, *, norm: Literal["l2", "l1", "max"] = "l2", eps: float = 1e-12, validate_args: bool = True
) -> torch.Tensor:
    """Scale every member's map of every sample to unit norm (the per-map-normalised ablation of Eq. 7).

    Raw saliency magnitudes scale with a model's logit scale, so a member with large logits dominates
    the variance of Eq. 7. With ``"l2"`` maps the ensemble score becomes 1 - ||mean of the k unit
    maps||², a function of the pairwise cosine similarities of the members' maps only.

    Args:
        attr: attributions, shape (M, N, ...) (e.g. (M, N, C, H, W)).
        norm: ``"l2"`` (default), ``"l1"`` (sum of absolute values) or ``"max"`` (largest absolute value).
        eps: maps whose norm is below ``eps`` are left at zero instead of divided.
        validate_args: check the inputs (``False`` skips every check; an unknown ``norm`` raises either way).

    Returns:
        The normalised maps in :func:`~ensdiv.metrics.checks.compute_dtype` of ``attr``.

    Shape:
        attr (M, N, ...) -> (M, N, ...).

    Example:
        >>> normalize_attributions(torch.tensor([[[3.0, 4.0]], [[0.0, 2.0]]]))
        tensor([[[0.6000, 0.8000]],
        <BLANKLINE>
                [[0.0000, 1.0000]]])
    """
    if norm not in ("l2", "l1", "max"):
        raise InvalidInputError(f"norm must be 'l2', 'l1' or 'max', got {norm!r}.")
    a = _members_maps(attr, validate_args)
    a = a.to(compute_dtype(a.dtype))
    flat = a.reshape(a.shape[0], a.shape[1], -1)
    if norm == "l2":
        size = flat.norm(dim=-1)
    elif norm == "l1":
        size = flat.abs().sum(-1)
    else:
        size = flat.abs().amax(-1) if flat.shape[-1] else torch.zeros(flat.shape[:2], dtype=a.dtype)
    scale = torch.where(size > eps, 1.0 / size.clamp_min(eps), torch.zeros_like(size))
    return (flat * scale[..., None]).reshape(a.shape)


def attribution_gram(attr: Any, *, chunk: int = 256, validate_args: bool = True) -> torch.Tensor:
    """The members' Gram matrix of attribution maps, G_ij = mean over samples of <a_i(n), a_j(n)>.

    Computed in float64 over chunks of ``chunk`` samples (bounds the memory of the float64 copy).

    Args:
        attr: attributions, shape (M, N, ...).
        chunk: samples per chunk.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        Symmetric positive semi-definite, float64.

    Shape:
        attr (M, N, ...) -> (M, M).

    Example:
        >>> attribution_gram(torch.tensor([[[1.0, 0.0]], [[3.0, 1.0]]]))
        tensor([[ 1.,  3.],
                [ 3., 10.]], dtype=torch.float64)
    """
    a = _members_maps(attr, validate_args)
    m, n = a.shape[0], a.shape[1]
    if validate_args and n == 0:
        raise InvalidInputError("attribution_gram needs at least one sample, got N = 0.")
    flat = a.reshape(m, n, -1)
    gram = torch.zeros(m, m, dtype=torch.float64)
    for lo in range(0, n, max(1, int(chunk))):
        part = flat[:, lo : lo + chunk].reshape(m, -1).double()
        gram += part @ part.T
    return gram / n


def ensemble_attribution_diversity(
    attr: Any, combinations: Any, *, gram: bool = False, validate_args: bool = True
) -> torch.Tensor:
    """Eq. 7 of design-diversity, A = Σ_c Σ_p Var_m(a_{c,p}) averaged over samples, for K ensembles at once.

    Equals :func:`~ensdiv.metrics.attribution_diversity` of ``attr[combination]`` for each row of
    ``combinations`` (population variance over the members, mean over samples), without a loop over
    ensembles: (1/k) Σ_i G_ii - (1/k²) Σ_ij G_ij with G from :func:`attribution_gram`.

    Args:
        attr: attributions shaped (M, N, ...), or with ``gram=True`` their Gram matrix (M, M).
        combinations: member indices of each ensemble, an int tensor (K, k).
        gram: ``attr`` is already the Gram matrix (reuse it across rules and sets).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        Non-negative scores, float64 (tiny negative round-off is clipped to 0).

    Shape:
        attr (M, N, ...) or (M, M), combinations (K, k) -> (K,).

    Example:
        >>> a = torch.tensor([[[1.0, 0.0]], [[3.0, 0.0]], [[1.0, 2.0]]])  # M=3, N=1, two pixels
        >>> ensemble_attribution_diversity(a, torch.tensor([[0, 1], [0, 2], [1, 2]]))
        tensor([1., 1., 2.], dtype=torch.float64)
    """
    g = as_tensor(attr, "attr", validate=validate_args) if gram else attribution_gram(attr, validate_args=validate_args)
    g = g.double()
    m = g.shape[0]
    combos = as_tensor(combinations, "combinations", validate=validate_args)
    if validate_args:
        if gram and (g.ndim != 2 or g.shape[1] != m):
            raise InvalidInputError(f"With gram=True, attr must be a square (M, M) matrix, got {tuple(g.shape)}.")
        if combos.is_floating_point() or combos.ndim != 2 or combos.shape[1] == 0:
            raise InvalidInputError(
                f"combinations must be an int tensor (K, k) with k >= 1, got {tuple(combos.shape)} {combos.dtype}."
            )
        if combos.numel() and (int(combos.min()) < 0 or int(combos.max()) >= m):
            raise InvalidInputError(f"combinations must hold member indices in 0..{m - 1}.")
    combos = combos.long()
    k = combos.shape[1]
    sub = g[combos[:, :, None], combos[:, None, :]]  # (K, k, k)
    diag = sub.diagonal(dim1=1, dim2=2).sum(1)
    return (diag / k - sub.sum((1, 2)) / k**2).clamp_min(0)
