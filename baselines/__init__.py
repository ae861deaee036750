"""Shipped encoders, importable as `narbench.baselines` and registered by entry points.

May import: narbench.core, narbench.data, narbench.train, narbench.eval, narbench.splitters.
"""
