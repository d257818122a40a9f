"""Adversarial attacks in [0, 1] pixel space: PGD (the SAT paper's attack), APGD-CE and MI-FGSM, and
the library versions of APGD-CE and AutoAttack from ``torchattacks`` (:func:`apgd_ce`, :func:`autoattack`).

Every attack works on images in [0, 1] at the dataset's resolution. A model may declare its own
input pipeline (ImageNet timm models do, through ``pretrained_cfg``); :func:`~ensdiv.models.input_spec` reads it and
:func:`forward_pixels` applies it: resize to the model's input size, then normalise. As in the SAT
paper (attack-similarity §2), an attack on model A is made at A's resolution, and a target model B with
another resolution sees the attacked image resized to B's ("we resize the attacked image from the
source network for the target network").

Defaults. The paper's text says "PGD (Madry et al., 2018)" and "50 iterations" (App. H); it does not
give ε, the step size or the norm. We choose the most common ImageNet setting: L∞, ε = 8/255, step
α = 2/255, a uniform random start. At ``cpu`` scale (Fashion-MNIST) the same values drive small models'
accuracy to ~0 (see tests/test_attacks.py).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.models.input_spec import forward_pixels, input_spec, resize_to

__all__ = [
    "pgd", "apgd", "apgd_checkpoints", "mi_fgsm", "apgd_ce", "autoattack", "ATTACKS",
    "run_attack", "PGD_DEFAULTS",
]

#: PGD settings used when none are given — 50 steps (App. H); ε, α, norm are our choice (see module doc).
PGD_DEFAULTS = {"eps": 8 / 255, "alpha": 2 / 255, "steps": 50, "norm": "linf", "random_start": True}


def _check(x: torch.Tensor, y: torch.Tensor, eps: float, steps: int) -> None:
    if x.ndim != 4:
        raise EnsdivError(f"An attack needs images shaped (N, C, H, W), got {tuple(x.shape)}.")
    if y.shape != (x.shape[0],):
        raise EnsdivError(
            f"An attack needs one label per image: {x.shape[0]} images but labels of shape {tuple(y.shape)}."
        )
    if float(x.min()) < 0 or float(x.max()) > 1:
        raise EnsdivError("Attacks work in [0, 1] pixel space; the images have values outside [0, 1].")
    if eps < 0 or steps < 0:
        raise EnsdivError(f"eps and steps must be non-negative, got eps={eps!r}, steps={steps!r}.")


def _l2_normalise(g: torch.Tensor) -> torch.Tensor:
    return g / g.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, 1, 1, 1)


def _project(delta: torch.Tensor, eps: float, norm: str) -> torch.Tensor:
    if norm == "linf":
        return delta.clamp(-eps, eps)
    n = delta.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
    return delta * torch.clamp(eps / n.clamp_min(1e-12), max=1.0)


def _batched(model, x, y, *, eps, steps, batch_size, attack_batch) -> torch.Tensor:
    """Shared frame of every attack: check the input, resize to the source model's own resolution, run
    ``attack_batch(xb, yb, spec, device)`` per batch in eval mode, restore the mode, return the images."""
    _check(x, y, eps, steps)
    spec = input_spec(model)
    was_training = model.training
    model.eval()
    device = next(model.parameters(), torch.empty(0)).device
    x = resize_to(x.float(), spec.size)  # attack at the source model's own resolution
    outs = [attack_batch(x[i : i + batch_size].to(device), y[i : i + batch_size].to(device), spec, device).cpu()
            for i in range(0, len(x), batch_size)]  # fmt: skip
    model.train(was_training)
    return torch.cat(outs) if outs else x.clone()


def _iterate(model, x, y, *, eps, alpha, steps, norm, random_start, seed, momentum, batch_size):
    if norm not in ("linf", "l2"):
        raise unknown_name("norm", norm, ["linf", "l2"])
    gen = torch.Generator().manual_seed(int(seed))

    def attack_batch(xb, yb, spec, device):
        delta = torch.zeros_like(xb)
        if random_start and eps > 0:
            if norm == "linf":
                delta = (torch.rand(xb.shape, generator=gen) * 2 - 1).to(device) * eps
            else:
                r = torch.randn(xb.shape, generator=gen).to(device)
                delta = _l2_normalise(r) * eps * torch.rand(len(xb), 1, 1, 1, generator=gen).to(device)
            delta = (xb + delta).clamp(0, 1) - xb
        g_acc = torch.zeros_like(xb)
        for _ in range(steps):
            delta.requires_grad_(True)
            with torch.enable_grad():
                loss = F.cross_entropy(forward_pixels(model, xb + delta, spec), yb, reduction="sum")
                (grad,) = torch.autograd.grad(loss, delta)
            delta = delta.detach()
            if momentum is not None:  # MI-FGSM: accumulate L1-normalised gradients
                l1 = grad.abs().flatten(1).mean(1).clamp_min(1e-12).view(-1, 1, 1, 1)
                g_acc = momentum * g_acc + grad / l1
                grad = g_acc
            step = grad.sign() if norm == "linf" else _l2_normalise(grad)
            delta = _project(delta + alpha * step, eps, norm)
            delta = (xb + delta).clamp(0, 1) - xb
        return (xb + delta).detach()

    return _batched(model, x, y, eps=eps, steps=steps, batch_size=batch_size, attack_batch=attack_batch)


def pgd(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    eps: float = PGD_DEFAULTS["eps"],
    alpha: float = PGD_DEFAULTS["alpha"],
    steps: int = PGD_DEFAULTS["steps"],
    norm: str = "linf",
    random_start: bool = True,
    seed: int = 0,
    batch_size: int = 256,
) -> torch.Tensor:
    """Untargeted projected gradient descent (Madry et al. 2018), the attack of attack-similarity §2.

    Each step ascends the cross-entropy of ``model`` by ``alpha`` along the sign of the input gradient
    (L∞) or the normalised gradient (L2), projects back onto the ε-ball around ``x`` and onto [0, 1].

    Args:
        model: classifier; its own resize/normalisation (:func:`~ensdiv.models.input_spec`) is applied inside.
        x: clean images in [0, 1].
        y: true labels.
        eps: radius of the perturbation ball (in [0, 1] pixel units).
        alpha: step size.
        steps: number of steps (paper: 50).
        norm: ``"linf"`` (default) or ``"l2"``.
        random_start: start from a uniform random point in the ball (seeded by ``seed``).
        seed: seed of the random start.
        batch_size: images attacked at once.

    Returns:
        Adversarial images in [0, 1] at the model's input resolution (the data's when it has none).

    Shape:
        x: (N, C, H, W), y: (N,) → (N, C, H', W').
    """
    return _iterate(model, x, y, eps=eps, alpha=alpha, steps=steps, norm=norm, random_start=random_start,
                    seed=seed, momentum=None, batch_size=batch_size)


def mi_fgsm(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    eps: float = PGD_DEFAULTS["eps"],
    alpha: float | None = None,
    steps: int = 10,
    decay: float = 1.0,
    norm: str = "linf",
    seed: int = 0,
    batch_size: int = 256,
) -> torch.Tensor:
    """Momentum iterative FGSM (Dong et al. 2018): the second attack of our Fig. G.1.

    Gradients are L1-normalised and accumulated with momentum ``decay`` (μ = 1 in the original);
    steps of ``alpha`` (default ε / steps) along the sign of the accumulated gradient, no random start.
    ``steps=1`` gives FGSM. The paper's Fig. G.1 uses AutoAttack and PatchFool, which we do not
    reimplement; a momentum attack is known to transfer *better* than PGD, so it is a harder test of
    whether the similarity ranking depends on the attack.

    Returns:
        Adversarial images in [0, 1]; shapes as :func:`pgd`.
    """
    alpha = eps / max(steps, 1) if alpha is None else alpha
    return _iterate(model, x, y, eps=eps, alpha=alpha, steps=steps, norm=norm, random_start=False,
                    seed=seed, momentum=decay, batch_size=batch_size)


def apgd_checkpoints(steps: int) -> list[int]:
    """The iterations where APGD may halve its step (Croce & Hein 2020, §3.2).

    ``p_0 = 0``, ``p_1 = 0.22``, ``p_{j+1} = p_j + max(p_j − p_{j−1} − 0.03, 0.06)``; checkpoint
    ``w_j = ⌈p_j · steps⌉`` for every ``0 < p_j ≤ 1``. For 100 steps: 22, 41, 57, 70, 80, 87, 93, 99.
    """
    import math

    ps, out = [0.0, 0.22], []
    while ps[-1] <= 1:
        w = math.ceil(round(ps[-1] * steps, 9))
        if w > 0 and (not out or w > out[-1]):
            out.append(w)
        ps.append(ps[-1] + max(ps[-1] - ps[-2] - 0.03, 0.06))
    return out


def apgd(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    eps: float = PGD_DEFAULTS["eps"],
    steps: int = 50,
    rho: float = 0.75,
    momentum: float = 0.75,
    random_start: bool = True,
    seed: int = 0,
    batch_size: int = 256,
) -> torch.Tensor:
    """APGD-CE, L∞ (Croce & Hein 2020, Alg. 1): the first attack of AutoAttack, which Fig. G.1 of the SAT
    paper uses as its second attack.

    A PGD without a step-size parameter: the step starts at 2ε, takes a momentum step
    ``x_{k+1} = P(x_k + μ(z_{k+1} − x_k) + (1 − μ)(x_k − x_{k−1}))`` with ``z_{k+1} = P(x_k + η sign ∇)``,
    and is halved per image at the checkpoints of :func:`apgd_checkpoints` when (1) the loss rose in
    fewer than ``rho`` of the steps since the last checkpoint, or (2) neither the step nor the best loss
    changed since then; a halving restarts that image from its best point (and resets its momentum,
    a choice the paper leaves open). Returns each image's highest-loss point.

    Args:
        model: classifier (its own resize/normalisation is applied, as :func:`pgd`).
        x: clean images in [0, 1]. y: true labels.
        eps: L∞ radius. steps: iterations (AutoAttack uses 100).
        rho: checkpoint condition 1's fraction (paper: 0.75). momentum: μ (paper: 0.75).
        random_start: start from a uniform point of the ball (seeded by ``seed``).
        batch_size: images attacked at once.

    Returns:
        Adversarial images in [0, 1]; shapes as :func:`pgd`.
    """
    gen = torch.Generator().manual_seed(int(seed))
    checkpoints = set(apgd_checkpoints(steps))

    def attack_batch(x0, yb, spec, device):
        def proj(z: torch.Tensor) -> torch.Tensor:
            return (x0 + (z - x0).clamp(-eps, eps)).clamp(0, 1)

        def loss_grad(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            z = z.detach().requires_grad_(True)
            with torch.enable_grad():
                losses = F.cross_entropy(forward_pixels(model, z, spec), yb, reduction="none")
                (g,) = torch.autograd.grad(losses.sum(), z)
            return losses.detach(), g.detach()

        start = x0
        if random_start and eps > 0:
            start = proj(x0 + (torch.rand(x0.shape, generator=gen).to(device) * 2 - 1) * eps)
        view = (-1, *([1] * (x0.dim() - 1)))
        eta = torch.full((len(x0),), 2.0 * eps, device=device)
        cur, prev = start.clone(), start.clone()
        loss, grad = loss_grad(cur)
        best_x, best_l = cur.clone(), loss.clone()
        eta_ck, best_ck = eta.clone(), best_l.clone()
        rises, last_ck = torch.zeros(len(x0), device=device), 0
        for k in range(steps):
            z = proj(cur + eta.view(view) * grad.sign())
            new = z if k == 0 else proj(cur + momentum * (z - cur) + (1 - momentum) * (cur - prev))
            new_loss, new_grad = loss_grad(new)
            rises += (new_loss > loss).float()
            better = new_loss > best_l
            best_x[better], best_l[better] = new[better], new_loss[better]
            prev, cur, loss, grad = cur, new, new_loss, new_grad
            if k + 1 in checkpoints:
                halve = (rises < rho * (k + 1 - last_ck)) | ((eta == eta_ck) & (best_l == best_ck))
                eta_ck, best_ck = eta.clone(), best_l.clone()
                eta = torch.where(halve, eta / 2, eta)
                if bool(halve.any()):
                    cur[halve] = best_x[halve]
                    prev[halve] = best_x[halve]
                    loss, grad = loss_grad(cur)
                rises.zero_()
                last_ck = k + 1
        return best_x

    return _batched(model, x, y, eps=eps, steps=steps, batch_size=batch_size, attack_batch=attack_batch)


class _Pixels(nn.Module):
    """``model`` behind its own input pipeline: [0, 1] images at the model's resolution in, logits out."""

    def __init__(self, model: nn.Module, spec):
        super().__init__()
        self.model, self.spec = model, spec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return forward_pixels(self.model, x, self.spec)


