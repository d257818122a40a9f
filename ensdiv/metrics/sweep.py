"""Evaluate every size-k ensemble of a zoo at once (design-diversity Fig. 5–8, attack-similarity Fig. 2).

:func:`ensemble_sweep` never loops in Python over ensembles: the K combinations are an index
tensor (K, k); averaging rules become one matrix product of a (K, M) selection matrix with the
(M, N·C) member outputs (chunked over K to bound memory); pairwise diversity is computed once per
member pair (M × M) and gathered per ensemble. The combination rules come from
:mod:`ensdiv.metrics.combine` (the same rules as :func:`ensdiv.ensembles.combine`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch

from ensdiv.errors import InvalidInputError, unknown_name
from ensdiv.metrics.checks import as_tensor, check_ensemble, check_labels
from ensdiv.metrics.combine import COMBINE_RULES, make_generator
from ensdiv.metrics.diversity import disagreement_matrix

__all__ = ["ensemble_sweep", "combination_index"]


def combination_index(num_members: int, size: int, *, validate_args: bool = True) -> torch.Tensor:
    """All ``size``-subsets of ``range(num_members)`` in lexicographic order (the C(M, k) ensembles).

    Args:
        num_members: M.
        size: k, between 1 and M.
        validate_args: check the inputs (an impossible size raises either way).

    Returns:
        int64 member indices, one row per ensemble.

    Shape:
        -> (C(M, k), k).

    Example:
        >>> combination_index(3, 2).tolist()
        [[0, 1], [0, 2], [1, 2]]
    """
    if not 1 <= size <= num_members:
        raise InvalidInputError(f"size must be between 1 and the number of members ({num_members}), got {size}.")
    if size == 1:
        return torch.arange(num_members)[:, None]
    return torch.combinations(torch.arange(num_members), r=size)


def _correct_cn(score: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``score.argmax(1) == labels`` for scores laid out (K, C, N), with argmax's first-maximum rule.

    PyTorch's argmax over a strided class dimension is slow, but ``amax`` is fast: a sample is right
    when its label's score beats every other class (the label's entry is overwritten in place with
    -inf, so ``score`` is consumed). Exact ties, rare, are resolved on the affected entries only:
    argmax picks the first class, so a tie is right only when no earlier class shares the maximum.
    """
    k = score.shape[0]
    idx = labels.expand(k, 1, -1)
    s_y = score.gather(1, idx).squeeze(1)  # (K, N)
    score.scatter_(1, idx, float("-inf"))
    other = score.amax(1)
    hit = s_y > other
    ties = s_y == other
    if bool(ties.any()):
        kk, nn = ties.nonzero(as_tuple=True)
        earlier = torch.arange(score.shape[1])[None, :] < labels[nn][:, None]
        hit[kk, nn] = ~((score[kk, :, nn] == s_y[kk, nn][:, None]) & earlier).any(1)
    return hit


