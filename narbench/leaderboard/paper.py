"""The paper's published numbers (Pei et al., ICLR 2024, Tables 1-4), shown beside ours as a reference."""

from __future__ import annotations

from narbench.leaderboard.records import PRETRAINED, SCRATCH

# Published numbers of Pei et al. (ICLR 2024), Tables 1-4, on *their* data (not ours):
# MRR@20/50/100, MAP@20/50/100, NDCG@20/50/100 per row. Their MAP is the min(k, |R|)
# convention, comparable with our `map_capped@k`, not with ranx's `map@k`.
PAPER: dict[str, dict[str, dict[str, tuple[float, ...]]]] = {
    "table1": {
        "real": {
            "gcn": (0.737, 0.745, 0.774, 0.598, 0.560, 0.510, 0.686, 0.672, 0.628),
            "gat": (0.756, 0.776, 0.787, 0.542, 0.541, 0.538, 0.610, 0.598, 0.511),
            "ours+motif": (0.825, 0.826, 0.826, 0.593, 0.577, 0.545, 0.705, 0.692, 0.678),
        },
        "nas": {
            "gcn": (1.000, 1.000, 1.000, 0.927, 0.854, 0.858, 0.953, 0.902, 0.906),
            "gat": (1.000, 1.000, 1.000, 0.941, 0.899, 0.901, 0.961, 0.933, 0.935),
            "ours+motif": (1.000, 1.000, 1.000, 0.952, 0.932, 0.935, 0.969, 0.960, 0.958),
        },
    },
    "table2": {
        "real": {
            "node-number": (0.807, 0.809, 0.809, 0.551, 0.539, 0.537, 0.694, 0.682, 0.667),
            "motif-number": (0.817, 0.820, 0.823, 0.591, 0.522, 0.518, 0.692, 0.669, 0.661),
            "random": (0.801, 0.802, 0.804, 0.589, 0.543, 0.536, 0.699, 0.675, 0.668),
            "motif": (0.825, 0.826, 0.826, 0.593, 0.577, 0.545, 0.705, 0.692, 0.678),
        },
        "nas": {
            "node-number": (0.999, 0.999, 0.999, 0.941, 0.885, 0.883, 0.962, 0.926, 0.924),
            "motif-number": (0.998, 0.998, 0.998, 0.931, 0.872, 0.874, 0.956, 0.917, 0.919),
            "random": (1.000, 1.000, 1.000, 0.919, 0.826, 0.824, 0.949, 0.881, 0.883),
            "motif": (1.000, 1.000, 1.000, 0.952, 0.936, 0.935, 0.969, 0.957, 0.958),
        },
    },
    "table3": {
        "real": {
            "ce": (0.824, 0.828, 0.829, 0.583, 0.573, 0.539, 0.703, 0.693, 0.692),
            "cl": (0.565, 0.572, 0.573, 0.334, 0.348, 0.373, 0.502, 0.455, 0.451),
            "ce+cl": (0.825, 0.826, 0.826, 0.593, 0.577, 0.545, 0.705, 0.692, 0.678),
        },
        "nas": {
            "ce": (1.000, 1.000, 1.000, 0.953, 0.921, 0.923, 0.969, 0.952, 0.950),
            "cl": (0.925, 0.925, 0.925, 0.750, 0.658, 0.656, 0.829, 0.762, 0.764),
            "ce+cl": (1.000, 1.000, 1.000, 0.952, 0.932, 0.935, 0.969, 0.955, 0.958),
        },
    },
    "table4": {
        "real": {
            SCRATCH: (0.825, 0.826, 0.826, 0.593, 0.577, 0.545, 0.705, 0.692, 0.678),
            PRETRAINED: (0.821, 0.838, 0.839, 0.596, 0.584, 0.573, 0.712, 0.703, 0.706),
        },
    },
}
PAPER_LABEL = "paper (their data)"
MAP_NOTE = (
    "MAP convention: `MAP@k` is ranx's AP@k (divides by all relevant items |R|, the TREC "
    "convention; on `nas` |R| is about 2,700, so MAP@20 <= 0.007 for any encoder). `MAPc@k` is "
    "`map_capped@k`, the same AP rescaled to divide by min(k, |R|): the paper's MAP column uses that "
    "convention, so the paper's MAP numbers are shown under MAPc, not MAP."
)


_PAPER_NAMES = {
    "table1": {"gcn": "GCN", "gat": "GAT", "ours+motif": "Ours"},
    "table2": {"node-number": "Node Num", "motif-number": "Motif Num", "random": "Random", "motif": "Ours"},
    "table3": {"ce": "CE", "cl": "CL", "ce+cl": "CE+CL"},
    "table4": {SCRATCH: "Training from Scratch", PRETRAINED: "Pre-training with NAS"},
}



def paper_rows(paper_key: str, dataset: str) -> list[tuple[str, tuple[float, ...]]]:
    rows = PAPER.get(paper_key, {}).get(dataset, {})
    return [(f"{PAPER_LABEL}: {_PAPER_NAMES[paper_key][k]}", v) for k, v in rows.items()]
