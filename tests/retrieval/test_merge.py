"""Hit merging: the raw-score merge over corpora (CLEAR's and MedRAG's), the corpora in turn, and MedRAG's reciprocal
rank fusion across retrievers."""

from __future__ import annotations

import pytest

from clearmed.retrieval.merge import (
    MEDRAG_RRF_K,
    hit_key,
    merge_by_score,
    merge_hits,
    per_corpus_k,
    reciprocal_rank_fusion,
)
from clearmed.signatures.records import Passage, Provenance


def hit(corpus: str, doc_id: str, score: float, rank: int) -> Passage:
    return Passage(
        id=doc_id,
        text=f"text of {doc_id}",
        pathway="local",
        provenance=Provenance(kind="corpus", corpus=corpus, doc_id=doc_id, score=score, rank=rank, query="q"),
    )


# A corpus whose rare query terms give large BM25 scores, and one where the same terms are everywhere (small
# scores): the raw-score merge takes the first corpus's whole head; taking them in turn (what RRF over one
# retriever's corpora comes to) alternates between the two.
TEXTBOOKS = [hit("textbooks", "Gray_0", 9.0, 1), hit("textbooks", "Gray_1", 8.0, 2), hit("textbooks", "Gray_2", 7.0, 3)]
STATPEARLS = [hit("statpearls", "article-1_0", 0.9, 1), hit("statpearls", "article-2_0", 0.8, 2)]


def ids(passages: list[Passage]) -> list[str]:
    return [f"{p.provenance.corpus}:{p.provenance.doc_id}" for p in passages]


def test_clear_per_corpus_depth_is_max_of_4k_and_32() -> None:
    assert [per_corpus_k(k) for k in (1, 5, 8, 16, 32)] == [32, 32, 32, 64, 128]


def test_score_merge_and_rrf_rank_the_same_hits_differently() -> None:
    by_score = merge_by_score([TEXTBOOKS, STATPEARLS], 3)
    fused = reciprocal_rank_fusion([TEXTBOOKS, STATPEARLS], 3)
    assert ids(by_score) == ["textbooks:Gray_0", "textbooks:Gray_1", "textbooks:Gray_2"]
    assert ids(fused) == ["textbooks:Gray_0", "statpearls:article-1_0", "textbooks:Gray_1"]
    # Ranks are rewritten 1..k; the raw score stays with the score merge, the fused score replaces it in RRF.
    assert [p.provenance.rank for p in by_score] == [1, 2, 3]
    assert [p.provenance.score for p in by_score] == [9.0, 8.0, 7.0]
    assert [p.provenance.rank for p in fused] == [1, 2, 3]
    assert fused[0].provenance.score == round(1 / (MEDRAG_RRF_K + 1), 6)
    assert merge_hits([TEXTBOOKS, STATPEARLS], 3) == by_score
    in_turn = merge_hits([TEXTBOOKS, STATPEARLS], 3, "interleave")
    assert ids(in_turn) == ids(fused)  # RRF over corpora is the corpora in turn ...
    assert [p.provenance.score for p in in_turn] == [9.0, 0.9, 8.0]  # ... and the merge named so keeps raw scores


def test_the_corpus_merge_is_named_for_what_it_is() -> None:
    from clearmed.retrieval.config import CorpusConfig

    lucene = {"backend": "lucene", "db_dir": "/d", "corpora": ["textbooks"]}
    assert CorpusConfig.model_validate({**lucene, "merge": "interleave"}).merge == "interleave"
    # Before: merge = "rrf", described as MedRAG's fusion; MedRAG merges the corpora of one retriever by score.
    with pytest.raises(ValueError, match='"rrf" is now "interleave"'):
        CorpusConfig.model_validate({**lucene, "merge": "rrf"})


def test_rrf_sums_over_rankings_holding_the_same_document() -> None:
    # MedRAG's RRF-2: BM25 and MedCPT over one corpus; a snippet both find outranks one found once higher up.
    bm25 = [hit("pubmed", "a", 12.0, 1), hit("pubmed", "b", 11.0, 2)]
    dense = [hit("pubmed", "c", 0.9, 1), hit("pubmed", "b", 0.8, 2)]
    fused = reciprocal_rank_fusion([bm25, dense], 3, rrf_k=60)
    assert ids(fused) == ["pubmed:b", "pubmed:a", "pubmed:c"]
    assert fused[0].provenance.score == pytest.approx(2 / 62, abs=1e-6)


def test_same_id_in_two_corpora_is_two_documents() -> None:
    one = [hit("textbooks", "x_0", 2.0, 1)]
    other = [hit("statpearls", "x_0", 1.0, 1)]
    assert hit_key(one[0]) != hit_key(other[0])
    assert len(merge_by_score([one, other], 5)) == 2
    assert len(reciprocal_rank_fusion([one, other], 5)) == 2


def test_score_merge_keeps_a_repeated_document_once_at_its_best_score() -> None:
    merged = merge_by_score([[hit("c", "a", 1.0, 1)], [hit("c", "a", 3.0, 1), hit("c", "b", 2.0, 2)]], 5)
    assert [(p.provenance.doc_id, p.provenance.score) for p in merged] == [("a", 3.0), ("b", 2.0)]


def test_ties_keep_ranking_order_then_position() -> None:
    first = [hit("a", "a1", 1.0, 1), hit("a", "a2", 1.0, 2)]
    second = [hit("b", "b1", 1.0, 1)]
    assert ids(merge_by_score([first, second], 3)) == ["a:a1", "a:a2", "b:b1"]
    assert ids(reciprocal_rank_fusion([first, second], 3)) == ["a:a1", "b:b1", "a:a2"]


@pytest.mark.parametrize("k", [0, -1])
def test_nothing_asked_nothing_returned(k: int) -> None:
    assert merge_by_score([TEXTBOOKS], k) == []
    assert reciprocal_rank_fusion([TEXTBOOKS], k) == []
