"""core: the ground floor. The plugin registry (entry points), the narbench cache folder and
numba's cache under it.

May import: nothing of narbench.
"""
