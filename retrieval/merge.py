"""One ranking from several: the raw-score merge over corpora (CLEAR's, and MedRAG's for one retriever's corpora), the
corpora taken in turn, and MedRAG's reciprocal rank fusion across retrievers.

Each takes rankings of hits (`Passage`s, best first, as every `Retriever` returns them) and give the top `k`,
re-ranked 1..k in their provenance. A hit is the same document in two rankings when its corpus and document id
agree (`hit_key`), so one snippet found by BM25 and by MedCPT is fused, while two corpora that reuse an id
are not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from clearmed.signatures.records import Passage

# How one retriever's corpora are merged: by raw score (the CLEAR code's, and MedRAG's: its BM25 over MedCorp is
# this), or taken in turn. Reciprocal rank fusion is for one document set ranked by different retrievers
# (`RankFusionRetriever`).
MergeMethod = Literal["score", "interleave"]

# MedRAG's `RetrievalSystem.retrieve(question, k=32, rrf_k=100)`: the constant its RRF-2 and RRF-4 use.
MEDRAG_RRF_K = 100


def per_corpus_k(k: int) -> int:
    """How many hits the CLEAR code asks each corpus for before merging: max(4k, 32)."""
    return max(4 * k, 32)


def hit_key(hit: Passage) -> tuple[str, str]:
    """What makes two hits the same document: (corpus, document id)."""
    return hit.provenance.corpus or "", hit.provenance.doc_id or hit.id


def merge_by_score(rankings: Sequence[Sequence[Passage]], k: int) -> list[Passage]:
    """CLEAR's merge: every hit of every ranking by its raw score, best first, top `k`.

    Raw BM25 scores of different Lucene indexes are compared as they are (as the CLEAR code does), so a corpus
    whose statistics give larger scores wins ties of relevance. Equal scores keep ranking order, then position.
    A document present in several rankings is kept once, at its best score.
    """
    if k <= 0:
        return []
    pool = [
        (-(hit.provenance.score or 0.0), source, position, hit)
        for source, ranking in enumerate(rankings)
        for position, hit in enumerate(ranking)
    ]
    pool.sort(key=lambda item: item[:3])
    merged: list[Passage] = []
    seen: set[tuple[str, str]] = set()
    for negative_score, _, _, hit in pool:
        key = hit_key(hit)
        if key in seen:
            continue
        seen.add(key)
        merged.append(_ranked(hit, len(merged) + 1, -negative_score))
        if len(merged) == k:
            break
    return merged


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Passage]], k: int, rrf_k: int = MEDRAG_RRF_K) -> list[Passage]:
    """MedRAG's reciprocal rank fusion: each hit scores sum(1 / (rrf_k + position)) over the rankings holding it
    (position 1 = best), top `k` by that sum; the fused score replaces the raw one in the provenance.

    Ties keep first appearance (ranking order, then position), as MedRAG's stable sort over its dict does.
    """
    fused: dict[tuple[str, str], tuple[Passage, float]] = {}
    for ranking in rankings:
        for position, hit in enumerate(ranking, start=1):
            key = hit_key(hit)
            first, score = fused.get(key, (hit, 0.0))
            fused[key] = (first, score + 1.0 / (rrf_k + position))
    ordered = sorted(fused.values(), key=lambda item: -item[1])[: max(k, 0)]
    return [_ranked(hit, rank, score) for rank, (hit, score) in enumerate(ordered, start=1)]


def interleave(rankings: Sequence[Sequence[Passage]], k: int) -> list[Passage]:
    """The rankings taken in turn, best first: every ranking's first hit (in ranking order), then every second one,
    top `k`; a document met again is kept once, and its raw score stays in the provenance.

    This is what reciprocal rank fusion over the corpora of one retriever comes to: no hit is in two corpora (the
    corpus is part of its key), so equal positions tie and the corpora alternate. It is no MedRAG merge."""
    merged: list[Passage] = []
    seen: set[tuple[str, str]] = set()
    if k <= 0:
        return merged
    for position in range(max((len(ranking) for ranking in rankings), default=0)):
        for ranking in rankings:
            if position >= len(ranking) or hit_key(ranking[position]) in seen:
                continue
            hit = ranking[position]
            seen.add(hit_key(hit))
            merged.append(_ranked(hit, len(merged) + 1, hit.provenance.score or 0.0))
            if len(merged) >= k:
                return merged
    return merged


def merge_hits(rankings: Sequence[Sequence[Passage]], k: int, method: MergeMethod = "score") -> list[Passage]:
    """The configured corpus merge: "score" (CLEAR's and MedRAG's, the default) or "interleave"."""
    if method == "interleave":
        return interleave(rankings, k)
    return merge_by_score(rankings, k)


def _ranked(hit: Passage, rank: int, score: float) -> Passage:
    provenance = hit.provenance.model_copy(update={"rank": rank, "score": round(score, 6)})
    return hit.model_copy(update={"provenance": provenance})
