"""This host: whether a process is alive here (claims of a sweep's runs, temporary folders of killed commands)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists on this host (one of another user counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:  # not a pid this system knows
        return False
    return True
