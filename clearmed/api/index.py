"""`index build` and `index warm`, the doors of `clearmed index build|warm`: build the local pathway's index (bm25s,
or Lucene in MedRAG's layout), and search a benchmark's questions once into the local hit cache
(`retrieval.hit_cache`). `IndexBuildRequest` and `IndexWarmRequest` hold one field per option of their command; long
steps report through a `StepProgress` the caller gives (the command line's bars or log lines). What a built index
holds (`index info`, as plain data) is `clearmed.api.index_info`."""

from __future__ import annotations

import contextlib
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from clearmed.config import ClearmedConfig
from clearmed.core.errors import UsageError
from clearmed.retrieval.base import FATAL_FAILURES, TRANSIENT_FAILURES, EvidenceError
from clearmed.retrieval.config import CorpusConfig
from clearmed.retrieval.corpus import IngestStats
from clearmed.retrieval.hit_cache import CachedRetriever

if TYPE_CHECKING:
    from clearmed.retrieval.lucene_index import LuceneBuild


class IndexBuildRequest(BaseModel):
    """One field per `clearmed index build` option of the same name: the `[corpus]` table of `config` (a TOML
    file), overridden by the others."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["bm25s", "lucene"] | None = None  # default: the config's, else bm25s
    db_dir: Path | None = None  # lucene: the MedRAG folder holding <corpus>/chunk
    corpus: list[str] | None = None  # lucene: corpus folders under db_dir
    threads: int | None = None  # lucene: indexing threads (default: every core)
    rebuild: bool = False  # lucene: rebuild complete indexes too
    shards: int | None = None  # lucene: index shards
    preset: str | None = None  # a shared corpus: openstax or medquad
    path: Path | None = None  # a .jsonl or .parquet corpus file
    hub: str | None = None  # a Hugging Face corpus id
    config: Path | None = None  # a TOML file whose [corpus] table configures the corpus
    out: Path | None = None  # bm25s: the index directory (default: corpus.index_dir of config)
    name: str | None = None  # the corpus name recorded in passage provenance
    id_field: str | None = None
    title_field: list[str] | None = None  # several are joined
    text_field: list[str] | None = None  # several are joined
    url_field: str | None = None
    date_field: str | None = None
    chunk_words: int | None = None  # split documents into windows of this many words
    chunk_overlap: int | None = None  # words shared by neighbouring windows
    stem: Literal["none", "simple"] | None = None
    keep_stopwords: bool = False
    limit: int | None = None  # read at most this many source rows
    skip_bad_rows: bool = False
    data_root: Path | None = None  # the shared data folder for presets


class IndexWarmRequest(BaseModel):
    """One field per `clearmed index warm` option of the same name (`-c` is `config`, `--set` is `overrides`)."""

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
    out: Path | None = None  # the cache file to fill (default: corpus.hit_cache of the config)


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
    """The `[corpus]` table of `config` (if any), overridden by the request's other fields. Raises ValueError with a
    clear message."""
    data = _corpus_table(request.config) if request.config is not None else {}
    for flag in ("preset", "path", "hub"):
        if getattr(request, flag) is not None:
            for other in ("preset", "path", "hub"):
                data.pop(other, None)
            data[flag] = getattr(request, flag)
    if request.name:
        data["name"] = request.name
    if request.out is not None:
        data["index_dir"] = request.out
    if fields := _fields(dict(data.get("fields") or {}), request):
        data["fields"] = fields
    if request.chunk_words is not None:
        chunking = {"words": request.chunk_words}
        if request.chunk_overlap is not None:
            chunking["overlap"] = request.chunk_overlap
        data["chunking"] = chunking
    tokenizer = dict(data.get("tokenizer") or {})
    if request.stem:
        tokenizer["stem"] = request.stem
    if request.keep_stopwords:
        tokenizer["stopwords"] = False
    data["tokenizer"] = tokenizer
    if request.limit is not None:
        data["limit"] = request.limit
    if request.skip_bad_rows:
        data["on_error"] = "skip"
    if request.data_root is not None:
        data["data_root"] = request.data_root
    # Only bm25s and lucene have an index to build; a config naming another backend builds bm25s.
    data["backend"] = request.backend or ("lucene" if data.get("backend") == "lucene" else "bm25s")
    if data["backend"] == "lucene":
        return _lucene_config(data, request)
    for flag in ("db_dir", "corpus", "threads", "shards"):
        if getattr(request, flag):
            raise ValueError(f"--{flag.replace('_', '-')} is read by --backend lucene, not bm25s")
    for key in ("db_dir", "corpora", "merge", "threads", "shards", "search_threads"):
        data.pop(key, None)
    cfg = _validated(data)
    if cfg.index_dir is None:
        raise ValueError("say where to write the index: --out DIR (or corpus.index_dir in --config)")
    if cfg.preset is None and cfg.path is None and cfg.hub is None:
        raise ValueError("say what to index: --preset, --path or --hub (or a source in --config)")
    return cfg


def _corpus_table(config: Path) -> dict[str, Any]:
    """The `[corpus]` table of a TOML file, its paths resolved. Raises ValueError with a clear message."""
    try:
        table = tomllib.loads(config.read_text(encoding="utf-8")).get("corpus")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{config}: cannot read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{config}: invalid TOML ({exc})") from None
    if not isinstance(table, dict):
        raise ValueError(f"{config}: no [corpus] table")
    data: dict[str, Any] = dict(table)
    # As in the project config loader: "~" expands, relative paths are relative to the config file.
    for key in ("path", "index_dir", "data_root", "db_dir"):
        if isinstance(data.get(key), str) and data[key]:
            value = Path(data[key]).expanduser()
            data[key] = value if value.is_absolute() else (config.parent / value).resolve()
    return data


def _fields(fields: dict[str, Any], request: IndexBuildRequest) -> dict[str, Any]:
    """The source fields of the config, overridden by the --*-field flags (a repeated one joins several)."""
    for flag, key in (("id_field", "id"), ("url_field", "url"), ("date_field", "date")):
        if getattr(request, flag):
            fields[key] = getattr(request, flag)
    for flag, key in (("title_field", "title"), ("text_field", "text")):
        values = getattr(request, flag)
        if values:
            fields[key] = values[0] if len(values) == 1 else values
    return fields


def _lucene_config(data: dict[str, Any], request: IndexBuildRequest) -> CorpusConfig:
    if request.out is not None:
        raise ValueError("--out is for bm25s; Lucene indexes go to <db_dir>/<corpus>/index/bm25 (--db-dir)")
    data.pop("index_dir", None)
    if request.db_dir is not None:
        data["db_dir"] = request.db_dir
    if request.corpus:
        data["corpora"] = request.corpus
    if request.threads is not None:
        data["threads"] = request.threads
    if request.shards is not None:
        data["shards"] = request.shards
    if request.rebuild:
        data["rebuild"] = True
    return _validated(data)


def _validated(data: dict[str, Any]) -> CorpusConfig:
    try:
        return CorpusConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(['corpus', *map(str, e['loc'])])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ValueError(f"invalid corpus settings: {problems}") from None


def warm_target(request: IndexWarmRequest) -> tuple[CorpusConfig, int]:
    """The corpus `request.program` searches (set to record into the cache) and its local_k; one-line errors."""
    from clearmed.api.assemble import local_corpus
    from clearmed.api.evaluate import request_config
    from clearmed.programs.catalog import PROGRAMS
    from clearmed.signatures.records.settings import clear_variant_settings

    config = request_config(request)
    if request.program not in PROGRAMS:
        raise UsageError(f"unknown program {request.program!r}; choose one of {', '.join(PROGRAMS)}")
    corpus = local_corpus(request.program, config)
    if corpus is None:
        raise UsageError(f"{request.program} searches no local corpus (no [corpus] table, or no local pathway)")
    path = request.out or corpus.hit_cache
    if path is None:
        raise UsageError("say which file to fill: --out FILE (or corpus.hit_cache in the config)")
    try:
        recording = _validated({**corpus.model_dump(), "hit_cache": path, "hit_cache_mode": "record"})
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
