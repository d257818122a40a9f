"""The ensembles Table 2, Fig. 11 and Fig. 12 compare, one set per seed on one training budget: the
attribution-penalty run, the GNCL average-consensus run, the heterogeneous zoo architectures retrained on the
same images (on fewer steps when that matches GNCL's accuracy: :func:`hetero_match`), and the λ = 0 control."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from torch import nn

import ensdiv as ed
from ensdiv.chapters import design_diversity as dd
from ensdiv.chapters.design_diversity import chapter_labels, chapter_logits, chapter_models
from ensdiv.chapters.design_diversity_training.diversity import PAPER_TABLE2, ensemble_accuracy
from ensdiv.chapters.design_diversity_training.joint import (
    _attr_recipe,
    attr_control,
    joint_members,
    joint_recipe,
    train_joint,
)


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
