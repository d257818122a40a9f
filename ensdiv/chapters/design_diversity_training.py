"""The design-diversity chapter, second half (Rosales, Munoz, Paulitsch): Fig. 8-12, Sec. 4.3.1, Table 2.

* a weight-sharing super-network (:mod:`ensdiv.models.supernet`), trained once by progressive shrinking
  from a trained full network, and eleven sub-networks of similar size extracted from it as ordinary
  models (batch norm recalibrated per sub-network) — Fig. 8, Fig. 9;
* jointly trained three-member ensembles of one architecture under the NCL losses of
  :mod:`ensdiv.losses.ncl` (independent, GNCL with four consensus rules, masked GNCL, balanced) and the
  attribution-variance loss (Eq. 8) — Fig. 10, Sec. 4.3.1;
* three ensembles compared on prediction, attribution and representation diversity — Table 2, Fig. 11, 12.

Evaluation sets, cached logits and Saliency maps, and the Eq. 7 sweep come from the first half
(:mod:`ensdiv.chapters.design_diversity`); a sub-network or a jointly trained member is an ``nn.Module``
carrying ``ensdiv_cache_id`` (what decides it) and ``ensdiv_name``, so those helpers cache its outputs too.

Every jointly trained ensemble (the NCL losses and the attribution penalty, which reaches the batch's inputs
through :data:`ensdiv.losses.INPUT_LOSSES`) is an ordinary ``ed.Joint`` recipe trained and cached by
:func:`ensdiv.train_recipe`.

**Divergence is a result.** A run whose loss becomes non-finite stops (``train_recipe(..., on_diverge="stop")``);
:func:`train_joint` reads the engine's fit report: the epoch and step, the last finite loss, and the members of
the last finished epoch, cached like a finished run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

import ensdiv as ed
from ensdiv.chapters import design_diversity as dd
from ensdiv.chapters._presets import add_dry_blocks, chapter_preset
from ensdiv.chapters.design_diversity.layers import corresponding_layers, corresponding_mean, layer_names
from ensdiv.chapters.design_diversity.supernet import select_configs, subnetworks, supernet
from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.losses import ENSEMBLE_LOSSES, INPUT_LOSSES
from ensdiv.shards import fan_out
from ensdiv.train import model_cache_config

SLUG = dd.SLUG
#: the recipe loss name of Eq. 8 (:func:`ensdiv.losses.attribution_penalty`, in ``ensdiv.losses.INPUT_LOSSES``)
ATTRIBUTION_LOSS = "attribution_penalty"

__all__ = [
    "SLUG", "PRESETS", "preset", "HEURISTICS", "PAPER_TABLE2", "PAPER_FIG10_CLAIMS", "SET_KEYS", "SET_LABELS",
    "JointRun", "joint_recipe", "train_joint", "joint_members", "supernet", "subnetworks", "select_configs",
    "pair_diversity", "attribution_methods", "ensemble_accuracy", "equitability_split", "equitability_table",
    "layer_names",
    "corresponding_layers", "corresponding_mean",
    "cka_between", "diversity_sweep", "chapter_logits", "chapter_labels", "chapter_attributions", "eval_set",
    "model_name", "chapter_models", "three_ensembles", "minmax", "nan_estimate", "member_estimates", "pearson",
    "correct", "ensemble_correct", "equitability_per_sample", "bootstrap_counts", "mean_estimates",
    "member_null", "permute_rows", "swap_within", "weighted_null", "member_effects", "shuffled_residuals",
]  # fmt: skip

SET_KEYS, SET_LABELS = dd.SET_KEYS, dd.SET_LABELS
chapter_logits, chapter_labels, chapter_attributions = dd.chapter_logits, dd.chapter_labels, dd.chapter_attributions
eval_set, model_name, chapter_models, diversity_sweep, minmax = (dd.eval_set, dd.model_name, dd.chapter_models,
                                                                 dd.diversity_sweep, dd.minmax)  # fmt: skip
eval_rows = dd.eval_rows
nan_estimate, member_estimates, pearson, correct, ensemble_correct = (dd.nan_estimate, dd.member_estimates, dd.pearson,
                                                                      dd.correct, dd.ensemble_correct)  # fmt: skip
bootstrap_counts, mean_estimates, member_null, permute_rows, swap_within, weighted_null = (
    dd.bootstrap_counts, dd.mean_estimates, dd.member_null, dd.permute_rows, dd.swap_within,
    dd.weighted_null)  # fmt: skip
member_effects, shuffled_residuals = dd.evidence.member_effects, dd.evidence.shuffled_residuals

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
#: Table 2 of the paper: Shannon equitability on correctly / incorrectly classified samples
PAPER_TABLE2 = pd.DataFrame(
    [[0.13, 0.16, 0.29, 0.32, 0.23, 0.23, 0.46, 0.49, 0.62, 0.60, 0.57, 0.58],
     [0.10, 0.13, 0.29, 0.31, 0.21, 0.23, 0.46, 0.49, 0.67, 0.69, 0.59, 0.63],
     [0.12, 0.17, 0.35, 0.37, 0.25, 0.29, 0.51, 0.55, 0.74, 0.77, 0.67, 0.71]],
    index=["attribution penalty", "GNCL", "heterogeneous"],
    columns=pd.MultiIndex.from_product([["H_corr", "H_inco"], ["clean", "v2", "waterdrop", "lines", "plasma",
                                                                "checkerboard"]]),
)  # fmt: skip
#: what the paper reports for Fig. 10 (no numbers are printed; the observation's counts)
PAPER_FIG10_CLAIMS = {"corruptions where balanced beats every GNCL variant": 3, "corruptions": 4}


# ---- jointly trained ensembles -------------------------------------------------------------------------------
def joint_recipe(cfg: Any, loss: str, lam: float, options: dict | None = None, **changes: Any) -> ed.Recipe:
    """The recipe of a jointly trained ensemble of ``cfg.members`` copies of ``cfg.member_model``: AdaBelief
    (lr, eps 1e-8, β = (0.9, 0.999)), the step schedule, no weight decay, ``cfg.train_subset`` images for
    ``cfg.epochs`` epochs (``changes`` override any flat recipe field)."""
    if loss not in ENSEMBLE_LOSSES and loss not in INPUT_LOSSES:
        raise unknown_name("ensemble loss", loss, [*ENSEMBLE_LOSSES, *INPUT_LOSSES])
    r = ed.Recipe.make(model=cfg["member_model"], model_kwargs=dict(cfg["member_kwargs"]), dataset=cfg["train_set"],
                       train_subset=cfg["train_subset"], epochs=cfg["epochs"], batch_size=cfg["batch_size"],
                       optimizer="adabelief", lr=cfg["lr"], eps=1e-8, weight_decay=0.0,
                       schedule=cfg.get("schedule", "step"), milestones=list(cfg.get("milestones") or []),
                       augment=cfg["augment"], seed=cfg["seed"],
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


# ---- attributions: Saliency vs Integrated Gradients (Fig. 9) ------------------------------------------------------
def attribution_methods(steps: Sequence[int]) -> dict[str, dict]:
    """``{"Saliency": ..., "IG 1": ..., ...}``: the captum method and its options per label."""
    out = {"Saliency": {"method": "saliency"}}
    out.update({f"IG {s}": {"method": "integrated_gradients", "n_steps": int(s)} for s in steps})
    return out


def pair_diversity(cfg: Any, models: Sequence[nn.Module], key: str = "clean") -> tuple[pd.DataFrame, pd.Series]:
    """Eq. 7 of every pair of ``models`` under each attribution method of ``cfg.ig_steps`` (plus Saliency), on
    ``cfg.fig9_images`` images of set ``key``; absolute attributions, Integrated Gradients from a black (all-zero)
    baseline, target = the label. Returns ``(pairs × methods scores, seconds per method)``; maps and their
    compute time are cached per model and method. Under ``torchrun`` the (method, model) maps are split across the
    job's ranks (:func:`ensdiv.shards.fan_out`), and every rank returns the whole table."""
    data, name, idx = eval_rows(cfg, key, cfg["fig9_images"])
    set_key = dd.eval_set_key(data, name, idx)
    methods = attribution_methods(cfg["ig_steps"])
    items = [(label, k) for label in methods for k in range(len(models))]

    def method_maps(item: tuple[str, int]) -> dict:
        label, k = item
        m, opts = models[k], methods[label]
        conf = {"model": m.ensdiv_cache_id, "set": set_key, "abs": True, "target": "label",
                "baseline": 0.0, **opts}  # fmt: skip

        def compute() -> dict:
            for p in m.parameters():
                p.requires_grad_(False)
            t0 = time.perf_counter()
            a = ed.metrics.attributions(m.eval(), data.x, data.y, abs=True, batch_size=cfg["attr_batch"], **opts)
            return {"maps": a, "seconds": torch.tensor(time.perf_counter() - t0)}

        return ed.cached("dd-attr-methods", conf, compute)

    maps: dict[str, list[torch.Tensor]] = {label: [] for label in methods}
    secs: dict[str, float] = dict.fromkeys(methods, 0.0)
    for (label, _), got in zip(items, fan_out(items, method_maps, desc="attributions"), strict=True):
        maps[label].append(got["maps"])
        secs[label] += float(got["seconds"])
    pairs = [(i, j) for i in range(len(models)) for j in range(i + 1, len(models))]
    rows = {}
    for i, j in pairs:
        rows[f"{model_name(models[i])} · {model_name(models[j])}"] = {
            label: float(ed.metrics.attribution_diversity(torch.stack([a[i], a[j]]))) for label, a in maps.items()}
    return pd.DataFrame(rows).T, pd.Series(secs, name="seconds")


