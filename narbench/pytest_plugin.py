"""pytest plugin: gate your own encoder against a committed reference in your own CI.

Registered as the `pytest11` entry point `narbench.pytest_plugin`, so it is active wherever
narbench is installed (or enable it explicitly with `-p narbench.pytest_plugin`).

Fixtures
    narbench_run(encoder, dataset="nas", profile="smoke", seed=0, splitter=None, device="cpu")
        -> RunResult. Runs once per distinct arguments per test session (cached), with the
        gate's deterministic settings.
    narbench_check(result, reference, tolerance=None, key=None)
        `assert_no_regression` that honours `--narbench-update-reference`: with the option,
        it writes the result into the reference file instead of comparing.

Helper
    assert_no_regression(result, reference, tolerance=None, key=None, update=False)
        `reference` is a reference file path (narbench gate format), a dict in that format,
        or a plain {metric: value} dict. Raises AssertionError naming every dropped metric.

Option
    --narbench-update-reference: (re)write reference entries instead of asserting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from narbench.harness import gate
from narbench.harness import reference as refmod

__all__ = ["assert_no_regression"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("narbench", "narbench regression gate")
    group.addoption("--narbench-update-reference", action="store_true", default=False,
                    help="write narbench reference entries from this run instead of comparing with them")


def _reference_metrics(reference: str | Path | Mapping[str, Any], key: str
                       ) -> tuple[dict[str, float] | None, float | dict[str, float] | None]:
    """(metrics of `key` or None when absent, the reference's own band per metric or tolerance, or None)."""
    if isinstance(reference, (str, Path)):
        reference = gate.load_reference(reference)
    if "entries" in reference:
        if "version" in reference:
            refmod.validate(dict(reference), "the given reference")
        entry = reference["entries"].get(key)
        if not entry:
            return None, None
        bands = refmod.bands_of(reference, key) if "version" in reference else reference.get("tolerance")
        return dict(entry["metrics"]), bands
    return {k: float(v) for k, v in reference.items()}, None


def assert_no_regression(
    result,
    reference: str | Path | Mapping[str, Any],
    tolerance: float | None = None,
    key: str | None = None,
    *,
    update: bool = False,
) -> list[gate.Cell]:
    """Assert that no metric of `result` (a RunResult) fell below the reference by > tolerance.

    Returns the compared cells (for further checks). With `update=True` and a file path, the
    entry for this result is written into the reference file (created if needed) instead.
    """
    __tracebackhide__ = True  # a failure shows the metric table and the caller's test, not this frame
    key = key or gate.entry_key(result)
    if update:
        if not isinstance(reference, (str, Path)):
            raise TypeError("update=True needs a reference file path, not a dict")
        path = Path(reference)
        try:
            data = gate.load_reference(path)
        except gate.GateError:
            if path.exists():
                raise
            data = {"entries": {}}
        tol = gate.DEFAULT_TOLERANCE if tolerance is None else tolerance
        gate.write_reference(path, {**data["entries"], key: gate.make_entry(result)}, data.get("tolerance", tol))
        return []
    ref_metrics, ref_tol = _reference_metrics(reference, key)
    if ref_metrics is None:
        raise AssertionError(
            f"no narbench reference entry {key!r} in {reference if isinstance(reference, (str, Path)) else 'the given dict'}; "
            "create it with `pytest --narbench-update-reference`"
        )
    tol = tolerance if tolerance is not None else (ref_tol if ref_tol is not None else gate.DEFAULT_TOLERANCE)
    current = gate.result_metrics(result)
    cells = gate.compare(key, current, ref_metrics, tol)
    unknown = sorted(set(ref_metrics) - set(current))
    dropped = [c for c in cells if c.status == "dropped"]
    if dropped or unknown:
        raise AssertionError(_failure_table(key, tol, cells, unknown))
    return cells


def _failure_table(key: str, tol: float, cells: list, unknown: list[str]) -> str:
    """Every compared metric, one line each: reference, current, delta, status (dropped first)."""
    order = {"dropped": 0, "improved": 1, "new": 2, "unchanged": 3}
    how = "band per metric" if isinstance(tol, Mapping) else f"tolerance {tol:g}"
    lines = [f"narbench regression in {key} ({how}): "
             f"{sum(c.status == 'dropped' for c in cells)} metric(s) dropped",
             f"  {'metric':<16} {'reference':>10} {'current':>10} {'delta':>10}  status"]
    for c in sorted(cells, key=lambda c: (order[c.status], c.metric)):
        ref = "-" if c.reference is None else f"{c.reference:.6f}"
        delta = "-" if c.delta is None else f"{c.delta:+.6f}"
        lines.append(f"  {c.metric:<16} {ref:>10} {c.current:>10.6f} {delta:>10}  {c.status}")
    lines += [f"  {m:<16} in the reference but not produced by this run" for m in unknown]
    return "\n".join(lines)


@pytest.fixture(scope="session")
def _narbench_cache() -> dict[tuple, Any]:
    return {}


@pytest.fixture(scope="session")
def narbench_run(_narbench_cache) -> Callable[..., Any]:
    """Factory: `narbench_run(encoder, dataset="nas", profile="smoke", seed=0, splitter=None,
    device="cpu") -> RunResult`, cached per test session."""

    def _run(encoder: str, dataset: str = "nas", profile: str = "smoke", seed: int = 0,
             splitter: str | None = None, device: str = "cpu"):
        key = (encoder, dataset, profile, seed, splitter, device)
        if key not in _narbench_cache:
            from narbench.harness.runner import RunConfig, run

            with gate.deterministic():
                ev = run(RunConfig(encoder=encoder, splitter=splitter, dataset=dataset, profile=profile, seed=seed,
                                   device=device, out=None, progress=False))
            _narbench_cache[key] = ev.result
        return _narbench_cache[key]

    return _run


@pytest.fixture
def narbench_check(request) -> Callable[..., list]:
    """`assert_no_regression` that writes the reference instead under `--narbench-update-reference`."""
    update = bool(request.config.getoption("narbench_update_reference"))

    def _check(result, reference, tolerance: float | None = None, key: str | None = None):
        __tracebackhide__ = True
        return assert_no_regression(result, reference, tolerance, key, update=update)

    return _check


def pytest_report_header(config) -> str | None:
    if config.getoption("narbench_update_reference"):
        return "narbench: --narbench-update-reference is set: reference entries are rewritten, not checked"
    return None

