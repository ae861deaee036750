"""How far each injected regression moves the gate, against the bands (docs/gate.md's table).

    python -m benchmarks.validity.gate_sensitivity [--datasets nas] [--encoders gcn,gin]

For every trained encoder and degradation (`narbench.harness.degradations`): the largest move
(signed: a drop is negative) over the entry's metrics, the band of that metric, and how many
metrics moved beyond their band (what fails the gate, both ways).
"""

from __future__ import annotations

import argparse

from narbench.core import registry
from narbench.harness import degradations, gate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", default=gate.DEFAULT_REFERENCE)
    ap.add_argument("--datasets", default="nas")
    ap.add_argument("--encoders", default=None)
    args = ap.parse_args()
    encoders = args.encoders.split(",") if args.encoders else \
        [n for n in registry.names("encoder") if registry.load("encoder", n).trainable]
    print(f"{'entry':<22} {'degradation':<16} {'largest move':>12} {'metric':<16} {'its band':>9} {'beyond':>8}")
    for name in degradations.DEGRADATIONS:
        with degradations.injected(name):
            report = gate.check(args.reference, encoders=encoders, datasets=args.datasets)
        for key in sorted({c.key for c in report.cells}):
            cells = [c for c in report.cells if c.key == key and c.delta is not None]
            worst = max(cells, key=lambda c: abs(c.delta))
            n = sum(c.status in ("dropped", "improved") for c in cells)
            print(f"{key:<22} {name:<16} {worst.delta:>+12.4f} {worst.metric:<16} {worst.tolerance:>9.1e} {n:>5}/{len(cells)}")


if __name__ == "__main__":
    main()