def _ensemble_correct(
    logits: torch.Tensor,
    labels: torch.Tensor,
    combos: torch.Tensor,
    how: str,
    gen: torch.Generator,
    chunk_elems: int,
) -> torch.Tensor:
    """Correctness (K, N) of the prediction of every ensemble in ``combos`` under rule ``how``.

    Scores are laid out (members, classes, samples) when C is small (reducing over classes is then
    a fast element-wise pass over contiguous rows) and (members, samples, classes) otherwise.
    """
    m, n, c = logits.shape
    k, s = combos.shape
    cn = c <= 64
    step = max(1, chunk_elems // max(1, n * c * (s if how == "median" else 1)))
    out = torch.empty(k, n, dtype=torch.bool)
    if how == "mean_logits":
        x = logits
    elif how in ("mean_probs", "median"):
        x = logits.softmax(-1)
    elif how == "geometric_mean":
        x = logits.log_softmax(-1)
    else:  # vote: one-hot votes, plus one random priority per (sample, class) shared by all
        # ensembles: within any one ensemble the tied classes are still ordered uniformly at random
        x = torch.nn.functional.one_hot(logits.argmax(-1), c).to(logits.dtype)
        jitter = 0.5 * torch.rand(n, c, generator=gen, dtype=logits.dtype)
        jitter = jitter.T.contiguous() if cn else jitter
    if cn:
        x = x.transpose(1, 2).contiguous()  # (M, C, N)
    flat = x.reshape(m, -1)
    gather = 8 * s <= m  # measured crossover (benchmarks/bench_metrics.py)
    for lo in range(0, k, step):
        idx = combos[lo : lo + step]
        if how == "median":
            p = x[idx].sort(dim=1).values  # (k', s, ...)
            score = p[:, (s - 1) // 2] if s % 2 else 0.5 * (p[:, s // 2 - 1] + p[:, s // 2])
        elif gather:  # few members per ensemble: sum the selected rows (k - 1 adds per entry)
            score = torch.index_select(flat, 0, idx[:, 0])
            for j in range(1, s):
                score += torch.index_select(flat, 0, idx[:, j])
            score = score.reshape(-1, *x.shape[1:])
        else:  # many members per ensemble: one matrix product with the 0/1 selection matrix
            sel = torch.zeros(idx.shape[0], m, dtype=flat.dtype)
            sel.scatter_add_(1, idx, torch.ones(idx.shape, dtype=flat.dtype))
            score = (sel @ flat).reshape(-1, *x.shape[1:])
        if how == "vote":  # both branches: ties broken by the seeded priorities, never by class order
            score = score + jitter
        out[lo : lo + step] = _correct_cn(score, labels) if cn else score.max(-1).indices == labels
    return out


def _pair_mean(mat: torch.Tensor, combos: torch.Tensor) -> torch.Tensor:
    s = combos.shape[1]
    pairs = list(itertools.combinations(range(s), 2))
    if not pairs:
        return torch.full((combos.shape[0],), float("nan"), dtype=torch.float64)
    return torch.stack([mat[combos[:, a], combos[:, b]] for a, b in pairs], 1).mean(1)


def _all_wrong(wrong: torch.Tensor, combos: torch.Tensor, chunk_elems: int) -> torch.Tensor:
    """Fraction of samples every member of each ensemble gets wrong, (K,), chunked over ensembles."""
    k, n = combos.shape[0], wrong.shape[1]
    out = torch.empty(k, dtype=torch.float64)
    step = max(1, chunk_elems // max(1, n))
    for lo in range(0, k, step):
        idx = combos[lo : lo + step]
        acc = wrong[idx[:, 0]].clone()
        for j in range(1, idx.shape[1]):
            acc &= wrong[idx[:, j]]
        out[lo : lo + step] = acc.double().mean(1)
    return out


def ensemble_sweep(
    logits: Any,
    labels: Any,
    *,
    size: int = 3,
    how: str = "mean_logits",
    params: Sequence[float] | torch.Tensor | None = None,
    names: Sequence[str] | None = None,
    attributions: Any = None,
    combinations: Any = None,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    chunk_elems: int = 1 << 22,
    validate_args: bool = True,
) -> pd.DataFrame:
    """Accuracy, gain and diversity of every ``size``-member ensemble of M models, vectorised.

    design-diversity Fig. 5-8 (improvement vs Eq. 4 and Eq. 7), attack-similarity Fig. 2-4 (ERR,
    "all wrong"). Columns, one row per ensemble:

    * ``members`` (tuple of indices), ``names`` ("a+b+c", if ``names`` given);
    * ``accuracy`` (of the ensemble under rule ``how``), ``best_member_accuracy``,
      ``mean_member_accuracy``;
    * ``improvement``: Y = A_ens - A_top of design-diversity Fig. 5;
    * ``err``: error reduction rate of attack-similarity §4.1, 1 - Err_ens / mean member error
      (as :func:`~ensdiv.metrics.error_reduction_rate` with ``reference="mean"``); NaN when the
      members make no error (nothing to reduce);
    * ``all_wrong``: fraction of samples every member gets wrong (attack-similarity Fig. 3c, as
      :func:`~ensdiv.metrics.all_wrong_ratio`);
    * ``disagreement`` (label-free, mean over pairs; NaN for one member), ``oracle_disagreement``
      (Eq. 4 of design-diversity, mean over pairs);
    * ``params`` (sum over members, if ``params`` given) and ``attribution_diversity`` (Eq. 7, mean
      over samples, if ``attributions`` given).

    A DataFrame, not a tensor: one row of mixed columns per ensemble.

    Args:
        logits: member logits, shape (M, N, C).
        labels: labels, shape (N,).
        size: ensemble size k (C(M, k) ensembles); ignored when ``combinations`` is given.
        how: combination rule of :func:`ensdiv.ensembles.combine`.
        params: parameter count per member, shape (M,).
        names: member names, length M.
        attributions: per-member attribution maps, shape (M, N, ...) (e.g. (M, N, C, H, W)); the
            ensemble's Σ_pixels Var_m is computed from the member Gram matrix without a loop.
        combinations: explicit ensembles to evaluate, an int tensor (K, k) of member indices.
        seed: tie-break seed for ``how="vote"`` (default 0); the sweep draws one random priority per
            (sample, class) shared by all ensembles, so its ties differ from :func:`combine`'s.
        generator: tie-break generator (overrides ``seed``).
        chunk_elems: at most this many floats per chunk of ensemble scores (bounds memory).
        validate_args: check the inputs (``False`` skips every check; an unknown rule still raises).

    Returns:
        A DataFrame with one row per ensemble.

    Shape:
        logits (M, N, C), labels (N,) -> C(M, k) rows (K rows for ``combinations`` (K, k)).

    Example:
        >>> z = torch.tensor([[[2.0, 0.0], [2.0, 0.0]], [[0.0, 1.0], [0.0, 3.0]]])  # M=2, N=2, C=2
        >>> row = ensemble_sweep(z, torch.tensor([0, 1]), size=2).iloc[0]
        >>> [float(row[k]) for k in ("accuracy", "mean_member_accuracy", "err", "all_wrong")]
        [1.0, 0.5, 1.0, 0.0]
    """
    logits = check_ensemble(logits, "logits", validate=validate_args)
    m, n, c = logits.shape
    labels = check_labels(labels, n, c, validate=validate_args)
    if how not in COMBINE_RULES:
        raise unknown_name("combination rule", how, COMBINE_RULES)
    if validate_args and n == 0:
        raise InvalidInputError("ensemble_sweep needs at least one sample, got N = 0.")
    if combinations is None:
        combos = combination_index(m, size)
    else:
        combos = as_tensor(combinations, "combinations", validate=validate_args).long()
        if validate_args and (
            combos.ndim != 2 or combos.numel() == 0 or int(combos.min()) < 0 or int(combos.max()) >= m
        ):
            raise InvalidInputError(f"combinations must be an int tensor (K, k) of member indices in 0..{m - 1}.")
    if names is not None and len(names) != m:
        raise InvalidInputError(f"names must hold one name per member ({m}), got {len(names)}.")
    gen = make_generator(seed, generator)
    logits = logits.cpu()
    if logits.dtype in (torch.bfloat16, torch.float16):
        logits = logits.float()
    labels, combos = labels.cpu(), combos.cpu()

    preds = logits.argmax(-1)  # (M, N)
    correct = (preds == labels).double()
    member_acc = correct.mean(1)
    dis_mat = disagreement_matrix(preds, validate_args=False)
    oracle_mat = (correct @ (1 - correct).T + (1 - correct) @ correct.T) / n

    ens_acc = _ensemble_correct(logits, labels, combos, how, gen, chunk_elems).double().mean(1)
    macc = member_acc[combos]
    mean_err = 1.0 - macc.mean(1)
    err = torch.where(
        mean_err > 0, 1.0 - (1.0 - ens_acc) / mean_err.clamp_min(1e-300), torch.full_like(mean_err, float("nan"))
    )
    df = pd.DataFrame(
        {
            "members": [tuple(r) for r in combos.tolist()],
            "accuracy": ens_acc.numpy(),
            "best_member_accuracy": macc.max(1).values.numpy(),
            "mean_member_accuracy": macc.mean(1).numpy(),
            "improvement": (ens_acc - macc.max(1).values).numpy(),
            "err": err.numpy(),
            "all_wrong": _all_wrong(correct == 0, combos, chunk_elems).numpy(),
            "disagreement": _pair_mean(dis_mat, combos).numpy(),
            "oracle_disagreement": _pair_mean(oracle_mat, combos).numpy(),
        }
    )
    if names is not None:
        df.insert(1, "names", ["+".join(str(names[i]) for i in r) for r in df["members"]])
    if params is not None:
        p = as_tensor(params, "params", validate=validate_args).double().cpu()
        if p.shape != (m,):
            raise InvalidInputError(f"params must be shaped (M,) = ({m},), got {tuple(p.shape)}.")
        df["params"] = p[combos].sum(1).numpy()
    if attributions is not None:
        a = as_tensor(attributions, "attributions", validate=validate_args)
        if a.ndim < 2 or a.shape[:2] != (m, n):
            raise InvalidInputError(f"attributions must be shaped (M, N, ...) = ({m}, {n}, ...), got {tuple(a.shape)}.")
        a = a.reshape(m, n, -1).double().cpu()
        gram = torch.einsum("inp,jnp->ij", a, a) / n  # mean over samples of <a_i, a_j>
        k = combos.shape[1]
        sub = gram[combos[:, :, None], combos[:, None, :]]  # (K, k, k)
        diag = sub.diagonal(dim1=1, dim2=2).sum(1)
        df["attribution_diversity"] = (diag / k - sub.sum((1, 2)) / k**2).clamp_min(0).numpy()
    return df
