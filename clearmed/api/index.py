"""`index build` and `index warm`, the doors of `clearmed index build|warm`: build the local pathway's index (bm25s,
or Lucene in MedRAG's layout), and search a benchmark's questions once into the local hit cache
(`retrieval.hit_cache`). The corpus is configured one way: a config (`config`) and its `--set` overrides
(`overrides`), read by the config module (`clearmed.config.config_tables`, `load_config`); the commands' corpus flags
(`--path`, `--out`, `--text-field`, ...) are shorthands their parser writes as overrides (`--set corpus.path=...`),
so neither request has a field of its own for them. Long steps report through a `StepProgress` the caller gives (the
command line's bars or log lines). What a built index holds (`index info`, as plain data) is
`clearmed.api.index_info`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from clearmed.backbones.errors import ConfigError
from clearmed.config import ClearmedConfig, config_tables
from clearmed.core.errors import UsageError
from clearmed.retrieval.base import FATAL_FAILURES, TRANSIENT_FAILURES, EvidenceError
from clearmed.retrieval.config import CorpusConfig
from clearmed.retrieval.corpus import IngestStats
from clearmed.retrieval.hit_cache import CachedRetriever

if TYPE_CHECKING:
    from clearmed.retrieval.lucene_index import LuceneBuild


class IndexBuildRequest(BaseModel):
    """`clearmed index build`: the `[corpus]` table of `config` (a packaged config name, a TOML file or a run folder;
    None: no file, an empty table) with the `--set` overrides over it (`["corpus.path=my.jsonl",
    "corpus.index_dir=idx"]`). Backend "lucene" builds every corpus under `corpus.db_dir` without a complete index
    (all, with `corpus.rebuild`); any other builds bm25s into `corpus.index_dir`."""

    model_config = ConfigDict(extra="forbid")

    config: str | Path | None = None
    overrides: list[str] = []


class IndexWarmRequest(BaseModel):
    """One field per `clearmed index warm` option of the same name (`-c` is `config`, `--set` is `overrides`; `--out
    FILE` is the override `corpus.hit_cache=FILE`, the file filled)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    benchmark: str
    source: str | Path | None = None
    split: str | None = None
    limit: int | None = None  # N questions, the sample `clearmed eval --limit N --seed S` takes
    seed: int = 0
    ids: str | Path | None = None  # a file of question ids
    skip_bad_rows: bool = False
    program: str = "clear"  # whose local pathway to search for: its retriever and local_k
    config: ClearmedConfig | str | Path | None = None  # the config whose [corpus] and local_k the runs will use
    overrides: list[str] = []


class StepProgress(Protocol):
    """One long step's progress: `with progress(label, total, unit) as update: update(done)`; a unit of "" is a
    wait with nothing to count (a Lucene build)."""

    def __call__(
        self, label: str, total: int | None, unit: str
    ) -> contextlib.AbstractContextManager[Callable[[int], None]]: ...


@contextlib.contextmanager
def no_progress(label: str, total: int | None, unit: str) -> Iterator[Callable[[int], None]]:
    """A `StepProgress` that shows nothing (the Python door's default)."""
    yield lambda _done: None


