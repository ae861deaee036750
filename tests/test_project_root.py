"""narbench.core.project: the project root is found from any subfolder, and outside one the error says so."""

from pathlib import Path

import pytest

from narbench.core.project import NotInProject, find_root, resolve_default


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "leaderboard" / "deep").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "narbench"\n')
    return root


def test_the_root_is_found_from_a_subfolder(tmp_path):
    root = _project(tmp_path)
    assert find_root(root / "leaderboard" / "deep") == root.resolve()


def test_another_projects_pyproject_is_not_a_root(tmp_path):
    root = _project(tmp_path)
    other = root / "leaderboard" / "deep"
    (other / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    assert find_root(other) == root.resolve()


def test_outside_a_project_the_error_is_one_line(tmp_path):
    with pytest.raises(NotInProject) as info:
        find_root(tmp_path)
    assert "\n" not in str(info.value) and "not inside a narbench checkout" in str(info.value)


def test_a_given_path_is_kept_and_the_default_is_resolved_in_the_root(tmp_path):
    root = _project(tmp_path)
    assert resolve_default("x/ref.json", "leaderboard/reference.json", root) == Path("x/ref.json")
    assert resolve_default("leaderboard/reference.json", "leaderboard/reference.json",
                           root / "leaderboard") == root.resolve() / "leaderboard/reference.json"