# ---- ensembles and their diversity ----------------------------------------------------------------------------------
def ensemble_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Accuracy (%) of the logit-averaged ensemble."""
    return 100 * float((logits.float().mean(0).argmax(-1) == labels).float().mean())


def equitability_per_sample(logits: torch.Tensor, labels: torch.Tensor, *, num_species: Any = "members"
                            ) -> tuple[np.ndarray, np.ndarray]:
    """Shannon equitability (Eq. 5) of the members' votes on each sample ``(N,)``, and whether the logit-averaged
    ensemble gets the sample right ``(N,)`` (bool)."""
    e = ed.metrics.equitability(logits.argmax(-1), num_species=num_species, num_classes=logits.shape[-1])
    return e.numpy().astype(float), (logits.float().mean(0).argmax(-1) == labels).numpy()


def equitability_split(logits: torch.Tensor, labels: torch.Tensor, *, num_species: Any = "members"
                       ) -> tuple[float, float]:
    """Mean Shannon equitability (Eq. 5) of the members' votes on the samples the logit-averaged ensemble gets
    right (H_corr) and wrong (H_inco); NaN where a group is empty."""
    e, right = equitability_per_sample(logits, labels, num_species=num_species)
    e, right = torch.from_numpy(e), torch.from_numpy(right)
    return (float(e[right].mean()) if right.any() else float("nan"),
            float(e[~right].mean()) if (~right).any() else float("nan"))


def equitability_table(cfg: Any, ensembles: dict[str, Sequence[Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 2 for ``ensembles`` (label -> members): H_corr and H_inco of each ensemble on each set of
    :data:`SET_KEYS` (rows: the labels; columns: :data:`PAPER_TABLE2`'s), and the ensembles' accuracies (%) on
    each set (rows: the labels; columns: the set keys)."""
    rows: dict[str, dict] = {}
    accs: dict[str, dict] = {}
    for name, members in ensembles.items():
        for key in SET_KEYS:
            logits, labels = chapter_logits(cfg, members, key), chapter_labels(cfg, key)
            rows.setdefault(name, {})[("H_corr", key)], rows[name][("H_inco", key)] = equitability_split(logits,
                                                                                                      labels)
            accs.setdefault(name, {})[key] = ensemble_accuracy(logits, labels)
    return pd.DataFrame(rows).T[PAPER_TABLE2.columns], pd.DataFrame(accs).T


