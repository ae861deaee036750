"""Nearest-neighbour backends over an index's L2-normalised embeddings (cosine = inner product).

* `exact` (default): a float16 matrix-vector product per query, the leading rows rescored in
  float32: an exact, deterministic top-k (ties by row; index rows are in content-hash order).
  Fine to a few million rows in RAM.
* `faiss`: Facebook's FAISS (`pip install 'narbench[faiss]'`), for corpora of millions of
  architectures. Up to `FLAT_MAX` rows it is an exact `IndexFlatIP`; above, an inverted file with
  8-bit scalar quantisation (`IVF{nlist},SQ8`, a quarter of float32's memory), searched with
  `nprobe` lists; an index written with `FaissBackend.save` is memory-mapped on load, so a corpus
  larger than RAM can be searched.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

BACKENDS = ("exact", "faiss")
#: Corpora up to this size get an exact flat FAISS index (no training, nothing approximate).
FLAT_MAX = 200_000


class BackendError(RuntimeError):
    """A backend that is unknown or not installed (message: problem; fix)."""


def exact_scores(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Dot products of `rows` with `query` as float32 that are the same on every host: taken in float64
    (a float16 row times a float32 query is exact there; only the sum rounds, ~1e-16) and rounded once,
    so a BLAS kernel's summation order (Intel's and AMD's differ) cannot reorder equal scores
    (as `narbench.eval.retrieval` does for the benchmark's cosines)."""
    return (np.asarray(rows, dtype=np.float64) @ np.asarray(query, dtype=np.float64)).astype(np.float32)


class ExactBackend:
    """Exact cosine top-k over L2-normalised rows: a float16 screen, then exact float32 rescoring.

    Scores are screened with one float16 matrix product in torch (half the memory traffic of
    float32, one thread: a single query is memory-bound); every row within `MARGIN` of the k-th
    screened score is rescored exactly (`exact_scores`) and ranked by (-score, row). The screen's error is
    below 1e-3 for unit vectors (measured 3e-4), so the result is the exact top k.
    """

    name = "exact"
    MARGIN = 4e-3

    def __init__(self, embeddings: np.ndarray) -> None:
        import torch

        self.rows = np.asarray(embeddings)  # rescoring reads these rows at their stored precision
        self.screen = torch.from_numpy(np.ascontiguousarray(self.rows, dtype=np.float16))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows int64 [Q, k'], scores float32 [Q, k']), best first, ties by row; k' = min(k, N)."""
        import torch

        queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        n = self.rows.shape[0]
        k = min(k, n)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            q16 = torch.from_numpy(queries.astype(np.float16))
            screened = (torch.mv(self.screen, q16[0])[None] if len(q16) == 1 else (self.screen @ q16.T).T).float()
            kth = torch.topk(screened, k, dim=1).values[:, -1:] if k else screened[:, :1]
        finally:
            torch.set_num_threads(threads)
        rows = np.empty((len(queries), k), dtype=np.int64)
        scores = np.empty((len(queries), k), dtype=np.float32)
        for i, q in enumerate(queries):
            cand = torch.nonzero(screened[i] >= kth[i] - self.MARGIN).flatten().numpy()
            exact = exact_scores(self.rows[cand], q)
            best = np.lexsort((cand, -exact))[:k]
            rows[i], scores[i] = cand[best], exact[best]
        return rows, scores


class FaissBackend:
    """FAISS inner-product search: exact flat below `FLAT_MAX` rows, `IVF{nlist},SQ8` above."""

    name = "faiss"

    def __init__(self, embeddings: np.ndarray | None = None, *, factory: str | None = None, nprobe: int = 32,
                 index=None, train_size: int | None = None, seed: int = 0) -> None:
        faiss = import_faiss()
        self.nprobe = nprobe
        if index is None:
            emb = np.ascontiguousarray(embeddings, dtype=np.float32)  # FAISS takes float32
            n, d = emb.shape
            if factory is None:
                factory = "Flat" if n <= FLAT_MAX else f"IVF{ivf_lists(n)},SQ8"
            index = faiss.index_factory(d, factory, faiss.METRIC_INNER_PRODUCT)
            if not index.is_trained:  # k-means on a sample: 40 points per list (FAISS asks for 39)
                ivf = faiss.try_extract_index_ivf(index)
                train_size = train_size or 40 * (ivf.nlist if ivf is not None else 256)
                rng = np.random.default_rng(seed)
                sample = emb if n <= train_size else emb[np.sort(rng.choice(n, train_size, replace=False))]
                index.train(sample)
            index.add(emb)
        self.index = index
        self.factory = factory
        self._set_nprobe()

    def _set_nprobe(self) -> None:
        faiss = import_faiss()
        try:
            faiss.extract_index_ivf(self.index).nprobe = self.nprobe
        except RuntimeError:  # not an IVF index
            pass

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        k = min(k, self.index.ntotal)
        scores, rows = self.index.search(queries, k)
        return rows.astype(np.int64), scores

    def save(self, path: str | Path) -> None:
        import_faiss().write_index(self.index, str(path))

    @classmethod
    def load(cls, path: str | Path, *, nprobe: int = 32, mmap: bool = True) -> "FaissBackend":
        """Read a saved FAISS index; IVF lists are memory-mapped (the corpus need not fit in RAM)."""
        faiss = import_faiss()
        flags = faiss.IO_FLAG_MMAP if mmap else 0
        try:
            index = faiss.read_index(str(path), flags)
        except RuntimeError:  # flat indexes cannot be mapped
            index = faiss.read_index(str(path))
        return cls(index=index, nprobe=nprobe)


def ivf_lists(n: int) -> int:
    """Inverted lists for `n` vectors: about 4 sqrt(n), a power of two (FAISS's guideline)."""
    return 1 << max(4, round(math.log2(4 * math.sqrt(n))))


def import_faiss():
    try:
        import faiss
    except ImportError as exc:
        raise BackendError("the faiss backend needs FAISS: pip install faiss-cpu (or pip install 'narbench[faiss]'), "
                           "or use --backend exact") from exc
    return faiss


def make_backend(name: str, embeddings: np.ndarray, **options):
    """A backend by name over `embeddings` (rows L2-normalised)."""
    if name == "exact":
        return ExactBackend(embeddings)
    if name == "faiss":
        return FaissBackend(embeddings, **options)
    raise BackendError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
