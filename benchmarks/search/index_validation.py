"""Which encoder should the search index use, decided off `crossimpl`: validation NDCG@20 on the
index's own cross-source hold-out; prints one line per candidate.

    python -m benchmarks.search.index_validation [--dataset real]

The graphs are those `narbench index build` trains on (the `quick` profile's stratified subset of
the dataset's corpus graphs, seed 0, protocol `family`). `cross_source_split` holds out, for some
families several zoos implement, one zoo's graphs as queries against the rest (the pool). Each floor
is fitted on the pool alone and scored as is; each `graf-lda` variant reports the best of its own
settings on that split (what it would pick, so somewhat optimistic against the floors, which pick
nothing). Never reads a `crossimpl` query.
"""

from __future__ import annotations

import argparse

import numpy as np

GRAF_LDA = ({"holdout": "cross-source"}, {"holdout": "cross-source", "wl_rounds": 3})


def main(argv=None) -> None:
    from narbench.baselines.selection import CANDIDATES, Candidate, holdout_split, score_candidate
    from narbench.core import registry
    from narbench.data.dataset import load_dataset, stratified_subset
    from narbench.harness.runner import RunConfig, make_labels, resolve
    from narbench.train.profiles import get_profile
    from narbench.train.protocol import get_protocol
    from narbench.train.trainer import Trainer

    parser = argparse.ArgumentParser(description="validation NDCG@20 of index encoders off crossimpl")
    parser.add_argument("--dataset", default="real")
    args = parser.parse_args(argv)
    from narbench.search_engine.index_build import newest_corpus

    ds = newest_corpus(load_dataset(args.dataset))  # as the index build reads it
    graphs, profile = ds.core_graphs, get_profile("quick")
    fam = np.array([g.family for g in graphs])
    train = stratified_subset(np.arange(len(graphs)), fam, profile.max_train, seed=0)
    encoder_cls, _, _ = resolve(RunConfig(encoder="graf-lda", dataset=args.dataset))
    labels, _ = make_labels(ds, get_protocol("family"), encoder_cls, train)
    tg, y = [graphs[i] for i in train], np.asarray(labels.ce)
    pool, val = holdout_split(tg, y, "cross-source")
    print(f"{args.dataset}: {len(tg)} training graphs, pool {len(pool)}, validation queries {len(val)}")
    trainer = Trainer("cpu", 0, progress=False)
    floors = (Candidate("wl (dim=256)", "narbench.baselines.floors:WLCountEncoder", {"rounds": 3, "dim": 256}),
              *(c for c in CANDIDATES if c.label in ("wl-binary(rounds=1)", "wl-binary(rounds=2)",
                                                     "wl-binary(rounds=3)", "graf")))
    for cand in floors:  # each fitted on the pool, the held-out graphs query it (best-floor's own scoring)
        score = score_candidate(cand, trainer, tg, y, pool, val, len(ds.vocab), profile)["ndcg@20"]
        print(f"{cand.label:24s} ndcg@20={score:.4f}")
    for params in GRAF_LDA:
        enc = registry.load("encoder", "graf-lda")(len(ds.vocab), labels.num_ce_classes, profile)
        enc.set_params(params)
        _, record = enc.select(tg, y)
        print(f"graf-lda {params}: best of {len(record['scores'])} settings ndcg@20="
              f"{max(record['scores'].values()):.4f} picked {record['picked']}")


if __name__ == "__main__":
    main()
