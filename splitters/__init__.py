"""Shipped graph splitters, importable as `narbench.splitters` and registered by entry points."""
