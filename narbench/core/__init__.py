"""core: the ground floor. The plugin registry (entry points), the narbench cache folder and
numba's cache under it, the one-line errors of a file that cannot be written, this host's processes.

May import: nothing of narbench.
"""
