"""tools/install_torch.py, the Makefile's CPU-build installer, against a simulated environment: a fake
runner plays pip and the environment's python (recording every call), a fake probe plays PyTorch's
index answering or not. No network, no real install."""

from __future__ import annotations

import http.server
import importlib.util
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "install_torch.py"
spec = importlib.util.spec_from_file_location("install_torch", SCRIPT)
it = importlib.util.module_from_spec(spec)
spec.loader.exec_module(it)

PY = "/venv/bin/python"
CPU_WHEEL = "file:///opt/wheels/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
INDEX_WHEEL = "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
PYPI_WHEEL = "https://files.pythonhosted.org/packages/torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
CUDA_REQUIRES = ['nvidia-cublas-cu12==12.8.4.1; platform_system == "Linux"', 'triton==3.6.0; platform_system == "Linux"']


class FakeEnv:
    """A virtual environment as pip and python would report it; `plain` is what plain pip installs."""

    def __init__(self, plain="local-cpu", index_rc=0, pip="23.2.1", torch=None, uninstall_rc=0, imports=True):
        self.dists = {"pip": {"version": pip, "requires": []}}
        if torch:
            self.dists.update(torch)
        self.plain, self.index_rc, self.uninstall_rc, self.imports = plain, index_rc, uninstall_rc, imports
        self.calls: list[list[str]] = []

    def installs(self):
        return [c for c in self.calls if c[1:4] == ["-m", "pip", "install"]]

    def uninstalls(self):
        return [c[5:] for c in self.calls if c[1:4] == ["-m", "pip", "uninstall"]]

    def __call__(self, cmd, capture=False):
        self.calls.append(cmd)
        assert cmd[0] == PY
        if cmd[1] == "-c" and cmd[2] == it.LIST_DISTS:
            return subprocess.CompletedProcess(cmd, 0, json.dumps(self.dists), "")
        if cmd[1] == "-c" and cmd[2] == it.TORCH_BUILD:
            if not self.imports:
                return subprocess.CompletedProcess(cmd, 1, "", "Traceback ...\nImportError: libtorch_cpu.so: cannot open")
            v = self.dists["torch"]["version"]
            cuda = "12.8" if it.is_gpu_build(self.dists["torch"]) else None
            return subprocess.CompletedProcess(cmd, 0, json.dumps([v, cuda]) + "\n", "")
        if cmd[1:4] == ["-m", "pip", "uninstall"]:
            if self.uninstall_rc == 0:
                for name in cmd[5:]:
                    self.dists.pop(name, None)
            return subprocess.CompletedProcess(cmd, self.uninstall_rc)
        if cmd[1:4] == ["-m", "pip", "install"]:
            if "-e" in cmd:
                return subprocess.CompletedProcess(cmd, 0)
            if "--index-url" in cmd:
                if self.index_rc:
                    return subprocess.CompletedProcess(cmd, self.index_rc)
                url, version, requires = INDEX_WHEEL, "2.13.0+cpu", []
            elif self.plain == "local-cpu":
                url, version, requires = CPU_WHEEL, "2.13.0+cpu", []
            elif self.plain == "pypi-cuda":  # public PyPI without find-links: the CUDA wheel and its libraries
                url, version, requires = PYPI_WHEEL, "2.13.0", CUDA_REQUIRES
                self.dists["nvidia-cublas-cu12"] = {"version": "12.8.4.1", "requires": []}
                self.dists["triton"] = {"version": "3.6.0", "requires": []}
            else:
                return subprocess.CompletedProcess(cmd, 1)
            install = []
            if self.dists.get("torch", {}).get("version") != version:
                self.dists["torch"] = {"version": version, "requires": requires}
                install = [{"metadata": {"name": "torch", "version": version}, "download_info": {"url": url}}]
            if "--report" in cmd:
                Path(cmd[cmd.index("--report") + 1]).write_text(json.dumps({"version": "1", "install": install}))
            return subprocess.CompletedProcess(cmd, 0)
        raise AssertionError(f"unexpected command {cmd}")


def reachable(url, timeout):
    reachable.urls.append(url)
    return None


def unreachable(url, timeout):
    unreachable.urls.append(url)
    return "[Errno -2] Name or service not known"


@pytest.fixture(autouse=True)
def _reset_probes():
    reachable.urls, unreachable.urls = [], []


def main(env, probe, *args):
    return it.main(["--python", PY, "--why", "no CUDA device found", *args], runner=env, prober=probe)


