"""Data-parallel training on one node: `torchrun --nproc_per_node N -m narbench.cli run ...`.

Under torchrun (WORLD_SIZE > 1 in the environment) every process trains the same model on its
own shard of each epoch's shuffled training items (`DistributedSampler`) and the gradients are
averaged across processes after each backward pass, before the optimiser step (what
`DistributedDataParallel` does, done on the trainer's parameters so encoders that use a module
outside `forward`, such as a classifier head, need no change). So all ranks keep identical
weights. Embedding, retrieval and scoring then run on each rank as in a single-process run;
only rank 0 shows progress and writes the result file. NCCL on CUDA (rank r on `cuda:LOCAL_RANK`),
gloo on CPU (the tests). Without torchrun nothing here does anything.

Each process takes `batch_size` items per step, so one step sees N x batch_size items and an
epoch has 1/N of the steps; the contrastive term's negatives are the process's own batch.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
import torch
import torch.distributed as dist


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def active() -> bool:
    return world_size() > 1


def is_main() -> bool:
    """True in a single-process run and in rank 0 of a distributed one."""
    return rank() == 0


def setup(device: torch.device) -> torch.device:
    """Join torchrun's process group when launched by it (once); the device of this rank.

    `device` is the one the run asked for: on CUDA each rank takes `cuda:LOCAL_RANK`.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or not dist.is_available():
        return device
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


def shard_size(n: int) -> int:
    """Items per rank and epoch out of `n` (`DistributedSampler` pads the last shard)."""
    return -(-n // world_size())


def shard_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """This rank's items of epoch `epoch`, in the order a PyG `DataLoader` over a `DistributedSampler` gave them
    after `set_epoch` (the loader the trainer used before batches were packed; tests/test_packed.py keeps it as the
    reference), with the base seed it drew from torch's global generator (`narbench.train.batchorder`): what the
    trainer batches from its packed items."""
    from torch.utils.data.distributed import DistributedSampler

    from narbench.train.batchorder import global_seed_draw

    sampler = DistributedSampler(range(n), num_replicas=world_size(), rank=rank(), shuffle=True, seed=seed)
    sampler.set_epoch(epoch)
    global_seed_draw()
    return np.fromiter(iter(sampler), dtype=np.int64)


def average_gradients(params: Iterable[torch.nn.Parameter]) -> None:
    """Replace each gradient by its mean over the ranks (one all-reduce of one flat buffer).

    A parameter without a gradient on this rank counts as a zero gradient, so every rank
    reduces the same buffer whatever its batch touched.
    """
    params = [p for p in params if p.requires_grad]
    if not params or not active():
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1).float() for g in grads])
    dist.all_reduce(flat)
    flat /= world_size()
    offset = 0
    for p, g in zip(params, grads):
        n = g.numel()
        mean = flat[offset:offset + n]
        offset += n
        if p.grad is None and not mean.any():  # unused everywhere: stays without a gradient, as in one process
            continue
        p.grad = mean.view_as(g).to(g.dtype)
