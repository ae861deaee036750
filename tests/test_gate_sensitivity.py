"""The gate is not blind: each known regression, injected into a trained encoder's run, fails it
against the committed reference and its measured bands (`narbench.harness.degradations`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from narbench.core import registry
from narbench.harness import degradations, gate

REFERENCE = Path(__file__).resolve().parents[1] / "leaderboard" / "reference.json"
TRAINED = [name for name in registry.names("encoder") if registry.load("encoder", name).trainable]
#: trained encoders a degradation cannot touch: graf-lda fits a linear discriminant in closed form
#: (no epochs, no message-passing layers); label noise and dot-product ranking do reach it
UNTOUCHED = {"one-epoch-fewer": {"graf-lda"}, "layer-dropped": {"graf-lda"}}


def test_every_shipped_trained_encoder_is_covered():
    assert {"gcn", "gat", "gin", "gps", "ours"} <= set(TRAINED)
    assert not {"wl", "ophist", "random"} & set(TRAINED)


@pytest.mark.slow
@pytest.mark.parametrize("degradation", list(degradations.DEGRADATIONS))
def test_the_gate_fails_on_an_injected_regression_of_every_trained_encoder(degradation):
    with degradations.injected(degradation):
        report = gate.check(REFERENCE, encoders=TRAINED, datasets=["nas"])
    assert not report.errors and not report.missing and not report.passed()
    # dropped or risen beyond the band: smoke metrics fingerprint behaviour (a layer dropped can raise them)
    caught = {c.key.split("/")[1] for c in report.dropped + report.improved}
    expected = set(TRAINED) - UNTOUCHED.get(degradation, set())
    assert caught >= expected, f"{degradation}: not caught for {sorted(expected - caught)}"


def test_an_unknown_degradation_is_named():
    with pytest.raises(KeyError, match="known: one-epoch-fewer"):
        with degradations.injected("nope"):
            pass