def test_index_reachable_installs_torch_alone_from_pytorch_cpu_index(capsys):
    """PyTorch's index serves torch alone (--no-deps, no other index beside it: no dependency confusion);
    torch's dependencies and narbench come from the default index."""
    env = FakeEnv()
    assert main(env, reachable, "--editable", ".[test]") == 0
    assert reachable.urls == ["https://download.pytorch.org/whl/cpu/torch/"]
    (torch_install, deps, editable) = env.installs()
    assert torch_install[4] == "torch==2.13.0"
    i = torch_install.index("--index-url")
    assert torch_install[i - 1:i + 2] == ["--no-deps", "--index-url", "https://download.pytorch.org/whl/cpu"]
    assert not any(a.startswith("--extra-index-url") for call in env.installs() for a in call)
    assert deps[4:] == ["torch==2.13.0"]  # the default index; torch itself is already installed and kept
    assert editable[4:] == ["-e", ".[test]"]
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("install_torch: PyTorch 2.13.0+cpu, the CPU build (torch.version.cuda is None), "
                           "installed from download.pytorch.org (PyTorch's CPU index https://download.pytorch.org/"
                           "whl/cpu; its dependencies from the default index)")
    assert "in /venv; CPU build because: no CUDA device found" in last


def test_every_install_is_constrained(tmp_path, capsys):
    pins = tmp_path / "constraints.txt"
    pins.write_text("torch==2.13.0\n")
    for probe in (reachable, unreachable):
        env = FakeEnv()
        assert main(env, probe, "--editable", ".[test]", "--constraint", str(pins)) == 0
        assert len(env.installs()) == (3 if probe is reachable else 2)
        for call in env.installs():
            i = call.index("-c")
            assert call[i + 1] == str(pins)
    env = FakeEnv()
    assert main(env, reachable, "--constraint", str(tmp_path / "missing.txt")) == 1 and env.installs() == []
    assert capsys.readouterr().err == f"install_torch: error: constraints file {tmp_path / 'missing.txt'} not found\n"


def test_dependencies_that_fail_after_torch_from_the_index(capsys):
    class DepsFail(FakeEnv):
        def __call__(self, cmd, capture=False):
            if cmd[1:4] == ["-m", "pip", "install"] and "--index-url" not in cmd and "-e" not in cmd:
                self.calls.append(cmd)
                return subprocess.CompletedProcess(cmd, 1)
            return super().__call__(cmd, capture)

    assert main(DepsFail(), reachable) == 1
    assert capsys.readouterr().err == ("install_torch: error: pip could not install the dependencies of torch==2.13.0 "
                                       "from the default index\n")


def test_index_unreachable_falls_back_to_plain_pip_and_says_so(capsys):
    env = FakeEnv()
    assert main(env, unreachable) == 0
    assert len(unreachable.urls) == 1
    (torch_install,) = env.installs()
    assert "--index-url" not in torch_install and torch_install[4] == "torch==2.13.0"
    out = capsys.readouterr().out
    assert "download.pytorch.org unreachable ([Errno -2] Name or service not known); installing with plain pip" in out
    assert ("installed from the local wheel /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl "
            "(plain pip: download.pytorch.org unreachable") in out.strip().splitlines()[-1]


def test_index_failing_during_install_falls_back_to_plain_pip(capsys):
    env = FakeEnv(index_rc=1)
    assert main(env, reachable) == 0
    first, second = env.installs()
    assert "--index-url" in first and "--index-url" not in second
    out = capsys.readouterr().out
    assert "pip install from https://download.pytorch.org/whl/cpu failed (exit 1); falling back to plain pip" in out
    assert "installed from the local wheel" in out.strip().splitlines()[-1]


def test_empty_index_means_plain_pip_only(capsys):
    env = FakeEnv()
    assert main(env, reachable, "--index", "") == 0
    assert reachable.urls == [] and "--index-url" not in env.installs()[0]
    assert "(plain pip)" in capsys.readouterr().out


def test_torch_spec_with_extra_pip_arguments_is_split():
    env = FakeEnv()
    assert main(env, unreachable, "--torch", "torch==2.13.0 --no-cache-dir") == 0
    assert env.installs()[0][4:6] == ["torch==2.13.0", "--no-cache-dir"]


def test_cuda_build_from_plain_pip_fails_in_one_line(capsys):
    """Public PyPI's torch==2.13.0 is the CUDA wheel: refused, and its libraries left so that it still imports."""
    env = FakeEnv(plain="pypi-cuda")
    assert main(env, unreachable) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("install_torch: error: torch 2.13.0 (installed from files.pythonhosted.org; plain pip: "
                          "download.pytorch.org unreachable")
    assert "is a CUDA build (torch.version.cuda = 12.8), not the CPU build" in err
    assert "PyTorch 2.13.0" not in out and env.uninstalls() == []


