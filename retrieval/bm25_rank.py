"""`RankBM25Retriever`: rank_bm25's BM25Okapi, the reference implementation, for small corpora.

rank_bm25 scores every document in pure Python for each query term, so a query costs about 0.5 µs per
passage per query term. The limits below come from `scripts/bench_retrieval.py` on the 2-core development
machine with MedQA question stems as queries (question-only, ~80 terms after tokenisation): ~1 s per query at
30k passages, against ~1-2 ms for bm25s.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

from rank_bm25 import BM25Okapi

from clearmed.retrieval.hits import as_hit, top_k
from clearmed.retrieval.tokenize import Tokenizer, TokenizerConfig
from clearmed.signatures.records import Passage

# Measured cost of one query term over one passage (seconds); used for the estimate in the warning.
SECONDS_PER_TERM_PASSAGE = 0.5e-6
# Above this, a question-length query takes > ~0.3 s: an eval of 1,000 questions spends minutes in BM25 alone.
WARN_ABOVE = 10_000
# Above this, a query takes > ~3 s and the index holds a Python dict per passage (GBs): refuse unless forced.
HARD_CAP = 100_000


class SlowIndexWarning(RuntimeWarning):
    """The corpus is large enough that rank_bm25 will be slow; bm25s would be much faster."""


class CorpusTooLargeError(ValueError):
    """rank_bm25 was asked to index more passages than its hard cap."""


class RankBM25Retriever:
    """BM25Okapi over passages held in memory. Implements `Retriever`."""

    backend = "rank_bm25"

    def __init__(
        self,
        passages: Iterable[Passage],
        *,
        name: str = "rank_bm25",
        tokenizer: TokenizerConfig | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        force: bool = False,
    ) -> None:
        self.name = name
        self.tokenizer_config = tokenizer or TokenizerConfig()
        self._tokenize = Tokenizer(self.tokenizer_config)
        self._passages: list[Passage] = []
        for passage in passages:
            self._passages.append(passage)
            # Check while reading so a 10M-row stream is refused early instead of after exhausting memory.
            if len(self._passages) > HARD_CAP and not force:
                raise CorpusTooLargeError(
                    f"rank_bm25 refuses more than {HARD_CAP:,} passages (corpus {name!r}): a question-length "
                    "query would take several seconds and the index several GB. Use backend 'bm25s' (the "
                    "default), or pass force=True (corpus.force = true)."
                )
        if not self._passages:
            raise CorpusTooLargeError(f"corpus {name!r} is empty: nothing to index") from None
        if len(self._passages) > WARN_ABOVE:
            estimate = len(self._passages) * 80 * SECONDS_PER_TERM_PASSAGE
            warnings.warn(
                f"rank_bm25 over {len(self._passages):,} passages: expect ~{estimate:.1f} s per question-length "
                "query (80 terms); backend 'bm25s' answers in milliseconds at this size.",
                SlowIndexWarning,
                stacklevel=2,
            )
        corpus_tokens = [self._tokenize(f"{p.title} {p.text}") for p in self._passages]
        self._index = BM25Okapi(corpus_tokens, k1=k1, b=b)

    def __len__(self) -> int:
        return len(self._passages)

    def retrieve(self, query: str, k: int) -> list[Passage]:
        tokens = self._tokenize(query)
        if not tokens:
            return []
        scores = self._index.get_scores(tokens)
        return [
            as_hit(self._passages[index], rank=rank, score=score, query=query)
            for rank, (index, score) in enumerate(top_k(scores, k), start=1)
        ]
