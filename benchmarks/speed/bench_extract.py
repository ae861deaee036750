"""Meta-device extraction with and without the shape cache (`narbench.zoo.metacache`).

    python -m benchmarks.speed.bench_extract            # the examples/out_of_zoo.py models
    python -m benchmarks.speed.bench_extract --timm 100 # and 100 timm models (timm installed)

Prints one `extract ...` line per model (ops, CPU ms without and with the cache, whether the two
graphs are identical) and a `summary` line. Any `same=False` is a bug in the cache. The first
cached pass also wraps torch's meta kernels (`metacache.install`, once per process, ~20 ms).
"""

from __future__ import annotations

import argparse
import gc
import random
import warnings

from benchmarks.timing import cpu_timed, example, line


def _cases(timm_count: int, seed: int):
    import torch

    zoo = example("out_of_zoo")
    UNet, ResidualCNN, LSTMTagger, TransformerEncoder = (zoo.UNet, zoo.ResidualCNN, zoo.LSTMTagger,
                                                         zoo.TransformerEncoder)
    tokens = (1, 16)
    for name, cls, shape in (("UNet", UNet, (1, 3, 224, 224)), ("ResidualCNN", ResidualCNN, (1, 3, 224, 224)),
                             ("LSTMTagger", LSTMTagger, tokens), ("TransformerEncoder-64", TransformerEncoder, tokens)):
        def build(cls=cls, shape=shape, name=name):
            with torch.device("meta"):
                model = cls(layers=64) if name.endswith("-64") else cls()
            dtype = torch.long if shape == tokens else torch.float32
            return model, torch.zeros(*shape, dtype=dtype, device="meta")
        yield name, build
    if timm_count:
        import timm

        rng = random.Random(seed)
        for name in rng.sample(timm.list_models(), timm_count):
            def build(name=name):
                with torch.device("meta"):
                    model = timm.create_model(name)
                shape = (model.pretrained_cfg or {}).get("input_size", (3, 224, 224))
                return model, torch.zeros(1, *shape, device="meta")
            yield f"timm:{name}", build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timm", type=int, default=0, help="also this many timm models, sampled")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import torch

    from narbench.zoo.extract import extract_graph

    torch.set_num_threads(1)
    n = differ = 0
    total = {False: 0.0, True: 0.0}
    for name, build in _cases(args.timm, args.seed):
        try:
            model, x = build()
            if n == 0:  # warm: the first meta pass imports and initialises parts of torch
                extract_graph(model, (x,), shape_cache=False)
            graphs, ms = {}, {}
            for cache in (False, True):
                gc.collect()  # the other pass's garbage is not this pass's cost
                _, cpu, graphs[cache] = cpu_timed(lambda: extract_graph(model, (x,), shape_cache=cache))
                ms[cache] = cpu * 1e3
        except Exception as exc:  # noqa: BLE001 - a model that cannot run on meta is skipped, and said
            print(f"skip model={name} error={type(exc).__name__}")
            continue
        same = graphs[False].signature() == graphs[True].signature()
        n, differ = n + 1, differ + (not same)
        for cache in ms:
            total[cache] += ms[cache]
        line("extract", model=name, ops=graphs[True].num_nodes, plain_ms=f"{ms[False]:.1f}",
             cached_ms=f"{ms[True]:.1f}", same=same)
    line("summary", models=n, differ=differ, plain_s=f"{total[False] / 1e3:.1f}", cached_s=f"{total[True] / 1e3:.1f}",
         speedup=f"{total[False] / max(total[True], 1e-9):.2f}")


if __name__ == "__main__":
    main()
