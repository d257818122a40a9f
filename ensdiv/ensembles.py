"""Combining ensemble members: consensus rules, temperature scaling, greedy selection, uniform soup.

Member outputs are logits shaped (M, N, C). :func:`combine` returns (N, C) scores whose argmax is
the ensemble's prediction; which kind of score depends on the rule (see its docstring).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch

from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.metrics._checks import check_ensemble, check_labels, check_preds

__all__ = ["COMBINE_RULES", "combine", "vote", "fit_temperature", "greedy_select", "uniform_soup"]

COMBINE_RULES = ("mean_logits", "mean_probs", "median", "geometric_mean", "vote")
Rule = Literal["mean_logits", "mean_probs", "median", "geometric_mean", "vote"]


def _generator(seed: int | None, generator: torch.Generator | None) -> torch.Generator:
    if generator is not None:
        return generator
    return torch.Generator().manual_seed(0 if seed is None else int(seed))


def vote(
    preds: Any,
    *,
    num_classes: int | None = None,
    seed: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Majority vote of member predictions; ties are broken uniformly at random (seeded).

    Args:
        preds: class predictions, shape (M, N).
        num_classes: C; default the largest prediction + 1.
        seed: seed of the tie-break (default 0) when no ``generator`` is given.
        generator: a ``torch.Generator`` for the tie-break.

    Returns:
        The voted class per sample, shape (N,).
    """
    preds = check_preds(preds)
    if preds.shape[0] == 0:
        raise EnsdivError("vote needs at least one member, got M = 0.")
    c = int(num_classes) if num_classes is not None else int(preds.max()) + 1
    counts = torch.zeros(preds.shape[1], c, dtype=torch.float64)
    counts.scatter_add_(1, preds.T, torch.ones_like(preds.T, dtype=torch.float64))
    # Counts differ by >= 1, so i.i.d. jitter in [0, 0.5) only reorders tied classes, uniformly.
    jitter = torch.rand(counts.shape, generator=_generator(seed, generator), dtype=torch.float64) * 0.5
    return (counts + jitter).argmax(-1)


