"""Shipped graph splitters, importable as `narbench.splitters` and registered by entry points.

May import: narbench.core, narbench.data, narbench.train.
"""