def cka_between(cfg: Any, a: Any, b: Any, key: str = "clean") -> tuple[torch.Tensor, list, list]:
    """Minibatch linear CKA (Eq. 6) of every layer of model (or zoo recipe) ``a`` with every layer of ``b`` on
    ``cfg.cka_images`` images of set ``key`` in batches of ``cfg.cka_batch`` (cached). A constant layer has zero
    self-similarity: minibatch CKA then divides a rounding residue by zero and returns inf or NaN; every
    non-finite entry is returned as NaN."""
    ids = [dd.member_cache_config(m) for m in (a, b)]  # a recipe's key: its module, once loaded, has no id
    a, b = (dd.member_module(m) for m in (a, b))
    data, name, idx = eval_rows(cfg, key, cfg["cka_images"])
    la, lb = layer_names(a), layer_names(b)
    conf = {"a": ids[0], "b": ids[1],
            "set": dd.eval_set_key(data, name, idx),
            "layers": [la, lb], "batch": cfg["cka_batch"]}  # fmt: skip

    def compute() -> dict:
        batches = [data.x[i : i + cfg["cka_batch"]] for i in range(0, len(data), cfg["cka_batch"])]
        return {"cka": ed.metrics.cka_map(a, b, batches, la, lb)}

    cka = ed.cached("dd-cka", conf, compute)["cka"]
    return torch.where(torch.isfinite(cka), cka, torch.full_like(cka, float("nan"))), la, lb


