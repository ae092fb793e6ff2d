"""clearmed.retrieval: the evidence the local and dynamic pathways read.

Interfaces (`Retriever`, `WebSearch`, `EvidenceError`) live in `base`; this module re-exports the public API:

- corpora: `read_jsonl`, `read_parquet`, `read_hub`, `read_preset`, with `FieldMapping` and `Chunking`
- local retrieval: `BM25sRetriever` (default; save/load, memory-mapped) and `RankBM25Retriever` (reference)
- web search: `TavilySearch`, `OfflineWebSearch`, wrapped by `CachedWebSearch` (SQLite record/replay)
- source quality priors: `prior_features`, `prior_assessment`, `assess_with_priors`, `QualityPriors`
- config and factory: `CorpusConfig`, `SearchConfig`, `build_retriever`, `build_web_search`, `build_query`
"""

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
