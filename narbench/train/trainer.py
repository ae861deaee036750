"""One trainer for every encoder: device choice, seeding, progress bars, mixed precision.

The same code runs on CUDA when there is one and on the CPU otherwise; `device="cpu"` or
`"cuda"` forces a choice. `malloc_tuning=True` keeps freed batch memory in the process while
training and embedding (`narbench.train.allocator`; the `narbench` command turns it on itself).
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from rich.console import Console

from narbench.train import allocator, batchorder, compiled, distributed, losses, packed, steptimes
from narbench.train.profiles import TrainConfig
from narbench.train.progress import progress_bars
from narbench.train.resume import Snapshots, random_state, set_random_state


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' picks CUDA when available; asking for CUDA without one is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} requested but CUDA is not available on this machine")
    return dev


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


_UNSET = object()


@dataclass
class History:
    """Per-epoch mean losses of one training stage."""

    stage: str
    losses: list[float] = field(default_factory=list)
    #: per-epoch records of the stage's `evaluate` callback (learning curves), [] without one
    evals: list[dict] = field(default_factory=list)


class Trainer:
    """Runs training loops and batched inference for encoders."""

    def __init__(
        self,
        device: str = "auto",
        seed: int = 0,
        *,
        amp: bool | None = None,
        progress: bool = True,
        console: Console | None = None,
        jobs: int | None = None,
        malloc_tuning: bool = False,
        compile: bool = False,
        snapshots: Snapshots | None = None,
    ) -> None:
        self.device = distributed.setup(resolve_device(device))  # torchrun: this rank's device
        self.seed = seed
        self.amp = (self.device.type == "cuda") if amp is None else amp
        self.show_progress = progress and os.environ.get("NARBENCH_NO_PROGRESS") != "1" and distributed.is_main()
        self.console = console or Console(stderr=True)
        self.histories: list[History] = []
        self.malloc_tuning = malloc_tuning
        self.compile = compile
        #: why torch.compile failed in this trainer (it then runs eager), None if it did not
        self.compile_failure: str | None = None
        self._compiled: dict[int, tuple[torch.nn.Module, compiled.CompiledForward]] = {}
        # CPU processes for data preparation (e.g. splitting graphs); None: all cores
        if jobs is None:
            from narbench.train.partcache import available_cores

            jobs = available_cores()
        self.jobs = max(1, int(jobs))
        #: epoch snapshots (`narbench.train.resume`): None trains every stage from its start
        self.snapshots = snapshots
        #: the learning-curve probe `fit_graph_level` hands to `fit` (`evaluate`); None: no curve
        self.epoch_eval: Callable[[int], dict] | None = None
        #: per-phase step times (`narbench.train.steptimes.StepTimes`, benchmarks); None: not timed
        self.step_times: steptimes.StepTimes | None = None

    # -- plumbing ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def progress(self) -> Iterator:
        """Progress bars on a terminal; in a log, a line per 10% of each task (`narbench.train.progress`)."""
        with progress_bars(self.console, disable=not self.show_progress) as prog:
            yield prog

    def autocast(self):
        if self.amp and self.device.type == "cuda":
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _compile_failed(self, reason: str) -> None:
        if self.compile_failure is None:
            self.compile_failure = reason
            compiled.warn_failure(reason)

    @contextlib.contextmanager
    def compiling(self, model: torch.nn.Module) -> Iterator[None]:
        """With `compile=True`, `model`'s forward (`compiled.targets`) runs compiled inside the block.

        The compiled forward of a module is kept for the trainer's life, so training and
        embedding the same model compile once per mode; the module's own `forward` is put back
        on leaving the block."""
        if not self.compile or self.compile_failure is not None:
            yield
            return
        patched: list[tuple[torch.nn.Module, object]] = []
        try:
            for module in compiled.targets(model):
                entry = self._compiled.get(id(module))
                if entry is None or entry[0] is not module:
                    entry = (module, compiled.CompiledForward(module, self._compile_failed))
                    self._compiled[id(module)] = entry
                patched.append((module, module.__dict__.get("forward", _UNSET)))
                module.forward = entry[1]
            yield
        finally:
            for module, before in reversed(patched):
                if before is _UNSET:
                    del module.forward
                else:
                    module.forward = before

    def pack(self, items: Sequence):
        """`items` packed on the trainer's device (`narbench.train.packed.pack`); None for no items."""
        return packed.pack(items, self.device) if len(items) else None

    # -- loops ------------------------------------------------------------------------------
    def fit(
        self,
        model: torch.nn.Module,
        items: Sequence,
        cfg: TrainConfig,
        step: Callable[[torch.nn.Module, object], torch.Tensor],
        *,
        stage: str = "train",
        params=None,
        on_epoch: Callable[[int, float], None] | None = None,
        evaluate: Callable[[int], dict] | None = None,
    ) -> History:
        """Generic loop: `step(model, batch)` returns the loss of one batch on `self.device`.

        `items` are PyG `Data` (or tuples of them, or anything PyG's collater batches); each batch
        is what PyG's `DataLoader(items, batch_size, shuffle=True)` gives (a `Batch`, or a list of
        them for tuples), built on the device from the items packed once (`narbench.train.packed`),
        in the loader's order (`narbench.train.batchorder`). Losses are summed on the device and
        read once per epoch.

        `on_epoch(epoch, mean_loss)`, if given, is called after each epoch (model in train mode
        again when it returns), e.g. for probes of what the model has learnt so far.
        `evaluate(epoch)` (1-based), if given, is called after each epoch with the model in eval
        mode and returns a record kept in `History.evals` and in the epoch snapshot (so a resumed
        stage keeps its curve); the global random generators are put back after it, so the
        training trajectory is the one a run without it follows."""
        model.to(self.device).train()
        opt = torch.optim.Adam(params if params is not None else model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        hist = History(stage)
        index = len(self.histories)
        items = self.pack(items)
        gen = None if distributed.active() else torch.Generator().manual_seed(self.seed + index)
        n = len(items) if items is not None else 0
        per_epoch = batchorder.steps(n if gen is not None else distributed.shard_size(n), cfg.batch_size)
        snapshots = self.snapshots if on_epoch is None and gen is not None else None
        start = 0
        if snapshots is not None and (state := snapshots.load(index, stage)) is not None:
            snapshots.restore(state, model, opt, gen)
            hist.losses = list(state["losses"])
            hist.evals = list(state.get("evals") or [])
            start = state["epochs_done"]
        with allocator.tuned(self.malloc_tuning), self.compiling(model), self.progress() as prog:
            task = prog.add_task(stage, total=cfg.epochs * per_epoch, info="")
            if start:
                prog.update(task, completed=start * per_epoch, info=f"resumed after epoch {start}/{cfg.epochs}")
            for epoch in range(start, cfg.epochs):
                if not n:
                    order = np.zeros(0, dtype=np.int64)
                else:
                    order = batchorder.shuffled(n, gen) if gen is not None else \
                        distributed.shard_order(n, self.seed + index, epoch)
                total, count = self._epoch(model, opt, items, order, cfg.batch_size, step,
                                           lambda: prog.update(task, advance=1))
                hist.losses.append(total / max(count, 1))
                prog.update(task, info=f"epoch {epoch + 1}/{cfg.epochs} loss {hist.losses[-1]:.4f}")
                if evaluate is not None:
                    hist.evals.append(self._evaluate(model, evaluate, epoch + 1))
                if snapshots is not None:
                    snapshots.save(index, stage, epoch + 1, model, opt, gen, hist.losses, hist.evals)
                if on_epoch is not None:
                    on_epoch(epoch, hist.losses[-1])
                    model.train()
        model.eval()
        self.histories.append(hist)
        return hist

    def _epoch(self, model, opt, items, order: np.ndarray, batch_size: int, step, advance) -> tuple[float, int]:
        """One epoch over `order` in batches of `batch_size`: (sum of the batch losses, batches).

        The sum is kept on the device in float64 (the same additions as summing the losses on the
        host) and read once, at the end; `self.step_times` times each step's phases."""
        timer = self.step_times or steptimes.OFF
        timer.begin_epoch()
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        order_dev = torch.from_numpy(order).to(self.device)
        count = 0
        for start in range(0, len(order), batch_size):
            with timer.phase("batch"):
                batch = items.take(order[start:start + batch_size], order_dev[start:start + batch_size])
            with timer.phase("forward"), self.autocast():
                loss = step(model, batch)
            with timer.phase("optimiser"):
                opt.zero_grad(set_to_none=True)
            with timer.phase("backward"):
                loss.backward()
            with timer.phase("optimiser"):
                distributed.average_gradients(p for group in opt.param_groups for p in group["params"])
                opt.step()
            total += loss.detach().double()
            count += 1
            timer.step_done()
            advance()
        with timer.phase("sync"):
            total = float(total)
        timer.end_epoch()
        return total, count

    def _evaluate(self, model: torch.nn.Module, evaluate: Callable[[int], dict], epoch: int) -> dict:
        """`evaluate(epoch)` in eval mode, the global random state kept (see `fit`)."""
        state = random_state()
        model.eval()
        try:
            record = {"epoch": epoch, **evaluate(epoch)}
        finally:
            set_random_state(state)
            model.train()
        return record

    def fit_graph_level(self, model: torch.nn.Module, datas: Sequence, cfg: TrainConfig, *, stage: str = "graph",
                        expand: Callable[[object], object] | None = None) -> History:
        """Eq. 5 + cross-entropy (eq. 6), or either alone per `cfg.objective`.

        Each Data carries `y_cl` (the contrastive label: the family) and `y_ce` (the class label).
        `model(batch)` returns embeddings and `model.classifier` maps them to logits. This is
        every trained encoder's last stage: the trainer's `epoch_eval` (a learning curve) runs
        after each of its epochs. `expand(batch)`, if given, returns the batch the loss is computed
        on (`invariant` adds a rewrite of each graph, labelled like it).
        """
        use_ce = "ce" in cfg.objective.split("+")
        use_cl = "cl" in cfg.objective.split("+")

        def step(m, batch):
            if expand is not None:
                batch = expand(batch)
            emb = m(batch)
            loss = emb.new_zeros(())
            if use_cl:
                loss = loss + losses.supervised_contrastive(emb, batch.y_cl, cfg.temperature)
            if use_ce:
                loss = loss + torch.nn.functional.cross_entropy(m.classifier(emb).float(), batch.y_ce)
            return loss

        return self.fit(model, datas, cfg, step, stage=stage, evaluate=self.epoch_eval)

    @torch.no_grad()
    def embed(self, model: torch.nn.Module, datas: Sequence, batch_size: int, *, desc: str = "embed",
              max_nodes: int | None = None) -> torch.Tensor:
        """Embeddings of `datas` in order, as a float32 CPU tensor.

        Batches hold `batch_size` graphs, and with `max_nodes` no more nodes than that (a larger
        graph alone): a model whose memory grows faster than its batch's nodes (`gps`' attention)
        then peaks at a bound however large the graphs are that happen to be neighbours. The
        graphs are packed on the device `EMBED_CHUNK` at a time (memory bounded by the chunk, not
        by the corpus); the embeddings stay on the device and are copied to the host once."""
        model.to(self.device).eval()
        datas = list(datas)
        groups = (batchorder.batches(np.arange(len(datas)), batch_size) if max_nodes is None else
                  [np.asarray(b) for b in node_budget_batches([d.num_nodes for d in datas], batch_size, max_nodes)])
        if max_nodes is not None:  # PyG's DataLoader of index batches drew its base seed from the global generator
            batchorder.global_seed_draw()
        out = []
        with allocator.tuned(self.malloc_tuning), self.compiling(model), self.progress() as prog:
            task = prog.add_task(desc, total=len(groups), info="")
            for chunk in _chunks(groups, EMBED_CHUNK):
                first = int(chunk[0][0])
                items = self.pack(datas[first:int(chunk[-1][-1]) + 1])
                for idx in chunk:
                    with self.autocast():
                        out.append(model(items.take(idx - first)).float())
                    prog.update(task, advance=1)
        return torch.cat(out).cpu() if out else torch.zeros(0, 0)


#: graphs packed at once for embedding (`Trainer.embed`)
EMBED_CHUNK = 4096


def _chunks(groups: list[np.ndarray], size: int) -> list[list[np.ndarray]]:
    """Consecutive batches grouped so that each group spans at most `size` items (a larger batch alone)."""
    out: list[list[np.ndarray]] = []
    for idx in groups:
        if out and int(idx[-1]) + 1 - int(out[-1][0][0]) <= size:
            out[-1].append(idx)
        else:
            out.append([idx])
    return out


def node_budget_batches(sizes: Sequence[int], batch_size: int, max_nodes: int) -> list[list[int]]:
    """Consecutive batches of item indices, in order: at most `batch_size` items and `max_nodes`
    summed sizes each (an item larger than `max_nodes` is a batch of its own)."""
    batches: list[list[int]] = []
    current: list[int] = []
    nodes = 0
    for i, size in enumerate(sizes):
        if current and (len(current) == batch_size or nodes + size > max_nodes):
            batches.append(current)
            current, nodes = [], 0
        current.append(i)
        nodes += int(size)
    if current:
        batches.append(current)
    return batches
