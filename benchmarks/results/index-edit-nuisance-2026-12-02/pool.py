"""Pooled wildval 1-15 (2.11 files) figures of an index: python pool.py INDEX [INDEX ...]"""
import sys, numpy as np
from benchmarks.search.wild import measure
from narbench.datasets.wild import outside_set, read_graphs, VALIDATIONS
from narbench.search_engine.index_file import load_index
for path in sys.argv[1:]:
    index = load_index(None, None if path == "shipped" else path)
    T=[];P=[];FF=[];NF=[];per=[]
    for name in VALIDATIONS:
        ws=[read_graphs(canonical=c, name=name) for c in outside_set(name).files]
        w=[x for x in ws if list(x.vocab)==list(index.vocab)][-1]
        m=measure(index,w.graphs,w.families,w.vocab)
        fits=np.array([bool(f) for f in w.families])
        T+=list(m['top1'][fits]);P+=list(m['p10'][fits]);FF+=list(m['flagged'][fits]);NF+=list(m['flagged'][~fits])
        per.append(f"{name}:{m['top1'][fits].mean():.2f}")
    print(f"{path}: top1 {np.mean(T):.3f} ({int(np.sum(T))}/{len(T)}) P@10 {np.mean(P):.3f} none flagged {int(np.sum(NF))}/{len(NF)} fit flagged {int(np.sum(FF))}/{len(FF)}")
    print("   ", " ".join(per), flush=True)
