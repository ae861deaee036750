"""Known regressions, injected into a run, to show that the gate catches them (mutation testing).

    with degradations.injected("label-noise"):
        report = gate.check(encoders="gin", datasets="nas")   # must fail

Each degradation is a change a careless commit could make: train one epoch fewer, shuffle 5% of
the training labels, drop a message-passing layer, rank by dot product instead of cosine. They
patch the run path (`narbench.harness.runner`) for the duration of the block only.
`tests/test_gate_sensitivity.py` asserts the gate fails on each for every trained encoder;
`benchmarks/validity/gate_sensitivity.py` prints the largest drop of each against its band.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from unittest import mock

import numpy as np

#: name -> what it does
DEGRADATIONS = {
    "one-epoch-fewer": "train every stage's last epoch out (smoke: 2 epochs -> 1 in the main stage)",
    "label-noise": "5% of the training graphs get another graph's labels (both loss terms)",
    "layer-dropped": "one message-passing layer fewer (smoke: 2 -> 1)",
    "dot-product": "rank the corpus by dot product instead of cosine similarity",
}
LABEL_NOISE = 0.05


def _profile_patch(change):
    from narbench.harness import runner

    original = runner.get_profile

    def get_profile(name, **overrides):
        return change(original(name, **overrides))

    return mock.patch.object(runner, "get_profile", get_profile)


def _fewer_epochs(profile):
    return replace(profile, train=replace(profile.train, epochs=max(1, profile.train.epochs - 1)))


def _fewer_layers(profile):
    return replace(profile, model=replace(profile.model, layers=max(1, profile.model.layers - 1)))


def _label_noise():
    from narbench.harness import runner

    original = runner.make_labels

    def make_labels(dataset, protocol, encoder_cls, idx):
        labels, record = original(dataset, protocol, encoder_cls, idx)
        rng = np.random.default_rng(12345)
        n = len(idx)
        chosen = rng.choice(n, size=max(2, int(round(LABEL_NOISE * n))), replace=False)
        donors = np.roll(chosen, 1)  # each chosen graph takes the labels of another chosen graph
        cl, ce = labels.cl.copy(), labels.ce.copy()
        cl[chosen], ce[chosen] = labels.cl[donors], labels.ce[donors]
        return replace(labels, cl=cl, ce=ce), record

    return mock.patch.object(runner, "make_labels", make_labels)


def _dot_product():
    import torch

    from narbench.harness import runner

    def top_k_dot(queries, corpus, k=100, *, device="cpu", tiebreak=None, **_):
        perm = torch.as_tensor(np.argsort(np.asarray(tiebreak), kind="stable")) if tiebreak is not None \
            else torch.arange(corpus.shape[0])
        sim = queries.to(torch.float32) @ corpus[perm].to(torch.float32).T
        val, idx = torch.topk(sim, min(k, corpus.shape[0]), dim=1)
        return perm[idx], val

    return mock.patch.object(runner, "top_k_cosine", top_k_dot)


@contextlib.contextmanager
def injected(name: str) -> Iterator[None]:
    """Runs inside the block are degraded by `name` (one of `DEGRADATIONS`)."""
    if name not in DEGRADATIONS:
        raise KeyError(f"unknown degradation {name!r}; known: {', '.join(DEGRADATIONS)}")
    patch = {"one-epoch-fewer": lambda: _profile_patch(_fewer_epochs),
             "layer-dropped": lambda: _profile_patch(_fewer_layers),
             "label-noise": _label_noise,
             "dot-product": _dot_product}[name]()
    with patch:
        yield
