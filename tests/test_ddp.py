"""Two-process DDP training on CPU (gloo): both ranks must end with identical weights.

The processes are spawned with ``torch.multiprocessing`` and given the environment torchrun would
set (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``PORT``), so the engine takes the
same Fabric ``ddp`` path as under ``torchrun --nproc_per_node=2``.
"""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _join(rank: int, world: int, port: int) -> None:
    """The torch.distributed environment of one local process of ``world``, one thread."""
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                       "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "NODE_RANK": "0"})
    torch.set_num_threads(1)


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    _join(rank, world, port)
    from ensdiv.data import TensorSet
    from ensdiv.models import create_model
    from ensdiv.train import Optim, fit, make_fabric

    fabric = make_fabric("cpu")
    assert fabric.world_size == world and fabric.global_rank == rank
    g = torch.Generator().manual_seed(0)
    data = TensorSet(torch.rand(64, 1, 8, 8, generator=g), torch.arange(64) % 3, "toy", ["a", "b", "c"])
    torch.manual_seed(rank)  # different init per rank: DDP must broadcast rank 0's weights
    model = create_model("test_cnn", num_classes=3, img_size=8)
    fit(
        model,
        data,
        Optim(epochs=2, lr=0.1, batch_size=16),
        seed=0,
        augment="flip",
        progress=False,
        accelerator="cpu",
    )
    torch.save(model.state_dict(), os.path.join(out_dir, f"rank{rank}.pt"))


@pytest.mark.slow
def test_two_process_ddp_gives_identical_weights(tmp_path):
    mp.start_processes(
        _worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True, start_method="spawn"
    )
    a = torch.load(tmp_path / "rank0.pt", weights_only=True)
    b = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert a.keys() == b.keys()
    for k in a:
        if a[k].is_floating_point() and "running" not in k:
            assert torch.equal(a[k], b[k]), k
    # the weights moved away from rank 0's initialisation
    torch.manual_seed(0)
    from ensdiv.models import create_model

    init = create_model("test_cnn", num_classes=3, img_size=8).state_dict()
    assert not torch.equal(init["fc.weight"], a["fc.weight"])


def _diverging_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """Rank 1 alone sees a NaN loss at its 3rd step: both ranks must stop at step 3 (no hang)."""
    _join(rank, world, port)
    import torch.nn.functional as F

    from ensdiv.data import TensorSet
    from ensdiv.models import create_model
    from ensdiv.train import Optim, fit

    calls = {"n": 0}

    def loss_fn(model, x, y):
        calls["n"] += 1
        loss = F.cross_entropy(model(x), y)
        return loss * float("nan") if rank == 1 and calls["n"] == 3 else loss

    g = torch.Generator().manual_seed(0)
    data = TensorSet(torch.rand(64, 1, 8, 8, generator=g), torch.arange(64) % 3, "toy", ["a", "b", "c"])
    torch.manual_seed(rank)  # different init per rank: the weights handed back are rank 0's (broadcast)
    model = create_model("test_cnn", num_classes=3, img_size=8)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    fit(model, data, Optim(epochs=2, lr=0.1, batch_size=16), seed=0, progress=False, accelerator="cpu",
        loss_fn=loss_fn, on_diverge="stop")
    rep = model.ensdiv_fit
    torch.save({"state": model.state_dict(), "init": init, "step": rep.diverged_step, "status": rep.status,
                "calls": calls["n"]}, os.path.join(out_dir, f"rank{rank}.pt"))


@pytest.mark.slow
def test_two_process_ddp_ranks_stop_together_on_divergence(tmp_path):
    mp.start_processes(
        _diverging_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True, start_method="spawn"
    )
    a = torch.load(tmp_path / "rank0.pt", weights_only=True)
    b = torch.load(tmp_path / "rank1.pt", weights_only=True)
    for r in (a, b):
        assert (r["status"], r["step"], r["calls"]) == ("diverged", 3, 3)
        for k, v in r["state"].items():  # diverged in epoch 1: rank 0's starting weights on every rank
            if v.is_floating_point() and "running" not in k:
                assert torch.equal(v, a["init"][k]), k
