"""The configuration hash: which runs are "the same run", so a sweep can skip what is done.

A run's hash covers what decides its numbers and nothing else: encoder and its parameters
(`Encoder.PARAMS` with their values, e.g. the ablations of `ours`; a file that recorded none
counts as none), splitter and its full parameters, dataset and its version, split, protocol (`any` for a training-free encoder, which
sees no labels), profile, objective, initialisation (scratch or pretrained), seed, ranking depth
and the *code version* of the encoder and the splitter. A run with its forward compiled
(`narbench run --compile`) adds `compile: true`: its numbers agree with eager ones to rounding,
not bit for bit, so it is a configuration of its own; an eager run hashes without the field, as
every run did before it existed. How batches are built and layers propagate (packed batches, CSR
products, the fused ReLU + dropout of issue 60, docs/speed.md) is not hashed: it gives the numbers of
the code it replaced bit for bit on the CPU (tests/test_trainer_packed.py), so runs before and after
it are the same runs.

The code version is the distribution and version of the package that registers each one
(`environment.entry_points` in the result file, e.g. `narbench==0.1.0` or a third party's
`my-encoder==2.1`), not the git commit: a commit that touches docs or another encoder must not
invalidate every committed result, and a release that changes an encoder's numbers bumps its
version. The same fields are read back from any result file (old ones included, which predate the
stored hash), so results already committed are recognised without re-running. The device, the
torch version and the time are provenance, not configuration: they are recorded, not hashed.
So is the precision (`config.precision`: bfloat16 autocast on CUDA, float32 elsewhere; issue 60's decision):
it has followed the device kind since the first GPU run, so runs before and after issue 60 agree in it, and
the leaderboard's rows are keyed by device kind (`narbench.leaderboard.records`), so float32 and bfloat16
seeds are never averaged; hashing it would make a run's hash depend on where it is planned (a Slurm login
node without a GPU plans for GPU workers).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from narbench.eval.olddefaults import implied_params
from narbench.eval.result import RunResult

#: bump when the fields or their meaning change: every stored hash then differs from a new one
HASH_VERSION = 2
#: protocol of a training-free encoder (the leaderboard's `narbench.leaderboard.ANY_PROTOCOL`)
ANY_PROTOCOL = "any"
DEFAULT_OBJECTIVE = "ce+cl"
DEFAULT_TOP_K = 100
FIELDS = ("encoder", "encoder_params", "splitter", "splitter_params", "dataset", "dataset_version", "split", "protocol", "profile",
          "objective", "init", "seed", "top_k", "encoder_code", "splitter_code")
#: hashed only when present: `compile` (true), `epochs` (the graph-level stage's, when a run overrides
#: the profile's) and `curve` (true: trained on the training graphs less a validation split), so
#: that the runs without them keep the hash they always had
OPTIONAL_FIELDS = ("compile", "epochs", "curve", "holdout")
#: Encoder parameters added after runs without them were committed, with the value that is the
#: behaviour before them: at that value a parameter is hashed as absent, so those runs keep their hash
#: (`ours-ft`'s `stage1_positive`, issue 39; `best-floor`'s `holdout` and `fuse`, `graf-lda`'s `holdout`,
#: `sources` and `wl_rounds`, issue 38; `gps`' `norm_stats`, whose old value a file on `real` implies instead:
#: `narbench.eval.olddefaults`; `graf-lda`'s `wl_alphabet`, `nuisance`, `spellings` and `outside`, issue 59:
#: `spellings` was left out when it came, so from session 83 to 87 a sweep re-ran the graf-lda runs made before it).
ADDED_PARAMS = {"stage1_positive": "context", "holdout": "family", "fuse": 1, "sources": "ignore", "wl_rounds": 0,
                "norm_stats": "once", "wl_alphabet": "ops", "nuisance": 0.0, "spellings": 0.0, "outside": 0.0}
_ABSENT = object()


def config_hash(fields: dict[str, Any]) -> str:
    """16 hex digits of the SHA-256 of the canonical JSON of `fields` (`FIELDS`, and any of `OPTIONAL_FIELDS`)."""
    if not set(FIELDS) <= set(fields) <= set(FIELDS) | set(OPTIONAL_FIELDS):
        missing, extra = set(FIELDS) - set(fields), set(fields) - set(FIELDS) - set(OPTIONAL_FIELDS)
        raise ValueError(f"config hash fields: missing {sorted(missing)}, unexpected {sorted(extra)}")
    params = fields.get("encoder_params") or {}
    if any(params.get(k, _ABSENT) == v for k, v in ADDED_PARAMS.items()):
        fields = {**fields, "encoder_params": {k: v for k, v in params.items() if ADDED_PARAMS.get(k, _ABSENT) != v}}
    text = json.dumps({"hash_version": HASH_VERSION, **fields}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def code_version(origin: dict[str, Any] | None) -> str | None:
    """`distribution==version` of an entry point's origin (`registry.origin`, as result files record it)."""
    if not origin or not origin.get("distribution"):
        return None
    return f"{origin['distribution']}=={origin.get('version')}"


def result_fields(result: RunResult) -> dict[str, Any]:
    """The hashed fields of a result file, read from what it recorded."""
    cfg = result.config or {}
    run = cfg.get("run") or {}
    trained = cfg.get("labels") is not None
    objective = (((cfg.get("encoder") or {}).get("train") or {}).get("objective") or run.get("objective")
                 or ((cfg.get("profile") or {}).get("train") or {}).get("objective") or DEFAULT_OBJECTIVE)
    env = result.environment or {}
    eps = env.get("entry_points") or {}
    # Files written before entry points were recorded: the shipped names came from narbench itself.
    fallback = (env.get("packages") or {}).get("narbench")
    fallback = f"narbench=={fallback}" if fallback else None
    fields = {
        "encoder": result.encoder,
        "encoder_params": recorded_params(result),
        "splitter": result.splitter,
        "splitter_params": (cfg.get("splitter") or {}).get("params") or {},
        "dataset": (result.dataset or {}).get("name"),
        "dataset_version": str((result.dataset or {}).get("version")),
        "split": result.split,
        "protocol": result.protocol if trained else ANY_PROTOCOL,
        "profile": result.profile,
        "objective": objective,
        "init": "pretrained" if run.get("init_from") else "scratch",
        "seed": int(result.seed),
        "top_k": int(run.get("top_k", DEFAULT_TOP_K)),
        "encoder_code": code_version(eps.get("encoder")) or fallback,
        "splitter_code": code_version(eps.get("splitter")) or fallback,
    }
    if run.get("compile"):
        fields["compile"] = True
    if run.get("epochs") is not None:
        fields["epochs"] = int(run["epochs"])
    if run.get("curve"):
        fields["curve"] = True
    if run.get("holdout", "family") != "family":
        fields["holdout"] = str(run["holdout"])
    return fields


def recorded_params(result: RunResult) -> dict[str, Any]:
    """The encoder parameters a result file ran with: those it recorded, and the old value of any parameter
    added since with a default that changed its numbers (`narbench.eval.olddefaults`)."""
    params = ((result.config or {}).get("encoder") or {}).get("params") or {}
    return {**params, **implied_params(result.encoder, (result.dataset or {}).get("name"), params)}


def result_hash(result: RunResult) -> str:
    """The configuration hash of a result, recomputed from its recorded configuration."""
    return config_hash(result_fields(result))
