from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from clearmed.programs.pathways.web_query import build_query
from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.bm25_rank import RankBM25Retriever
from clearmed.retrieval.bm25_sparse import BM25sRetriever
from clearmed.retrieval.cache import CachedWebSearch
from clearmed.retrieval.config import CorpusConfig, SearchConfig
from clearmed.retrieval.factory import build_retriever, build_web_search
from clearmed.retrieval.memory import InMemoryRetriever
from clearmed.retrieval.offline_web import OfflineWebSearch
from clearmed.retrieval.tavily import TavilySearch
from clearmed.signatures.records import Question

TOML = """
[corpus]
backend = "bm25s"
path = "{path}"
index_dir = "{index}"
fields = {{ id = "id", title = "title", text = "text" }}
chunking = {{ words = 120, overlap = 20 }}
tokenizer = {{ stopwords = true, stem = "none" }}

[search]
backend = "offline"
pages = "{pages}"
cache_path = "{cache}"
cache_mode = "record"
"""


def test_toml_tables_build_backends(tmp_path: Path, toy_jsonl: Path, pages_jsonl: Path) -> None:
    text = TOML.format(path=toy_jsonl, index=tmp_path / "idx", pages=pages_jsonl, cache=tmp_path / "s.sqlite")
    data = tomllib.loads(text)
    corpus = CorpusConfig.model_validate(data["corpus"])
    search = SearchConfig.model_validate(data["search"])
    retriever = build_retriever(corpus)
    assert isinstance(retriever, BM25sRetriever)
    assert retriever.name == "toy"
    assert retriever.retrieve("levothyroxine", 4)[0].id == "d2"
    assert (tmp_path / "idx" / "manifest.json").is_file()
    # Second build loads the saved index, even with the source gone.
    toy_jsonl.unlink()
    assert build_retriever(corpus).retrieve("levothyroxine", 1)[0].id == "d2"
    web = build_web_search(search)
    assert isinstance(web, CachedWebSearch)
    assert isinstance(web.inner, OfflineWebSearch)
    assert len(web.search("measles", 3)) == 3


def test_other_corpus_backends(toy_jsonl: Path) -> None:
    assert isinstance(build_retriever(CorpusConfig(backend="rank_bm25", path=toy_jsonl)), RankBM25Retriever)
    memory = build_retriever(CorpusConfig(backend="memory", path=toy_jsonl, name="mem"))
    assert isinstance(memory, InMemoryRetriever)
    assert memory.name == "mem"


def test_index_tokenizer_mismatch_is_refused(tmp_path: Path, toy_jsonl: Path) -> None:
    build_retriever(CorpusConfig(path=toy_jsonl, index_dir=tmp_path / "idx"))
    changed = CorpusConfig(path=toy_jsonl, index_dir=tmp_path / "idx", tokenizer={"stem": "simple"})
    with pytest.raises(EvidenceError, match="rebuild"):
        build_retriever(changed)
    rebuilt = build_retriever(changed.model_copy(update={"rebuild": True}))
    assert isinstance(rebuilt, BM25sRetriever)
    assert rebuilt.manifest.tokenizer.stem == "simple"


def test_corpus_config_validation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one corpus source"):
        CorpusConfig(preset="openstax", path=tmp_path / "x.jsonl")
    with pytest.raises(ValueError, match="needs a source"):
        CorpusConfig()
    with pytest.raises(ValueError, match="index_dir is only used"):
        CorpusConfig(backend="rank_bm25", preset="openstax", index_dir=tmp_path)
    with pytest.raises(ValueError, match="extra"):
        CorpusConfig.model_validate({"preset": "openstax", "top_k": 5})
    only_index = CorpusConfig(index_dir=tmp_path / "missing")
    with pytest.raises(EvidenceError, match="no corpus source configured"):
        build_retriever(only_index)
    assert CorpusConfig(hub="MedRAG/textbooks").corpus_name() == "textbooks"


def test_search_config_defaults_and_validation(tmp_path: Path) -> None:
    assert SearchConfig().preset == "medquad"
    with pytest.raises(ValueError, match=r"either search\.preset or search\.pages"):
        SearchConfig(preset="medquad", pages=tmp_path / "p.jsonl")
    with pytest.raises(ValueError, match="needs a cache_path"):
        SearchConfig(cache_mode="replay")
    with pytest.raises(ValueError, match="extra"):
        SearchConfig.model_validate({"backend": "tavily", "api_key": "x"})
    assert build_web_search(SearchConfig(backend="none")) is None


