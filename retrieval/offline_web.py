"""`OfflineWebSearch`: web search over a local page collection (JSONL of url/title/text/date), with bm25s.

It returns what a web search returns: dynamic passages with URL, domain and published date, one per page (the
best passage of each URL), so the dynamic pathway and the source-quality assessment run unchanged offline. The
shared MedQuAD file (NIH consumer-health pages) is the built-in collection ("medquad" preset).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from clearmed.retrieval.bm25_sparse import BM25sRetriever
from clearmed.retrieval.corpus import CorpusError, FieldMapping, OnError, read_jsonl
from clearmed.retrieval.corpus_presets import preset, read_preset
from clearmed.retrieval.tokenize import TokenizerConfig
from clearmed.signatures.records import Passage

# A generic page collection: the URL doubles as the page id when there is no id field.
PAGE_MAPPING = FieldMapping(id="url", title="title", text="text", url="url", date="date")

# How many extra hits to fetch so that, after keeping one passage per URL, `max_results` pages remain.
_OVERFETCH = 4


class OfflineWebSearch:
    """Implements `WebSearch` over an in-memory or saved bm25s index of web-page passages."""

    def __init__(self, index: BM25sRetriever, *, collection: str, one_per_url: bool = True) -> None:
        self.name = f"offline:{collection}"
        self.max_query_chars: int | None = None  # a local index takes any query
        self.collection = collection
        self.one_per_url = one_per_url
        self._index = index

    @classmethod
    def from_passages(
        cls,
        pages: Iterable[Passage],
        *,
        collection: str,
        index_dir: Path | None = None,
        tokenizer: TokenizerConfig | None = None,
        one_per_url: bool = True,
    ) -> OfflineWebSearch:
        index = BM25sRetriever.build(pages, name=collection, tokenizer=tokenizer, directory=index_dir)
        return cls(index, collection=collection, one_per_url=one_per_url)

    @classmethod
    def from_jsonl(
        cls,
        path: Path | str,
        *,
        mapping: FieldMapping = PAGE_MAPPING,
        collection: str | None = None,
        index_dir: Path | None = None,
        on_error: OnError = "raise",
        one_per_url: bool = True,
    ) -> OfflineWebSearch:
        """Index a JSONL page collection (or reuse `index_dir` when it already holds a built index)."""
        name = collection or Path(path).stem
        if index_dir is not None and (Path(index_dir) / "manifest.json").is_file():
            return cls.load(index_dir, collection=name, one_per_url=one_per_url)
        pages = read_jsonl(path, mapping, corpus=name, pathway="dynamic", on_error=on_error)
        return cls.from_passages(pages, collection=name, index_dir=index_dir, one_per_url=one_per_url)

    @classmethod
    def from_preset(
        cls,
        name: str = "medquad",
        *,
        data_root: Path | None = None,
        index_dir: Path | None = None,
        one_per_url: bool = True,
    ) -> OfflineWebSearch:
        """A shared page collection ("medquad"), indexed in memory or at `index_dir` (reused when built)."""
        if index_dir is not None and (Path(index_dir) / "manifest.json").is_file():
            return cls.load(index_dir, collection=name, one_per_url=one_per_url)
        if preset(name).pathway != "dynamic":
            raise CorpusError(f"preset {name!r} is a local corpus without URLs, not a web page collection")
        pages = read_preset(name, data_root=data_root)
        return cls.from_passages(pages, collection=name, index_dir=index_dir, one_per_url=one_per_url)

    @classmethod
    def load(
        cls, index_dir: Path | str, *, collection: str | None = None, one_per_url: bool = True
    ) -> OfflineWebSearch:
        index = BM25sRetriever.load(index_dir)
        return cls(index, collection=collection or index.manifest.corpus, one_per_url=one_per_url)

    def cache_params(self) -> dict[str, object]:
        return {"one_per_url": self.one_per_url, "passages": len(self._index)}

    def search(self, query: str, max_results: int) -> list[Passage]:
        if max_results <= 0:
            return []
        fetch = max_results * _OVERFETCH if self.one_per_url else max_results
        seen: set[str] = set()
        out: list[Passage] = []
        for hit in self._index.retrieve(query, fetch):
            url = hit.provenance.url or hit.id
            if self.one_per_url and url in seen:
                continue
            seen.add(url)
            provenance = hit.provenance.model_copy(update={"kind": "web", "backend": self.name, "rank": len(out) + 1})
            out.append(hit.model_copy(update={"pathway": "dynamic", "provenance": provenance}))
            if len(out) == max_results:
                break
        return out
