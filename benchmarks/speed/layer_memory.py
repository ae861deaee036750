"""What layer recomputation (`GNNStack.CHECKPOINT_ELEMENTS`) saves and costs on a paper-size `real` batch.

    python -m benchmarks.speed.layer_memory [--graphs 512] [--hidden 512] [--device cpu|cuda] [--repeats 3]

One training batch of `--graphs` `real` training graphs (a seeded shuffle of the training side, as an
epoch draws one; the paper profile's batch is 512 graphs at width 512) through gcn, gat and gin's stacks
(3 layers, dropout 0.1, mean pooling, the sum of squares as the loss), once keeping every activation and
once recomputing each layer in the backward pass. Per model and mode: `held_mb`, the tensors the forward
pass keeps for the backward pass (autograd's saved tensors, a checkpoint's inputs included, each storage
once; what dominates a run's memory, on any device), on CUDA `peak_mb`, the caching allocator's peak over
the step; and `step_s`, the median wall time of forward plus backward. Issue 60's target, a paper-profile
`real` run in <= 8 GiB of GPU memory, is read from the result files' `config.memory` after a GPU run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from benchmarks.timing import line


def _batch(n_graphs: int, device: torch.device):
    from torch_geometric.data import Batch

    from narbench.data.dataset import load_dataset
    from narbench.train.encoder import graph_to_data

    ds = load_dataset("real")
    order = np.random.default_rng(0).permutation(ds.split.train)[:n_graphs]
    return Batch.from_data_list([graph_to_data(ds.graphs[i], len(ds.vocab)) for i in order]).to(device), len(ds.vocab)


def held_bytes(stack, batch) -> tuple[int, torch.Tensor]:
    """(bytes the forward pass of `stack` on `batch` keeps for the backward pass, its output): the distinct
    storages autograd saves, a checkpoint's inputs included (tests/test_layer_recompute.py uses it too)."""
    storages: dict[int, int] = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = stack(batch)
    return sum(storages.values()), out


def _step(stack, batch, device) -> tuple[float, int]:
    """(seconds, the held bytes) of one forward and backward."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    held, out = held_bytes(stack, batch)
    out.square().sum().backward()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t, held


def measure(conv: str, batch, num_ops: int, hidden: int, device, repeats: int, recompute: bool) -> dict:
    from narbench.baselines import gnn

    build = {"gcn": gnn.gcn_conv, "gat": gnn.gat_conv, "gin": gnn.gin_conv}[conv]
    torch.manual_seed(0)
    stack = gnn.GNNStack(build, hidden, 3, 0.1, num_ops=num_ops).to(device).train()
    stack.CHECKPOINT_ELEMENTS = -1 if recompute else 1 << 62
    _step(stack, batch, device)  # warm-up
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, held = [], 0
    for _ in range(repeats):
        stack.zero_grad(set_to_none=True)
        seconds, held = _step(stack, batch, device)
        times.append(seconds)
    out = {"held_mb": held / 2**20, "step_s": statistics.median(times)}
    if device.type == "cuda":
        out["peak_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=["gcn", "gat", "gin"])
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    batch, num_ops = _batch(args.graphs, device)
    for conv in args.models:
        kept = measure(conv, batch, num_ops, args.hidden, device, args.repeats, False)
        again = measure(conv, batch, num_ops, args.hidden, device, args.repeats, True)
        extra = {"peak_mb": round(kept["peak_mb"]), "recompute_peak_mb": round(again["peak_mb"])} \
            if "peak_mb" in kept else {}
        line("layer-memory", model=conv, device=device.type, graphs=args.graphs, nodes=batch.num_nodes,
             hidden=args.hidden, held_mb=round(kept["held_mb"]), recompute_held_mb=round(again["held_mb"]),
             held_ratio=again["held_mb"] / kept["held_mb"], step_s=kept["step_s"],
             recompute_step_s=again["step_s"], time_ratio=again["step_s"] / kept["step_s"], **extra)


if __name__ == "__main__":
    main()
