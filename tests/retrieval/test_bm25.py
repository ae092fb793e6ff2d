from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from clearmed.retrieval import bm25_rank
from clearmed.retrieval.base import EvidenceError, Retriever
from clearmed.retrieval.bm25_rank import CorpusTooLargeError, RankBM25Retriever, SlowIndexWarning
from clearmed.retrieval.bm25_sparse import BM25Params, BM25sRetriever, directory_size, read_manifest
from clearmed.retrieval.tokenize import TokenizerConfig
from clearmed.signatures.records import Passage, Provenance

QUERIES = [
    ("macrocytic anemia with neuropathy from B12 deficiency", "d1"),
    ("high TSH and low free T4", "d2"),
    ("what does HbA1c measure", "d3"),
    ("IL6 cytokine acute phase", "d4"),
    ("ferritin microcytic", "d5"),
    ("inhaled corticosteroids asthma", "d6"),
    ("first-line drugs for hypertension", "d7"),
]


@pytest.fixture(params=["rank_bm25", "bm25s"])
def retriever(request: pytest.FixtureRequest, toy_passages: list[Passage]) -> Retriever:
    if request.param == "rank_bm25":
        return RankBM25Retriever(toy_passages, name="toy")
    return BM25sRetriever.build(toy_passages, name="toy")


@pytest.mark.parametrize(("query", "expected"), QUERIES)
def test_top_hit(retriever: Retriever, query: str, expected: str) -> None:
    hits = retriever.retrieve(query, 3)
    assert hits[0].id == expected


def test_hits_carry_rank_score_query(retriever: Retriever) -> None:
    hits = retriever.retrieve("macrocytic anemia", 3)
    assert [h.provenance.rank for h in hits] == list(range(1, len(hits) + 1))
    scores = [h.provenance.score for h in hits]
    assert all(s is not None and s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert {h.provenance.query for h in hits} == {"macrocytic anemia"}
    assert {h.provenance.corpus for h in hits} == {"toy"}
    assert {h.pathway for h in hits} == {"local"}
    assert {"d1", "d8"} <= {h.id for h in hits}


def test_k_and_no_match(retriever: Retriever) -> None:
    assert len(retriever.retrieve("anemia", 1)) == 1
    assert retriever.retrieve("anemia", 0) == []
    assert retriever.retrieve("xylophone quasar", 5) == []  # unknown terms: nothing, not random passages
    assert retriever.retrieve("the of and", 5) == []  # only stopwords
    assert len(retriever.retrieve("anemia", 100)) == 3  # never pads with zero-score passages


def test_is_a_retriever(retriever: Retriever) -> None:
    assert isinstance(retriever, Retriever)
    assert retriever.name == "toy"


def test_backends_agree_on_toy_corpus(toy_passages: list[Passage]) -> None:
    okapi = RankBM25Retriever(toy_passages, name="toy")
    sparse = BM25sRetriever.build(toy_passages, name="toy")
    for query, _ in [*QUERIES, ("anemia deficiency", ""), ("first-line treatment", "")]:
        assert [h.id for h in okapi.retrieve(query, 3)][:2] == [h.id for h in sparse.retrieve(query, 3)][:2]


def test_save_load_round_trip(tmp_path: Path, toy_passages: list[Passage]) -> None:
    built = BM25sRetriever.build(toy_passages, name="toy", tokenizer=TokenizerConfig(stem="simple"))
    built.save(tmp_path / "idx")
    loaded = BM25sRetriever.load(tmp_path / "idx")
    assert len(loaded) == len(toy_passages)
    assert loaded.manifest.tokenizer == TokenizerConfig(stem="simple")
    for query, _ in QUERIES:
        assert loaded.retrieve(query, 4) == built.retrieve(query, 4)
    not_mapped = BM25sRetriever.load(tmp_path / "idx", mmap=False, name="renamed")
    assert not_mapped.name == "renamed"
    assert not_mapped.retrieve("asthma", 1)[0].id == "d6"
    loaded.close()


def test_build_to_directory_streams_and_reloads(tmp_path: Path, toy_passages: list[Passage]) -> None:
    seen: list[int] = []
    index = BM25sRetriever.build(iter(toy_passages), name="toy", directory=tmp_path / "idx", progress=seen.append)
    assert index.directory == tmp_path / "idx"
    assert seen[-1] == len(toy_passages)
    manifest = read_manifest(tmp_path / "idx")
    assert manifest.passages == 8
    assert manifest.vocabulary > 30
    assert manifest.corpus == "toy"
    assert not (tmp_path / "idx.partial").exists()
    assert directory_size(tmp_path / "idx") > 0
    assert index.retrieve("levothyroxine", 1)[0].id == "d2"
    # Rebuilding over an existing index replaces it.
    index = BM25sRetriever.build(toy_passages[:2], name="toy", directory=tmp_path / "idx")
    assert len(BM25sRetriever.load(tmp_path / "idx")) == 2


def test_concurrent_queries_on_loaded_index(tmp_path: Path, toy_passages: list[Passage]) -> None:
    index = BM25sRetriever.build(toy_passages, name="toy", directory=tmp_path / "idx")
    expected = {q: [h.id for h in index.retrieve(q, 3)] for q, _ in QUERIES}
    errors: list[str] = []

    def worker() -> None:
        for _ in range(20):
            for query, ids in expected.items():
                if [h.id for h in index.retrieve(query, 3)] != ids:
                    errors.append(query)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_load_errors_are_clear(tmp_path: Path, toy_passages: list[Passage]) -> None:
    with pytest.raises(EvidenceError, match="not a clearmed index") as info:
        BM25sRetriever.load(tmp_path)
    assert info.value.kind == "index"
    BM25sRetriever.build(toy_passages, name="toy", directory=tmp_path / "idx")
    manifest_path = tmp_path / "idx" / "manifest.json"
    data = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**data, "format_version": 99}))
    with pytest.raises(EvidenceError, match="index format 99"):
        BM25sRetriever.load(tmp_path / "idx")
    manifest_path.write_text(json.dumps({**data, "passages": 9}))
    with pytest.raises(EvidenceError, match="manifest says 9"):
        BM25sRetriever.load(tmp_path / "idx")
    manifest_path.write_text("{not json")
    with pytest.raises(EvidenceError, match="unreadable manifest"):
        BM25sRetriever.load(tmp_path / "idx")
    manifest_path.write_text(json.dumps(data))
    (tmp_path / "idx" / "offsets.npy").unlink()
    with pytest.raises(EvidenceError, match=r"incomplete index, missing \['offsets.npy'\]"):
        BM25sRetriever.load(tmp_path / "idx")


