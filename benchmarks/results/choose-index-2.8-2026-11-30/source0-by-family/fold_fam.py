"""per-family family@1 on the source side's folds (seed 0), shipped candidate only: python fold_fam.py OUT.json"""
import json, sys, types
import numpy as np
from narbench.data.dataset import load_dataset
from narbench.search_engine.index_build import newest_corpus
from benchmarks.search import index_sides as S
from benchmarks.search.choose_index import candidates
ds = newest_corpus(load_dataset("real-2.3"))
cands = [c for c in candidates() if c.label == "graf-lda/roles/nuisance"]
args = types.SimpleNamespace(seed=0, graphs=1000, source_graphs="split", sides=["source"], boot=200, quick=False)
train = ds.get_split("standard").train
folds = S.source_folds(ds, 0, train=train)
out = {}
for fold in folds[:1]:
    raw = S.measure_side(ds, fold, cands, args, edit=False)[2]
    (figs, fams) = raw[cands[0].label, fold.name]
    f1 = np.asarray(figs["family@1"])
    for fam in sorted(set(fams)):
        m = np.array([x == fam for x in fams])
        out[f"{fold.name}/{fam}"] = [int(m.sum()), float(f1[m].mean())]
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(out)
