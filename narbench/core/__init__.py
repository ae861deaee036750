"""core: the ground floor. The plugin registry (entry points), the narbench cache folder and
numba's cache under it, the one-line errors of a file that cannot be written, this host's processes,
a function run in a child process under limits (`child`: memory cap, time limit, process group), on/off
switches a context sets and the environment defaults (`switch`),
bounded reads of files a user may be handed (`safeio`: the header first, sizes capped, no pickle).

May import: nothing of narbench.
"""
