"""The model a search target names, built and run once: the build step of a search (`model_graph`).

* `FILE.py:CLASS`, `MODULE:CLASS`: the file or module imported (`import_file`, `import_module`), the
  class or function it names (`load_attr`) called with the target's `kwargs` on each device tried;
* an `nn.Module` instance: run as it is (its weights stay where they are);
* a zoo name: built and run by the zoo exactly as the `real` build does (`narbench.zoo.specgraph.extract_spec`),
  on the build's input (of `--input-shape`, if given).

Where and how the model runs (meta first, the example input) is `narbench.search_engine._target_run`;
the example inputs a function returns (`--inputs FILE.py:FUNC`) are `load_inputs`. Every failure is a
`TargetError` whose one line names the problem and the fix.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any, Callable

from narbench.search_engine._target_inputs import TargetError, normalise_inputs
from narbench.search_engine._target_failure import one_line
from narbench.search_engine._target_run import exited, extract, stage
from narbench.search_engine.target_text import ZOOS, parse_colon


def model_graph(target) -> tuple[Any, dict[str, Any]]:
    """The raw graph of the model `target` (a `narbench.search_engine.target.Target` of kind module, file,
    import or zoo) names, and {device, input}: built, given its example inputs, run once; a zoo model by
    the zoo, exactly as the `real` build builds and runs it."""
    if target.kind != "zoo":
        build = _builder(target)  # None: an instance, run as it is
        inputs = load_inputs(target.feed) if isinstance(target.feed, str) else target.feed
        return extract(target.label, build, instance=target.source if build is None else None, shape=target.shape,
                       inputs=inputs)
    zoo, (model, _, task) = target.source, target.name.partition("/")
    if importlib.util.find_spec(zoo) is None:
        raise TargetError(f"zoo {zoo!r} is not installed; pip install {zoo} (or pip install 'narbench[zoo]'), "
                          "or search a FILE.py:CLASS or graph instead")
    from narbench.zoo.devices import AllDevicesFailed
    from narbench.zoo.sources import UnknownModelError, ZooImportError, default_spec
    from narbench.zoo.spec import NotApplicable
    from narbench.zoo.specgraph import extract_spec

    try:
        spec = default_spec(zoo, model, task or None)
    except UnknownModelError as exc:
        raise TargetError(f"{exc}; check the name") from exc
    except ZooImportError as exc:
        raise TargetError(str(exc)) from exc
    except ImportError as exc:
        raise TargetError(f"zoo {zoo!r} fails to import ({one_line(exc)}); reinstall it") from exc
    try:
        raw, info = extract_spec(spec, input_shape=target.shape)
    except ZooImportError as exc:  # transformers imports a model's module on first use
        raise TargetError(str(exc)) from exc
    except (AllDevicesFailed, NotApplicable) as exc:
        first = exc.first if isinstance(exc, AllDevicesFailed) else exc
        raise TargetError(f"extracting {target.label} failed ({one_line(first)}); "
                          "if the input does not fit, give its shape with --input-shape") from exc
    return raw, {"device": info.get("device", ""), "input": "the real build's input", **info}


def _builder(target) -> Callable[[], Any] | None:
    """What builds the model of a file or import target: its class or function, with the target's kwargs."""
    if target.kind == "module":
        return None
    if target.kind == "file":
        module, where = import_file(target.source), str(target.source)
    else:
        module, where = import_module(target.source), f"module {target.source}"
    obj = load_attr(target.label, module, target.name, where)
    if not callable(obj):
        raise TargetError(f"{target.label} is a {type(obj).__name__}, not a class; name an nn.Module class or a "
                          "function returning one")
    kwargs = target.kwargs
    return lambda: obj(**kwargs)


def load_attr(label: str, module, attr: str, where: str):
    """`module.attr` (a dotted name), or a `TargetError` naming the nn.Module classes `module` defines."""
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            import torch

            defined = sorted(k for k, v in vars(module).items() if isinstance(v, type)
                             and issubclass(v, torch.nn.Module) and v.__module__ == module.__name__)
            hint = f" (it defines: {', '.join(defined)})" if defined else ""
            raise TargetError(f"{where} has no {attr!r}{hint}; name a class defined there")
        obj = getattr(obj, part)
    return obj


#: how many folders above a file its package may start (a repository's `models/backbones/net.py` is 2 down)
PACKAGE_DEPTH = 4


