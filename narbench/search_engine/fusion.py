"""A fused index: an encoder's cosine and WL's, weighted, in one stored row (issue 59 item 4).

A linear discriminant (`graf-lda`) separates the corpus' families well but has cliffs: a graph a few
nodes from a corpus graph can land far from it, where WL subtree counts (`wl`) move little. A fused
index scores every graph by

    cosine(q, g) = (1 - share) * cosine_E(q, g) + share * cosine_WL(q, g)

exactly, with no code at search time: a row is the encoder's embedding cut to its leading `dims`
axes and made unit length, times sqrt(1 - share), beside the `wl` floor's counts hashed to `wl_dim`
dimensions, unit length, times sqrt(share) (CombSUM of the two cosines as one embedding, as
`best-floor --param fuse=N` fuses). The exact and FAISS backends rank those rows as any other, so
search keeps its one path (`engine.run_search`) and its cost: `dims + wl_dim` is the index's width
(256 by default, as every index), never projected.

Only an encoder whose coordinates come in order of importance can be cut to its leading axes
(`ORDERED`: `graf-lda`, whose axes are the discriminant's by decreasing eigenvalue); the index
then stores only those axes of what it fitted. An index asks for a fusion through its parameters
(`fuse_wl=SHARE`, and `fuse_dims`, `fuse_wl_dim`, `fuse_wl_alphabet`; `narbench index build --param fuse_wl=0.5`,
`index_build.DEFAULT_PARAMS`); its header records it (`fusion`), and `SearchIndex.encoder` wraps
the rebuilt encoder in `FusedEncoder`, so a query embeds as the corpus did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from narbench.data.roles import check_alphabet, in_alphabet

#: encoders whose leading coordinates carry the most, and the fitted buffer whose columns are those axes
ORDERED: dict[str, str] = {"graf-lda": "projection"}
#: the parameters of a fusion, given among an index's encoder parameters (`split_params`)
KEYS = {"fuse_wl": "share", "fuse_dims": "dims", "fuse_wl_dim": "wl_dim", "fuse_wl_alphabet": "wl_alphabet"}
#: the `wl` floor's rounds (its own default: `wl`'s vectors)
WL_ROUNDS = 3


@dataclass(frozen=True)
class Fusion:
    """`share`: WL's weight in the score (0 < share < 1); `dims`: the encoder's leading axes kept;
    `wl_dim`: WL's hashed width; `wl_alphabet`: what WL reads a node's op as (`narbench.data.roles`: `ops`, the
    vocabulary; `roles`, every activation one op and every normalisation one op)."""

    share: float
    dims: int = 128
    wl_dim: int = 128
    wl: str = "wl"
    wl_alphabet: str = "ops"

    def __post_init__(self) -> None:
        if isinstance(self.share, bool) or not isinstance(self.share, (int, float)) or not 0 < self.share < 1:
            raise ValueError(f"fuse_wl (WL's share of the score) must be a number between 0 and 1, exclusive, "
                             f"got {self.share!r}")
        for key, value in (("fuse_dims", self.dims), ("fuse_wl_dim", self.wl_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        check_alphabet(self.wl_alphabet, "fuse_wl_alphabet")

    @property
    def width(self) -> int:
        return self.dims + self.wl_dim

    def record(self) -> dict[str, Any]:
        """What an index header keeps (`from_record` reads it back)."""
        record = asdict(self)
        if self.wl_alphabet == "ops":  # an index written before the alphabet existed reads as `ops`
            del record["wl_alphabet"]
        return {**record, "wl_rounds": WL_ROUNDS, "rule": "(1 - share) * cosine(encoder's leading dims axes)"
                " + share * cosine(wl hashed to wl_dim)"}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Fusion":
        return cls(float(record["share"]), int(record["dims"]), int(record["wl_dim"]), str(record.get("wl", "wl")),
                   str(record.get("wl_alphabet", "ops")))

    def describe(self) -> str:
        on = "" if self.wl_alphabet == "ops" else f" on op {self.wl_alphabet}"
        return f"fused with {self.wl}{on} at {self.share:g}"


def split_params(encoder: str, params: dict[str, Any]) -> tuple[dict[str, Any], Fusion | None]:
    """(the encoder's own parameters, the fusion asked for by `fuse_*` among `params` or None).
    `ValueError` naming the problem for a bad value or an encoder whose axes are not ordered."""
    own = {k: v for k, v in params.items() if k not in KEYS}
    asked = {KEYS[k]: v for k, v in params.items() if k in KEYS}
    if not asked:
        return own, None
    if "share" not in asked:
        raise ValueError(f"{', '.join(k for k in params if k in KEYS)} need fuse_wl (WL's share of the score)")
    if encoder not in ORDERED:
        raise ValueError(f"fuse_wl fuses an encoder whose axes come in order of importance ({', '.join(ORDERED)}), "
                         f"not {encoder!r}")
    return own, Fusion(**asked)


def cut(encoder, name: str, fusion: Fusion) -> None:
    """Keep only the leading `fusion.dims` axes of a fitted `ORDERED` encoder (what the index stores)."""
    buffer = ORDERED[name]
    axes = getattr(encoder, buffer)
    setattr(encoder, buffer, axes[:, : fusion.dims].contiguous())


def combine(primary: np.ndarray, wl: np.ndarray, share: float) -> np.ndarray:
    """Rows whose dot products are (1 - share) times the cosines of `primary`'s rows plus `share` times
    those of `wl`'s: each part unit length (a zero row stays zero), scaled by sqrt(its weight), side by side
    (float64 arithmetic, float32 out)."""
    parts = []
    for emb, weight in ((primary, 1.0 - share), (wl, share)):
        emb = np.asarray(emb, dtype=np.float64)
        norm = np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        parts.append(np.sqrt(weight) * emb / norm)
    return np.concatenate(parts, axis=1).astype(np.float32)


def wl_encoder(num_ops: int, profile, fusion: Fusion):
    """The `wl` floor at the fusion's width (from the registry, as an index's encoder is)."""
    from narbench.core import registry

    wl = registry.load("encoder", fusion.wl)(num_ops, 1, profile)
    wl.dim = fusion.wl_dim
    return wl


class FusedEncoder:
    """An index's fitted encoder and the `wl` floor, embedding as the fused index's rows (`combine`); `vocab`:
    the index's op names (WL reads them in the fusion's alphabet)."""

    def __init__(self, primary, fusion: Fusion, vocab: Sequence[str], profile) -> None:
        self.primary, self.fusion, self.vocab = primary, fusion, tuple(vocab)
        self.wl = wl_encoder(len(self.vocab), profile, fusion)

    def eval(self) -> "FusedEncoder":
        self.primary.eval()
        return self

    def parts(self, trainer, graphs) -> tuple[np.ndarray, np.ndarray]:
        """(the encoder's leading `dims` axes, WL's hashed counts), float32."""
        primary = self.primary.embed(trainer, graphs)
        wl = self.wl.embed(trainer, in_alphabet(graphs, self.vocab, self.fusion.wl_alphabet))
        primary = primary.detach().cpu().numpy() if hasattr(primary, "detach") else np.asarray(primary)
        return primary[:, : self.fusion.dims], wl.detach().cpu().numpy()  # `wl` gives a tensor

    def embed(self, trainer, graphs) -> np.ndarray:
        return combine(*self.parts(trainer, graphs), self.fusion.share)
