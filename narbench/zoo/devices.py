"""Running a model's extraction on one device after another: meta first where a model is large, the CPU
where the meta device cannot run it (and the other way round), until one works.

`try_devices` returns the first graph extracted, with the device it ran on and the errors of the devices
tried before it; `AllDevicesFailed` holds every device's error when none works. A `NotApplicable`
variant is never retried.
"""

from __future__ import annotations

from typing import Any

from narbench.zoo.extract import RawGraph
from narbench.zoo.spec import NotApplicable

#: Above this many parameters a model is never run at full width on the CPU.
CPU_PARAM_LIMIT = 400_000_000


def num_params(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


class AllDevicesFailed(Exception):
    """Every device/mode tried for a spec failed; `errors` holds (mode, exception) pairs."""

    def __init__(self, errors: list[tuple[str, BaseException]]):
        self.errors = errors
        super().__init__("; ".join(f"[{m}] {type(e).__name__}: {str(e)[:300]}" for m, e in errors))

    @property
    def first(self) -> BaseException:
        return self.errors[0][1]


def try_devices(devices: list[str], run) -> tuple[RawGraph, dict[str, Any]]:
    """Run `run(device)` on each device/mode in turn; `AllDevicesFailed` if none works."""
    errors: list[tuple[str, BaseException]] = []
    for dev in devices:
        try:
            graph, info = run(dev)
            info = {"device": dev, **info}
            if errors:
                info["fallback_from"] = [f"[{m}] {type(e).__name__}: {str(e)[:200]}" for m, e in errors]
            return graph, info
        except NotApplicable:
            raise
        except Exception as exc:  # noqa: BLE001 - the next device may work
            errors.append((dev, exc))
    raise AllDevicesFailed(errors)