def matched_recipes(cfg: Any, seed: int | None = None, budget: Sequence[int] | None = None) -> dict[str, ed.Recipe]:
    """The recipes of Table 2 / Fig. 11 / Fig. 12's three ensembles with initialisation and data-order seed ``seed``
    (default ``cfg.seed``; the pages train one set per seed of ``cfg.seeds``), all on one training budget: the
    attribution-penalty run's (Sec. 4.3.1's: ``attr_train_subset`` images for ``attr_epochs`` epochs, AdaBelief,
    the step schedule), since its double back-propagation is what the page can afford. The GNCL average-consensus
    run is trained on that budget too (Fig. 10 trains its own on the full one), and the heterogeneous ensemble's
    zoo architectures (``cfg.hetero``) are retrained on the same images, epochs, optimiser and seed instead of
    coming from the zoo's own (larger) recipe. Keys are the ensembles' labels; the heterogeneous members are
    ``"heterogeneous zoo: <name>"``. ``budget`` ``(images, epochs)`` trains the heterogeneous members on fewer
    steps (:func:`hetero_match`). At paper scale a heterogeneous member that is a pretrained model stays as it is
    (:func:`budget_table` says so)."""
    s = cfg["seed"] if seed is None else seed
    attr = _attr_recipe(cfg, cfg["attr_lam"], s)
    out = {f"attribution penalty (Eq. 8, λ = {cfg['attr_lam']:g})": attr,
           f"GNCL average (Eq. 2, λ = {cfg['lam']:g})": joint_recipe(
               cfg, "gncl_mean", cfg["lam"], train_subset=cfg["attr_train_subset"], epochs=cfg["attr_epochs"], seed=s)}
    for member in chapter_models(cfg, cfg["hetero"]):
        if isinstance(member, ed.Recipe):
            member = member.replace(data=attr.data, optim=attr.optim, seeds=attr.seeds, name=f"{member.name}@budget")
            if budget is not None and tuple(budget) != (cfg["attr_train_subset"], cfg["attr_epochs"]):
                member = member.replace(train_subset=int(budget[0]), epochs=int(budget[1]),
                                        name=f"{member.name}-{budget[0]}x{budget[1]}")
        out[f"heterogeneous zoo: {dd.model_name(member)}"] = member
    return out


def three_ensembles(cfg: Any, seed: int | None = None, budget: Sequence[int] | None = None
                    ) -> dict[str, list[nn.Module] | list[ed.Recipe]]:
    """Table 2 / Fig. 11 / Fig. 12's ensembles on one budget and seed (:func:`matched_recipes`): the
    attribution-penalty run at λ = ``cfg.attr_lam`` (its last finished epoch), the GNCL average-consensus run, and
    the heterogeneous ensemble of ``cfg.hetero``'s architectures (on ``budget``, :func:`hetero_match`)."""
    recipes = matched_recipes(cfg, seed, budget)
    (attr_label, attr), (gncl_label, gncl) = list(recipes.items())[:2]
    hetero = [m for k, m in recipes.items() if k.startswith("heterogeneous zoo: ")]
    return {attr_label: joint_members(train_joint(attr, attr_label)),
            gncl_label: joint_members(train_joint(gncl, "GNCL average")),
            "heterogeneous zoo": hetero}  # fmt: skip


