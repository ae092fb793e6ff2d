"""Config -> evidence backends: the only place that knows which class serves which `backend` value."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clearmed.retrieval.base import EvidenceError, Retriever, WebSearch
from clearmed.retrieval.bm25_rank import RankBM25Retriever
from clearmed.retrieval.bm25_sparse import MANIFEST, BM25sRetriever, IndexManifest, Progress, read_manifest
from clearmed.retrieval.cache import CachedWebSearch
from clearmed.retrieval.config import CorpusConfig, SearchConfig
from clearmed.retrieval.corpus import (
    MEDRAG_MAPPING,
    FieldMapping,
    IngestStats,
    preset_path,
    read_file,
    read_hub,
    read_preset,
)
from clearmed.retrieval.memory import InMemoryRetriever
from clearmed.retrieval.offline_web import PAGE_MAPPING, OfflineWebSearch
from clearmed.retrieval.tavily import MAX_QUERY_CHARS, TavilySearch
from clearmed.signatures.records import Passage


def iter_corpus(cfg: CorpusConfig, stats: IngestStats | None = None) -> Iterator[Passage]:
    """Stream the configured corpus as local passages."""
    common: dict[str, Any] = {"chunking": cfg.chunking, "on_error": cfg.on_error, "stats": stats, "limit": cfg.limit}
    name = cfg.corpus_name()
    if cfg.preset is not None:
        return read_preset(cfg.preset, data_root=cfg.data_root, pathway="local", **common)
    if cfg.path is not None:
        return read_file(cfg.path, cfg.fields or FieldMapping(), corpus=name, pathway="local", **common)
    if cfg.hub is not None:
        return read_hub(cfg.hub, mapping=cfg.fields or MEDRAG_MAPPING, split=cfg.hub_split, corpus=name, **common)
    raise EvidenceError(
        f"no corpus source configured and no index in {cfg.index_dir}; set corpus.preset, corpus.path or "
        "corpus.hub, or build the index with `clearmed index build`",
        kind="index",
    )


def build_retriever(cfg: CorpusConfig, progress: Progress | None = None) -> Retriever:
    """The local pathway's retriever. bm25s with `index_dir`: loads the index when present (unless `rebuild`),
    else builds it there. Raises `EvidenceError(kind="index")` or `CorpusError` with a clear message."""
    name = cfg.corpus_name()
    if cfg.backend == "memory":
        return InMemoryRetriever(list(iter_corpus(cfg)), name=name)
    if cfg.backend == "rank_bm25":
        return RankBM25Retriever(iter_corpus(cfg), name=name, tokenizer=cfg.tokenizer, force=cfg.force)
    if cfg.index_dir is not None and (cfg.index_dir / MANIFEST).is_file() and not cfg.rebuild:
        manifest = read_manifest(cfg.index_dir)
        if manifest.tokenizer != cfg.tokenizer:
            raise EvidenceError(
                f"{cfg.index_dir} was built with tokenizer {manifest.tokenizer.model_dump()} but the "
                f"config asks for {cfg.tokenizer.model_dump()}; rebuild the index (corpus.rebuild = true)",
                kind="index",
                backend="bm25s",
            )
        stale = _stale_reason(manifest, cfg)
        if stale:
            raise EvidenceError(
                f"{cfg.index_dir} holds a different corpus than the config asks for ({stale}); rebuild it "
                "(corpus.rebuild = true, or `clearmed index build`) or point corpus.index_dir elsewhere",
                kind="index",
                backend="bm25s",
            )
        return BM25sRetriever.load(cfg.index_dir, name=cfg.name)
    return build_index(cfg, progress=progress)


def build_index(
    cfg: CorpusConfig, progress: Progress | None = None, stats: IngestStats | None = None
) -> BM25sRetriever:
    """(Re)build the bm25s index of `cfg` (at `cfg.index_dir` when set), recording its source in the manifest."""
    return BM25sRetriever.build(
        iter_corpus(cfg, stats),
        name=cfg.corpus_name(),
        tokenizer=cfg.tokenizer,
        directory=cfg.index_dir,
        progress=progress,
        source=cfg.source_label(),
        source_settings=cfg.source_settings(),
    )


def _stale_reason(manifest: IndexManifest, cfg: CorpusConfig) -> str | None:
    """Why a saved index does not match the config, or None. A config without a source trusts the index."""
    wanted = cfg.source_label()
    if wanted is None or manifest.source is None:
        return None
    if manifest.source != wanted:
        return f"built from {manifest.source}, config says {wanted}"
    if manifest.source_settings is not None and manifest.source_settings != cfg.source_settings():
        return f"built with {manifest.source_settings}, config says {cfg.source_settings()}"
    return None


def build_web_search(cfg: SearchConfig, *, check_key: bool = True) -> WebSearch | None:
    """The dynamic pathway's search backend (wrapped in the SQLite cache when `cache_path` is set), or None.

    With `check_key`, a Tavily backend without TAVILY_API_KEY fails here (`EvidenceError(kind="no_key")`)
    instead of on every question; replaying a recorded cache needs no key.
    """
    search: WebSearch | None
    if cfg.backend == "none":
        return None
    if cfg.backend == "tavily":
        tavily = TavilySearch(cfg.tavily, timeout=cfg.timeout, max_query_chars=cfg.max_query_chars or MAX_QUERY_CHARS)
        if check_key and cfg.cache_mode != "replay":
            tavily.api_key()
        search = tavily
    elif cfg.index_dir is not None and (Path(cfg.index_dir) / MANIFEST).is_file():
        search = OfflineWebSearch.load(cfg.index_dir, collection=cfg.preset, one_per_url=cfg.one_per_url)
    elif cfg.pages is not None:
        search = OfflineWebSearch.from_jsonl(
            cfg.pages,
            mapping=cfg.fields or PAGE_MAPPING,
            index_dir=cfg.index_dir,
            one_per_url=cfg.one_per_url,
        )
    elif cfg.fields is not None:
        preset = cfg.preset or "medquad"
        search = OfflineWebSearch.from_jsonl(
            preset_path(preset, cfg.data_root),
            mapping=cfg.fields,
            collection=preset,
            index_dir=cfg.index_dir,
            one_per_url=cfg.one_per_url,
        )
    else:
        search = OfflineWebSearch.from_preset(
            cfg.preset or "medquad",
            data_root=cfg.data_root,
            index_dir=cfg.index_dir,
            one_per_url=cfg.one_per_url,
        )
    if cfg.max_query_chars is not None:  # a configured limit applies to any backend (a proxy's, say)
        search.max_query_chars = cfg.max_query_chars
    if cfg.cache_path is not None and cfg.cache_mode != "off":
        return CachedWebSearch(search, cfg.cache_path, cfg.cache_mode)
    return search
