"""Shared by every ranking backend: picking the top k scores, and turning a hit into a returned `Passage`."""

from __future__ import annotations

import numpy as np

from clearmed.signatures.records import Passage

# Below this many scores a plain argpartition is already sub-millisecond.
_SAMPLED_ABOVE = 50_000
_STRIDE = 64


def top_k(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Indices and scores of the `k` best positive scores, best first, ties broken by corpus order.

    Passages scoring 0 share no term with the query and are never returned.
    """
    if k <= 0 or scores.size == 0:
        return []
    pool = _candidates(scores, min(k, scores.size))
    pool = pool[scores[pool] > 0]
    order = np.lexsort((pool, -scores[pool]))[:k]
    return [(int(pool[i]), float(scores[pool[i]])) for i in order]


def _candidates(scores: np.ndarray, k: int) -> np.ndarray:
    """Every index whose score is at least the k-th best (so ties at the cut are all present).

    A full argpartition over a million scores costs ~12 ms, most of a query. Instead: the k-th best score of a
    strided sample can only be lower than or equal to the true k-th best, so the scores at or above it are a
    superset of the top k; that set has ~k * stride entries, which the caller sorts in microseconds.
    """
    if k >= scores.size:
        return np.arange(scores.size)
    if scores.size > _SAMPLED_ABOVE:
        sample = scores[::_STRIDE]
        if sample.size > k:
            threshold = np.partition(sample, sample.size - k)[sample.size - k]
            return np.flatnonzero(scores >= threshold)
    kth = scores[np.argpartition(scores, scores.size - k)[scores.size - k :]].min()
    return np.flatnonzero(scores >= kth)


def as_hit(passage: Passage, *, rank: int, score: float, query: str, backend: str | None = None) -> Passage:
    """A copy of `passage` with rank, score and query (and the backend, for web results) in its provenance."""
    update: dict[str, object] = {"rank": rank, "score": round(score, 6), "query": query}
    if backend is not None:
        update["backend"] = backend
    return passage.model_copy(update={"provenance": passage.provenance.model_copy(update=update)})
