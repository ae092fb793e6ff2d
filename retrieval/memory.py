"""Small in-memory evidence backends: for tests, demos and as executable documentation of the interfaces."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date
from urllib.parse import urlparse

from clearmed.retrieval.base import EvidenceError
from clearmed.signatures.records import Passage, Provenance

_WORD = re.compile(r"[a-z0-9]+")


def _terms(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def _rank(query: str, texts: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """Token-overlap ranking: enough to make tests meaningful, no claim to be BM25."""
    query_terms = _terms(query)
    scored = [(index, float(len(query_terms & _terms(text)))) for index, text in enumerate(texts)]
    scored = [item for item in scored if item[1] > 0]
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:limit]


class InMemoryRetriever:
    """Ranks a fixed list of local passages by word overlap with the query."""

    def __init__(self, passages: Sequence[Passage], name: str = "memory") -> None:
        self.name = name
        self._passages = list(passages)

    def retrieve(self, query: str, k: int) -> list[Passage]:
        ranked = _rank(query, [f"{p.title} {p.text}" for p in self._passages], k)
        out: list[Passage] = []
        for rank, (index, score) in enumerate(ranked, start=1):
            passage = self._passages[index]
            provenance = passage.provenance.model_copy(update={"rank": rank, "score": score, "query": query})
            out.append(passage.model_copy(update={"provenance": provenance, "pathway": "local"}))
        return out


def web_passage(page_id: str, url: str, title: str, text: str, published: str | None = None) -> Passage:
    """Build a dynamic passage with URL provenance (domain derived from the URL)."""
    return Passage(
        id=page_id,
        title=title,
        text=text,
        pathway="dynamic",
        provenance=Provenance(
            kind="web",
            url=url,
            domain=urlparse(url).hostname,
            published=date.fromisoformat(published) if published else None,
        ),
    )


class InMemoryWebSearch:
    """Searches a fixed list of web-like pages; can be told to fail, to exercise failure paths."""

    def __init__(
        self,
        pages: Sequence[Passage],
        name: str = "memory-web",
        fail_with: EvidenceError | None = None,
        max_query_chars: int | None = None,
    ) -> None:
        self.name = name
        self.max_query_chars = max_query_chars
        self._pages = list(pages)
        self.fail_with = fail_with
        self.queries: list[str] = []

    def search(self, query: str, max_results: int) -> list[Passage]:
        self.queries.append(query)
        if self.fail_with is not None:
            raise self.fail_with
        ranked = _rank(query, [f"{p.title} {p.text}" for p in self._pages], max_results)
        out: list[Passage] = []
        for rank, (index, score) in enumerate(ranked, start=1):
            page = self._pages[index]
            provenance = page.provenance.model_copy(
                update={"rank": rank, "score": score, "query": query, "backend": self.name}
            )
            out.append(page.model_copy(update={"provenance": provenance, "pathway": "dynamic"}))
        return out
