"""Work that fans out over models, split across the ranks of a ``torchrun`` job (issue #33 item 6).

Two CPU processes are given the environment ``torchrun --nproc_per_node=2`` sets (as ``tests/test_ddp.py`` does
for training). The SAT matrix of three small models: each rank attacks only its share of the source models, the
cache merges them, and both ranks end with the matrix one process computes alone. The logits of three trained
recipes (``ed.predict_many``): each rank evaluates its share, and both return every model's logits. The saliency
maps of three models (design-diversity's ``chapter_attributions``), and Fig. 9's Saliency and Integrated-Gradients
maps of each (``pair_diversity``): each rank computes its share, and both return what one process computes alone.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.multiprocessing as mp
from test_ddp import _free_port, _join

from ensdiv.shards import fan_out, rank_and_world, share


def test_share_gives_every_item_to_exactly_one_rank():
    items = list(range(11))
    for world in (1, 2, 3, 5):
        parts = [share(items, r, world) for r in range(world)]
        assert sorted(x for p in parts for x in p) == items
        assert max(map(len, parts)) - min(map(len, parts)) <= 1  # round robin: shares differ by one at most
    assert share(items, 1, 3) == [1, 4, 7, 10]


def test_one_process_is_the_plain_loop(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert rank_and_world() == (0, 1)
    calls = []
    assert fan_out("abc", lambda x: calls.append(x) or x.upper()) == ["A", "B", "C"]
    assert calls == ["a", "b", "c"]  # once each, in order: nothing is computed twice without a job


def _models() -> list[torch.nn.Module]:
    out = []
    for k in range(3):
        torch.manual_seed(k)
        m = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 3))
        m.ensdiv_cache_id = {"module": "tiny-linear", "seed": k}  # what keys its cached SAT row
        m.tag = f"m{k}"
        out.append(m.eval())
    return out


def _data():
    from ensdiv.data import TensorSet

    g = torch.Generator().manual_seed(0)
    return TensorSet(torch.rand(24, 3, 8, 8, generator=g), torch.arange(24) % 3, "toy", ["a", "b", "c"])


def _sat(store_dir: str) -> tuple[dict, list[str]]:
    import ensdiv.transfer as tr
    from ensdiv.store import Store

    attacked: list[str] = []
    real = tr._adversarial

    def counting(model, *args, **kw):
        attacked.append(model.tag)
        return real(model, *args, **kw)

    tr._adversarial = counting  # a wrapper that only counts: what it saves is the real computation's
    os.environ["ENSDIV_ALLOW_PATCHED"] = "1"
    try:
        res = tr.sat_by_source(_models(), _data(), subsample=None, attack_kwargs={"eps": 0.3, "steps": 2},
                               names=["m0", "m1", "m2"], store=Store(store_dir))
    finally:
        tr._adversarial = real
        os.environ.pop("ENSDIV_ALLOW_PATCHED", None)
    return {"scores": res.scores, "one_side": res.one_side, "fooled": res.fooled}, attacked


def _rank(rank: int, world: int, port: int, job: str, out_dir: str, store_dir: str) -> None:
    """One rank of a two-process job: ``job`` (``"sat"`` or ``"predict"``) with the shared cache ``store_dir``;
    what it returned and what it computed itself, saved as ``<job><rank>.pt``."""
    _join(rank, world, port)
    result, done = {"sat": _sat, "predict": _predict, "attr": _attributions, "methods": _attr_methods}[job](store_dir)
    torch.save({"result": result, "done": done}, os.path.join(out_dir, f"{job}{rank}.pt"))


def _two_ranks(job: str, out_dir, store_dir) -> list[dict]:
    mp.start_processes(_rank, args=(2, _free_port(), job, str(out_dir), str(store_dir)), nprocs=2, join=True,
                       start_method="spawn")
    return [torch.load(out_dir / f"{job}{r}.pt") for r in range(2)]


@pytest.mark.slow
def test_two_ranks_split_the_sat_sources_and_agree_with_one_process(tmp_path, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    alone, attacked_alone = _sat(str(tmp_path / "alone"))
    assert attacked_alone == ["m0", "m1", "m2"]
    ranks = _two_ranks("sat", tmp_path, tmp_path / "shared")
    # each source attacked by exactly one rank, in the round robin's shares
    assert ranks[0]["done"] == ["m0", "m2"] and ranks[1]["done"] == ["m1"]
    for r in ranks:  # and every rank holds the whole matrix, the one a single process computes
        assert torch.equal(r["result"]["fooled"], alone["fooled"])
        for key in ("scores", "one_side"):
            torch.testing.assert_close(r["result"][key], alone[key], equal_nan=True)


def _recipes():
    from ensdiv.train.recipes import Recipe

    return [Recipe.make(model="test_cnn", epochs=1, batch_size=64, train_subset=128, seed=s) for s in range(3)]


def _predict(store_dir: str) -> tuple[torch.Tensor, int]:
    import importlib

    from ensdiv.data import get_dataset
    from ensdiv.store import Store

    pr = importlib.import_module("ensdiv.predict")  # the module (ensdiv.predict is also the function's name)
    calls = []
    real = pr.run_model
    pr.run_model = lambda *a, **k: calls.append(1) or real(*a, **k)  # counts only: it saves the real result
    os.environ["ENSDIV_ALLOW_PATCHED"] = "1"
    try:
        logits = pr.predict_many(_recipes(), get_dataset("fmnist/test").subset(64, seed=0), store=Store(store_dir))
    finally:
        pr.run_model = real
        os.environ.pop("ENSDIV_ALLOW_PATCHED", None)
    return logits, len(calls)


@pytest.mark.slow
def test_two_ranks_split_the_predictions_of_trained_recipes(tmp_path, monkeypatch):
    from ensdiv.store import Store
    from ensdiv.train import train_recipe

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    store = Store(tmp_path / "cache")
    for r in _recipes():  # trained before the job (a training under torchrun is every rank's collective)
        train_recipe(r, store=store)
    ranks = _two_ranks("predict", tmp_path, tmp_path / "cache")
    assert [r["done"] for r in ranks] == [2, 1]  # rank 0 evaluates recipes 0 and 2, rank 1 recipe 1
    alone, calls = _predict(str(tmp_path / "cache"))
    assert calls == 0  # the ranks cached every prediction
    for r in ranks:
        assert torch.equal(r["result"], alone) and alone.shape == (3, 64, 10)


@pytest.fixture()
def alone_cache(tmp_path, monkeypatch) -> str:
    """One process outside any job, with a cache folder of its own (its path)."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "alone"))
    return str(tmp_path / "alone")


