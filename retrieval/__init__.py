"""clearmed.retrieval: the evidence the local and dynamic pathways read.

Interfaces (`Retriever`, `WebSearch`, `EvidenceError`) live in `base`; this module re-exports the public API:

- corpora: `read_jsonl`, `read_parquet`, `read_hub`, `read_preset`, with `FieldMapping` and `Chunking`
- local retrieval: `BM25sRetriever` (default; save/load, memory-mapped) and `RankBM25Retriever` (reference)
- web search: `TavilySearch`, `OfflineWebSearch`, wrapped by `CachedWebSearch` (SQLite record/replay)
- source quality priors: `prior_features`, `prior_assessment`, `assess_with_priors`, `QualityPriors`
- config and factory: `CorpusConfig`, `SearchConfig`, `build_retriever`, `build_web_search`, `build_query`
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Loaded on first use: reading a config must not import the search clients, bm25s and numpy (`clearmed config`,
# the front of `clearmed ask`); type checkers still see every name.
if TYPE_CHECKING:
    from clearmed.retrieval.base import EvidenceError, Retriever, SearchFailure, WebSearch
    from clearmed.retrieval.bm25_rank import CorpusTooLargeError, RankBM25Retriever, SlowIndexWarning
    from clearmed.retrieval.bm25_sparse import BM25sRetriever, IndexManifest, read_manifest
    from clearmed.retrieval.cache import CachedWebSearch, CacheMode
    from clearmed.retrieval.config import CorpusConfig, SearchConfig
    from clearmed.retrieval.corpus import (
        MEDRAG_MAPPING,
        PRESETS,
        Chunking,
        CorpusError,
        FieldMapping,
        IngestStats,
        read_file,
        read_hub,
        read_jsonl,
        read_parquet,
        read_preset,
    )
    from clearmed.retrieval.factory import build_index, build_retriever, build_web_search, iter_corpus
    from clearmed.retrieval.memory import InMemoryRetriever, InMemoryWebSearch, web_passage
    from clearmed.retrieval.offline_web import PAGE_MAPPING, OfflineWebSearch
    from clearmed.retrieval.quality import (
        QualityPriors,
        assess_with_priors,
        content_type,
        domain_tier,
        prior_assessment,
        prior_features,
    )
    from clearmed.retrieval.query import build_query
    from clearmed.retrieval.tavily import TavilyOptions, TavilySearch
    from clearmed.retrieval.tokenize import Tokenizer, TokenizerConfig

_HOME: dict[str, str] = {
    "EvidenceError": "clearmed.retrieval.base",
    "Retriever": "clearmed.retrieval.base",
    "SearchFailure": "clearmed.retrieval.base",
    "WebSearch": "clearmed.retrieval.base",
    "CorpusTooLargeError": "clearmed.retrieval.bm25_rank",
    "RankBM25Retriever": "clearmed.retrieval.bm25_rank",
    "SlowIndexWarning": "clearmed.retrieval.bm25_rank",
    "BM25sRetriever": "clearmed.retrieval.bm25_sparse",
    "IndexManifest": "clearmed.retrieval.bm25_sparse",
    "read_manifest": "clearmed.retrieval.bm25_sparse",
    "CachedWebSearch": "clearmed.retrieval.cache",
    "CacheMode": "clearmed.retrieval.cache",
    "CorpusConfig": "clearmed.retrieval.config",
    "SearchConfig": "clearmed.retrieval.config",
    "MEDRAG_MAPPING": "clearmed.retrieval.corpus",
    "PRESETS": "clearmed.retrieval.corpus",
    "Chunking": "clearmed.retrieval.corpus",
    "CorpusError": "clearmed.retrieval.corpus",
    "FieldMapping": "clearmed.retrieval.corpus",
    "IngestStats": "clearmed.retrieval.corpus",
    "read_file": "clearmed.retrieval.corpus",
    "read_hub": "clearmed.retrieval.corpus",
    "read_jsonl": "clearmed.retrieval.corpus",
    "read_parquet": "clearmed.retrieval.corpus",
    "read_preset": "clearmed.retrieval.corpus",
    "build_index": "clearmed.retrieval.factory",
    "build_retriever": "clearmed.retrieval.factory",
    "build_web_search": "clearmed.retrieval.factory",
    "iter_corpus": "clearmed.retrieval.factory",
    "InMemoryRetriever": "clearmed.retrieval.memory",
    "InMemoryWebSearch": "clearmed.retrieval.memory",
    "web_passage": "clearmed.retrieval.memory",
    "PAGE_MAPPING": "clearmed.retrieval.offline_web",
    "OfflineWebSearch": "clearmed.retrieval.offline_web",
    "QualityPriors": "clearmed.retrieval.quality",
    "assess_with_priors": "clearmed.retrieval.quality",
    "content_type": "clearmed.retrieval.quality",
    "domain_tier": "clearmed.retrieval.quality",
    "prior_assessment": "clearmed.retrieval.quality",
    "prior_features": "clearmed.retrieval.quality",
    "build_query": "clearmed.retrieval.query",
    "TavilyOptions": "clearmed.retrieval.tavily",
    "TavilySearch": "clearmed.retrieval.tavily",
    "Tokenizer": "clearmed.retrieval.tokenize",
    "TokenizerConfig": "clearmed.retrieval.tokenize",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
