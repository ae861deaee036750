"""A file searched as `FILE.py:CLASS` that imports its package's modules, as research code run from a repository's
root does (`from models.layers import Block`, `from ..utils import make`), is imported as a module of that package
(`narbench.search_engine._target_model.as_package`); a file whose import is truly missing keeps its own error."""

from __future__ import annotations

import sys
import textwrap

import pytest

pytest.importorskip("torch")

from narbench.search_engine._target_inputs import TargetError  # noqa: E402
from narbench.search_engine._target_model import import_file  # noqa: E402


@pytest.fixture
def repo(tmp_path):
    files = {
        "models/__init__.py": "",
        "models/layers.py": "import torch.nn as nn\nclass Block(nn.Sequential):\n"
                            "    def __init__(self):\n        super().__init__(nn.Linear(4, 4), nn.ReLU())\n",
        "models/net.py": "import torch.nn as nn\nfrom models.layers import Block\n"
                         "class Net(nn.Sequential):\n    def __init__(self):\n        super().__init__(Block(), Block())\n",
        "pkg/__init__.py": "",
        "pkg/utils.py": "import torch.nn as nn\ndef make():\n    return nn.Linear(4, 2)\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/head.py": "from ..utils import make\nHEAD = make\n",
        "broken/net.py": "import no_such_module_anywhere_xyz\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    before = list(sys.path)
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] in ("models", "pkg", "sub")]:
        sys.modules.pop(name)
    assert sys.path == before  # nothing of the repository is left on the path


def test_a_file_importing_from_its_repository_root_is_imported_in_its_package(repo):
    module = import_file(repo / "models" / "net.py")
    assert module.__name__ == "models.net" and len(module.Net()) == 2


def test_a_relative_import_reaches_the_package_above(repo):
    module = import_file(repo / "pkg" / "sub" / "head.py")
    assert module.__name__ == "pkg.sub.head" and module.HEAD().out_features == 2


def test_a_missing_import_keeps_its_own_error(repo):
    with pytest.raises(TargetError, match="no_such_module_anywhere_xyz"):
        import_file(repo / "broken" / "net.py")
