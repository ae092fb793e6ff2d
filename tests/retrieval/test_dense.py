"""MedCPT dense retrieval on a tiny BERT the tests create: the real loading, encoding, index and fusion code.

The MedCPT weights are not reachable here, so each encoder is a randomly initialised two-head BERT with a
forty-word vocabulary, saved with `save_pretrained` and loaded through the same `from_pretrained` call that
loads `ncbi/MedCPT-Query-Encoder` (the encoder setting names the folder instead of the hub id).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from clearmed.api.assemble import build_program
from clearmed.backbones.config import ConfigError
from clearmed.config import parse_config
from clearmed.core.errors import UsageError
from clearmed.programs.catalog import PROGRAMS
from clearmed.programs.pathways.web_query import build_query
from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.bm25_sparse import BM25sRetriever
from clearmed.retrieval.config import CorpusConfig
from clearmed.retrieval.corpus import MEDRAG_MAPPING, read_file
from clearmed.retrieval.dense import (
    ARTICLE_MAX_TOKENS,
    INDEX_SUBDIR,
    MEDCPT_ARTICLE_ENCODER,
    MEDCPT_QUERY_ENCODER,
    QUERY_MAX_TOKENS,
    MedCPTConfig,
    MedCPTIndex,
    MedCPTQueryEncoder,
    MedCPTRetriever,
    MergedCorporaRetriever,
    RankFusionRetriever,
    build_medcpt_index,
    medcpt_index_dir,
    open_medcpt,
)
from clearmed.retrieval.factory import build_retriever
from clearmed.signatures.records import Passage, Provenance
from clearmed.testing import QUESTION, pathway_replies, scripted_lm

EXTRA = ("torch", "transformers", "faiss")
needs_extra = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in EXTRA),
    reason="the medcpt extra (torch, transformers, faiss-cpu) is not installed: pip install 'clearmed[medcpt]'",
)

VOCABULARY = """
vitamin b12 deficiency causes macrocytic anemia and neuropathy iron microcytic ferritin low high tsh t4 thyroid
hypothyroidism levothyroxine treat with asthma inhaled corticosteroids control the of a is in heart failure
diuretics first line drug
"""
WORDS = VOCABULARY.split()
BACKBONES = {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}}
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# MedRAG's chunk files: one snippet a line, id = <file stem>_<line>.
CHUNKS: dict[str, dict[str, list[tuple[str, str]]]] = {
    "textbooks": {
        "Anatomy_Gray": [
            ("Thyroid", "low t4 with high tsh is hypothyroidism"),
            ("Heart", "heart failure is treated with diuretics"),
        ],
        "Pharmacology_Katzung": [
            ("Vitamin B12", "vitamin b12 deficiency causes macrocytic anemia and neuropathy"),
            ("Iron", "iron deficiency causes microcytic anemia with low ferritin"),
            ("Asthma", "inhaled corticosteroids control asthma"),
        ],
    },
    "statpearls": {
        "article-100": [
            ("Hypothyroidism", "treat hypothyroidism with levothyroxine"),
            ("Anemia", "anemia is low hemoglobin"),
        ],
    },
}


def save_tiny_bert(directory: Path, seed: int) -> Path:
    """A random BERT (hidden 16, one layer) and its WordPiece tokenizer, saved as the hub's encoders are."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch = pytest.importorskip("torch")
    vocab_dir = directory / "vocab"
    vocab_dir.mkdir(parents=True)
    (vocab_dir / "vocab.txt").write_text("\n".join(SPECIAL + WORDS) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(str(vocab_dir))
    config = BertConfig(
        vocab_size=len(SPECIAL) + len(WORDS),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        initializer_range=0.5,  # larger than BERT's 0.02, so every token visibly moves the [CLS] vector
    )
    torch.manual_seed(seed)
    model = BertModel(config)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


@pytest.fixture(scope="module")
def encoders(tmp_path_factory: pytest.TempPathFactory) -> MedCPTConfig:
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("medcpt")
    return MedCPTConfig(
        query_encoder=str(save_tiny_bert(root / "query", seed=1)),
        article_encoder=str(save_tiny_bert(root / "article", seed=2)),
    )


def write_chunks(db_dir: Path, corpus: str) -> None:
    chunk_dir = db_dir / corpus / "chunk"
    chunk_dir.mkdir(parents=True)
    for source, snippets in CHUNKS[corpus].items():
        lines = []
        for line, (title, content) in enumerate(snippets):
            item = {"id": f"{source}_{line}", "title": title, "content": content, "contents": f"{title}. {content}"}
            lines.append(json.dumps(item))
        (chunk_dir / f"{source}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def cls_of(folder: str, texts: list[str], pairs: list[str] | None = None, *, truncate: bool = True) -> np.ndarray:
    """What the model card computes, written out here: tokenizer, model, last_hidden_state[:, 0, :]."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder)
    encoded = tokenizer(texts, pairs, truncation=truncate, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**encoded).last_hidden_state[:, 0, :].numpy()


def plant_embeddings(db_dir: Path, corpus: str, vectors: dict[str, np.ndarray]) -> None:
    """Embeddings as MedRAG's downloads deliver them (embedding/<source>.npy), before the faiss index is built."""
    folder = medcpt_index_dir(db_dir, corpus) / "embedding"
    folder.mkdir(parents=True)
    for source, rows in vectors.items():
        np.save(folder / f"{source}.npy", rows.astype(np.float32))


def aimed_vectors(query_vector: np.ndarray, corpus: str, target: tuple[str, int], base: float) -> dict[str, np.ndarray]:
    """One vector per snippet of `corpus`, so that every inner product with the query is known in advance: the
    target's is twice the query's direction; the n-th other snippet in index order points away by base + n."""
    unit = query_vector / np.linalg.norm(query_vector)
    vectors, position = {}, 0
    for source, snippets in sorted(CHUNKS[corpus].items()):
        rows = []
        for line in range(len(snippets)):
            rows.append(unit * (2.0 if (source, line) == target else -(base + position)))
            position += 1
        vectors[source] = np.stack(rows)
    return vectors


# --- the encoders -------------------------------------------------------------------------------------------------


def test_medrags_hub_ids_and_index_folder_are_the_defaults() -> None:
    config = MedCPTConfig()
    assert (config.query_encoder, config.article_encoder) == (MEDCPT_QUERY_ENCODER, MEDCPT_ARTICLE_ENCODER)
    assert MEDCPT_QUERY_ENCODER == "ncbi/MedCPT-Query-Encoder"
    assert medcpt_index_dir(Path("/db"), "pubmed") == Path("/db/pubmed/index/ncbi/MedCPT-Article-Encoder")
    assert Path("index/ncbi/MedCPT-Article-Encoder") == INDEX_SUBDIR
    # MedRAG's query length (sentence-transformers' default), not the model card's 64; articles at 512 in both.
    assert (QUERY_MAX_TOKENS, ARTICLE_MAX_TOKENS, config.query_max_tokens) == (512, 512, 512)


@needs_extra
def test_a_query_is_the_cls_vector_of_the_query_encoder(encoders: MedCPTConfig) -> None:
    query = "vitamin b12 deficiency causes macrocytic anemia"
    vector = MedCPTQueryEncoder(encoders.query_encoder).encode(query)

    assert vector.shape == (1, 16)
    assert vector.dtype == np.float32
    np.testing.assert_allclose(vector, cls_of(encoders.query_encoder, [query]), rtol=1e-5, atol=1e-6)

    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(encoders.query_encoder)
    with torch.no_grad():
        hidden = AutoModel.from_pretrained(encoders.query_encoder)(**tokenizer([query], return_tensors="pt"))
    mean_pooled = hidden.last_hidden_state.mean(dim=1).numpy()
    assert not np.allclose(vector, mean_pooled, atol=1e-3)  # CLS pooling, not the sentence-transformers default


@needs_extra
def test_a_query_is_read_whole_up_to_512_tokens_as_medrag_reads_it(encoders: MedCPTConfig) -> None:
    words = [WORDS[i % len(WORDS)] for i in range(100)]  # one WordPiece token per word
    whole = cls_of(encoders.query_encoder, [" ".join(words)], truncate=False)
    # Before: cut at 64 tokens, so a vignette's last sentence (the question) never reached the encoder.
    assert MedCPTConfig().query_max_tokens == 512
    vector = MedCPTQueryEncoder(encoders.query_encoder).encode(" ".join(words))
    np.testing.assert_allclose(vector, whole, rtol=1e-5, atol=1e-6)


@needs_extra
def test_a_query_is_cut_at_64_tokens_as_the_model_card_says_when_asked(encoders: MedCPTConfig) -> None:
    words = [WORDS[i % len(WORDS)] for i in range(100)]  # one WordPiece token per word
    vector = MedCPTQueryEncoder(encoders.query_encoder, max_tokens=64).encode(" ".join(words))

    # [CLS] + 62 words + [SEP] = 64 tokens: the same vector as the first 62 words alone...
    np.testing.assert_allclose(vector, cls_of(encoders.query_encoder, [" ".join(words[:62])]), rtol=1e-5, atol=1e-6)
    # ...and not the vector the whole query gives when nothing cuts it.
    whole = cls_of(encoders.query_encoder, [" ".join(words)], truncate=False)
    assert np.abs(vector - whole).max() > 1e-2


@needs_extra
def test_an_encoder_that_cannot_load_is_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(EvidenceError, match="cannot load the encoder") as caught:
        MedCPTQueryEncoder(str(empty))
    assert str(empty) in str(caught.value)
    assert "\n" not in str(caught.value)
    assert caught.value.backend == "medcpt"


def test_a_missing_extra_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)  # as if faiss-cpu were not installed
    with pytest.raises(EvidenceError, match=r"pip install 'clearmed\[medcpt\]' \(faiss is missing\)") as caught:
        open_medcpt(tmp_path, ["textbooks"])
    assert "\n" not in str(caught.value)


# --- the index in MedRAG's layout -----------------------------------------------------------------------------------


@needs_extra
def test_building_writes_medrags_layout_with_article_pairs(tmp_path: Path, encoders: MedCPTConfig) -> None:
    write_chunks(tmp_path, "textbooks")
    folder = build_medcpt_index(tmp_path, "textbooks", encoders)

    assert folder == tmp_path / "textbooks" / "index" / "ncbi" / "MedCPT-Article-Encoder"
    assert sorted(p.name for p in (folder / "embedding").iterdir()) == ["Anatomy_Gray.npy", "Pharmacology_Katzung.npy"]
    rows = [json.loads(line) for line in (folder / "metadatas.jsonl").read_text().splitlines()]
    assert rows == [
        {"index": 0, "source": "Anatomy_Gray"},
        {"index": 1, "source": "Anatomy_Gray"},
        {"index": 0, "source": "Pharmacology_Katzung"},
        {"index": 1, "source": "Pharmacology_Katzung"},
        {"index": 2, "source": "Pharmacology_Katzung"},
    ]
    snippets = CHUNKS["textbooks"]["Pharmacology_Katzung"]
    expected = cls_of(encoders.article_encoder, [t for t, _ in snippets], [c for _, c in snippets])
    np.testing.assert_allclose(np.load(folder / "embedding" / "Pharmacology_Katzung.npy"), expected, atol=1e-5)

    import faiss

    index = faiss.read_index(str(folder / "faiss.index"))
    assert (index.ntotal, index.d, index.metric_type) == (5, 16, faiss.METRIC_INNER_PRODUCT)
    assert not list(folder.glob("*.partial"))


@needs_extra
def test_retrieval_returns_the_snippet_with_corpus_and_chunk_id(tmp_path: Path, encoders: MedCPTConfig) -> None:
    write_chunks(tmp_path, "textbooks")
    query = "vitamin b12 deficiency anemia"
    query_vector = MedCPTQueryEncoder(encoders.query_encoder).encode(query)[0]
    plant_embeddings(tmp_path, "textbooks", aimed_vectors(query_vector, "textbooks", ("Pharmacology_Katzung", 0), 1))
    build_medcpt_index(tmp_path, "textbooks", encoders)  # the downloaded embeddings are indexed, not re-encoded

    [retriever] = open_medcpt(tmp_path, ["textbooks"], encoders)
    hits = retriever.retrieve(query, 3)
    assert retriever.encoder.max_tokens == 512
    [card] = open_medcpt(tmp_path, ["textbooks"], encoders.model_copy(update={"query_max_tokens": 64}))
    assert card.encoder.max_tokens == 64  # `[corpus.medcpt] query_max_tokens` reaches the encoder

    top = hits[0]
    assert top.id == "Pharmacology_Katzung_0"
    assert (top.title, top.text) == ("Vitamin B12", "vitamin b12 deficiency causes macrocytic anemia and neuropathy")
    assert top.pathway == "local"
    provenance = top.provenance
    assert (provenance.kind, provenance.corpus, provenance.doc_id) == ("corpus", "textbooks", "Pharmacology_Katzung_0")
    assert (provenance.rank, provenance.backend, provenance.query) == (1, "medcpt", query)
    norm = float(np.linalg.norm(query_vector))
    assert provenance.score == pytest.approx(2 * norm, rel=1e-4)
    # The others point away from the query by 1 + their position: the first two rows come next.
    assert [hit.id for hit in hits[1:]] == ["Anatomy_Gray_0", "Anatomy_Gray_1"]
    assert [hit.provenance.rank for hit in hits] == [1, 2, 3]
    assert retriever.name == "medcpt:textbooks"


@needs_extra
def test_several_corpora_merge_by_inner_product(tmp_path: Path, encoders: MedCPTConfig) -> None:
    query = "treat hypothyroidism"
    query_vector = MedCPTQueryEncoder(encoders.query_encoder).encode(query)[0]
    for corpus, target in (("textbooks", ("Anatomy_Gray", 0)), ("statpearls", ("article-100", 0))):
        write_chunks(tmp_path, corpus)
        plant_embeddings(
            tmp_path, corpus, aimed_vectors(query_vector, corpus, target, 1 if corpus == "textbooks" else 0.5)
        )
        build_medcpt_index(tmp_path, corpus, encoders)

    merged = MergedCorporaRetriever(open_medcpt(tmp_path, ["textbooks", "statpearls"], encoders), name="medcpt")
    hits = merged.retrieve(query, 4)

    # Both targets score 2|q| (corpus order breaks the tie); then statpearls' other (-1.5|q|) beats textbooks'
    # best other (-2|q|).
    assert [(hit.provenance.corpus, hit.provenance.doc_id) for hit in hits] == [
        ("textbooks", "Anatomy_Gray_0"),
        ("statpearls", "article-100_0"),
        ("statpearls", "article-100_1"),
        ("textbooks", "Anatomy_Gray_1"),
    ]
    assert [hit.provenance.rank for hit in hits] == [1, 2, 3, 4]


@needs_extra
def test_a_missing_index_is_one_line(tmp_path: Path, encoders: MedCPTConfig) -> None:
    write_chunks(tmp_path, "textbooks")
    with pytest.raises(EvidenceError, match=r"no MedCPT index for corpus 'textbooks': .*faiss\.index is missing") as e:
        open_medcpt(tmp_path, ["textbooks"], encoders)
    assert "\n" not in str(e.value)
    assert e.value.kind == "index"


@needs_extra
def test_a_half_built_index_is_refused(tmp_path: Path, encoders: MedCPTConfig) -> None:
    write_chunks(tmp_path, "textbooks")
    folder = build_medcpt_index(tmp_path, "textbooks", encoders)
    rows = (folder / "metadatas.jsonl").read_text().splitlines()
    (folder / "metadatas.jsonl").write_text("\n".join(rows[:3]) + "\n")  # a build that stopped mid-way

    with pytest.raises(EvidenceError, match=r"half-built: 5 vectors but 3 rows in metadatas\.jsonl; rebuild it"):
        MedCPTIndex(tmp_path, "textbooks")


@needs_extra
def test_an_index_from_another_encoder_is_refused(tmp_path: Path, encoders: MedCPTConfig) -> None:
    write_chunks(tmp_path, "textbooks")
    plant_embeddings(tmp_path, "textbooks", {s: np.ones((len(r), 8)) for s, r in CHUNKS["textbooks"].items()})
    build_medcpt_index(tmp_path, "textbooks", encoders)

    with pytest.raises(EvidenceError, match=r"8-dimensional vectors but the query encoder .* gives 16"):
        open_medcpt(tmp_path, ["textbooks"], encoders)


@needs_extra
def test_an_index_pointing_past_its_chunks_is_one_line(tmp_path: Path, encoders: MedCPTConfig) -> None:
    write_chunks(tmp_path, "textbooks")
    build_medcpt_index(tmp_path, "textbooks", encoders)
    (tmp_path / "textbooks" / "chunk" / "Pharmacology_Katzung.jsonl").write_text("")  # the chunks changed since

    [retriever] = open_medcpt(tmp_path, ["textbooks"], encoders)
    with pytest.raises(EvidenceError, match=r"points at line \d of .*Pharmacology_Katzung\.jsonl, which has 0 lines"):
        retriever.retrieve("anemia", 5)


# --- RRF-2 ----------------------------------------------------------------------------------------------------------


class RankedList:
    """A retriever that returns a fixed ranking (best first) and records the k it was asked for."""

    def __init__(self, corpus: str, scored: list[tuple[str, float]]) -> None:
        self.name = f"fixed:{corpus}"
        self.corpus = corpus
        self.scored = scored
        self.asked: list[int] = []

    def retrieve(self, query: str, k: int) -> list[Passage]:
        self.asked.append(k)
        return [
            Passage(
                id=doc,
                text=doc,
                pathway="local",
                provenance=Provenance(kind="corpus", corpus=self.corpus, doc_id=doc, rank=rank, score=score),
            )
            for rank, (doc, score) in enumerate(self.scored[:k], start=1)
        ]


def test_rrf2_fuses_as_medrag_does() -> None:
    # BM25 over two corpora, merged by raw score: a3 12 > b1 11 > a1 10 > b2 9 (positions 1-4).
    bm25 = [RankedList("a", [("a3", 12.0), ("a1", 10.0)]), RankedList("b", [("b1", 11.0), ("b2", 9.0)])]
    # MedCPT: a1 0.9 > b2 0.8 > b1 0.1 (positions 1-3).
    medcpt = [RankedList("a", [("a1", 0.9)]), RankedList("b", [("b2", 0.8), ("b1", 0.1)])]
    fused = RankFusionRetriever([bm25, medcpt], name="rrf-2").retrieve("q", 3)

    def rrf(*positions: int) -> float:
        return sum(1 / (100 + p) for p in positions)

    expected = {"a1": rrf(3, 1), "b1": rrf(2, 3), "b2": rrf(4, 2)}
    # BM25's best (a3) falls out; had BM25 listed corpus a before b instead of merging by score, b2 would
    # have come before b1.
    assert [(hit.provenance.corpus, hit.id) for hit in fused] == [("a", "a1"), ("b", "b1"), ("b", "b2")]
    assert [hit.provenance.score for hit in fused] == [pytest.approx(expected[hit.id], abs=1e-6) for hit in fused]
    assert [hit.provenance.rank for hit in fused] == [1, 2, 3]
    # Each retriever asks each corpus for max(2k, 100) hits.
    assert [r.asked for r in bm25 + medcpt] == [[100]] * 4


def test_rrf2_asks_each_corpus_for_twice_k_above_fifty() -> None:
    families = [[RankedList("a", [("a1", 1.0)])], [RankedList("a", [("a1", 1.0)])]]
    RankFusionRetriever(families, name="rrf-2").retrieve("q", 64)
    assert [family[0].asked for family in families] == [[128], [128]]


def test_rank_fusion_needs_two_retrievers() -> None:
    with pytest.raises(ValueError, match="at least two retrievers"):
        RankFusionRetriever([[RankedList("a", [])]], name="rrf-1")


@needs_extra
def test_rrf2_fuses_bm25_and_medcpt_over_one_corpus(tmp_path: Path, encoders: MedCPTConfig) -> None:
    write_chunks(tmp_path, "textbooks")
    query = "iron deficiency microcytic anemia ferritin"
    query_vector = MedCPTQueryEncoder(encoders.query_encoder).encode(query)[0]
    # MedCPT puts the B12 snippet first; BM25 puts the iron snippet first, and the B12 one second.
    plant_embeddings(tmp_path, "textbooks", aimed_vectors(query_vector, "textbooks", ("Pharmacology_Katzung", 0), 1))
    build_medcpt_index(tmp_path, "textbooks", encoders)
    passages: list[Passage] = []
    for path in sorted((tmp_path / "textbooks" / "chunk").glob("*.jsonl")):
        passages.extend(read_file(path, MEDRAG_MAPPING, corpus="textbooks"))
    bm25 = BM25sRetriever.build(passages, name="textbooks")
    medcpt: list[MedCPTRetriever] = open_medcpt(tmp_path, ["textbooks"], encoders)

    bm25_ids = [hit.id for hit in bm25.retrieve(query, 100)]
    medcpt_ids = [hit.id for hit in medcpt[0].retrieve(query, 100)]
    assert bm25_ids[:2] == ["Pharmacology_Katzung_1", "Pharmacology_Katzung_0"]
    assert medcpt_ids[0] == "Pharmacology_Katzung_0"

    fused = RankFusionRetriever([[bm25], medcpt], name="rrf-2").retrieve(query, 2)

    # B12: 1/102 + 1/101 beats iron: 1/101 + 1/(100 + its MedCPT position); both keep corpus and chunk id.
    scores: dict[str, float] = {}
    for ranking in (bm25_ids, medcpt_ids):
        for position, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1 / (100 + position)
    assert [hit.id for hit in fused] == ["Pharmacology_Katzung_0", "Pharmacology_Katzung_1"]
    assert [hit.provenance.score for hit in fused] == [pytest.approx(scores[hit.id], abs=1e-6) for hit in fused]
    assert {(hit.provenance.corpus, hit.provenance.doc_id) for hit in fused} == {
        ("textbooks", "Pharmacology_Katzung_0"),
        ("textbooks", "Pharmacology_Katzung_1"),
    }


# --- the setting, the factory and the medrag-medcpt program -----------------------------------------------------------


def medcpt_corpus_table(db_dir: Path, encoders: MedCPTConfig, corpora: list[str], **extra: object) -> dict[str, Any]:
    return {
        "backend": "lucene",
        "db_dir": str(db_dir),
        "corpora": corpora,
        "medcpt": encoders.model_dump(),
        **extra,
    }


def plant_two_corpora(db_dir: Path, query_vector: np.ndarray) -> None:
    for corpus, target, base in (("textbooks", ("Anatomy_Gray", 0), 1.0), ("statpearls", ("article-100", 0), 0.5)):
        write_chunks(db_dir, corpus)
        plant_embeddings(db_dir, corpus, aimed_vectors(query_vector, corpus, target, base))
        build_medcpt_index(db_dir, corpus)


def test_a_medcpt_retriever_needs_medrags_layout() -> None:
    with pytest.raises(ValidationError, match="retriever 'medcpt' reads MedRAG's layout: set backend 'lucene'"):
        CorpusConfig(preset="openstax", retriever="medcpt")
    with pytest.raises(ConfigError, match="rrf-2") as caught:
        parse_config({"backbones": BACKBONES, "corpus": {"backend": "bm25s", "preset": "x", "retriever": "rrf-2"}})
    assert "\n" not in str(caught.value)


@needs_extra
def test_the_factory_builds_medcpt_over_the_configured_corpora(tmp_path: Path, encoders: MedCPTConfig) -> None:
    query = "treat hypothyroidism"
    plant_two_corpora(tmp_path, MedCPTQueryEncoder(encoders.query_encoder).encode(query)[0])
    cfg = CorpusConfig.model_validate(
        medcpt_corpus_table(tmp_path, encoders, ["textbooks", "statpearls"], retriever="medcpt")
    )

    retriever = build_retriever(cfg)  # no Lucene index exists, and none is needed
    hits = retriever.retrieve(query, 3)

    assert retriever.name == "medcpt:textbooks+statpearls"
    assert [(hit.provenance.corpus, hit.provenance.doc_id) for hit in hits] == [
        ("textbooks", "Anatomy_Gray_0"),
        ("statpearls", "article-100_0"),
        ("statpearls", "article-100_1"),
    ]


@needs_extra
def test_medrag_medcpt_answers_from_medcpt_passages(tmp_path: Path, encoders: MedCPTConfig) -> None:
    plant_two_corpora(tmp_path, MedCPTQueryEncoder(encoders.query_encoder).encode(build_query(QUESTION))[0])
    config = parse_config({"backbones": BACKBONES, "corpus": medcpt_corpus_table(tmp_path, encoders, ["textbooks"])})
    lm, engine = scripted_lm(pathway_replies("A", "B", "C"))

    program = build_program("medrag-medcpt", config, role_lms={"main": lm})
    decision = program(question=QUESTION).decision

    assert "medrag-medcpt" in PROGRAMS
    assert (decision.program, decision.status, decision.letters) == ("medrag-medcpt", "answered", ("B",))
    assert engine.stages() == ["local_answer"]
    passages = decision.bundle.local_passages
    assert [p.provenance.doc_id for p in passages[:2]] == ["Anatomy_Gray_0", "Anatomy_Gray_1"]
    assert {(p.provenance.corpus, p.provenance.backend) for p in passages} == {("textbooks", "medcpt")}
    assert decision.bundle.candidates[0].retriever == "medcpt:textbooks"


def test_medrag_medcpt_outside_medrags_layout_is_one_line(toy_jsonl: Path) -> None:
    config = parse_config(
        {
            "backbones": BACKBONES,
            "corpus": {"backend": "memory", "path": str(toy_jsonl), "fields": {"id": "id", "text": "text"}},
        }
    )
    with pytest.raises(UsageError, match=r"medrag-medcpt searches MedCPT indexes in MedRAG's layout") as caught:
        build_program("medrag-medcpt", config, role_lms={})
    assert "\n" not in str(caught.value)


@needs_extra
def test_rrf2_fuses_lucene_bm25_and_medcpt(tmp_path: Path, encoders: MedCPTConfig) -> None:
    from clearmed.retrieval.lucene_java import unavailable_reason

    if (reason := unavailable_reason()) is not None:
        pytest.skip(reason)
    write_chunks(tmp_path, "textbooks")
    query = "iron deficiency microcytic anemia ferritin"
    query_vector = MedCPTQueryEncoder(encoders.query_encoder).encode(query)[0]
    plant_embeddings(tmp_path, "textbooks", aimed_vectors(query_vector, "textbooks", ("Pharmacology_Katzung", 0), 1))
    build_medcpt_index(tmp_path, "textbooks")
    cfg = CorpusConfig.model_validate(
        medcpt_corpus_table(tmp_path, encoders, ["textbooks"], retriever="rrf-2", threads=1)
    )

    retriever = build_retriever(cfg)  # builds the missing Lucene index with pyserini, as MedRAG would
    fused = retriever.retrieve(query, 2)

    assert isinstance(retriever, RankFusionRetriever)
    bm25 = [hit.provenance.doc_id for hit in retriever.families[0][0].retrieve(query, 100)]
    assert bm25[:2] == ["Pharmacology_Katzung_1", "Pharmacology_Katzung_0"]  # Lucene prefers the iron snippet
    # MedCPT's first (B12) has 1/101 + 1/102; Lucene's first (iron) 1/101 + 1/104 (fourth for MedCPT).
    assert [(hit.provenance.corpus, hit.provenance.doc_id) for hit in fused] == [
        ("textbooks", "Pharmacology_Katzung_0"),
        ("textbooks", "Pharmacology_Katzung_1"),
    ]
    assert [hit.provenance.score for hit in fused] == [
        pytest.approx(1 / 101 + 1 / 102, abs=1e-6),
        pytest.approx(1 / 101 + 1 / 104, abs=1e-6),
    ]
    assert fused[1].text == "iron deficiency causes microcytic anemia with low ferritin"
    assert retriever.name == "rrf-2:textbooks"
