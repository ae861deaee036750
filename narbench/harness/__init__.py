"""harness: the benchmark. One run through the pipeline (`runner`: dataset -> split -> splitter
-> encoder -> trainer -> embeddings -> retrieval -> metrics -> result; its record `runrecord`, its
table `runtable`), the checks before it (`preflight`), which runs are the same run (`confighash`), a
grid of runs on a launcher (`grid` -> `sweepplan` -> `sweep`; `launchers`: `local_launcher`,
`slurm_launcher`, `ray_launcher`, sharing runs through `claims`), the runs done so far (`runs`),
training-free results re-made to check them (`verify`, `narbench leaderboard --verify`) and the
regression gate (`gate`: its reference file `reference`, bands measured across environments `bands`,
injected regressions `degradations` that show it is not blind).

May import: narbench.core, narbench.data, narbench.train, narbench.eval. Encoders, splitters and
datasets come through the registry, never by import.
"""