def test_switching_from_the_cuda_build_replaces_torch_and_removes_cuda_libraries(capsys):
    env = FakeEnv(torch={"torch": {"version": "2.13.0", "requires": CUDA_REQUIRES},
                         "nvidia-cublas-cu12": {"version": "12.8.4.1", "requires": []},
                         "triton": {"version": "3.6.0", "requires": []},
                         "cuda-pathfinder": {"version": "1.0", "requires": []}})
    assert main(env, unreachable) == 0
    assert env.uninstalls() == [["torch"], ["cuda-pathfinder", "nvidia-cublas-cu12", "triton"]]
    assert sorted(env.dists) == ["pip", "torch"]
    out = capsys.readouterr().out
    assert "replacing torch 2.13.0 (a CUDA build)" in out
    assert "removing 3 CUDA-only packages: cuda-pathfinder nvidia-cublas-cu12 triton" in out


def test_cpu_build_already_installed_is_kept(capsys):
    env = FakeEnv(torch={"torch": {"version": "2.13.0+cpu", "requires": []}})
    assert main(env, unreachable) == 0
    assert env.uninstalls() == []
    assert "already installed, kept" in capsys.readouterr().out.strip().splitlines()[-1]


def test_old_pip_without_report_still_installs(capsys):
    env = FakeEnv(pip="21.2.3")
    assert main(env, reachable) == 0
    assert "--report" not in env.installs()[0]
    assert ", installed (PyTorch's CPU index" in capsys.readouterr().out


@pytest.mark.parametrize("env, message", [
    (FakeEnv(plain="none"), "pip could not install torch==2.13.0 (exit 1; tried: plain pip: download.pytorch.org"),
    (FakeEnv(imports=False), "torch does not import in /venv/bin/python: ImportError: libtorch_cpu.so"),
    (FakeEnv(torch={"triton": {"version": "3.6.0", "requires": []}}, uninstall_rc=1), "pip could not uninstall triton"),
])
def test_failures_are_one_line_and_exit_1(capsys, env, message):
    assert main(env, unreachable) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("install_torch: error: " + message)


@pytest.mark.parametrize("version, requires, gpu", [
    ("2.13.0+cpu", [], False),
    ("2.13.0", [], False),  # macOS or an aarch64 CPU wheel: no local tag, no CUDA packages
    ("2.13.0+cu128", [], True),
    ("2.13.0+rocm6.4", [], True),
    ("2.13.0", CUDA_REQUIRES, True),  # PyPI's Linux x86 wheel
])
def test_gpu_build_is_recognised_from_metadata(version, requires, gpu):
    assert it.is_gpu_build({"version": version, "requires": requires}) is gpu


def test_probe_reports_answering_and_refusing_servers():
    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/cpu/torch/" else 404)
            self.end_headers()
            self.wfile.write(b"<a href='torch-2.13.0+cpu.whl'>x</a>")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        assert it.probe(base + "/cpu/torch/", 5) is None
        assert it.probe(base + "/missing/torch/", 5) == "HTTP 404"
    finally:
        server.shutdown()
        server.server_close()
    assert it.probe(f"http://127.0.0.1:{server.server_port}/cpu/torch/", 5)  # closed now: refused, a reason


def test_script_imports_neither_torch_nor_narbench():
    code = (f"import importlib.util, sys; s = importlib.util.spec_from_file_location('m', {str(SCRIPT)!r}); "
            "s.loader.exec_module(importlib.util.module_from_spec(s)); "
            "print(sorted({k.split('.')[0] for k in sys.modules} & {'torch', 'narbench'}))")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize("switch, calls", [("CPU=1", True), ("GPU=0", True), ("GPU=1", False)])
def test_makefile_cpu_recipe_calls_the_script(tmp_path, switch, calls):
    out = subprocess.run(["make", "-n", "setup", switch, f"VENV={tmp_path / 'v'}"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert ("tools/install_torch.py --torch \"torch==2.13.0\" --index \"https://download.pytorch.org/whl/cpu\""
            in out) is calls
    if calls:
        assert '--editable ".[test]" --why "asked for" --constraint "constraints.txt"' in out
    lines = out.splitlines()
    upgrade = lines.index(f"{tmp_path / 'v'}/bin/python -m pip install -c constraints.txt --upgrade pip")
    assert upgrade == next(i for i, ln in enumerate(lines) if "pip install" in ln or "install_torch" in ln)  # first
    if not calls:  # the CUDA build: pip installs narbench and torch from the default index, constrained
        assert f"{tmp_path / 'v'}/bin/python -m pip install -c constraints.txt -e \".[test]\"" in lines
