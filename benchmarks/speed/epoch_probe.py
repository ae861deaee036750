"""How long a paper-profile run of one encoder would train, from a few of its steps (issues 60 and 62).

    python -m benchmarks.speed.epoch_probe --encoder gps --dataset real-2.3 --split unseen --device cuda
    python -m benchmarks.speed.epoch_probe --encoder gcn --dataset real --graphs 256 --profile smoke  # here

For an encoder too slow to finish inside a GPU lease (gps on `real` at the paper profile), a run stopped at the
budget says nothing; this trains the encoder at PROFILE's recipe on a stratified GRAPHS of the split's training
graphs for EPOCHS epochs (`narbench.train.steptimes` timing each phase) and prints seconds per step (mean over
epochs 2..E, the first being warm-up), the peak CUDA memory and the training time a whole run would take at
that rate: steps of a full epoch on the profile's training graphs of the split x the profile's epochs. The estimate leaves out
what runs once (positional encodings, motif parts: printed as `prepare`) and evaluation.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch

from benchmarks.timing import line
from narbench.core import registry
from narbench.data.dataset import load_dataset, stratified_subset
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.train.steptimes import PHASES, StepTimes
from narbench.train.trainer import Trainer, seed_everything


def probe(encoder: str, ds, split: str, graphs: int, epochs: int, profile: str, device: str) -> dict:
    """Seconds per training step of `encoder` on dataset `ds` (mean over epochs 2..E), per phase, and the
    whole run's training time at that rate."""
    fam = ds.family_ids()
    train = ds.get_split(split).train
    idx = stratified_subset(train, fam[train], min(graphs, len(train)), seed=0)
    full = get_profile(profile)
    seed_everything(0)
    enc = registry.load("encoder", encoder)(len(ds.vocab), len(ds.families), get_profile(profile, epochs=epochs))
    enc.use_vocabulary(ds.vocab)
    trainer = Trainer(device, 0, progress=False, jobs=1, malloc_tuning=True)
    trainer.step_times = StepTimes(trainer.device)
    if trainer.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    enc.fit(trainer, [ds.graphs[i] for i in idx], Labels(fam[idx], fam[idx], len(ds.families)))
    total = time.perf_counter() - t
    done = trainer.step_times.epochs
    measured = [e for e in (done[1:] or done) if e.steps]
    per_step = statistics.mean(e.wall / e.steps for e in measured)
    n_train = len(train) if full.max_train is None else min(len(train), full.max_train)
    full_steps = math.ceil(n_train / full.train.batch_size)
    return {
        "steps_per_epoch": measured[0].steps, "seconds_per_step": per_step,
        "phases": {p: statistics.mean(e.host[p] / e.steps for e in measured) for p in PHASES},
        "prepare": total - sum(e.wall for e in done), "train_graphs": n_train, "full_steps": full_steps,
        "estimate_train_s": per_step * full_steps * full.train.epochs,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if trainer.device.type == "cuda" else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", default="gps")
    parser.add_argument("--dataset", default="real")
    parser.add_argument("--split", default="unseen")
    parser.add_argument("--graphs", type=int, default=2048, help="training graphs probed (stratified)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    r = probe(args.encoder, load_dataset(args.dataset), args.split, args.graphs, args.epochs, args.profile, args.device)
    print(f"# epoch-probe: {args.encoder} on {args.dataset} {args.split}, {args.profile} recipe, {args.graphs} graphs, "
          f"device {args.device}: {r['steps_per_epoch']} steps an epoch, {r['seconds_per_step']:.3f} s a step "
          f"({', '.join(f'{p} {s:.3f}' for p, s in r['phases'].items())}); prepare {r['prepare']:.1f} s; "
          f"a whole run: {r['full_steps']} steps x epochs = ~{r['estimate_train_s']:.0f} s of training; "
          f"peak CUDA memory {r['peak_gib']:.2f} GiB", flush=True)
    line("epoch-probe", encoder=args.encoder, dataset=args.dataset, split=args.split, graphs=args.graphs,
         seconds_per_step=r["seconds_per_step"], estimate_train_s=r["estimate_train_s"], peak_gib=r["peak_gib"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
