"""Which items each batch takes: the orders PyG's `DataLoader` took, drawn from the same generators.

The trainer batches packed items (`narbench.train.packed`) instead of iterating a `DataLoader`,
so it draws the loader's random numbers itself, in the loader's order, and runs stay bit-identical
to the runs made with the loader (tests/test_batchorder.py compares with torch's own loader):

- shuffled training (`shuffled`): at each epoch the loader's iterator drew a base seed from the
  loader's generator (`_BaseDataLoaderIter`), then `RandomSampler` drew `randperm(n)` and, once
  exhausted, a second `randperm(n)` for its empty remainder. The generator ends where the loader
  left it, so an epoch snapshot stores the same state (`narbench.train.resume`).
- under torchrun (`narbench.train.distributed.shard_order`): `DistributedSampler`'s shard, and the
  base seed drawn from torch's global generator (the loader had no generator of its own);
- in order (embedding): consecutive batches, or given index batches (a node budget); a loader of
  index batches had no generator and drew its base seed from the global generator once per pass
  (`global_seed_draw`), which later dropout masks depend on.

A batch is then a slice of the epoch's order: `batches(order, batch_size)`.
"""

from __future__ import annotations

import numpy as np
import torch


def shuffled(n: int, generator: torch.Generator) -> np.ndarray:
    """This epoch's order of `n` shuffled items, drawn as `DataLoader(shuffle=True, generator=...)` drew it."""
    torch.empty((), dtype=torch.int64).random_(generator=generator)  # the iterator's base seed
    order = torch.randperm(n, generator=generator)
    torch.randperm(n, generator=generator)  # RandomSampler's remainder (n % n items), drawn and empty
    return order.numpy()


def global_seed_draw() -> None:
    """The base seed a `DataLoader` without a generator drew from torch's global generator per pass."""
    torch.empty((), dtype=torch.int64).random_()


def batches(order: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Consecutive runs of `batch_size` items of `order` (the last may be shorter)."""
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def steps(n: int, batch_size: int) -> int:
    """Batches per epoch of `n` items."""
    return -(-n // batch_size)
