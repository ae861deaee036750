"""An outside set's GitHub sources: the file is checked line by line, and each repository is checked out at its
pinned commit (from a local repository the test makes; no network)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from narbench.zoo import wild_sources as ws

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin:/usr/local/bin"})


@pytest.fixture
def upstream(tmp_path):
    """A repository `Some-Owner/my.net` with two commits; returns (origin template, first commit, second)."""
    repo = tmp_path / "mirror" / "Some-Owner+my.net"
    (repo / "models").mkdir(parents=True)
    _git("init", "-q", cwd=repo)
    commits = []
    (repo / "weights.bin").write_bytes(b"\0" * 64)  # not code: left out of a checkout
    (repo / "LICENSE").write_text("MIT\n")
    for body in ("WIDTH = 8\n", "WIDTH = 16\n"):
        (repo / "models" / "net.py").write_text(body)
        _git("add", ".", cwd=repo)
        _git("commit", "-q", "-m", body.strip(), cwd=repo)
        commits.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                                      check=True).stdout.strip())
    return str(tmp_path / "mirror" / "{owner}+{name}"), commits[0], commits[1]


def test_folder_names_import():
    assert ws.folder_name("Some-Owner/my.net") == "gh_some_owner_my_net"
    assert ws.folder_name("a/b").isidentifier()


def test_read_sources_names_the_bad_line(tmp_path):
    good = f"gh_a_b a/b {'0' * 40}"
    path = tmp_path / "s.txt"
    path.write_text(f"# comment\n{good}\n\n")
    assert ws.read_sources(path) == [ws.Source("gh_a_b", "a/b", "0" * 40)]
    for bad, message in ((f"gh_a_b a/b {'0' * 12}", "40-digit"), (f"gh_x a/b {'0' * 40}", "folder of a/b"),
                         (f"gh_a_b ab {'0' * 40}", "OWNER/NAME"), ("gh_a_b a/b", "FOLDER OWNER/NAME COMMIT"),
                         (good, "listed twice")):
        path.write_text(f"{good}\n{bad}\n")
        with pytest.raises(ValueError, match=rf"s\.txt:2: .*{message}"):
            ws.read_sources(path)


def test_materialise_checks_out_the_pinned_commit_and_keeps_or_refuses_what_is_there(upstream, tmp_path):
    origin, first, second = upstream
    source = ws.Source(ws.folder_name("Some-Owner/my.net"), "Some-Owner/my.net", first)
    into = tmp_path / "src"
    seen = []
    (target,) = ws.materialise([source], into, origin, progress=seen.append)
    assert (target / "models" / "net.py").read_text() == "WIDTH = 8\n"  # the pinned commit, not the newest
    assert (target / "LICENSE").is_file() and not (target / "weights.bin").exists()
    assert target == into / "gh_some_owner_my_net" and seen and first[:12] in seen[0]
    assert ws.materialise([source], into, origin) == [target]  # already there at the commit: kept
    assert ws.checkout_commit(target) == first and ws.checkout_commit(target / "models") is None
    with pytest.raises(RuntimeError, match=f"not Some-Owner/my.net@{second}"):
        ws.materialise([ws.Source(source.folder, source.repo, second)], into, origin)
    with pytest.raises(RuntimeError, match="git clone"):
        ws.materialise([ws.Source("gh_no_such", "no/such", first)], into, origin)


def test_cli_refuses_a_set_without_sources(tmp_path, capsys):
    from narbench.cli import wild_sources

    assert wild_sources.main(["--set", "wildval18", "--into", str(tmp_path)]) == 2
    assert "pip packages" in capsys.readouterr().err


def test_a_checkout_on_the_path_gives_its_commit_and_a_plain_folder_says_so(upstream, tmp_path, monkeypatch):
    from narbench.zoo.crossimpl import package_version

    origin, first, _ = upstream
    ws.materialise([ws.Source("gh_some_owner_my_net", "Some-Owner/my.net", first)], tmp_path, origin)

    (tmp_path / "gh_a_b").mkdir()
    (tmp_path / "gh_a_b" / "net.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert package_version("gh_a_b") == "a folder, not a distribution"
    assert package_version("gh_some_owner_my_net") == first  # what a graph file's header records
    assert package_version("gh_no_such_folder_here") == "not installed"
    assert package_version("numpy")[0].isdigit()


def test_no_git_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on the path
    with pytest.raises(RuntimeError, match="install git"):
        ws.materialise([ws.Source("gh_a_b", "a/b", "0" * 40)], tmp_path / "src")


def test_cli_names_a_damaged_sources_line(tmp_path, monkeypatch, capsys):
    from narbench.cli import wild_sources

    def damaged(name, version):
        raise ValueError("wildval19-1.0-sources.txt:7: 'x' is not a 40-digit commit")

    monkeypatch.setattr(ws, "sources_of", damaged)
    assert wild_sources.main(["--set", "wildval19", "--into", str(tmp_path)]) == 1
    assert "sources.txt:7" in capsys.readouterr().err
