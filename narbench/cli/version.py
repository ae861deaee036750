"""`narbench --version`: narbench's, torch's, PyG's and the registered datasets' versions, importing none of them."""

from __future__ import annotations

import argparse

from narbench import __version__


class Version(argparse.Action):
    """`--version`: prints `versions_line` of the registry's static versions and exits 0."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from narbench.core.registry import static_versions

        print(versions_line(static_versions))
        parser.exit(0)


def versions_line(dataset_versions) -> str:
    """`narbench 0.1.0 (torch 2.13.0+cpu, torch-geometric 2.8.1; datasets nas 1.0, real 1.0)`."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(dist: str) -> str:
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            return f"{dist} not installed"

    datasets = ", ".join(f"{name} {v}" for name, v in dataset_versions("dataset").items())
    return (f"narbench {__version__} ({installed('torch')}, {installed('torch-geometric')}; "
            f"datasets {datasets or 'none registered'})")
