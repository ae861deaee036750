"""Top-10 of `narbench.search` for every model of examples/out_of_zoo.py, and its out-of-family score and flag, as
JSON (one torch per run).

Run it under each supported torch (separate virtual environments) and compare the files: the
canonical graphs, hence the hits and the score read from them, must not depend on the torch that recorded them.

    python -m benchmarks.validity.bench_search_versions /tmp/s-2.13.json   # and likewise under 2.14, 2.15
"""
import json
import sys

import torch

import narbench

NAMES = ["ResidualCNN", "UNet", "LSTMTagger", "TransformerEncoder", "GPT2Decoder", "BertEncoder"]


def main(path: str) -> None:
    out = {"torch": torch.__version__}
    for n in NAMES:
        hits = narbench.search(f"examples/out_of_zoo.py:{n}", k=10)
        rows = getattr(hits, "hits", hits)
        out[n] = [(h.name, round(float(h.similarity), 4)) for h in rows]
        out[f"{n}:out_of_family"] = [getattr(hits, "out_of_family", None), getattr(hits, "no_family_fits", None)]
    with open(path, "w") as f:
        json.dump(out, f, indent=0)
    print(out["torch"], {n: out[n][0] for n in NAMES})


if __name__ == "__main__":
    main(sys.argv[1])