def _torchattacks(make, model, x, y, *, eps, steps, batch_size):
    """Run the torchattacks attack ``make(wrapped_model, first_batch)`` per batch through :func:`_batched`."""

    def attack_batch(xb, yb, spec, device):
        wrapped = _Pixels(model, spec).eval()
        atk = make(wrapped, xb)
        atk.set_device(device)
        return atk(xb, yb).detach()

    return _batched(model, x, y, eps=eps, steps=steps, batch_size=batch_size, attack_batch=attack_batch)


def apgd_ce(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    eps: float = PGD_DEFAULTS["eps"],
    steps: int = 100,
    n_restarts: int = 1,
    rho: float = 0.75,
    seed: int = 0,
    batch_size: int = 256,
) -> torch.Tensor:
    """APGD-CE, L∞ (Croce & Hein 2020), as implemented by ``torchattacks.APGD`` (``loss="ce"``).

    AutoAttack's first attack, from a maintained library; the SAT paper's Fig. G.1 compares PGD with
    AutoAttack. The model's own resize/normalisation is applied inside, as :func:`pgd`. :func:`apgd`
    is our transcription of the same algorithm (kept for its tests against the paper's pseudo-code).

    Args:
        model: classifier. x: clean images in [0, 1]. y: true labels.
        eps: L∞ radius. steps: iterations (AutoAttack: 100). n_restarts: random restarts.
        rho: checkpoint condition (paper: 0.75). seed: torchattacks' seed of the random start.
        batch_size: images attacked at once.

    Returns:
        Adversarial images in [0, 1]; shapes as :func:`pgd`.
    """
    import torchattacks

    def make(m, _xb):
        return torchattacks.APGD(m, norm="Linf", eps=eps, steps=steps, n_restarts=n_restarts, seed=int(seed),
                                 loss="ce", rho=rho)

    return _torchattacks(make, model, x, y, eps=eps, steps=steps, batch_size=batch_size)


