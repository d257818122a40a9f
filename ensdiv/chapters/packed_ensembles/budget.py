"""Where Table 1's methods converge: the budget curve that chooses the cpu training budget.

The paper trains every method of Table 1 to convergence (200 epochs). At ``cpu`` scale a fixed budget
stops the methods wherever they are, and a packed model, whose members each get ``1/M`` of the averaged
loss's gradient, learns more slowly than a single model at the same step: a verdict drawn there measures
learning speed, not the paper's claim. :func:`budget_curve` trains the single model and PE-(α, M, γ) at
several budgets — separate runs, each with the whole schedule (a cosine run cut short is not a shorter
cosine run) — and scores them on the validation split, never the test set; :func:`plateau_budget` picks
the cheapest budget at which every method is within a tolerance of its best measured accuracy.

The best *measured* accuracy stands for the plateau: if a method still gains between the two largest
budgets, :func:`plateau_budget` says so (``still_rising``) and the page reports the distance instead of
calling the budget converged.

The curve's smaller budgets are a design record, not part of the claim: ``benchmarks/bench_packed_budget.py``
trains them and writes :data:`RECORD` (``book/data/packed_budget.json``); the page reads them from there
(:func:`recorded_curve`, only when the record was made with the preset's recipe) and trains itself only the
budgets it needs anyway, Table 1's own (:func:`with_record`). A cold book so skips four trainings (the 1-, 2-
and 4-epoch single model and PE, about 570 s on two cores) that no claim uses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ensdiv.chapters.packed_ensembles.methods import eval_set, evaluate, method_logits, recipes_for
from ensdiv.errors import InvalidInputError
from ensdiv.paths import project_root

#: Where the budget curve is scored: the 5,000 validation images carved from Fashion-MNIST's training split.
VALIDATION_SET = "fmnist/val"
#: The recorded curve, relative to the project root (in ``book/data``: a change to it re-runs the page).
RECORD = "book/data/packed_budget.json"
#: The preset keys that make a recorded curve this preset's: data, optimiser, schedule, backbone, PE-(α, M, γ).
CURVE_RECIPE_KEYS = ("arch", "widths", "dataset", "train_subset", "batch_size", "lr", "weight_decay", "augment",
                     "schedule", "num_estimators", "alpha", "gamma", "seeds")
#: The keys of :data:`CURVE_RECIPE_KEYS` that only the packed model reads (the single model is PE-(1, 1, 1)).
PACKING_KEYS = ("num_estimators", "alpha", "gamma")


def budget_curve(cfg: dict, *, epochs: Sequence[int], methods: Sequence[str] = ("single", "packed"),
                 val_set: str = VALIDATION_SET, seed: int | None = None) -> pd.DataFrame:
    """Validation accuracy of each method trained at each budget of ``epochs`` (cached like every recipe).

    Args:
        cfg: a resolved Table-1 preset (data, optimiser, schedule, backbone, PE-(α, M, γ)); only its
            ``epochs`` is replaced.
        epochs: the budgets, in epochs over ``cfg["train_subset"]`` images; each is a run of its own.
        methods: which methods (:data:`~ensdiv.chapters.packed_ensembles.METHODS`).
        val_set: the registered set scored (default :data:`VALIDATION_SET`).
        seed: the run (default: the preset's first seed, so the run at the chosen budget *is* Table 1's).

    Returns:
        One row per (method, epochs): ``images_seen`` and ``val_acc`` (%).
    """
    budgets = sorted({int(e) for e in epochs})
    if not budgets or budgets[0] < 1:
        raise InvalidInputError(f"budget_curve needs epochs >= 1, got {list(epochs)}.")
    seed = int(cfg["seeds"][0] if seed is None else seed)
    val = eval_set(cfg, val_set, n=0)
    n = int(cfg["train_subset"]) or None
    rows = []
    for e in budgets:
        at = {**cfg, "epochs": e}
        for method in methods:
            recipes = recipes_for(method, at, seed)
            acc = evaluate(method_logits(recipes, val), val.y)["acc"]
            rows.append({"method": method, "epochs": e, "images_seen": e * n if n else float("nan"),
                         "val_acc": acc})
    return pd.DataFrame(rows)


def plateau_budget(curve: pd.DataFrame, *, tolerance: float = 1.0) -> dict[str, Any]:
    """The cheapest budget of ``curve`` at which every method is within ``tolerance`` points of its best.

    Args:
        curve: :func:`budget_curve`'s table.
        tolerance: points of accuracy (the issue's "about one point of the plateau").

    Returns:
        ``epochs`` (the chosen budget), ``within`` (whether every method is within ``tolerance`` there; when
        no budget is — the methods peak at different budgets — the budget of the smallest worst gap is
        chosen and ``within`` is False), ``gap`` (each method's distance from its best at that budget,
        points), ``still_rising`` (methods whose own two largest budgets differ by more than ``tolerance``:
        their best is not yet a plateau), ``one_budget`` (methods measured at a single budget: no plateau can
        be seen), ``converged`` (True only when every method has at least two budgets, none is still rising and
        the chosen budget is within: the plateau is measured, not assumed).
    """
    if curve.empty:
        raise InvalidInputError("plateau_budget needs a non-empty budget curve.")
    if tolerance < 0:
        raise InvalidInputError(f"plateau_budget's tolerance must be >= 0 points, got {tolerance}.")
    wide = curve.pivot(index="epochs", columns="method", values="val_acc").sort_index()
    best = wide.max()
    worst = (best - wide).max(axis=1)
    within = worst <= tolerance
    chosen = int(within[within].index[0]) if within.any() else int(worst.idxmin())
    # each method's own two largest budgets (a method may be measured at fewer budgets than another)
    own = {m: wide[m].dropna() for m in wide.columns}
    rising = [m for m, col in own.items() if len(col) >= 2 and col.iloc[-1] - col.iloc[-2] > tolerance]
    one_budget = [m for m, col in own.items() if len(col) < 2]
    gap = (best - wide.loc[chosen]).round(3).to_dict()
    # a plateau needs evidence that the curve has flattened: at least two budgets of every method, no method
    # gaining more than the tolerance between its two largest, and the chosen budget within the tolerance of every
    # best. The largest budget is always "within" of its own best, so "within" alone cannot say "not converged".
    converged = not one_budget and not rising and bool(within.loc[chosen])
    return {"epochs": chosen, "within": bool(within.loc[chosen]), "gap": gap, "still_rising": rising,
            "one_budget": one_budget, "converged": converged}


def plateau_sentence(choice: dict[str, Any], epochs: int, *, tolerance: float = 1.0,
                     labels: dict[str, str] | None = None) -> str:
    """One sentence on whether ``epochs`` (Table 1's budget) is converged by :func:`plateau_budget`'s
    ``choice``: the word "converged" only when the curve flattened there."""
    name = (labels or {}).get
    if choice["converged"] and epochs >= choice["epochs"]:
        return (f"Converged: every method is within {tolerance:g} point(s) of its best from {choice['epochs']} "
                f"epochs on, and none gains more than {tolerance:g} between the two largest budgets.")
    why = []
    if choice["still_rising"]:
        why.append("still gaining more than " f"{tolerance:g} point(s) at the largest budget: "
                   + ", ".join(name(m) or m for m in choice["still_rising"]))
    if epochs < choice["epochs"]:
        why.append(f"{epochs} epochs is below the cheapest budget within {tolerance:g} point(s) of every best "
                   f"({choice['epochs']})")
    if not choice["within"]:
        why.append(f"no budget has every method within {tolerance:g} point(s) of its best")
    if choice.get("one_budget"):
        why.append("measured at one budget only: " + ", ".join(name(m) or m for m in choice["one_budget"]))
    return f"Not converged at {epochs} epochs ({'; '.join(why) or 'too few budgets measured'})."


def recorded_curve(cfg: dict, path: str | Path) -> tuple[pd.DataFrame, str]:
    """The budget curve recorded in ``path`` (:data:`RECORD`, written by ``bench_packed_budget.py``; relative to
    the project root unless absolute) when it
    was made with ``cfg``'s recipe (every key of :data:`CURVE_RECIPE_KEYS` equal; when only PE's own keys,
    :data:`PACKING_KEYS`, differ, the single model's rows alone), and one sentence saying where it comes from
    or why it is not used.

    Returns:
        ``(curve, note)``: :func:`budget_curve`'s rows (empty when the file is missing or its recipe differs).
    """
    empty = pd.DataFrame(columns=["method", "epochs", "images_seen", "val_acc"])
    path = Path(path)
    if path.is_absolute() and path.is_relative_to(project_root()):
        path = path.relative_to(project_root())  # shown on the page as the project's file
    try:
        record = json.loads((project_root() / path).read_text())
    except (OSError, ValueError):
        return empty, f"No recorded budget curve at {path}: only this run's budgets are shown."
    recipe = record.get("recipe", {})
    def mine(k: str) -> Any:
        value = list(cfg[k]) if isinstance(cfg[k], tuple) else cfg[k]
        return value[:1] if k == "seeds" else value  # the curve is trained with the preset's first seed

    differ = [k for k in CURVE_RECIPE_KEYS if (recipe.get(k)[:1] if k == "seeds" and recipe.get(k) else
                                               recipe.get(k)) != mine(k)]
    when = record.get("machine", {}).get("when", "an earlier run")
    curve = pd.DataFrame(record.get("curve", []), columns=empty.columns)
    if differ and set(differ) <= set(PACKING_KEYS):
        # the single model's recipe holds none of PE's keys: its recorded rows are this preset's single model
        return curve[curve.method == "single"].reset_index(drop=True), (
            f"Recorded budget curve: {path}, measured {when} by benchmarks/bench_packed_budget.py; its single "
            f"model is this preset's, its PE is not ({', '.join(differ)} differ): only the single model's budgets "
            "are read from it.")
    if differ:
        return empty, (f"The recorded budget curve ({path}) was made with another recipe ({', '.join(differ)} "
                       "differ): not used; only this run's budgets are shown.")
    return curve, (
        f"Recorded budget curve: {path}, measured {when} by benchmarks/bench_packed_budget.py with this preset's "
        "recipe.")


def curve_with_record(cfg: dict, *, epochs: Sequence[int], record: str | Path = "") -> tuple[pd.DataFrame, str]:
    """The budget curve a page reads: :func:`budget_curve` at ``epochs`` (none: nothing trained) completed by the
    curve recorded in ``record`` (``""``: none; :func:`recorded_curve`), and the record's sentence.

    Raises:
        InvalidInputError: nothing trained and nothing recorded (:func:`with_record`).
    """
    measured = budget_curve(cfg, epochs=epochs) if epochs else None
    recorded, note = recorded_curve(cfg, record) if record else (None, "")
    return with_record(measured, recorded), note


def with_record(measured: pd.DataFrame | None, recorded: pd.DataFrame | None) -> pd.DataFrame:
    """This run's budget curve completed by a recorded one: every row of ``measured`` (``source`` "this run",
    with the recorded accuracy of the same budget in ``recorded_val_acc`` when there is one) and the rows of
    ``recorded`` at the other budgets (``source`` "recorded"), sorted by budget and method. Either may be
    ``None`` or empty (nothing trained, or no usable record).

    Raises:
        InvalidInputError: both are missing or empty (no curve at all).
    """
    key = ["method", "epochs"]
    cols = ["method", "epochs", "images_seen", "val_acc"]
    measured = measured[cols] if measured is not None else pd.DataFrame(columns=cols)
    recorded = recorded[cols] if recorded is not None else pd.DataFrame(columns=cols)
    if measured.empty and recorded.empty:
        raise InvalidInputError("with_record needs a measured or a recorded budget curve; both are empty.")
    rec = recorded.rename(columns={"val_acc": "recorded_val_acc"})[[*key, "recorded_val_acc"]]
    ours = measured.assign(source="this run").merge(rec, on=key, how="left") if len(measured) else None
    done = set(map(tuple, measured[key].itertuples(index=False)))
    rest = recorded[[tuple(r) not in done for r in recorded[key].itertuples(index=False)]]
    rest = rest.assign(source="recorded", recorded_val_acc=float("nan"))
    out = pd.concat([f for f in (ours, rest) if f is not None and len(f)], ignore_index=True)
    out["epochs"] = out["epochs"].astype(int)
    out["recorded_val_acc"] = out["recorded_val_acc"].astype(float)
    return out.sort_values(["epochs", "method"], ignore_index=True)
