"""The example package's own regression test (its tests/test_gate.py; named so that
narbench's own test run does not collect it here).

First run, or after a deliberate change:  pytest --narbench-update-reference
Every CI run afterwards:                  pytest
"""

from pathlib import Path

REFERENCE = Path(__file__).parent / "narbench-reference.json"
DATASET = "nas"


def test_edgeop_does_not_regress(narbench_run, narbench_check):
    result = narbench_run("edgeop", dataset=DATASET, profile="smoke", seed=0)
    narbench_check(result, REFERENCE)  # fails naming every metric that dropped


def test_edgeop_beats_the_random_floor(narbench_run):
    ours = narbench_run("edgeop", dataset=DATASET)
    floor = narbench_run("random", dataset=DATASET)
    assert ours.metrics["ndcg@20"] > floor.metrics["ndcg@20"]