@dataclass
class IndexBuilt:
    """What a build did: the corpus it read, the rows and passages (bm25s), each Lucene corpus built (None: it was
    complete and kept), the bad rows skipped, the seconds it took."""

    corpus: CorpusConfig
    stats: IngestStats
    seconds: float
    passages: int = 0
    lucene: dict[str, LuceneBuild | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Warmed:
    """What a warm did: the cache file, the questions searched, and the searches that failed for a reason that may
    pass (not stored: warm again to fill them)."""

    path: Path
    benchmark: str
    questions: int
    searched: int
    cached: int
    k: int
    retriever: str
    index_version: str | None
    seconds: float
    failed: int


def build_corpus_index(
    request: IndexBuildRequest | None = None, /, *, progress: StepProgress = no_progress, **fields: Any
) -> IndexBuilt:
    """Build the index the request configures: bm25s into `out`, or every Lucene corpus under `db_dir` whose index
    is missing or half-built (all, with `rebuild`). Bad settings raise ValueError (one line); a bad source
    CorpusError; a failed build EvidenceError or OSError."""
    from clearmed.retrieval.factory import build_index, build_lucene_indexes, source_rows

    if request is None:
        request = IndexBuildRequest(**fields)
    elif fields:
        raise UsageError("give a request or its fields as keywords, not both")
    cfg = corpus_config_of(request)
    stats = IngestStats()
    started = time.perf_counter()
    if cfg.backend == "lucene":
        from clearmed.retrieval.lucene_java import BACKEND
        from clearmed.retrieval.medrag_layout import chunk_dir, write_offsets

        assert cfg.db_dir is not None
        what = f"indexing {', '.join(cfg.lucene_corpora())} with pyserini"
        with progress(what, None, ""):
            builds = build_lucene_indexes(cfg, stats)
        built: IndexBuilt = IndexBuilt(cfg, stats, time.perf_counter() - started)
        for corpus in cfg.lucene_corpora():
            built.lucene[corpus] = builds.get(corpus)
            if corpus not in builds:
                # An index built elsewhere (MedRAG's own) has no line offsets: write them, so no query scans for them.
                write_offsets(chunk_dir(cfg.db_dir, corpus), backend=BACKEND)
        return built
    assert cfg.index_dir is not None
    # Rows of the source, whose count is known ahead (passages are not, where chunking splits rows).
    with progress(f"indexing {cfg.corpus_name()}", source_rows(cfg), "rows") as update:
        index = build_index(cfg, progress=lambda _passages: update(stats.rows), stats=stats)
    return IndexBuilt(cfg, stats, time.perf_counter() - started, passages=len(index))


def warm_hit_cache(
    request: IndexWarmRequest | None = None, /, *, progress: StepProgress = no_progress, **fields: Any
) -> Warmed:
    """Search the local pathway's query of every question (skipping those already cached) into the hit cache."""
    from clearmed.api.questions import load_questions
    from clearmed.programs.pathways.web_query import build_query  # the query LocalPathway searches
    from clearmed.retrieval.factory import build_hit_cache

    if request is None:
        request = IndexWarmRequest(**fields)
    elif fields:
        raise UsageError("give a request or its fields as keywords, not both")
    corpus, k = warm_target(request)
    bench = load_questions(request)
    if not bench.questions:
        raise UsageError(f"{request.benchmark}: no questions to search")
    started = time.perf_counter()
    with progress(f"index of {corpus.corpus_name()}", None, "passages") as update:
        cache = build_hit_cache(corpus, progress=update)  # opens (and builds, when missing) the index
    try:
        failed = _warm(cache, [build_query(q) for q in bench.questions], k, progress)
    finally:
        cache.close()
    return Warmed(
        path=Path(cache.path),
        benchmark=bench.name,
        questions=len(bench.questions),
        searched=cache.misses,
        cached=cache.hits,
        k=k,
        retriever=cache.name,
        index_version=cache.index_version,
        seconds=time.perf_counter() - started,
        failed=failed,
    )


def corpus_config_of(request: IndexBuildRequest) -> CorpusConfig:
    """The corpus the build reads: the `[corpus]` table of `config` with the overrides over it, merged by the config
    module (`config_tables`), validated. Raises ValueError with a clear one-line message."""
    try:
        tables = config_tables(str(request.config) if request.config is not None else None, request.overrides)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    table = tables.get("corpus")
    if table is None and request.config is not None:
        raise ValueError(f"{request.config}: no [corpus] table")
    if table is not None and not isinstance(table, Mapping):
        raise ValueError(f"{request.config}: corpus must be a table, not {type(table).__name__}")
    data = dict(table or {})
    # Only bm25s and lucene have an index to build; a config naming another backend builds bm25s (a name that is no
    # backend is left for the corpus settings to refuse, naming corpus.backend).
    if data.get("backend") in (None, "rank_bm25", "memory"):
        data["backend"] = "bm25s"
    if data["backend"] == "lucene":
        return _validated(data, request.overrides)
    for key in ("threads", "shards"):  # db_dir and corpora the corpus settings refuse for bm25s themselves
        if data.get(key) is not None:
            raise ValueError(f"corpus.{key} is read by backend 'lucene', not bm25s")
    cfg = _validated(data, request.overrides)
    if cfg.index_dir is None:
        raise ValueError("say where to write the index: --out DIR (or corpus.index_dir in the config)")
    if cfg.preset is None and cfg.path is None and cfg.hub is None:
        raise ValueError("say what to index: --preset, --path or --hub (or a source in the config)")
    return cfg


def _validated(data: dict[str, Any], overrides: Sequence[str] = ()) -> CorpusConfig:
    try:
        return CorpusConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(['corpus', *map(str, e['loc'])])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        given = f" (with --set {' --set '.join(overrides)})" if overrides else ""
        raise ValueError(f"invalid corpus settings: {problems}{given}") from None


def warm_target(request: IndexWarmRequest) -> tuple[CorpusConfig, int]:
    """The corpus `request.program` searches (set to record into the cache) and its local_k; one-line errors."""
    from clearmed.api.assemble import local_corpus
    from clearmed.api.config_choice import request_config
    from clearmed.programs.catalog import PROGRAMS
    from clearmed.signatures.records.settings import clear_variant_settings

    config = request_config(request)
    if request.program not in PROGRAMS:
        raise UsageError(f"unknown program {request.program!r}; choose one of {', '.join(PROGRAMS)}")
    corpus = local_corpus(request.program, config)
    if corpus is None:
        raise UsageError(f"{request.program} searches no local corpus (no [corpus] table, or no local pathway)")
    if corpus.hit_cache is None:
        raise UsageError("say which file to fill: --out FILE (or corpus.hit_cache in the config)")
    try:
        recording = _validated({**corpus.model_dump(), "hit_cache_mode": "record"})
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    settings = clear_variant_settings(request.program, config.program) or config.program
    return recording, settings.local_k


def _warm(cache: CachedRetriever, queries: list[str], k: int, progress: StepProgress) -> int:
    """Every query through the cache, with progress shown; the failures that were not stored (transient ones)."""
    failed = 0
    with progress(f"searching {cache.name}", len(queries), "questions") as update:
        for done, query in enumerate(queries, start=1):
            try:
                cache.retrieve(query, k)
            except EvidenceError as exc:
                if exc.kind in FATAL_FAILURES:
                    raise
                failed += exc.kind in TRANSIENT_FAILURES  # the others are stored, and replayed, as they happened
            update(done)
    return failed