#: the family's ensembles by their short names (Table 2's rows), then the λ = 0 control on the same budget
FAMILY = [*PAPER_TABLE2.index, "independent (λ = 0)"]


def family(cfg: Any, seed: int | None = None, budget: Sequence[int] | None = None
           ) -> dict[str, list[nn.Module] | list[ed.Recipe]]:
    """The ensembles Table 2, Fig. 11 and Fig. 12 compare, with seed ``seed`` (default ``cfg.seed``), by their
    short names (:data:`FAMILY`): :func:`three_ensembles` (the heterogeneous members on ``budget``) and the λ = 0
    control (:func:`attr_control`)."""
    three = three_ensembles(cfg, seed, budget)
    return {**dict(zip(PAPER_TABLE2.index, three.values(), strict=True)),
            FAMILY[-1]: joint_members(attr_control(cfg, seed))}


def hetero_match(cfg: Any) -> tuple[tuple[int, int], pd.DataFrame]:
    """The heterogeneous members' training budget, accuracy-matched by training for fewer steps: of
    ``cfg.hetero_budgets`` (``(images, epochs)``, the first Sec. 4.3.1's), the one whose mean clean accuracy over
    ``cfg.seeds`` (on ``cfg.match_images`` test images) is closest to the GNCL ensemble's, the ensemble both of
    the heterogeneous checks compare with. Returns the budget and a table of each candidate's mean accuracy (no
    table, and the first budget, when there is one candidate)."""
    budgets = [tuple(int(v) for v in b) for b in cfg["hetero_budgets"]]
    if len(budgets) == 1:
        return budgets[0], pd.DataFrame()
    sel = type(cfg)({**cfg, "eval_images": cfg["match_images"]})
    gncl = next(k for k in matched_recipes(cfg) if k.startswith("GNCL"))
    target = float(np.mean([clean_accuracy(sel, joint_members(train_joint(matched_recipes(cfg, s)[gncl], "GNCL")))
                            for s in cfg["seeds"]]))
    rows = []
    for b in budgets:
        accs = [clean_accuracy(sel, [m for k, m in matched_recipes(cfg, s, b).items() if k.startswith("hetero")])
                for s in cfg["seeds"]]
        rows.append({"images": b[0], "epochs": b[1], "heterogeneous (%)": float(np.mean(accs)),
                     "GNCL (%)": target, "gap (points)": float(np.mean(accs)) - target})
    table = pd.DataFrame(rows)
    return budgets[int(table["gap (points)"].abs().to_numpy().argmin())], table


def clean_accuracy(cfg: Any, members: Sequence[Any]) -> float:
    """The logit-averaged ensemble's accuracy (%) on the chapter's clean test images."""
    return ensemble_accuracy(chapter_logits(cfg, members, "clean"), chapter_labels(cfg, "clean"))


def budget_table(cfg: Any, budget: Sequence[int] | None = None) -> pd.DataFrame:
    """What each ensemble of :func:`three_ensembles` was trained on: one row per recipe (training set, images,
    epochs, optimiser, learning rate, batch, seeds), the heterogeneous members' on ``budget`` (:func:`hetero_match`),
    so a reader sees what each was trained on."""
    rows = []
    for label, r in matched_recipes(cfg, budget=budget).items():
        if not isinstance(r, ed.Recipe):
            rows.append({"ensemble": label, "training set": "pretrained (not trained here)"})
            continue
        o = r.optim
        rows.append({"ensemble": label, "members": getattr(r.method, "members", 1), "training set": r.data.dataset,
                     "images": r.data.subset or "all", "epochs": o.epochs, "optimiser": o.optimizer, "lr": o.lr,
                     "schedule": o.schedule, "batch": o.batch_size,
                     "seeds": ", ".join(str(s) for s in cfg.get("seeds") or [r.seeds.init])})
    return pd.DataFrame(rows).set_index("ensemble")