def import_file(path: Path):
    """The module of a Python file (its top level runs), its folder on `sys.path` while it imports. A file that
    imports its package's modules (`from .layers import X`, or `from models.layers import X` from a repository's
    root, as research code run from its root does) fails so; it is then imported as a module of a package rooted
    in a folder above it (`as_package`), the nearest that imports, and the first error is the one reported."""
    name = "narbench_target_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))  # the file's own imports of its neighbours
    stage(f"importing {path}")
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        sys.modules.pop(name, None)
        sys.path.remove(str(path.parent))
        found = as_package(path)
        if found is None:
            raise TargetError(f"importing {path} failed ({one_line(exc)}); fix the file") from exc
        return found
    except Exception as exc:  # noqa: BLE001 - report the user's error in one line
        sys.modules.pop(name, None)
        raise TargetError(f"importing {path} failed ({one_line(exc)}); fix the file") from exc
    except SystemExit as exc:
        sys.modules.pop(name, None)
        raise exited(f"importing {path}", exc) from None
    finally:
        if str(path.parent) in sys.path:
            sys.path.remove(str(path.parent))
    return module


def as_package(path: Path):
    """`path` imported as `a.b.file` with the folder above `a` on `sys.path`, for the nearest such root (up to
    `PACKAGE_DEPTH` folders up, each folder name a Python name) from which it imports; None when none does. A root
    whose top package is already imported from elsewhere is skipped (it would read the other one's modules)."""
    path = path.resolve()
    parts = [path.stem]
    for root in list(path.parents)[:PACKAGE_DEPTH]:
        if not parts[0].isidentifier():
            return None
        if len(parts) > 1:
            top = sys.modules.get(parts[0])
            held = [str(p) for p in getattr(top, "__path__", [])] if top is not None else []
            if top is None or any(Path(h).resolve() == root / parts[0] for h in held):
                sys.path.insert(0, str(root))
                try:
                    return importlib.import_module(".".join(parts))
                except Exception:  # noqa: BLE001 - this root does not import it: try the one above
                    for done in [m for m in sys.modules if m == parts[0] or m.startswith(parts[0] + ".")]:
                        sys.modules.pop(done, None)
                finally:
                    sys.path.remove(str(root))
        parts.insert(0, root.name)
    return None


def import_module(name: str):
    """An installed module, imported by name (its top level runs on first import)."""
    stage(f"importing {name}")
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001
        raise TargetError(f"cannot import module {name!r} ({one_line(exc)}); install it, or use "
                          f"FILE.py:CLASS for a file, or a zoo name: {', '.join(z + ':NAME' for z in ZOOS)}") from exc
    except SystemExit as exc:
        raise exited(f"importing {name}", exc) from None


def load_inputs(spec: str) -> tuple[tuple, dict[str, Any]]:
    """The (args, kwargs) that `FILE.py:FUNC` or `MODULE:FUNC` returns when called with no argument
    (what it may return: `narbench.search_engine._target_inputs.normalise_inputs`)."""
    colon = parse_colon(spec)
    if not colon:
        raise TargetError(f"--inputs takes FILE.py:FUNC or MODULE:FUNC (a function returning the example inputs), "
                          f"got {spec!r}")
    if colon[0].endswith(".py"):
        path = Path(colon[0])
        if not path.is_file():
            raise TargetError(f"file not found: {path}; check the path (--inputs is FILE.py:FUNC)")
        module, where = import_file(path), str(path)
    else:
        try:
            module, where = importlib.import_module(colon[0]), f"module {colon[0]}"
        except Exception as exc:  # noqa: BLE001
            raise TargetError(f"cannot import module {colon[0]!r} ({one_line(exc)}); --inputs is FILE.py:FUNC or "
                              "MODULE:FUNC") from exc
    func = load_attr(spec, module, colon[1], where)
    if not callable(func):
        raise TargetError(f"--inputs {spec} is a {type(func).__name__}, not a function; name a function that "
                          "returns the example inputs")
    stage(f"--inputs {spec}")
    try:
        value = func()
    except Exception as exc:  # noqa: BLE001 - report the user's error in one line
        raise TargetError(f"calling {spec} failed ({one_line(exc)}); fix the function") from exc
    except SystemExit as exc:
        raise exited(f"calling {spec}", exc) from None
    return normalise_inputs(value)
