"""Quick-profile training cost on `real` without a whole run: one epoch of each encoder over a stratified
sample of the quick profile's 6,000 training graphs (seed 0), scaled by nodes to the whole training set.

    OMP_NUM_THREADS=1 python -m benchmarks.speed.bench_train_real 150 gcn gin gps

CPU time (process_time) and wall time per epoch; data preparation (gps: RWPE) timed apart.
"""
import sys
from dataclasses import replace

import numpy as np
import torch

from benchmarks.timing import cpu_timed
from narbench.core import registry
from narbench.data.dataset import load_dataset, stratified_subset
from narbench.harness.runner import select
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    n_sample = int(argv[0]) if argv else 300
    ds = load_dataset("real")
    prof = get_profile("quick")
    train, corpus, queries = select(ds, prof, 0)
    fam = np.array([g.family for g in ds.graphs])
    sample = stratified_subset(train, fam[train], n_sample, seed=0)
    graphs = [ds.graphs[i] for i in sample]
    nodes_sample = sum(g.num_nodes for g in graphs)
    nodes_train = sum(ds.graphs[i].num_nodes for i in train)
    nodes_all = sum(g.num_nodes for g in ds.graphs)
    print(f"sample {len(graphs)} graphs {nodes_sample} nodes; training set {len(train)} graphs {nodes_train} nodes; "
          f"all {len(ds.graphs)} graphs {nodes_all} nodes", flush=True)
    families = sorted(set(fam))
    cl = np.array([families.index(g.family) for g in graphs])
    for name in argv[1:] or ["gcn", "gin", "gps"]:
        torch.manual_seed(0)
        enc = registry.load("encoder", name)(len(ds.vocab), len(families), prof)
        dw, dc, datas = cpu_timed(lambda: [enc.to_data(g, int(c), int(c)) for g, c in zip(graphs, cl)])
        tr = Trainer("cpu", 0, progress=False)
        one = replace(prof.train, epochs=1)
        ew, ec, _ = cpu_timed(lambda: tr.fit_graph_level(enc, datas, one, stage=name))
        scale = nodes_train / nodes_sample
        print(f"{name}: data {dw:.1f}s wall {dc:.1f}s cpu; one epoch on the sample {ew:.1f}s wall {ec:.1f}s cpu; "
              f"per epoch on the training set ~{ew*scale:.0f}s wall ~{ec*scale:.0f}s cpu "
              f"(x{scale:.1f} by nodes); 5 epochs ~{5*ec*scale:.0f}s cpu", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