def _attr_recipe(cfg: Any, lam: float, seed: int | None = None) -> ed.Recipe:
    return joint_recipe(cfg, ATTRIBUTION_LOSS, lam, train_subset=cfg["attr_train_subset"], epochs=cfg["attr_epochs"],
                        seed=cfg["seed"] if seed is None else seed)


def heuristic_runs(cfg: Any, seed: int | None = None) -> dict[str, JointRun]:
    """Fig. 10: one jointly trained ensemble per heuristic of :data:`HEURISTICS` (λ = 0 for ``independent``), with
    initialisation and data-order seed ``seed`` (default ``cfg.seed``)."""
    s = cfg["seed"] if seed is None else seed
    return {label: train_joint(joint_recipe(cfg, loss, 0.0 if loss == "independent" else cfg["lam"], opts, seed=s),
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
                        seed=cfg["seed"] if seed is None else seed)


def attr_control(cfg: Any, seed: int | None = None) -> JointRun:
    """The λ = 0 control at the attribution-penalty runs' budget and seed (:func:`control_recipe`), trained once
    per seed (cached; Sec. 4.3.1, Table 2, Fig. 11 and Fig. 12 share it)."""
    return train_joint(control_recipe(cfg, seed), CONTROL)


__all__ += ["attr_sweep", "heuristic_runs", "matched_recipes", "budget_table", "EVAL_CONSENSUS", "FAMILY", "family",
            "clean_accuracy", "hetero_match",
            "consensus_correct", "CONTROL", "control_recipe", "attr_control"]

# ---- presets ---------------------------------------------------------------------------------------------------------
_JOINT_CPU = {"member_model": "resnet", "member_kwargs": {"channels": [8, 16, 32, 64]}, "members": 3, "lam": 0.2,
              "train_set": "fmnist/train", "train_subset": 5000, "epochs": 3, "batch_size": 64, "lr": 1e-3,
              "augment": "flip", "schedule": "step", "milestones": [], "lr_decay": 0.0}  # fmt: skip
_JOINT_SMOKE = {**_JOINT_CPU, "member_model": "test_resnet", "member_kwargs": {}, "train_subset": 128, "epochs": 1}
# paper: ResNet-50 members, AdaBelief lr 1e-3, eps 1e-8, batch 64, 100 epochs, λ 0.2, the learning rate "decaying
# 10% every 30 epochs" (Sec. 4.3): ×0.9 at epochs 30, 60 and 90. Smoke and cpu keep the engine's step schedule
# (×0.1 at 50 % and 75 % of their few epochs; lr_decay 0 leaves the recipe's default factor).
_JOINT_PAPER = {**_JOINT_CPU, "member_model": "resnet50", "member_kwargs": {}, "train_set": "imagenet/train",
                "train_subset": 0, "epochs": 100, "augment": "flipcrop", "schedule": "multistep",
                "milestones": [30, 60, 90], "lr_decay": 0.9}  # fmt: skip
# member_kwargs: keyword arguments of the member model ({}: its defaults); milestones: the multistep schedule's epochs
_JOINT_TYPES = {"member_kwargs": dict[str, Any], "milestones": list[int]}
_MATCH_TYPES = {**_JOINT_TYPES, "hetero_budgets": list[list[int]]}
_ATTR = {"lams": [10.0, 1.0, 0.1, 0.01, 0.001], "attr_lam": 0.001}
_ATTR_CPU = {**_ATTR, "attr_train_subset": 2500, "attr_epochs": 2}
_ATTR_SMOKE = {**_ATTR, "attr_train_subset": 128, "attr_epochs": 1}
_ATTR_PAPER = {**_ATTR, "attr_train_subset": 0, "attr_epochs": 100}
_SN_CPU = {"supernet_model": "supernet", "supernet_subset": 10000, "supernet_epochs": [3, 1, 2], "supernet_lr": 0.05,
           "subnets": 11, "bn_images": 1500, "train_set": "fmnist/train", "batch_size": 64, "augment": "flip"}
_SN_SMOKE = {**_SN_CPU, "supernet_model": "test_supernet", "supernet_subset": 256, "supernet_epochs": [1, 1, 1],
             "bn_images": 128}  # fmt: skip
# paper: a ResNet-34-shaped super-network (BasicBlocks) from scratch on ImageNet; BootstrapNAS started from a
# pretrained ResNet-50 (bottlenecks), which this small super-network does not reproduce
_SN_PAPER = {**_SN_CPU, "supernet_model": "supernet_r34", "supernet_subset": 0, "supernet_epochs": [90, 25, 50],
             "supernet_lr": 0.1, "train_set": "imagenet/train", "batch_size": 256, "augment": "flipcrop"}
_COMMON = {"seed": 0, "eval_images": 0, "attr_images": 0, "attr_abs": True, "attr_batch": 250, "ensemble_size": 3,
           "ci": 0.90, "n_resamples": 1000}  # fmt: skip
_HETERO = ["dd/ResNext50_32_2", "dd/MNASNET_1", "dd/deit_tiny_p16_224"]
_HETERO_SMOKE = ["arch/resnext", "arch/mnasnet", "arch/vit"]  # the smoke zoo has no dd/* entries
_HETERO_PAPER = ["resnext50_32x4d.a1h_in1k", "mnasnet_100.rmsp_in1k", "deit_tiny_patch16_224.fb_in1k"]
_CKA = {"cka_images": 1000, "cka_batch": 250}
_FAMILY_SEEDS = [0, 1, 2, 3, 4, 5]
# hetero_budgets: (images, epochs) the heterogeneous members may train on, the first Sec. 4.3.1's (80 steps at cpu),
# then one epoch over fewer images (63 down to 40 steps); the one whose accuracy is closest to GNCL's is used
# (ch.hetero_match); match_images: the test images that accuracy is read on
_MATCH_CPU = {"hetero_budgets": [[2500, 2], [4000, 1], [3500, 1], [3000, 1], [2500, 1]], "match_images": 2000}
_MATCH_SMOKE = {"hetero_budgets": [[128, 1], [64, 1]], "match_images": 200}
_MATCH_PAPER = {"hetero_budgets": [[0, 100]], "match_images": 5000}  # pretrained stand-ins: nothing to match

PRESETS: dict = {
    "design-diversity/fig08_supernet_ensembles": {
        "common": {**_COMMON, "zoo": ["dd/*"]},
        "smoke": {**_SN_SMOKE, "eval_images": 200, "attr_images": 64, "zoo": dd.SMOKE_ZOO},
        "cpu": {**_SN_CPU, "eval_images": 5000, "attr_images": 1000},
        "paper": {**_SN_PAPER, "eval_images": 5000, "attr_images": 250, "attr_batch": 25, "zoo": dd.PAPER_ZOO},
    },
    "design-diversity/fig09_saliency_vs_ig": {
        # pair_models: the paper compares six sub-networks; cpu and paper take all eleven, so that the bootstrap
        # over them does not rest on about four distinct sub-networks per resample (smoke keeps six)
        "common": {**_COMMON, "pair_models": 11, "ig_steps": [1, 2, 10, 50]},
        "smoke": {**_SN_SMOKE, "fig9_images": 16, "ig_steps": [1, 2, 10], "pair_models": 6},
        "cpu": {**_SN_CPU, "fig9_images": 100},
        "paper": {**_SN_PAPER, "fig9_images": 100, "attr_batch": 10},
    },
    # seeds: every heuristic trained once per seed (initialisation and data order), the accuracies averaged
    "design-diversity/fig10_ncl_heuristics": {
        # seeds: six, so that each of the page's three paired checks can reach Holm's 5 % (2**-6 = 1/64)
        "common": {**_COMMON, "sets": ["clean", "plasma", "checkerboard", "waterdrop", "lines"],
                   "seeds": [0, 1, 2, 3, 4, 5]},
        "smoke": {**_JOINT_SMOKE, "eval_images": 200, "seeds": [0]},
        "types": _JOINT_TYPES,
        "cpu": {**_JOINT_CPU, "eval_images": 2000},
        "paper": {**_JOINT_PAPER, "eval_images": 5000},
    },
    # seeds: the family of Sec. 4.3.1, Table 2, Fig. 11 and 12 trained once per seed (initialisation and data order;
    # the same training images), six so that Holm over a page's two checks can reach 5 % with 2**-6 = 1/64
    "design-diversity/sec431_attribution_penalty": {
        "common": {**_COMMON, "seeds": _FAMILY_SEEDS},
        "smoke": {**_JOINT_SMOKE, **_ATTR_SMOKE, "eval_images": 200, "seeds": [0]},
        "types": _JOINT_TYPES,
        "cpu": {**_JOINT_CPU, **_ATTR_CPU, "eval_images": 2000},
        "paper": {**_JOINT_PAPER, **_ATTR_PAPER, "eval_images": 5000},
    },
    "design-diversity/tab02_equitability": {
        "common": {**_COMMON, "hetero": _HETERO, "seeds": _FAMILY_SEEDS},
        "smoke": {**_JOINT_SMOKE, **_ATTR_SMOKE, **_MATCH_SMOKE, "hetero": _HETERO_SMOKE, "eval_images": 200,
                  "seeds": [0]},
        "types": _MATCH_TYPES,
        "cpu": {**_JOINT_CPU, **_ATTR_CPU, **_MATCH_CPU, "eval_images": 2000},
        "paper": {**_JOINT_PAPER, **_ATTR_PAPER, **_MATCH_PAPER, "eval_images": 5000, "hetero": _HETERO_PAPER},
    },
    "design-diversity/fig11_attribution_maps": {
        "common": {**_COMMON, "hetero": _HETERO, "show": 8, "seeds": _FAMILY_SEEDS},
        "smoke": {**_JOINT_SMOKE, **_ATTR_SMOKE, **_MATCH_SMOKE, "hetero": _HETERO_SMOKE, "attr_images": 32,
                  "seeds": [0]},
        "types": _MATCH_TYPES,
        "cpu": {**_JOINT_CPU, **_ATTR_CPU, **_MATCH_CPU, "attr_images": 500},
        "paper": {**_JOINT_PAPER, **_ATTR_PAPER, **_MATCH_PAPER, "attr_images": 100, "attr_batch": 25,
                  "hetero": _HETERO_PAPER},
    },
    "design-diversity/fig12_cka_layers": {
        "common": {**_COMMON, **_CKA, "hetero": _HETERO, "seeds": _FAMILY_SEEDS},
        "smoke": {**_JOINT_SMOKE, **_ATTR_SMOKE, **_MATCH_SMOKE, "hetero": _HETERO_SMOKE, "cka_images": 64,
                  "cka_batch": 32, "seeds": [0]},
        "types": _MATCH_TYPES,
        "cpu": {**_JOINT_CPU, **_ATTR_CPU, **_MATCH_CPU},
        "paper": {**_JOINT_PAPER, **_ATTR_PAPER, **_MATCH_PAPER, "cka_images": 2000, "cka_batch": 100,
                  "hetero": _HETERO_PAPER},
    },
}

for _spec in PRESETS.values():  # bootstrap resamples of the claims' intervals: fewer at smoke (code path only)
    _spec["smoke"] = {**_spec["smoke"], "n_resamples": 200}
# a dry run of the paper presets (ensdiv run --dry-run): the paper's models and recipes on a few fake images
add_dry_blocks(PRESETS, {**dd.DRY_SIZES, "fig9_images": 4, "cka_images": 8, "cka_batch": 4,
                         "supernet_epochs": [1, 1, 1], "batch_size": 8, "bn_images": 8, "subnets": 3, "epochs": 2,
                         "milestones": [1], "attr_epochs": 2, "lams": [1.0, 0.001], "seeds": [0], "ig_steps": [1, 2],
                         "pair_models": 2, "train_subset": 8, "attr_train_subset": 8, "match_images": 4},
               pick={"zoo": dd.DRY_ZOO})


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``design-diversity/<stem>`` of the second half at ``scale``."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)
