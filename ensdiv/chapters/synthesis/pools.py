"""The synthesis chapter's population: four pools of members other chapters train, and the ensembles drawn from them
(the package docstring of :mod:`ensdiv.chapters.synthesis` describes each pool)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

import ensdiv as ed
from ensdiv.chapters import design_diversity as dd
from ensdiv.chapters import packed_ensembles as pe
from ensdiv.chapters import sed, zoo
from ensdiv.data.paper.stream import is_stream_set, stream_tensor_set
from ensdiv.errors import InvalidInputError, unknown_name
from ensdiv.store import config_key
from ensdiv.train import model_cache_config

ROLES = ("clean", "corruption", "rendition", "ood")
SOURCES = ("zoo", "dd", "packed", "sed")


@dataclass(frozen=True)
class Member:
    """One member of a pool and where it comes from: ``source``, its ``key`` (zoo key, or
    ``"<method>-s<seed>/m<k>"``), the ``recipe`` label and ``model_key`` (the cache key of the trained model
    it uses) and ``index`` (which estimator / head of that model; 0 for a single model)."""

    source: str
    key: str
    recipe: str
    model_key: str
    index: int = 0
    run: str = ""  # packed / sed: the run whose members may be combined ("" = any combination)


@dataclass
class Pool:
    """The members of one source and their logits ``(P, N, C)`` on every role; ``recipes[i]`` is member i's
    own recipe when it has one (zoo, dd), else None."""

    source: str
    members: list[Member]
    logits: dict[str, Tensor]
    recipes: list[Any] = field(default_factory=list)


@dataclass
class Population:
    """The pools, the labels of every role and one row per ensemble (``source``, ``kind``, ``size``,
    ``idx``: member indices into its pool, ``members``: their keys)."""

    pools: dict[str, Pool]
    labels: dict[str, Tensor]
    ensembles: pd.DataFrame
    cfg: dict


def eval_sets(cfg: dict) -> dict[str, ed.TensorSet]:
    """The evaluation set of every role: ``eval_subset`` images of the registered set, drawn with seed 0 (a
    paper-scale ImageNet folder: read into memory, :func:`ensdiv.data.paper.stream.stream_tensor_set`)."""
    def one(name: str) -> ed.TensorSet:
        if is_stream_set(name):
            return stream_tensor_set(name, cfg["eval_subset"], seed=0)
        return ed.get_dataset(name).subset(cfg["eval_subset"], seed=0)

    return {role: one(cfg["sets"][role]) for role in ROLES}


def _member(source: str, key: str, recipe: Any, index: int = 0, run: str = "") -> Member:
    """A member from a recipe, or from a pretrained module (design-diversity's paper-scale models: its name,
    and the cache id that decides its weights)."""
    if isinstance(recipe, ed.Recipe):
        return Member(source, key, recipe.label, config_key(model_cache_config(recipe))[:16], index, run)
    return Member(source, key, dd.model_name(recipe), config_key(dd.member_cache_config(recipe))[:16], index, run)


def _zoo_pool(cfg: dict, sets: dict) -> Pool:
    every = zoo.zoo_recipes(cfg["scale"])
    if cfg["base"] not in every:
        raise unknown_name("base zoo entry", cfg["base"], every)
    keys = [cfg["base"]] + [k for k in every if zoo.category_of(k) in cfg["categories"] and k != cfg["base"]]
    recipes = [every[k] for k in keys]
    logits = {role: ed.predict_many(recipes, data) for role, data in sets.items()}
    return Pool("zoo", [_member("zoo", k, r) for k, r in zip(keys, recipes, strict=True)], logits, recipes)


def _dd_cfg(cfg: dict) -> dict:
    return dd.preset("fig05_06_ensemble_diversity", cfg["scale"], verbose=False)


def _dd_pool(cfg: dict, sets: dict) -> Pool:
    models = dd.chapter_models(_dd_cfg(cfg))  # zoo recipes; at paper scale pretrained timm models
    logits = {role: ed.predict_many(models, data) for role, data in sets.items()}
    return Pool("dd", [_member("dd", dd.model_name(m), m) for m in models], logits, models)


def _packed_pool(cfg: dict, sets: dict) -> Pool:
    pcfg = pe.preset(cfg["packed_preset"], cfg["scale"], verbose=False)
    members, parts = [], {role: [] for role in ROLES}
    for method in cfg["packed_methods"]:
        for seed in pcfg["seeds"]:
            recipes = pe.recipes_for(method, pcfg, seed)
            run = f"{method}-s{seed}"
            for role, data in sets.items():
                parts[role].append(pe.method_logits(recipes, data))
            m = parts["clean"][-1].shape[0]
            members += [_member("packed", f"{run}/m{k}", recipes[k if len(recipes) > 1 else 0],
                                0 if len(recipes) > 1 else k, run) for k in range(m)]
    return Pool("packed", members, {role: torch.cat(v) for role, v in parts.items()}, [None] * len(members))


def _sed_pool(cfg: dict, sets: dict) -> Pool:
    roles = {"clean": "val", "corruption": "c1", "rendition": "r", "ood": "inat"}  # SED's role names, remapped
    base = sed.preset("tab01_unique", cfg["scale"], verbose=False)
    scfg = sed.preset("tab01_unique", cfg["scale"], verbose=False, eval_subset=cfg["eval_subset"],
                      sets={**base["sets"], **{roles[r]: cfg["sets"][r] for r in ROLES}})
    members, parts = [], {role: [] for role in ROLES}
    for method in cfg["sed_methods"]:
        recipes = sed.method_recipes(scfg, method)
        for role in ROLES:
            parts[role].append(sed.ensemble_logits(scfg, method, roles[role]))
        per = parts["clean"][-1].shape[0] // len(recipes)
        members += [_member("sed", f"{method}/m{k}", recipes[k // per], k % per, method)
                    for k in range(parts["clean"][-1].shape[0])]
    return Pool("sed", members, {role: torch.cat(v) for role, v in parts.items()}, [None] * len(members))


_POOLS = {"zoo": _zoo_pool, "dd": _dd_pool, "packed": _packed_pool, "sed": _sed_pool}


def _draw(rng: np.random.Generator, items: Sequence[tuple], n: int) -> list[tuple]:
    """``n`` of ``items`` without replacement (all when fewer), in a seeded order."""
    if n >= len(items):
        return list(items)
    return [items[i] for i in sorted(rng.choice(len(items), size=n, replace=False))]


def _ensembles(pool: Pool, cfg: dict, rng: np.random.Generator) -> list[dict]:
    rows, keys = [], [m.key for m in pool.members]
    p = len(pool.members)
    if pool.source == "zoo":
        cat = [zoo.category_of(k) for k in keys]
        rows += [{"kind": f"base+{cat[i]}", "idx": (0, i)} for i in range(1, p)]
        triples = [(0, i, j) for i, j in itertools.combinations(range(1, p), 2)]
        rows += [{"kind": f"base+{cat[i]}+{cat[j]}", "idx": t} for t in _draw(rng, triples, cfg["zoo_triples"])
                 for _, i, j in [t]]
    elif pool.source == "dd":
        rows += [{"kind": "dd triple", "idx": t}
                 for t in _draw(rng, list(itertools.combinations(range(p), 3)), cfg["dd_triples"])]
    else:
        for run in dict.fromkeys(m.run for m in pool.members):
            idx = [i for i, m in enumerate(pool.members) if m.run == run]
            for k in cfg["sizes"]:
                rows += [{"kind": run.rsplit("-s", 1)[0] if pool.source == "packed" else run, "idx": t}
                         for t in _draw(rng, list(itertools.combinations(idx, k)), cfg["per_run"])]
    for r in rows:
        r.update(source=pool.source, size=len(r["idx"]), members=tuple(keys[i] for i in r["idx"]))
    return rows


def population(cfg: dict) -> Population:
    """Every pool of ``cfg["sources"]`` (models loaded from the cache, trained on a miss) and the seeded
    ensembles drawn from them (see the module docstring for the sampling). An ensemble whose cached models
    (and estimator / head indices) equal an earlier one's is dropped, so no ensemble enters twice."""
    bad = [s for s in cfg["sources"] if s not in SOURCES]
    if bad:
        raise unknown_name("population source", bad[0], SOURCES)
    if not cfg["sources"]:
        raise InvalidInputError("The population needs at least one source; sources is empty.")
    sets = eval_sets(cfg)
    rng = np.random.default_rng(cfg["seed"])
    pools = {s: _POOLS[s](cfg, sets) for s in cfg["sources"]}
    rows, seen = [], set()
    for r in (r for s in cfg["sources"] for r in _ensembles(pools[s], cfg, rng)):
        models = frozenset((pools[r["source"]].members[i].model_key, pools[r["source"]].members[i].index)
                           for i in r["idx"])
        if models not in seen:  # the same cached models drawn twice (e.g. by two sources) enter once
            seen.add(models)
            rows.append(r)
    cols = ["source", "kind", "size", "members", "idx"]
    return Population(pools, {r: d.y for r, d in sets.items()}, pd.DataFrame(rows)[cols], dict(cfg))