def autoattack(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    eps: float = PGD_DEFAULTS["eps"],
    version: str = "standard",
    seed: int = 0,
    batch_size: int = 256,
) -> torch.Tensor:
    """AutoAttack, L∞ (Croce & Hein 2020), as implemented by ``torchattacks.AutoAttack``.

    The ``"standard"`` version runs APGD-CE, APGD-T, FAB-T and Square (5,000 queries) in turn on the
    images not yet fooled; ``"rand"`` runs APGD-CE and APGD-DLR with EOT. The number of classes is read
    from one forward pass. This is the paper's second attack of Fig. G.1, and expensive: Square alone
    makes 5,000 forward passes per image the other attacks failed on.

    Returns:
        Adversarial images in [0, 1]; shapes as :func:`pgd`.
    """
    import torchattacks

    if version not in ("standard", "plus", "rand"):
        raise unknown_name("AutoAttack version", version, ["standard", "plus", "rand"])

    def make(m, xb):
        with torch.no_grad():
            n_classes = int(m(xb[:1]).shape[-1])
        return torchattacks.AutoAttack(m, norm="Linf", eps=eps, version=version, n_classes=n_classes, seed=int(seed))

    return _torchattacks(make, model, x, y, eps=eps, steps=0, batch_size=batch_size)


#: Attacks by name (for :func:`ensdiv.transfer.sat_matrix`): ours, and torchattacks' APGD-CE and AutoAttack.
ATTACKS = {"pgd": pgd, "apgd": apgd, "mi_fgsm": mi_fgsm, "apgd_ce": apgd_ce, "autoattack": autoattack}


def run_attack(name: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor, **kwargs) -> torch.Tensor:
    """Run the attack called ``name`` (a key of :data:`ATTACKS`) with keyword options ``kwargs``."""
    if name not in ATTACKS:
        raise unknown_name("attack", name, ATTACKS)
    return ATTACKS[name](model, x, y, **kwargs)
