"""Data-parallel training (`narbench.distributed`) on CPU: gloo backend, two processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import torch

from narbench.train import distributed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    device = distributed.setup(torch.device("cpu"))
    used = torch.nn.Parameter(torch.zeros(3))
    unused = torch.nn.Parameter(torch.zeros(2))
    sometimes = torch.nn.Parameter(torch.zeros(2))  # a gradient on rank 0 only
    used.grad = torch.full((3,), float(rank + 1))
    if rank == 0:
        sometimes.grad = torch.ones(2)
    distributed.average_gradients([used, unused, sometimes])
    from tests.test_packed import train_loader

    shard = [int(i) for batch in train_loader(list(range(10)), 2, seed=0) for i in batch]
    with open(f"{out}/rank{rank}.json", "w") as fh:
        json.dump({"device": str(device), "used": used.grad.tolist(), "unused": unused.grad is None,
                   "sometimes": sometimes.grad.tolist(), "shard": shard, "main": distributed.is_main()}, fh)
    dist.destroy_process_group()


@pytest.mark.slow
def test_gradients_are_averaged_and_items_sharded(tmp_path):
    torch.multiprocessing.spawn(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["used"] == r1["used"] == [1.5, 1.5, 1.5]
    assert r0["unused"] and r1["unused"], "a parameter no rank used keeps no gradient"
    assert r0["sometimes"] == r1["sometimes"] == [0.5, 0.5]
    assert sorted(r0["shard"] + r1["shard"]) == list(range(10)) and not set(r0["shard"]) & set(r1["shard"])
    assert r0["main"] and not r1["main"] and r0["device"] == "cpu"


def test_single_process_is_untouched():
    assert not distributed.active() and distributed.is_main() and distributed.world_size() == 1
    p = torch.nn.Parameter(torch.zeros(2))
    p.grad = torch.ones(2)
    distributed.average_gradients([p])
    assert p.grad.tolist() == [1.0, 1.0]
    assert distributed.setup(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.slow
def test_torchrun_two_processes_write_one_result(plugin, tmp_path):
    """`torchrun --nproc_per_node 2 -m narbench.cli run` on CPU (gloo): one result file, from rank 0."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m",
           "narbench.cli", "run", "--encoder", "gcn", "--dataset", "toy", "--profile", "smoke", "--device", "cpu",
           "--out", str(out), "--no-progress", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = [p for p in out.glob("*.json")]
    assert len(results) == 1
    data = json.loads(results[0].read_text())
    history = data["config"]["training_history"]
    assert history and all(len(h["losses"]) == 2 for h in history)  # smoke: 2 epochs
