"""narbench.allocator: scoped malloc tuning, restored after, off unless asked, a no-op without glibc."""

from __future__ import annotations

import ctypes

import pytest
import torch

from narbench.train import allocator
from narbench import cli
from narbench.cli import listing
from narbench.train.allocator import M_MMAP_MAX, M_TRIM_THRESHOLD, TUNED


class FakeLibc:
    """Records mallopt / malloc_trim calls; `accept` is what mallopt returns (1 success, 0 failure)."""

    def __init__(self, accept: int = 1) -> None:
        self.calls: list[tuple] = []
        self.accept = accept

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return self.accept

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad))
        return 1


@pytest.fixture
def fake_libc(monkeypatch):
    fake = FakeLibc()
    monkeypatch.setattr(allocator, "_libc_cache", [fake])
    for name in ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES", allocator.ENV_SWITCH):
        monkeypatch.delenv(name, raising=False)
    return fake


def test_tuned_sets_then_restores_the_startup_values(fake_libc, monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "4194304")  # the process started with its own threshold
    with allocator.tuned() as applied:
        assert applied and allocator.active()
        assert fake_libc.calls == [("mallopt", p, v) for p, v in TUNED.items()]
        fake_libc.calls.clear()
    assert not allocator.active()
    assert fake_libc.calls == [("mallopt", M_MMAP_MAX, 65536), ("mallopt", M_TRIM_THRESHOLD, 4194304),
                               ("malloc_trim", 0)]


def test_nested_blocks_restore_once_at_the_outermost(fake_libc):
    with allocator.tuned():
        with allocator.tuned() as inner:
            assert inner
        assert allocator.active()
        assert len(fake_libc.calls) == len(TUNED)  # the inner block set nothing and restored nothing
    assert not allocator.active()
    assert fake_libc.calls[-1] == ("malloc_trim", 0)


def test_restored_even_when_the_block_raises(fake_libc):
    with pytest.raises(ValueError), allocator.tuned():
        raise ValueError("boom")
    assert not allocator.active()
    assert fake_libc.calls[-1] == ("malloc_trim", 0)


def test_startup_values_follow_glibc_tunables_over_malloc_env():
    env = {"MALLOC_MMAP_MAX_": "7", "GLIBC_TUNABLES": "glibc.malloc.mmap_max=9:glibc.malloc.trim_threshold=0x1000"}
    assert allocator.startup_values(env) == {M_MMAP_MAX: 9, M_TRIM_THRESHOLD: 4096}
    assert allocator.startup_values({}) == allocator.GLIBC_DEFAULTS


def test_without_mallopt_it_is_a_plain_block(monkeypatch):
    monkeypatch.setattr(allocator, "_libc_cache", [None])
    with allocator.tuned() as applied:
        assert not applied and not allocator.active()
    assert not allocator.available()


def test_a_libc_without_mallopt_is_not_loaded(monkeypatch):
    class NoMallopt:  # e.g. musl: no gnu_get_libc_version; macOS: no mallopt
        def __init__(self, name):
            pass

    monkeypatch.setattr(allocator.ctypes, "CDLL", NoMallopt)
    assert allocator._load_libc() is None
    monkeypatch.setattr(allocator.sys, "platform", "darwin")
    assert allocator._load_libc() is None


def test_a_refused_setting_is_undone_and_reported(fake_libc):
    fake_libc.accept = 0
    with allocator.tuned() as applied:
        assert not applied and not allocator.active()
    assert ("mallopt", M_MMAP_MAX, 65536) in fake_libc.calls  # set back to the start-up values


def test_off_unless_asked_for_a_library_user(fake_libc):
    from narbench.train.trainer import Trainer

    model = torch.nn.Linear(3, 2)
    data = [torch.randn(3) for _ in range(4)]
    seen = []

    def step(m, batch):
        seen.append(allocator.active())
        return m(batch).sum()

    from narbench.train.profiles import TrainConfig

    Trainer("cpu", progress=False).fit(model, data, TrainConfig(epochs=1, batch_size=2), step)
    assert fake_libc.calls == [] and seen == [False, False]
    Trainer("cpu", progress=False, malloc_tuning=True).fit(model, data, TrainConfig(epochs=1, batch_size=2), step)
    assert seen[2:] == [True, True] and not allocator.active()


@pytest.mark.parametrize(("argv", "env", "expected"), [
    (["datasets"], None, True),
    (["--no-malloc-tuning", "datasets"], None, False),
    (["datasets"], "0", False),
])
def test_the_cli_turns_it_on_around_its_command(fake_libc, monkeypatch, argv, env, expected):
    if env is not None:
        monkeypatch.setenv(allocator.ENV_SWITCH, env)
    seen = []
    monkeypatch.setattr(listing, "run", lambda args: seen.append(allocator.active()) or 0)
    assert cli.main(argv) == 0
    assert seen == [expected] and not allocator.active()


#: Run in a fresh interpreter: a tuned block run earlier in this process (any CLI call of another
#: test) leaves large free chunks in glibc's heap, which then serve a large malloc without mmap.
REAL_GLIBC_CHECK = """
import ctypes
from narbench.train import allocator


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


libc = ctypes.CDLL(None)
libc.malloc.argtypes, libc.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2


def mmapped_after_malloc(size):
    ptr = libc.malloc(size)
    try:
        return libc.mallinfo2().hblkhd
    finally:
        libc.free(ptr)


size = 64 * 2**20  # above glibc's largest dynamic mmap threshold (32 MiB): mmapped by default
base = libc.mallinfo2().hblkhd
assert mmapped_after_malloc(size) >= base + size, "not mmapped by default"
with allocator.tuned() as applied:
    assert applied
    assert mmapped_after_malloc(size) < base + size, "mmapped inside the block"
assert mmapped_after_malloc(size) >= base + size, "not restored"
"""


@pytest.mark.skipif(not allocator.available() or not hasattr(ctypes.CDLL(None), "mallinfo2"),
                    reason="needs glibc >= 2.33")
def test_real_glibc_serves_large_blocks_from_the_heap_only_inside_the_block():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", REAL_GLIBC_CHECK], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
