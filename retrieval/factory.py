"""Config -> evidence backends: the only place that knows which class serves which `backend` value."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clearmed.retrieval.base import EvidenceError, Retriever, WebSearch
from clearmed.retrieval.bm25_rank import RankBM25Retriever
from clearmed.retrieval.bm25_sparse import (
    MANIFEST,
    BM25sRetriever,
    IndexManifest,
    Progress,
    read_manifest,
)
from clearmed.retrieval.build_memory import check_build_fits
from clearmed.retrieval.cache import CachedWebSearch
from clearmed.retrieval.config import CorpusConfig, SearchConfig
from clearmed.retrieval.corpus import (
    MEDRAG_MAPPING,
    CorpusError,
    FieldMapping,
    IngestStats,
    read_file,
    read_hub,
)
from clearmed.retrieval.corpus_presets import preset_path, read_preset
from clearmed.retrieval.dense import MergedCorporaRetriever, RankFusionRetriever, open_medcpt
from clearmed.retrieval.hit_cache import CachedRetriever
from clearmed.retrieval.index_identity import corpus_settings, index_version
from clearmed.retrieval.medrag_layout import chunk_dir, write_chunks
from clearmed.retrieval.memory import InMemoryRetriever
from clearmed.retrieval.offline_web import PAGE_MAPPING, OfflineWebSearch
from clearmed.retrieval.tavily import MAX_QUERY_CHARS, TavilySearch
from clearmed.signatures.records import Passage

if TYPE_CHECKING:  # imported when used: `python -m clearmed.retrieval.lucene_index` runs it as a script
    from clearmed.retrieval.lucene_index import LuceneBuild


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
    else builds it there; lucene: opens each corpus's index, building those missing or half-built first. Behind
    `hit_cache`: replay opens no index at all, record opens it as above. Raises `EvidenceError(kind="index")` or
    `CorpusError` with a clear message."""
    if cfg.hit_cache is not None and cfg.hit_cache_mode != "off":
        return build_hit_cache(cfg, progress)
    name = cfg.corpus_name()
    if cfg.retriever != "bm25":
        return build_medcpt_retriever(cfg)
    if cfg.backend == "lucene":
        from clearmed.retrieval.lucene import LuceneRetriever

        assert cfg.db_dir is not None
        build_lucene_indexes(cfg)
        return LuceneRetriever.open(
            cfg.db_dir, cfg.lucene_corpora(), name=cfg.name, merge=cfg.merge, search_threads=cfg.search_threads
        )
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


def build_hit_cache(cfg: CorpusConfig, progress: Progress | None = None) -> CachedRetriever:
    """The retriever behind `cfg.hit_cache`: replay with no live retriever (the index is never opened, its version
    read from its metadata where it is here); record through the live one, opened (and built) first."""
    assert cfg.hit_cache is not None
    settings = corpus_settings(cfg)
    if cfg.hit_cache_mode == "replay":
        return CachedRetriever(None, cfg.hit_cache, "replay", settings=settings, version=index_version(cfg))
    live = build_retriever(cfg.model_copy(update={"hit_cache": None}), progress)
    version = index_version(cfg)
    if version is None:  # the config validator admits only indexes on disk, which the live retriever just opened
        raise EvidenceError(f"the index of {settings} names no version to record hits against", kind="index")
    return CachedRetriever(live, cfg.hit_cache, "record", settings=settings, version=version)


def build_index(
    cfg: CorpusConfig, progress: Progress | None = None, stats: IngestStats | None = None
) -> BM25sRetriever:
    """(Re)build the bm25s index of `cfg` (at `cfg.index_dir` when set), recording its source in the manifest.

    Refused before reading a passage when the source's row count already says it will not fit in memory."""
    rows = None if cfg.force else source_rows(cfg)
    if rows is not None:
        check_build_fits(rows, name=cfg.corpus_name())
    return BM25sRetriever.build(
        iter_corpus(cfg, stats),
        name=cfg.corpus_name(),
        tokenizer=cfg.tokenizer,
        directory=cfg.index_dir,
        progress=progress,
        source=cfg.source_label(),
        source_settings=cfg.source_settings(),
        force=cfg.force,
    )


def source_rows(cfg: CorpusConfig) -> int | None:
    """The configured source's row count where it is cheap to know (a file's lines or Parquet metadata), capped
    by `limit`; None for a hub stream. Chunking only adds passages, so it is a lower bound on the passages."""
    try:
        path = preset_path(cfg.preset, cfg.data_root) if cfg.preset else cfg.path
    except CorpusError:
        return None  # reported with its own message when the corpus is read
    if path is None or not path.is_file():
        return None
    if path.suffix.lower() in {".parquet", ".pq"}:
        import pyarrow.parquet as pq

        try:
            rows = int(pq.ParquetFile(path).metadata.num_rows)
        except (OSError, ValueError):
            return None
    else:
        with path.open("rb") as handle:
            rows = sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 24), b""))
    return min(rows, cfg.limit) if cfg.limit is not None else rows


def build_lucene_indexes(cfg: CorpusConfig, stats: IngestStats | None = None) -> dict[str, LuceneBuild]:
    """Make every corpus of a lucene config searchable: a configured source is first written as MedRAG chunks
    (when they are absent, or on `rebuild`), then each missing or half-built index is built with pyserini.
    Returns the builds that ran, by corpus; an index already complete is left alone unless `rebuild`."""
    from clearmed.retrieval.lucene_index import ensure_index

    assert cfg.db_dir is not None
    converted: str | None = None
    if cfg.source_label() is not None:
        converted = cfg.corpus_name()
        chunks = chunk_dir(cfg.db_dir, converted)
        if cfg.rebuild or not any(chunks.glob("*.jsonl")):
            write_chunks(iter_corpus(cfg, stats), chunks, converted)
    builds: dict[str, LuceneBuild] = {}
    for corpus in cfg.lucene_corpora():
        # A converted corpus keeps its own ids, which name no chunk line: its index stores the raw snippets.
        build = ensure_index(
            cfg.db_dir,
            corpus,
            rebuild=cfg.rebuild,
            threads=cfg.threads,
            store_raw=corpus == converted,
            shards=cfg.shards,
        )
        if build is not None:
            builds[corpus] = build
    return builds


def build_medcpt_retriever(cfg: CorpusConfig) -> Retriever:
    """retriever "medcpt": MedCPT over each corpus's faiss index, merged by `merge`; "rrf-2": MedRAG's fusion of
    that with each corpus's Lucene BM25 (per retriever, every corpus's hits by raw score; then RRF)."""
    assert cfg.db_dir is not None
    corpora = cfg.lucene_corpora()
    medcpt = open_medcpt(cfg.db_dir, corpora, cfg.medcpt)
    label = cfg.name or "+".join(corpora)
    if cfg.retriever == "medcpt":
        return MergedCorporaRetriever(medcpt, name=f"medcpt:{label}", merge=cfg.merge)
    from clearmed.retrieval.lucene import LuceneCorpus, LuceneRetriever, search_pool

    build_lucene_indexes(cfg)
    pool = search_pool(cfg.search_threads)
    bm25 = [LuceneRetriever([LuceneCorpus(cfg.db_dir, corpus, pool=pool)]) for corpus in corpora]
    return RankFusionRetriever([bm25, medcpt], name=f"rrf-2:{label}")


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
