"""Combining ensemble members: consensus rules, temperature scaling, greedy selection, uniform soup.

Member outputs are logits shaped (M, N, C). :func:`combine` returns (N, C) scores whose argmax is
the ensemble's prediction; which kind of score depends on the rule (see its docstring). The rules
themselves (:func:`combine`, :func:`vote`, ``COMBINE_RULES``) live in :mod:`ensdiv.metrics.combine`,
so the metrics layer below can use them; this module re-exports them. Bad inputs raise
:class:`~ensdiv.errors.InvalidInputError` (an ``EnsdivError`` and a ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ensdiv.errors import InvalidInputError
from ensdiv.metrics.checks import check_ensemble, check_labels, compute_dtype
from ensdiv.metrics.combine import COMBINE_RULES, Rule, combine, vote

__all__ = ["COMBINE_RULES", "combine", "vote", "fit_temperature", "greedy_select", "uniform_soup"]


def fit_temperature(logits: Any, labels: Any, *, max_iter: int = 100, validate_args: bool = True) -> torch.Tensor:
    """Temperature scaling (Guo et al. 2017): one temperature per member minimising the NLL.

    Fit on held-out validation data, then use ``logits / T[:, None, None]`` on test data
    (training-methods §3.2 calibrates every model this way before ensembling). Minimises
    (1/N) Σ_n -ln softmax(z_n / T)_{y_n} over log T with L-BFGS (strong-Wolfe line search), in
    float64; the members' losses are independent, so one joint optimisation of their sum gives each
    member's own optimum.

    Args:
        logits: validation logits, shape (M, N, C) or (N, C).
        labels: validation labels, shape (N,).
        max_iter: L-BFGS iterations.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        Temperatures in :func:`~ensdiv.metrics.checks.compute_dtype` of the logits (float32 for bf16).

    Shape:
        logits (M, N, C) -> (M,); logits (N, C) -> () (0-d).

    Example:
        >>> z = torch.tensor([[4.0, 0.0], [4.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
        >>> y = torch.tensor([0, 0, 1, 1])  # 3 of 4 right: the NLL-optimal softmax confidence is 3/4
        >>> t = fit_temperature(z, y)
        >>> round(float(torch.softmax(z[0] / t, -1)[0]), 3)
        0.75
    """
    logits = check_ensemble(logits, "logits", ndim=(2, 3), validate=validate_args)
    single = logits.ndim == 2
    z = (logits[None] if single else logits).detach().double()
    labels = check_labels(labels, z.shape[1], z.shape[2], validate=validate_args)
    log_t = torch.zeros(z.shape[0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")
    target = labels.repeat(z.shape[0])

    def closure() -> torch.Tensor:
        opt.zero_grad()
        scaled = z / log_t.exp()[:, None, None]
        loss = torch.nn.functional.cross_entropy(scaled.reshape(-1, z.shape[2]), target, reduction="sum") / z.shape[1]
        loss.backward()
        return loss

    opt.step(closure)
    t = log_t.detach().exp().to(compute_dtype(logits.dtype))
    return t[0] if single else t


def greedy_select(
    logits: Any,
    labels: Any,
    *,
    start: int | None = None,
    max_size: int | None = None,
    how: Rule = "mean_probs",
    candidates: Sequence[int] | None = None,
    with_replacement: bool = False,
    validate_args: bool = True,
) -> tuple[list[int], torch.Tensor]:
    """Greedy forward ensemble selection in output space (training-methods §4.5, Fig. 5).

    Starts from ``start`` (default the most accurate member), then repeatedly adds the candidate
    whose addition gives the most accurate ensemble, and stops when no candidate improves the
    accuracy or ``max_size`` members are reached (Caruana et al. 2004 without replacement by
    default). Select on validation data and report accuracy on test data.

    Args:
        logits: member logits on the selection set, shape (M, N, C).
        labels: labels of the selection set, shape (N,).
        start: index of the first member (the paper's high-accuracy model).
        max_size: largest ensemble (default M).
        how: combination rule (see :func:`combine`; ``"vote"`` uses seed 0).
        candidates: indices that may be added (default all others).
        with_replacement: allow a member to be added more than once (weights it).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        ``(members, accuracies)``: the chosen indices in order (a list), and a float64 tensor of the
        ensemble accuracy after each addition (``accuracies[0]`` is the start member alone).

    Shape:
        logits (M, N, C), labels (N,) -> members: K ints, accuracies (K,), K <= max_size.

    Example:
        >>> z = torch.tensor([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]])  # M=2, N=2
        >>> members, accs = greedy_select(z, torch.tensor([0, 0]))
        >>> members, accs.tolist()  # member 0 is always right; adding member 1 cannot help
        ([0], [1.0])
    """
    logits = check_ensemble(logits, "logits", validate=validate_args)
    m = logits.shape[0]
    labels = check_labels(labels, logits.shape[1], logits.shape[2], validate=validate_args)

    def acc(idx: list[int]) -> float:
        return float((combine(logits[idx], how, validate_args=False).argmax(-1) == labels).double().mean())

    if start is None:
        start = int(torch.tensor([acc([i]) for i in range(m)]).argmax())
    if not 0 <= start < m:
        raise InvalidInputError(f"start must be a member index in 0..{m - 1}, got {start}.")
    pool = list(range(m)) if candidates is None else [int(i) for i in candidates]
    if any(not 0 <= i < m for i in pool):
        raise InvalidInputError(f"candidates must be member indices in 0..{m - 1}, got {pool}.")
    max_size = m if max_size is None else int(max_size)
    members, accs = [start], [acc([start])]
    while len(members) < max_size:
        options = [i for i in pool if with_replacement or i not in members]
        if not options:
            break
        scores = [acc(members + [i]) for i in options]
        best = max(range(len(options)), key=lambda k: scores[k])
        if scores[best] <= accs[-1]:
            break
        members.append(options[best])
        accs.append(scores[best])
    return members, torch.tensor(accs, dtype=torch.float64)


def uniform_soup(state_dicts: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Uniform model soup (Wortsman et al. 2022; SED Table 2): the element-wise mean of the weights.

    Floating-point tensors are averaged; integer buffers (e.g. BatchNorm's ``num_batches_tracked``)
    are taken from the first state dict.

    Args:
        state_dicts: state dicts of models with the same architecture.

    Returns:
        A new state dict (load it with ``model.load_state_dict``).

    Shape:
        K state dicts with equal keys and shapes -> one state dict with those keys and shapes.

    Example:
        >>> uniform_soup([{"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([3.0, 6.0])}])["w"].tolist()
        [2.0, 4.0]
    """
    sds = list(state_dicts)
    if not sds:
        raise InvalidInputError("uniform_soup needs at least one state dict.")
    keys = list(sds[0].keys())
    out: dict[str, Any] = {}
    for i, sd in enumerate(sds[1:], start=1):
        if set(sd.keys()) != set(keys):
            diff = sorted(set(sd.keys()) ^ set(keys))[:3]
            raise InvalidInputError(
                f"State dict {i} has other keys than state dict 0 (e.g. {diff}); soups need one architecture."
            )
    for k in keys:
        ts = [sd[k] for sd in sds]
        shapes = {tuple(t.shape) for t in ts}
        if len(shapes) > 1:
            raise InvalidInputError(f"Parameter {k!r} has different shapes across state dicts: {sorted(shapes)}.")
        if ts[0].is_floating_point():
            out[k] = torch.stack([t.detach().to(torch.float64) for t in ts]).mean(0).to(ts[0].dtype)
        else:
            out[k] = ts[0].clone()
    return out
