"""Jointly trained ensembles (Fig. 10, Sec. 4.3.1): one ``ed.Joint`` recipe per loss and λ, trained and cached by
:func:`ensdiv.train_recipe`, and how each run ended (:class:`JointRun`).

**Divergence is a result.** A run whose loss becomes non-finite stops (``train_recipe(..., on_diverge="stop")``);
:func:`train_joint` reads the engine's fit report: the epoch and step, the last finite loss, and the members of
the last finished epoch, cached like a finished run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

import ensdiv as ed
from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.losses import ENSEMBLE_LOSSES, INPUT_LOSSES
from ensdiv.train import model_cache_config

#: the recipe loss name of Eq. 8 (:func:`ensdiv.losses.attribution_penalty`, in ``ensdiv.losses.INPUT_LOSSES``)
ATTRIBUTION_LOSS = "attribution_penalty"

#: Fig. 10's heuristics: label -> (loss name, options); every GNCL run and the balanced loss use λ = cfg.lam
HEURISTICS: dict[str, tuple[str, dict]] = {
    "independent": ("independent", {}),
    "GNCL average": ("gncl_mean", {}),
    "GNCL median": ("gncl_median", {}),
    "GNCL geometric": ("gncl_geometric", {}),
    "GNCL vote": ("gncl_vote", {}),
    "masked GNCL": ("gncl_masked", {}),
    "balanced (Eq. 3)": ("balanced", {}),
}

#: what the paper reports for Fig. 10 (no numbers are printed; the observation's counts)
PAPER_FIG10_CLAIMS = {"corruptions where balanced beats every GNCL variant": 3, "corruptions": 4}


def joint_recipe(cfg: Any, loss: str, lam: float, options: dict | None = None, *, seed: int | None = None,
                 **changes: Any) -> ed.Recipe:
    """The recipe of a jointly trained ensemble of ``cfg.members`` copies of ``cfg.member_model``: AdaBelief
    (lr, eps 1e-8, β = (0.9, 0.999)), the step schedule, no weight decay, ``cfg.train_subset`` images for
    ``cfg.epochs`` epochs, initialisation and data-order seed ``seed`` (default ``cfg.seed``; ``changes`` override
    any other flat recipe field)."""
    if loss not in ENSEMBLE_LOSSES and loss not in INPUT_LOSSES:
        raise unknown_name("ensemble loss", loss, [*ENSEMBLE_LOSSES, *INPUT_LOSSES])
    r = ed.Recipe.make(model=cfg["member_model"], model_kwargs=dict(cfg["member_kwargs"]), dataset=cfg["train_set"],
                       train_subset=cfg["train_subset"], epochs=cfg["epochs"], batch_size=cfg["batch_size"],
                       optimizer="adabelief", lr=cfg["lr"], eps=1e-8, weight_decay=0.0,
                       schedule=cfg.get("schedule", "step"), milestones=list(cfg.get("milestones") or []),
                       augment=cfg["augment"], seed=cfg["seed"] if seed is None else seed,
                       **({"lr_decay": cfg["lr_decay"]} if cfg.get("lr_decay") else {}))  # fmt: skip
    r = r.replace(method=ed.Joint(members=cfg["members"], loss=loss, lam=float(lam), options=dict(options or {})))
    return r.replace(**changes) if changes else r


@dataclass
class JointRun:
    """One jointly trained ensemble: how its training ended (the engine's fit report) and its members (those of
    the last finished epoch)."""

    recipe: ed.Recipe
    label: str
    status: str  # "finished" | "diverged"
    epochs_done: int
    history: list[float]  # mean training loss of each finished epoch
    diverged_epoch: int | None = None
    diverged_step: int | None = None  # global optimisation step (1-based) whose loss was non-finite
    last_finite_loss: float | None = None
    train_time_s: float = 0.0
    members: list[nn.Module] = field(default_factory=list)
    cause: str | None = None  # "loss" (a non-finite loss) or "weights" (non-finite weights at an epoch's end)

    def row(self) -> dict:
        return {"run": self.label, "loss": self.recipe.method.loss, "λ": self.recipe.method.lam, "status": self.status,
                "epochs finished": self.epochs_done, "diverged at epoch": self.diverged_epoch,
                "diverged at step": self.diverged_step, "last finite loss": self.last_finite_loss,
                "last epoch loss": self.history[-1] if self.history else None,
                "train time (s)": round(self.train_time_s, 1)}  # fmt: skip


def train_joint(recipe: ed.Recipe, label: str = "") -> JointRun:
    """Train (once: :func:`ensdiv.train_recipe` with ``on_diverge="stop"``, cached as the recipe's model) the
    jointly trained ensemble of ``recipe`` and return its :class:`JointRun`. A non-finite loss ends the run as
    ``"diverged"`` (not an exception); its members are those of the last finished epoch (none when it diverged
    in the first epoch). Each member carries ``ensdiv_cache_id`` (the recipe's model key and its index) and
    ``ensdiv_name``."""
    stack = ed.train_recipe(recipe, on_diverge="stop")
    meta = stack.ensdiv_meta
    # an entry cached before the engine recorded fit reports finished every epoch (a diverged run raised then)
    rep = meta.get("fit") or {"status": "finished", "epochs_done": recipe.optim.epochs, "history": []}
    run = JointRun(recipe, label or recipe.method.loss, rep["status"], int(rep["epochs_done"]), list(rep["history"]),
                   rep.get("diverged_epoch"), rep.get("diverged_step"), rep.get("last_finite_loss"),
                   float(meta["train_time_s"]), cause=rep.get("cause"))  # fmt: skip
    if run.epochs_done > 0:
        key = model_cache_config(recipe)
        for i, m in enumerate(stack.members):
            m.eval()
            m.ensdiv_cache_id = {"model": key, "member": i}
            m.ensdiv_name = f"{run.label} [{i}]"
        run.members = list(stack.members)
    return run


def joint_members(run: JointRun) -> list[nn.Module]:
    """The run's members; one clear sentence when it has none (diverged in its first epoch)."""
    if not run.members:
        raise EnsdivError(f"The run {run.label!r} diverged at step {run.diverged_step} of its first epoch: it has no "
                          "finished epoch to evaluate.")
    return run.members


def _attr_recipe(cfg: Any, lam: float, seed: int | None = None) -> ed.Recipe:
    return joint_recipe(cfg, ATTRIBUTION_LOSS, lam, train_subset=cfg["attr_train_subset"], epochs=cfg["attr_epochs"],
                        seed=seed)


def heuristic_runs(cfg: Any, seed: int | None = None) -> dict[str, JointRun]:
    """Fig. 10: one jointly trained ensemble per heuristic of :data:`HEURISTICS` (λ = 0 for ``independent``), with
    initialisation and data-order seed ``seed`` (default ``cfg.seed``)."""
    return {label: train_joint(joint_recipe(cfg, loss, 0.0 if loss == "independent" else cfg["lam"], opts, seed=seed),
                               label)
            for label, (loss, opts) in HEURISTICS.items()}


#: Fig. 10 evaluated as the paper runs it: each heuristic's ensemble combined by its own consensus rule
#: (:func:`ensdiv.losses.consensus_distribution`); the rules without a consensus of their own (independent,
#: masked GNCL, balanced) combine by averaging the logits, as GNCL's average consensus does.
EVAL_CONSENSUS = {"independent": "mean", "GNCL average": "mean", "GNCL median": "median",
                  "GNCL geometric": "geometric", "GNCL vote": "vote", "masked GNCL": "mean", "balanced (Eq. 3)": "mean"}


def consensus_correct(logits: torch.Tensor, labels: torch.Tensor, how: str = "mean") -> np.ndarray:
    """Per image, whether the ensemble's consensus distribution (``how``: ``mean`` — softmax of the mean logits,
    ``median``, ``geometric``, ``vote``; :func:`ensdiv.losses.consensus_distribution`) puts its largest mass on
    the label; a vote tie goes to the lower class index. Shape: logits (M, N, C), labels (N,) -> (N,) booleans."""
    return (ed.losses.consensus_distribution(logits, how).argmax(-1) == labels).numpy()


def attr_sweep(cfg: Any, seed: int | None = None) -> list[JointRun]:
    """Sec. 4.3.1: one attribution-penalty run per λ of ``cfg.lams``, with seed ``seed`` (default ``cfg.seed``)."""
    return [train_joint(_attr_recipe(cfg, lam, seed), f"λ = {lam:g}") for lam in cfg["lams"]]


#: the label of the λ = 0 control (:func:`attr_control`)
CONTROL = "λ = 0 (independent)"


def control_recipe(cfg: Any, seed: int | None = None) -> ed.Recipe:
    """The λ = 0 control of Sec. 4.3.1: the same members, optimiser, images, epochs and seed as the
    attribution-penalty runs (:func:`attr_sweep`), trained with the plain cross-entropy of each member (Eq. 8 at
    λ = 0 is the independent loss; the ``independent`` loss skips the double back-propagation)."""
    return joint_recipe(cfg, "independent", 0.0, train_subset=cfg["attr_train_subset"], epochs=cfg["attr_epochs"],
                        seed=seed)


def attr_control(cfg: Any, seed: int | None = None) -> JointRun:
    """The λ = 0 control at the attribution-penalty runs' budget and seed (:func:`control_recipe`), trained once
    per seed (cached; Sec. 4.3.1, Table 2, Fig. 11 and Fig. 12 share it)."""
    return train_joint(control_recipe(cfg, seed), CONTROL)
