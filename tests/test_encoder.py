"""The encoder contract helpers (`narbench.encoder`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Every warning of a fresh process is recorded ("always"): torch_geometric must not be imported yet.
_SCRIPT = """
import sys, warnings
sys.path.insert(0, {tests!r})
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    from conftest import toy_graphs
    from narbench.data.dataset import GraphDataset, stratified_split
    from narbench.harness.runner import RunConfig, run
    graphs = toy_graphs(per_family=6)
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    ds = GraphDataset("toy", "0", [f"op{{i}}" for i in range(8)], graphs, "0" * 64, split)
    assert "torch_geometric" not in sys.modules
    for encoder in ("ours", "gcn"):
        run(RunConfig(encoder=encoder, profile="smoke", out=None, progress=False), dataset=ds)
    assert "torch_geometric" in sys.modules
print("WARNINGS:", [str(w.message) for w in seen if "jit" in str(w.message)])
"""


@pytest.mark.slow
def test_runs_of_ours_and_gcn_raise_no_torch_jit_script_warning():
    """torch_geometric's import-time `torch.jit.script` deprecation is silenced where narbench imports it."""
    code = _SCRIPT.format(tests=str(ROOT / "tests"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "WARNINGS: []" in out.stdout, out.stdout
