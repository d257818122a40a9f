"""What Fig. 9, Table 2 and Fig. 12 measure on a set of members: Eq. 7 of every pair under Saliency and Integrated
Gradients, Shannon equitability on the samples the ensemble gets right and wrong (Eq. 5), and minibatch CKA
between every pair of layers (Eq. 6)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

import ensdiv as ed
from ensdiv.chapters import design_diversity as dd
from ensdiv.chapters.design_diversity import SET_KEYS, chapter_labels, chapter_logits, eval_rows, model_name
from ensdiv.chapters.design_diversity.layers import layer_names
from ensdiv.shards import fan_out

#: Table 2 of the paper: Shannon equitability on correctly / incorrectly classified samples
PAPER_TABLE2 = pd.DataFrame(
    [[0.13, 0.16, 0.29, 0.32, 0.23, 0.23, 0.46, 0.49, 0.62, 0.60, 0.57, 0.58],
     [0.10, 0.13, 0.29, 0.31, 0.21, 0.23, 0.46, 0.49, 0.67, 0.69, 0.59, 0.63],
     [0.12, 0.17, 0.35, 0.37, 0.25, 0.29, 0.51, 0.55, 0.74, 0.77, 0.67, 0.71]],
    index=["attribution penalty", "GNCL", "heterogeneous"],
    columns=pd.MultiIndex.from_product([["H_corr", "H_inco"], ["clean", "v2", "waterdrop", "lines", "plasma",
                                                                "checkerboard"]]),
)  # fmt: skip


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
