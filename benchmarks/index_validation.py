"""Which encoder should the search index use, decided off `crossimpl`: validation NDCG@20 on the
index's own cross-source hold-out; prints one line per candidate.

    python benchmarks/index_validation.py [--dataset real]

The graphs are those `narbench index build` trains on (the `quick` profile's stratified subset of
the dataset's corpus graphs, seed 0, protocol `family`). `cross_source_split` holds out, for some
families several zoos implement, one zoo's graphs as queries against the rest (the pool). Each floor
is fitted on the pool alone and scored as is; each `graf-lda` variant reports the best of its own
settings on that split (what it would pick, so somewhat optimistic against the floors, which pick
nothing). Never reads a `crossimpl` query.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GRAF_LDA = ({"holdout": "cross-source"}, {"holdout": "cross-source", "wl_rounds": 3})


def main(argv=None) -> None:
    import torch

    from narbench.baselines import floors, graf
    from narbench.baselines.selection import holdout_split
    from narbench.core import registry
    from narbench.data.dataset import load_dataset, stratified_subset
    from narbench.eval.metrics import score_rankings
    from narbench.eval.retrieval import tiebreak_keys, top_k_cosine
    from narbench.harness.runner import RunConfig, make_labels, resolve
    from narbench.train.profiles import get_profile
    from narbench.train.protocol import get_protocol

    parser = argparse.ArgumentParser(description="validation NDCG@20 of index encoders off crossimpl")
    parser.add_argument("--dataset", default="real")
    args = parser.parse_args(argv)
    ds = load_dataset(args.dataset)
    graphs, profile = ds.core_graphs, get_profile("quick")
    fam = np.array([g.family for g in graphs])
    train = stratified_subset(np.arange(len(graphs)), fam, profile.max_train, seed=0)
    encoder_cls, _, _ = resolve(RunConfig(encoder="graf-lda", dataset=args.dataset))
    labels, _ = make_labels(ds, get_protocol("family"), encoder_cls, train)
    tg, y = [graphs[i] for i in train], np.asarray(labels.ce)
    pool, val = holdout_split(tg, y, "cross-source")
    pg, vg = [tg[i] for i in pool], [tg[i] for i in val]
    print(f"{args.dataset}: {len(tg)} training graphs, pool {len(pool)}, validation queries {len(val)}")
    keys = tiebreak_keys(pg)

    def ndcg(pool_x, val_x) -> float:
        ranked, _ = top_k_cosine(torch.as_tensor(val_x, dtype=torch.float32),
                                 torch.as_tensor(pool_x, dtype=torch.float32), 20, tiebreak=keys)
        return float(score_rankings(y[val], y[pool], ranked.numpy(), ks=(20,))[0]["ndcg@20"])

    print(f"wl (dim=256)          ndcg@20={ndcg(floors.wl_features(pg, 3, 256), floors.wl_features(vg, 3, 256)):.4f}")
    for r in (1, 2, 3):
        x = [floors.wl_weighted_features(part, r, 2048, "binary") for part in (pg, vg)]
        print(f"wl-binary rounds={r}    ndcg@20={ndcg(*x):.4f}")
    pairs = np.unique(graf.pair_ids(pg, len(ds.vocab))[1])
    print(f"graf                  ndcg@20={ndcg(*(graf.features(p, len(ds.vocab), pairs) for p in (pg, vg))):.4f}")
    for params in GRAF_LDA:
        enc = registry.load("encoder", "graf-lda")(len(ds.vocab), labels.num_ce_classes, profile)
        enc.set_params(params)
        _, record = enc.select(tg, y)
        print(f"graf-lda {params}: best of {len(record['scores'])} settings ndcg@20="
              f"{max(record['scores'].values()):.4f} picked {record['picked']}")


if __name__ == "__main__":
    main()
