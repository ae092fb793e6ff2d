from __future__ import annotations

from pathlib import Path

import pytest

from clearmed.retrieval.base import WebSearch
from clearmed.retrieval.corpus import CorpusError
from clearmed.retrieval.offline_web import OfflineWebSearch


def test_search_returns_web_passages(pages_jsonl: Path) -> None:
    search = OfflineWebSearch.from_jsonl(pages_jsonl, collection="fixture")
    assert isinstance(search, WebSearch)
    assert search.name == "offline:fixture"
    results = search.search("measles rash fever", 8)
    assert results
    first = results[0]
    assert first.pathway == "dynamic"
    assert first.provenance.kind == "web"
    assert first.provenance.backend == "offline:fixture"
    assert first.provenance.query == "measles rash fever"
    assert first.provenance.url == first.id  # generic collections use the URL as id
    assert [p.provenance.rank for p in results] == list(range(1, len(results) + 1))
    dated = next(p for p in results if p.provenance.url == "https://www.cdc.gov/measles/symptoms/index.html")
    assert str(dated.provenance.published) == "2024-03-12"
    assert dated.provenance.domain == "www.cdc.gov"


def test_one_result_per_url(pages_jsonl: Path) -> None:
    search = OfflineWebSearch.from_jsonl(pages_jsonl)
    urls = [p.provenance.url for p in search.search("measles MMR vaccination dose", 8)]
    assert len(urls) == len(set(urls))
    every = OfflineWebSearch.from_jsonl(pages_jsonl, one_per_url=False)
    urls = [p.provenance.url for p in every.search("measles MMR vaccination dose", 8)]
    assert len(urls) > len(set(urls))


def test_max_results(pages_jsonl: Path) -> None:
    search = OfflineWebSearch.from_jsonl(pages_jsonl)
    assert len(search.search("measles", 2)) == 2
    assert search.search("measles", 0) == []
    assert search.search("zzzz qqqq", 5) == []


def test_index_dir_is_reused(pages_jsonl: Path, tmp_path: Path) -> None:
    first = OfflineWebSearch.from_jsonl(pages_jsonl, collection="fx", index_dir=tmp_path / "idx")
    pages_jsonl.write_text("")  # the source is no longer read once the index exists
    again = OfflineWebSearch.from_jsonl(pages_jsonl, collection="fx", index_dir=tmp_path / "idx")
    assert again.search("vitamin A measles", 3) == first.search("vitamin A measles", 3)


def test_page_without_url_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"url": "", "title": "t", "text": "x"}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"p\.jsonl:1"):
        OfflineWebSearch.from_jsonl(path)


def test_local_preset_is_not_a_web_collection(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="not a web page collection"):
        OfflineWebSearch.from_preset("openstax", data_root=tmp_path)


def test_medquad_collection(medquad_search: OfflineWebSearch) -> None:
    results = medquad_search.search("What are the symptoms of adult acute lymphoblastic leukemia?", 8)
    assert len(results) == 8
    assert len({p.provenance.url for p in results}) == 8
    assert all(p.provenance.domain for p in results)
    assert results[0].provenance.backend == "offline:medquad"
    assert "leukemia" in (results[0].title + results[0].text).lower()