def test_corrupt_passage_store(tmp_path: Path, toy_passages: list[Passage]) -> None:
    BM25sRetriever.build(toy_passages, name="toy", directory=tmp_path / "idx")
    store = tmp_path / "idx" / "passages.jsonl"
    raw = store.read_bytes()
    store.write_bytes(raw.replace(b'"pathway":"local"', b'"pathway":"lokal"'))
    index = BM25sRetriever.load(tmp_path / "idx")
    with pytest.raises(EvidenceError, match=r"passage .* is corrupt"):
        index.retrieve("asthma", 1)


def test_empty_corpus_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match="empty"):
        BM25sRetriever.build([], name="none", directory=tmp_path / "idx")
    assert not (tmp_path / "idx.partial").exists()
    with pytest.raises(CorpusTooLargeError, match="empty"):
        RankBM25Retriever([], name="none")


def _passages(n: int) -> list[Passage]:
    prov = Provenance(kind="corpus", corpus="gen")
    return [Passage(id=str(i), text=f"word{i % 7} common", pathway="local", provenance=prov) for i in range(n)]


def test_rank_bm25_warns_and_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_rank, "WARN_ABOVE", 5)
    monkeypatch.setattr(bm25_rank, "HARD_CAP", 10)
    with pytest.warns(SlowIndexWarning, match="bm25s"):
        RankBM25Retriever(_passages(8))
    with pytest.raises(CorpusTooLargeError, match=r"refuses more than 10 passages.*force=True"):
        RankBM25Retriever(_passages(11))
    with pytest.warns(SlowIndexWarning):
        assert len(RankBM25Retriever(_passages(11), force=True)) == 11


def test_shared_openstax_queries(openstax_index: BM25sRetriever) -> None:
    hits = openstax_index.retrieve("vitamin B12 deficiency pernicious anemia intrinsic factor", 5)
    assert len(hits) == 5
    assert any("b12" in h.text.lower() for h in hits)
    assert all(h.provenance.corpus == "openstax" for h in hits)
    assert len(openstax_index) > 14_000


@pytest.mark.parametrize("method", ["lucene", "robertson", "bm25+"])
def test_scores_match_bm25s_reference(toy_passages: list[Passage], method: str) -> None:
    index = BM25sRetriever.build(toy_passages, name="toy", params=BM25Params(method=method))  # type: ignore[arg-type]
    vocab = index._index.vocab_dict
    for query in ["anemia anemia deficiency", "t4 tsh levothyroxine", "anemia", "asthma beta agonists relieve"]:
        ids = [vocab[t] for t in index._tokenize(query) if t in vocab]
        expected = index._index.get_scores_from_ids(ids)
        assert index.scores(ids) == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_parity_with_rank_bm25_on_shared_corpus(openstax_index: BM25sRetriever, shared_root: Path) -> None:
    """The two backends rank alike on real data: mean top-10 overlap well above chance."""
    from clearmed.retrieval.corpus_presets import read_preset

    passages = list(read_preset("openstax", data_root=shared_root, limit=3000))
    okapi = RankBM25Retriever(passages, name="openstax")
    small = BM25sRetriever.build(passages, name="openstax")
    queries = [
        "insulin resistance type 2 diabetes",
        "bacterial cell wall peptidoglycan penicillin",
        "cardiac output stroke volume heart rate",
        "vitamin B12 absorption intrinsic factor",
        "opioid overdose naloxone respiratory depression",
    ]
    overlaps = []
    for query in queries:
        a = {h.id for h in okapi.retrieve(query, 10)}
        b = {h.id for h in small.retrieve(query, 10)}
        overlaps.append(len(a & b) / 10)
    assert sum(overlaps) / len(overlaps) >= 0.7


@pytest.mark.parametrize("size", [5, 1_000, 200_000])
@pytest.mark.parametrize("k", [1, 10, 50])
def test_top_k_matches_a_full_sort(size: int, k: int) -> None:
    from clearmed.retrieval.hits import top_k

    rng = np.random.default_rng(size + k)
    scores = rng.exponential(size=size).astype(np.float32)
    scores[rng.random(size) < 0.3] = 0.0  # non-matching passages
    scores[: min(size, 3)] = scores.max()  # ties at the top: broken by corpus order
    expected = sorted(((i, float(s)) for i, s in enumerate(scores) if s > 0), key=lambda x: (-x[1], x[0]))[:k]
    assert top_k(scores, k) == expected


def test_top_k_all_zero_and_tiny() -> None:
    from clearmed.retrieval.hits import top_k

    assert top_k(np.zeros(100_000), 10) == []
    assert top_k(np.array([0.0, 2.0]), 10) == [(1, 2.0)]
    assert top_k(np.array([]), 3) == []