def _tiny_cnns() -> list[torch.nn.Module]:
    members = []
    for k in range(3):
        torch.manual_seed(k)
        m = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(2 * 26 * 26, 10))
        m.ensdiv_cache_id = {"module": "tiny-cnn", "seed": k}  # what keys its cached maps
        m.ensdiv_name = f"tiny-cnn-{k}"  # what names its pairs in Fig. 9's table
        members.append(m)
    return members


def _counting_attributions(members: list, call):
    """``call()`` with ``ensdiv.metrics.attributions`` counting which member (by position) it is asked for."""
    import ensdiv.metrics as mt

    done, real = [], mt.attributions

    def counting(net, *args, **kw):
        done.append(next(i for i, m in enumerate(members) if m is net))
        return real(net, *args, **kw)

    mt.attributions = counting
    try:
        return call(), done
    finally:
        mt.attributions = real


def _attributions(store_dir: str) -> tuple[torch.Tensor, list[int]]:
    """Design-diversity's saliency maps of three small CNNs on a smoke page's images, cached in ``store_dir``;
    which members this process computed."""
    from ensdiv.chapters import design_diversity as dd

    os.environ["ENSDIV_CACHE"] = store_dir
    cfg = dd.preset("fig05_06_ensemble_diversity", "smoke", attr_images=6, verbose=False)
    members = _tiny_cnns()
    maps, done = _counting_attributions(members, lambda: dd.chapter_attributions(cfg, members, "clean")[0])
    return maps, done


def _attr_methods(store_dir: str) -> tuple[dict, list[int]]:
    """Fig. 9's pair table (Saliency and two Integrated-Gradients settings) of three small CNNs, cached in
    ``store_dir``; which (method, member) maps this process computed, as member positions in order."""
    from ensdiv.chapters import design_diversity_training as ddt

    os.environ["ENSDIV_CACHE"] = store_dir
    cfg = ddt.preset("fig09_saliency_vs_ig", "smoke", fig9_images=4, ig_steps=[1, 2], verbose=False)
    members = _tiny_cnns()
    (table, secs), done = _counting_attributions(members, lambda: ddt.pair_diversity(cfg, members))
    return {"table": torch.tensor(table.to_numpy()), "columns": list(table.columns), "seconds": secs.to_dict()}, done


@pytest.mark.slow
def test_two_ranks_split_the_attributions_and_agree_with_one_process(tmp_path, alone_cache):
    alone, done_alone = _attributions(alone_cache)
    assert done_alone == [0, 1, 2] and alone.shape == (3, 6, 1, 28, 28)
    assert len({float(m.abs().sum()) for m in alone}) == 3  # three different models, three different maps
    ranks = _two_ranks("attr", tmp_path, tmp_path / "shared")
    assert [r["done"] for r in ranks] == [[0, 2], [1]]  # each member computed by one rank, round robin
    for r in ranks:  # every rank returns all three members' maps, the ones one process computes
        assert torch.equal(r["result"], alone)


@pytest.mark.slow
def test_two_ranks_split_the_fig9_attribution_methods_and_agree_with_one_process(tmp_path, alone_cache):
    alone, done_alone = _attr_methods(alone_cache)
    assert done_alone == [0, 1, 2] * 3  # Saliency, IG 1, IG 2: each model once per method
    assert alone["columns"] == ["Saliency", "IG 1", "IG 2"] and alone["table"].shape == (3, 3)  # 3 pairs
    ranks = _two_ranks("methods", tmp_path, tmp_path / "shared")
    # the nine (method, model) items in the round robin: rank 0 items 0, 2, 4, 6, 8; rank 1 items 1, 3, 5, 7
    assert [r["done"] for r in ranks] == [[0, 2, 1, 0, 2], [1, 0, 2, 1]]
    for r in ranks:  # every rank returns the whole table: what one process computes alone
        torch.testing.assert_close(r["result"]["table"], alone["table"])
        assert r["result"]["columns"] == alone["columns"]
        assert r["result"]["seconds"].keys() == alone["seconds"].keys()
