"""The SED chapter's cost page: the training step time of SED and of the naive losses against ensemble size
(Rubinstein et al. §4.4), on heads of the width SED trains, and the exponent of time ∝ M^k."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

import ensdiv as ed
from ensdiv.errors import unknown_name
from ensdiv.models.stack import HeadStack, TokenMLPHead

__all__ = ["TIMED_LOSSES", "timing_head", "time_steps", "time_loss", "fit_exponent"]


#: The ensemble losses the cost page times: SED on its member subset, and the naive variants on every member.
TIMED_LOSSES = ("sed", "naive_a2d", "naive_divdis")


def timing_head(kind: str, dim: int, classes: int, hidden: int) -> nn.Module:
    """One member head of the cost benchmark: ``linear`` (a classifier on ``dim`` features) or ``block`` — the
    head SED trains on a frozen ViT (:class:`~ensdiv.models.stack.TokenMLPHead`: the last block's MLP branch of
    width ``hidden``, the final norms and the classifier) at width ``dim``."""
    if kind == "linear":
        return nn.Linear(dim, classes)
    if kind == "block":
        import timm.layers

        return TokenMLPHead(nn.LayerNorm(dim), timm.layers.Mlp(dim, hidden), nn.Identity(), nn.LayerNorm(dim),
                            nn.Identity(), nn.Linear(dim, classes))
    raise unknown_name("timing head", kind, ("linear", "block"))


def time_steps(members: int, loss: str, *, head: str = "linear", dim: int = 48, hidden: int = 96,
               classes: int = 10, batch: int = 64, steps: int = 30, repeats: int = 3, subset: int = 2,
               pairs: str = "all", lam: float = 1.0, seed: int = 0, device: str = "cpu") -> float:
    """Median seconds per training step (forward, loss, backward, AdamW step) of ``members`` heads
    (:func:`timing_head`) on random features: ``sed`` (only its |I| = ``subset`` members are forwarded and
    trained, as in SED's code) or a naive loss over every member on a labelled batch plus an unlabeled batch
    of the same size — ``naive_a2d`` with ``pairs`` ``all`` / ``one_vs_rest``, or ``naive_divdis``."""
    if loss not in TIMED_LOSSES:
        raise unknown_name("timed loss", loss, TIMED_LOSSES)
    torch.manual_seed(seed)
    heads = [timing_head(head, dim, classes, hidden) for _ in range(members)]
    paired = loss != "sed"
    fn = ed.losses.ensemble_loss(loss)
    opts = {"pairs": pairs} if loss == "naive_a2d" else {}
    stack = HeadStack(heads, loss_fn=lambda lg, y: fn(lg, y, lam=lam, **opts), subset=0 if paired else subset,
                      paired_ood=paired).to(device)
    opt = torch.optim.AdamW(stack.parameters(), lr=1e-3)
    x = torch.randn(batch, 2 * dim if paired else dim, device=device)
    y = torch.randint(0, classes, (batch,), device=device)
    times = []
    for _ in range(repeats):
        if device != "cpu":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            stack.training_loss(x, y).backward()
            opt.step()
        if device != "cpu":
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - t0) / steps)
    return float(np.median(times))


def time_loss(members: int, loss: str, *, classes: int = 10, batch: int = 64, steps: int = 20, pairs: str = "all",
              subset: int = 2, lam: float = 1.0, seed: int = 0, device: str = "cpu") -> float:
    """Median seconds of the ensemble loss alone — its forward and backward on given member logits, the members'
    own forwards left out — over ``steps`` calls after two warm-up calls: the term whose cost §4.4 states (pairs of
    members). ``sed`` computes it on |I| = ``subset`` drawn members; a naive loss on every member, over a labelled
    batch and an unlabeled batch of ``batch`` samples each (``pairs`` for ``naive_a2d``)."""
    if loss not in TIMED_LOSSES:
        raise unknown_name("timed loss", loss, TIMED_LOSSES)
    gen = torch.Generator().manual_seed(seed)
    paired = loss != "sed"
    logits = torch.randn(members, 2 * batch if paired else batch, classes, generator=gen).to(device)
    logits.requires_grad_(True)
    y = torch.randint(0, classes, (batch,), generator=gen).to(device)
    fn = ed.losses.ensemble_loss(loss)
    opts = {"pairs": pairs} if loss == "naive_a2d" else {} if paired else {"subset": subset, "generator": gen}
    times = []
    for i in range(steps + 2):
        if device != "cpu":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn(logits, y, lam=lam, **opts).backward()
        if device != "cpu":
            torch.cuda.synchronize(device)
        if i >= 2:
            times.append(time.perf_counter() - t0)
        logits.grad = None
    return float(np.median(times))


def fit_exponent(sizes: Sequence[int], seconds: Sequence[float]) -> float:
    """Slope of log(seconds) against log(M): the exponent k of time ∝ M^k."""
    x, y = np.log(np.asarray(sizes, float)), np.log(np.asarray(seconds, float))
    return float(np.polyfit(x, y, 1)[0]) if len(x) > 1 and np.isfinite(y).all() else math.nan

