"""Checks before a run (`narbench.preflight`)."""

from __future__ import annotations

import pytest

from narbench.harness.preflight import PreflightError, check_device, check_output


def test_output_folder_checks_create_nothing(tmp_path):
    check_output(tmp_path / "a" / "b")  # does not exist yet: its nearest existing parent is writable
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "f").write_text("x")
    with pytest.raises(PreflightError, match="is a file, not a folder"):
        check_output(tmp_path / "f")


@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_known_devices_pass(device):
    check_device(device)


@pytest.mark.parametrize("device", ["banana", "gpu", "cuda:x", "CPU", "cuda:"])
def test_unknown_devices_name_the_accepted_ones(device):
    with pytest.raises(PreflightError, match=r"narbench runs on auto .*cpu, cuda, or cuda:N"):
        check_device(device)


def test_cuda_without_cuda_says_so():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(PreflightError, match="CUDA is not available on this machine; use cpu or auto"):
        check_device("cuda")