def test_tavily_factory_checks_the_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(EvidenceError) as info:
        build_web_search(SearchConfig(backend="tavily"))
    assert info.value.kind == "no_key"
    assert isinstance(build_web_search(SearchConfig(backend="tavily"), check_key=False), TavilySearch)
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-x")
    search = build_web_search(SearchConfig(backend="tavily", timeout=7, tavily={"search_depth": "basic"}))
    assert isinstance(search, TavilySearch)
    assert search.timeout == 7
    assert search.options.search_depth == "basic"


def test_offline_preset_factory(tmp_path: Path, pages_jsonl: Path) -> None:
    # A stand-in shared data folder whose "medquad" file is the page fixture, in the MedQuAD schema.
    root = tmp_path / "data"
    (root / "corpora" / "medquad").mkdir(parents=True)
    rows = [json.loads(line) for line in pages_jsonl.read_text().splitlines()]
    medquad = [
        {
            "id": f"mq{i}",
            "source": "x",
            "url": row["url"],
            "focus": "f",
            "qtype": "q",
            "question": row["title"],
            "text": row["text"],
        }
        for i, row in enumerate(rows)
    ]
    (root / "corpora" / "medquad" / "medquad_passages.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in medquad), encoding="utf-8"
    )
    cfg = SearchConfig(data_root=root, index_dir=tmp_path / "mq")
    search = build_web_search(cfg)
    assert isinstance(search, OfflineWebSearch)
    assert search.name == "offline:medquad"
    hits = search.search("measles vitamin A", 3)
    assert hits[0].id == "mq3"
    assert hits[0].title == "Vitamin A for measles: a systematic review"
    assert isinstance(build_web_search(cfg), OfflineWebSearch)  # reloads the saved index
    assert isinstance(build_web_search(SearchConfig(data_root=root)), OfflineWebSearch)  # in memory
    custom = SearchConfig(data_root=root, fields={"id": "id", "title": "focus", "text": "text", "url": "url"})
    assert build_web_search(custom).search("measles vitamin A", 1)[0].title == "f"  # type: ignore[union-attr]


def test_shared_medquad_through_factory(medquad_index_dir: Path) -> None:
    search = build_web_search(SearchConfig(index_dir=medquad_index_dir, preset="medquad"))
    assert isinstance(search, OfflineWebSearch)
    assert len(search.search("diabetes insulin", 8)) == 8


def test_build_query() -> None:
    question = Question(
        id="q1",
        text="  Which vitamin deficiency causes   macrocytic anemia with neuropathy? ",
        options={"B": "Folate", "A": "Vitamin B12"},
    )
    assert build_query(question) == "Which vitamin deficiency causes macrocytic anemia with neuropathy?"
    assert build_query(question, include_options=True).endswith("neuropathy? Vitamin B12 Folate")
    free = Question(id="q2", text="What is HbA1c?", answer_mode="free_text")
    assert build_query(free, include_options=True) == "What is HbA1c?"


def test_stale_index_is_refused(tmp_path: Path, toy_jsonl: Path) -> None:
    index_dir = tmp_path / "idx"
    build_retriever(CorpusConfig(path=toy_jsonl, index_dir=index_dir))
    other = tmp_path / "other.jsonl"
    other.write_text(toy_jsonl.read_text(), encoding="utf-8")
    with pytest.raises(EvidenceError, match=r"built from path:.*toy\.jsonl, config says path:.*other\.jsonl"):
        build_retriever(CorpusConfig(path=other, index_dir=index_dir))
    with pytest.raises(EvidenceError, match="chunk_words"):
        build_retriever(CorpusConfig(path=toy_jsonl, index_dir=index_dir, chunking={"words": 50, "overlap": 5}))
    # No source in the config: the saved index is trusted as it is.
    assert isinstance(build_retriever(CorpusConfig(index_dir=index_dir)), BM25sRetriever)


def test_user_paths_expand(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert CorpusConfig(preset="openstax", index_dir="~/idx").index_dir == tmp_path / "idx"
    assert SearchConfig(cache_path="~/c.sqlite").cache_path == tmp_path / "c.sqlite"