def combine(
    logits: Any,
    how: Rule = "mean_logits",
    *,
    seed: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Combine member logits (M, N, C) into ensemble scores (N, C).

    Rules (design-diversity §4.3 uses averaging, median, geometric mean and vote as consensus):

    * ``"mean_logits"``: mean of the logits (design-diversity Fig. 5, attack-similarity); returns logits.
    * ``"mean_probs"``: mean of the softmax probabilities (deep ensembles, packed-ensembles, SED);
      returns probabilities.
    * ``"median"``: per-class median of the members' probabilities, renormalised to sum to 1
      (for M even, the mean of the two middle values); returns probabilities.
    * ``"geometric_mean"``: normalised geometric mean of the probabilities, softmax of the mean
      log-probabilities; returns probabilities.
    * ``"vote"``: majority vote of the members' argmax, ties broken at random with ``seed`` /
      ``generator``; returns the one-hot (N, C) of the voted class (not differentiable).

    Args:
        logits: member logits, shape (M, N, C).
        how: the rule.
        seed: tie-break seed for ``"vote"`` (default 0).
        generator: tie-break generator for ``"vote"`` (overrides ``seed``).

    Returns:
        Shape (N, C); ``argmax(-1)`` is the ensemble prediction.
    """
    logits = check_ensemble(logits, "logits")
    m = logits.shape[0]
    if m == 0:
        raise EnsdivError("combine needs at least one member, got M = 0.")
    if how == "mean_logits":
        return logits.mean(0)
    if how == "mean_probs":
        return logits.softmax(-1).mean(0)
    if how == "median":
        p = logits.softmax(-1).sort(dim=0).values
        med = p[(m - 1) // 2] if m % 2 else 0.5 * (p[m // 2 - 1] + p[m // 2])
        return med / med.sum(-1, keepdim=True)
    if how == "geometric_mean":
        return logits.log_softmax(-1).mean(0).softmax(-1)
    if how == "vote":
        c = logits.shape[-1]
        winner = vote(logits.argmax(-1), num_classes=c, seed=seed, generator=generator)
        return torch.nn.functional.one_hot(winner, c).to(logits.dtype)
    raise unknown_name("combination rule", how, COMBINE_RULES)


def fit_temperature(logits: Any, labels: Any, *, max_iter: int = 100) -> torch.Tensor:
    """Temperature scaling (Guo et al. 2017): one temperature per member minimising the NLL.

    Fit on held-out validation data, then use ``logits / T[:, None, None]`` on test data
    (training-methods §3.2 calibrates every model this way before ensembling). Optimises log T
    with L-BFGS (strong-Wolfe line search); the members' losses are independent, so one joint
    optimisation of their sum gives each member's own optimum.

    Args:
        logits: validation logits, shape (M, N, C) or (N, C).
        labels: validation labels, shape (N,).
        max_iter: L-BFGS iterations.

    Returns:
        Temperatures, shape (M,) (a 0-d tensor for (N, C) input).
    """
    logits = check_ensemble(logits, "logits", ndim=(2, 3))
    single = logits.ndim == 2
    z = (logits[None] if single else logits).detach().double()
    labels = check_labels(labels, z.shape[1], z.shape[2])
    log_t = torch.zeros(z.shape[0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")
    target = labels.repeat(z.shape[0])

    def closure() -> torch.Tensor:
        opt.zero_grad()
        scaled = z / log_t.exp()[:, None, None]
        loss = (
            torch.nn.functional.cross_entropy(scaled.reshape(-1, z.shape[2]), target, reduction="sum")
            / z.shape[1]
        )
        loss.backward()
        return loss

    opt.step(closure)
    t = log_t.detach().exp().to(logits.dtype)
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
) -> tuple[list[int], list[float]]:
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

    Returns:
        ``(members, accuracies)``: the chosen indices in order, and the ensemble accuracy after
        each addition (``accuracies[0]`` is the start member alone).
    """
    logits = check_ensemble(logits, "logits")
    m = logits.shape[0]
    labels = check_labels(labels, logits.shape[1], logits.shape[2])

    def acc(idx: list[int]) -> float:
        return float((combine(logits[idx], how).argmax(-1) == labels).double().mean())

    if start is None:
        start = int(torch.tensor([acc([i]) for i in range(m)]).argmax())
    if not 0 <= start < m:
        raise EnsdivError(f"start must be a member index in 0..{m - 1}, got {start}.")
    pool = list(range(m)) if candidates is None else [int(i) for i in candidates]
    if any(not 0 <= i < m for i in pool):
        raise EnsdivError(f"candidates must be member indices in 0..{m - 1}, got {pool}.")
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
    return members, accs


def uniform_soup(state_dicts: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Uniform model soup (Wortsman et al. 2022; SED Table 2): the element-wise mean of the weights.

    Floating-point tensors are averaged; integer buffers (e.g. BatchNorm's ``num_batches_tracked``)
    are taken from the first state dict.

    Args:
        state_dicts: state dicts of models with the same architecture.

    Returns:
        A new state dict (load it with ``model.load_state_dict``).
    """
    sds = list(state_dicts)
    if not sds:
        raise EnsdivError("uniform_soup needs at least one state dict.")
    keys = list(sds[0].keys())
    out: dict[str, Any] = {}
    for i, sd in enumerate(sds[1:], start=1):
        if set(sd.keys()) != set(keys):
            diff = sorted(set(sd.keys()) ^ set(keys))[:3]
            raise EnsdivError(
                f"State dict {i} has other keys than state dict 0 (e.g. {diff}); soups need one architecture."
            )
    for k in keys:
        ts = [sd[k] for sd in sds]
        shapes = {tuple(t.shape) for t in ts}
        if len(shapes) > 1:
            raise EnsdivError(f"Parameter {k!r} has different shapes across state dicts: {sorted(shapes)}.")
        if ts[0].is_floating_point():
            out[k] = torch.stack([t.detach().to(torch.float64) for t in ts]).mean(0).to(ts[0].dtype)
        else:
            out[k] = ts[0].clone()
    return out
