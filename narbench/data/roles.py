"""Op roles: the ops that implementations of one design choose between, read as one op (issue 59).

Which activation and which normalisation a network uses are settings of its design, not the design:
`real`'s families hold `act_layer=` variants of one zoo model, and two packages that write one
design pick them differently (on `benchmarks/search/choose_index.py`'s `source` side, real 2.3's
validation graphs of a family written by another source, the ops whose share of a graph's nodes
differs most between the two sources' graphs are relu, silu, gelu and relu6, then groupnorm and
batchnorm, and these roles hold 65% of the difference: `benchmarks/search/op_roles.py`). The `roles`
alphabet maps every op of a role to one id (the role's first op in the vocabulary), so a feature read
in it (the search index's WL part, `graf-lda`'s WL block) does not see the choice; the `ops` alphabet
is the vocabulary itself. The invariant encoder's rewrites (`narbench.train.augment`) swap within the
same roles.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

#: Pointwise nonlinearities that zoo variants swap (`act_layer=`); gates (sigmoid, tanh) are not.
ACTIVATIONS = ("relu", "relu6", "gelu", "silu", "hardswish", "mish", "elu", "leakyrelu", "prelu")
#: Normalisations packages choose between.
NORMS = ("batchnorm", "layernorm", "rmsnorm", "groupnorm")
#: the role groups, each read as one op in the `roles` alphabet
ROLES = {"activation": ACTIVATIONS, "norm": NORMS}
#: op name -> its role's name, for the ops of a role
ROLE_OF = {op: role for role, ops in ROLES.items() for op in ops}
#: the alphabets a graph's ops can be read in
ALPHABETS = ("ops", "roles")


def check_alphabet(value: object, key: str) -> str:
    """`value` when it names an alphabet, else ValueError naming `key` and the choices."""
    if value not in ALPHABETS:
        raise ValueError(f"{key} must be one of {', '.join(ALPHABETS)} (ops: the vocabulary; roles: every "
                         f"activation one op, every normalisation one op), got {value!r}")
    return str(value)


def role_table(vocab: Sequence[str]) -> np.ndarray:
    """Op id -> the id it reads as in the `roles` alphabet: a role's ops -> the id of its first op present in
    `vocab` (vocabulary order); every other op -> itself."""
    table = np.arange(len(vocab), dtype=np.int64)
    for ops in ROLES.values():
        ids = [i for i, op in enumerate(vocab) if op in ops]
        if ids:
            table[ids] = ids[0]
    return table


def in_alphabet(graphs: list, vocab: Sequence[str] | None, alphabet: str) -> list:
    """`graphs` read in `alphabet`: themselves for `ops`; for `roles`, shallow copies whose `ops` go through
    `role_table(vocab)` (the graphs themselves are not changed). ValueError when `roles` has no vocabulary."""
    check_alphabet(alphabet, "alphabet")
    if alphabet == "ops":
        return graphs
    if vocab is None:
        raise ValueError("the roles alphabet needs the dataset's op vocabulary (Encoder.use_vocabulary), and none "
                         "was given")
    table = role_table(vocab)
    out = []
    for g in graphs:
        mapped = copy.copy(g)
        mapped.ops = table[np.asarray(g.ops, dtype=np.int64)]
        out.append(mapped)
    return out
