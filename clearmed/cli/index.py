"""`clearmed index build|info|warm`: build the local pathway's index (bm25s, or Lucene in MedRAG's layout), describe
one, and search a benchmark's questions once into the local hit cache (`retrieval.hit_cache`).

    clearmed index build --preset openstax --out indexes/openstax
    clearmed index build --path my_corpus.parquet --id-field doc_id --text-field body --out indexes/mine
    clearmed index build --config configs/embedded.toml         # the [corpus] table; flags override it
    clearmed index build --backend lucene --db-dir /data/medcorp --corpus textbooks --corpus statpearls
    clearmed index build --backend lucene --db-dir /data/medcorp --preset openstax   # written as MedRAG chunks
    clearmed index build --backend lucene --db-dir /data/medcorp --corpus pubmed --shards 8
    clearmed index info indexes/openstax [--json]
    clearmed index info /data/medcorp/textbooks/index/bm25 [--json]
    clearmed index warm --benchmark medqa --source shared -c medcorp.toml --out hits.sqlite   # the local hit cache

A thin layer over `clearmed.retrieval`: parse flags into a `CorpusConfig`, call the library, print.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from clearmed.cli.main import add_config_arguments, config_from_args
from clearmed.core.console import user_console
from clearmed.core.errors import UsageError
from clearmed.evaluation.progress import CountLines, wants_lines
from clearmed.retrieval.base import FATAL_FAILURES, TRANSIENT_FAILURES, EvidenceError
from clearmed.retrieval.bm25_sparse import directory_size, read_manifest
from clearmed.retrieval.config import CorpusConfig
from clearmed.retrieval.corpus import CorpusError, IngestStats
from clearmed.retrieval.factory import build_hit_cache, build_index, build_lucene_indexes, source_rows
from clearmed.retrieval.hit_cache import CachedRetriever

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `index` with its `build`, `info` and `warm` subcommands to the CLI."""
    index = subparsers.add_parser("index", help="build or inspect a local BM25 index (bm25s or Lucene)")
    commands = index.add_subparsers(dest="index_command", metavar="{build,info,warm}", required=True)

    build = commands.add_parser("build", help="index a corpus (bm25s into --out; lucene under --db-dir)")
    build.add_argument("--backend", choices=["bm25s", "lucene"], help="default: the config's, else bm25s")
    build.add_argument("--db-dir", type=Path, help="lucene: the MedRAG folder holding <corpus>/chunk")
    build.add_argument("--corpus", action="append", help="lucene: a corpus folder under --db-dir (repeat; medcorp)")
    build.add_argument("--threads", type=int, help="lucene: indexing threads (default: every core)")
    build.add_argument("--rebuild", action="store_true", help="lucene: rebuild complete indexes too")
    build.add_argument(
        "--shards", type=int, help="lucene: index shards (default: about 2x the cores, each of 250k+ snippets)"
    )
    source = build.add_mutually_exclusive_group()
    source.add_argument("--preset", help="a shared corpus: openstax or medquad")
    source.add_argument("--path", type=Path, help="a .jsonl or .parquet corpus file")
    source.add_argument("--hub", help="a Hugging Face corpus id, e.g. MedRAG/textbooks (needs network)")
    build.add_argument("-c", "--config", type=Path, help="a TOML file whose [corpus] table configures the corpus")
    build.add_argument("--out", type=Path, help="index directory (default: corpus.index_dir of --config)")
    build.add_argument("--name", help="corpus name recorded in passage provenance")
    build.add_argument("--id-field", help="source field holding the document id (default: id)")
    build.add_argument("--title-field", action="append", help="title field; repeat to join several")
    build.add_argument("--text-field", action="append", help="text field; repeat to join several")
    build.add_argument("--url-field", help="source field holding the page URL")
    build.add_argument("--date-field", help="source field holding the publication date")
    build.add_argument("--chunk-words", type=int, help="split documents into windows of this many words")
    build.add_argument("--chunk-overlap", type=int, default=None, help="words shared by neighbouring windows")
    build.add_argument("--stem", choices=["none", "simple"], help="tokenizer stemming (default: none)")
    build.add_argument("--keep-stopwords", action="store_true", help="index stopwords too")
    build.add_argument("--limit", type=int, help="read at most this many source rows")
    build.add_argument("--skip-bad-rows", action="store_true", help="skip and count malformed rows")
    build.add_argument("--data-root", type=Path, help="shared data folder for presets")
    build.set_defaults(func=run_build)

    info = commands.add_parser("info", help="describe an index directory")
    info.add_argument("directory", type=Path)
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(func=run_info)
    _register_warm(commands)


def _register_warm(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    warm = commands.add_parser(
        "warm", help="search every question of a benchmark once into the local pathway's hit cache (corpus.hit_cache)"
    )
    warm.add_argument("--benchmark", required=True, help="benchmark name (see `clearmed benchmarks`), or 'demo'")
    warm.add_argument("--source", help="local file in the upstream schema, or 'shared' (default: the hub copy)")
    warm.add_argument("--split", help="hub split (or label for a local file)")
    warm.add_argument("--limit", type=int, help="N questions, the sample `clearmed eval --limit N --seed S` takes")
    warm.add_argument("--seed", type=int, default=0)
    warm.add_argument("--ids", help="a file of question ids (one per line or a JSON list)")
    warm.add_argument("--skip-bad-rows", action="store_true", help="skip and count malformed benchmark rows")
    warm.add_argument(
        "--program",
        default="clear",
        help="whose local pathway to search for: its retriever and local_k (default: clear)",
    )
    add_config_arguments(warm, help="the config whose [corpus] and [program] local_k the runs will use")
    warm.add_argument("--out", type=Path, help="the cache file to fill (default: corpus.hit_cache of the config)")
    warm.set_defaults(func=run_warm)


def corpus_config_from_args(args: argparse.Namespace) -> CorpusConfig:
    """The `[corpus]` table of --config (if any), overridden by flags. Raises ValueError with a clear message."""
    data = _corpus_table(args.config) if args.config is not None else {}
    for flag in ("preset", "path", "hub"):
        if getattr(args, flag) is not None:
            for other in ("preset", "path", "hub"):
                data.pop(other, None)
            data[flag] = getattr(args, flag)
    if args.name:
        data["name"] = args.name
    if args.out is not None:
        data["index_dir"] = args.out
    if fields := _fields(dict(data.get("fields") or {}), args):
        data["fields"] = fields
    if args.chunk_words is not None:
        chunking = {"words": args.chunk_words}
        if args.chunk_overlap is not None:
            chunking["overlap"] = args.chunk_overlap
        data["chunking"] = chunking
    tokenizer = dict(data.get("tokenizer") or {})
    if args.stem:
        tokenizer["stem"] = args.stem
    if args.keep_stopwords:
        tokenizer["stopwords"] = False
    data["tokenizer"] = tokenizer
    if args.limit is not None:
        data["limit"] = args.limit
    if args.skip_bad_rows:
        data["on_error"] = "skip"
    if args.data_root is not None:
        data["data_root"] = args.data_root
    # Only bm25s and lucene have an index to build; a config naming another backend builds bm25s.
    data["backend"] = args.backend or ("lucene" if data.get("backend") == "lucene" else "bm25s")
    if data["backend"] == "lucene":
        return _lucene_config(data, args)
    for flag in ("db_dir", "corpus", "threads", "shards"):
        if getattr(args, flag):
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


def _fields(fields: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The source fields of the config, overridden by the --*-field flags (a repeated one joins several)."""
    for flag, key in (("id_field", "id"), ("url_field", "url"), ("date_field", "date")):
        if getattr(args, flag):
            fields[key] = getattr(args, flag)
    for flag, key in (("title_field", "title"), ("text_field", "text")):
        values = getattr(args, flag)
        if values:
            fields[key] = values[0] if len(values) == 1 else values
    return fields


def _lucene_config(data: dict[str, Any], args: argparse.Namespace) -> CorpusConfig:
    if args.out is not None:
        raise ValueError("--out is for bm25s; Lucene indexes go to <db_dir>/<corpus>/index/bm25 (--db-dir)")
    data.pop("index_dir", None)
    if args.db_dir is not None:
        data["db_dir"] = args.db_dir
    if args.corpus:
        data["corpora"] = args.corpus
    if args.threads is not None:
        data["threads"] = args.threads
    if args.shards is not None:
        data["shards"] = args.shards
    if args.rebuild:
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


@contextlib.contextmanager
def step_progress(err: Console, label: str, total: int | None, unit: str) -> Iterator[Callable[[int], None]]:
    """`update(done)` for one long step: rich's bar on a terminal; in a log, where the bar draws nothing (or an empty
    line), eval's progress lines (`CountLines`)."""
    if wants_lines(err):
        lines = CountLines(err, label, total, unit=unit)
        yield lines.update
        lines.end()
        return
    if total is None:
        columns: tuple[ProgressColumn, ...] = (
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TextColumn(f"{{task.completed:,}} {unit}"),
            TimeElapsedColumn(),
        )
    else:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task(escape(label), total=total)
        yield lambda done: progress.update(task, completed=done)


def run_build(args: argparse.Namespace) -> int:
    err = user_console(stderr=True)
    try:
        cfg = corpus_config_from_args(args)
    except ValueError as exc:
        _error(err, exc)
        return EXIT_BAD_INPUT
    if cfg.backend == "lucene":
        return _run_lucene_build(cfg, err)
    assert cfg.index_dir is not None
    stats = IngestStats()
    started = time.perf_counter()
    try:
        # Rows of the source, whose count is known ahead (passages are not, where chunking splits rows).
        with step_progress(err, f"indexing {cfg.corpus_name()}", source_rows(cfg), "rows") as update:
            index = build_index(cfg, progress=lambda _passages: update(stats.rows), stats=stats)
    except (CorpusError, EvidenceError, OSError) as exc:
        _error(err, exc)
        return EXIT_BAD_INPUT if isinstance(exc, CorpusError) else EXIT_FAILED
    seconds = time.perf_counter() - started
    print(
        f"indexed {len(index):,} passages from {stats.rows:,} rows of {cfg.corpus_name()} "
        f"into {cfg.index_dir} in {seconds:.1f} s"
    )
    if stats.skipped:
        err.print(f"[yellow]skipped {stats.skipped:,} bad rows[/yellow]; first problems:", highlight=False)
        for problem in stats.problems[:5]:
            err.print(f"  {problem}", highlight=False, markup=False, soft_wrap=True)
    return EXIT_OK


def _run_lucene_build(cfg: CorpusConfig, err: Console) -> int:
    """Build every corpus of `cfg` whose index is missing or half-built (all, with --rebuild); say what was kept."""
    from clearmed.retrieval.lucene import BACKEND, describe_index
    from clearmed.retrieval.medrag_layout import chunk_dir, write_offsets

    assert cfg.db_dir is not None
    stats = IngestStats()
    what = f"indexing {', '.join(cfg.lucene_corpora())} with pyserini"
    waiting: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    if wants_lines(err):  # a spinner draws nothing in a log: say once what the silence is
        err.print(what, markup=False, highlight=False)
    else:
        waiting = err.status(escape(what))
    try:
        with waiting:
            builds = build_lucene_indexes(cfg, stats)
    except (CorpusError, EvidenceError, OSError) as exc:
        _error(err, exc)
        return EXIT_BAD_INPUT if isinstance(exc, CorpusError) else EXIT_FAILED
    for corpus in cfg.lucene_corpora():
        build = builds.get(corpus)
        if build is not None:
            skipped = f", {build.skipped:,} lines skipped by the indexer" if build.skipped else ""
            shards = f", {build.shards} shards" if build.shards > 1 else ""
            print(
                f"indexed {build.documents:,} snippets of {corpus} into {cfg.db_dir / corpus / 'index' / 'bm25'} "
                f"in {build.seconds:.1f} s ({build.threads} threads{shards}{skipped})"
            )
        else:
            report = describe_index(cfg.db_dir, corpus, open_index=False)
            # An index built elsewhere (MedRAG's own) has no line offsets: write them, so no query scans for them.
            try:
                write_offsets(chunk_dir(cfg.db_dir, corpus), backend=BACKEND)
            except (EvidenceError, OSError) as exc:
                _error(err, exc)
                return EXIT_FAILED
            print(f"{corpus}: {report.directory} is complete, kept (--rebuild to build it again)")
    if stats.skipped:
        err.print(f"[yellow]skipped {stats.skipped:,} bad rows[/yellow]; first problems:", highlight=False)
        for problem in stats.problems[:5]:
            err.print(f"  {problem}", highlight=False, markup=False, soft_wrap=True)
    return EXIT_OK


def run_warm(args: argparse.Namespace) -> int:
    """Search the local pathway's query of every question (skipping those already cached) into the hit cache."""
    from clearmed.cli.evaluate import _load_questions
    from clearmed.programs.pathways.web_query import build_query  # the query LocalPathway searches

    err = user_console(stderr=True)
    corpus, k = warm_target(args)
    bench = _load_questions(args)
    if not bench.questions:
        raise UsageError(f"{args.benchmark}: no questions to search")
    started = time.perf_counter()
    with step_progress(err, f"index of {corpus.corpus_name()}", None, "passages") as update:
        cache = build_hit_cache(corpus, progress=update)  # opens (and builds, when missing) the index
    try:
        failed = _warm(cache, [build_query(q) for q in bench.questions], k, err)
    finally:
        cache.close()
    seconds = time.perf_counter() - started
    searched = f"{cache.misses:,} searched, {cache.hits:,} already cached"
    print(
        f"warmed {cache.path}: {len(bench.questions):,} questions of {bench.name} ({searched}), k={k}, "
        f"{cache.name} at index version {cache.index_version}, in {seconds:.1f} s"
    )
    if failed:
        searches = "search" if failed == 1 else "searches"
        err.print(Text(f"{failed:,} {searches} failed for a reason that may pass, not stored: warm again to fill them"))
        return EXIT_FAILED
    return EXIT_OK


def warm_target(args: argparse.Namespace) -> tuple[CorpusConfig, int]:
    """The corpus `args.program` searches (set to record into the cache) and its local_k; one-line errors."""
    from clearmed.api.assemble import local_corpus
    from clearmed.programs.catalog import PROGRAMS
    from clearmed.signatures.records.settings import clear_variant_settings

    config = config_from_args(args)
    if args.program not in PROGRAMS:
        raise UsageError(f"unknown program {args.program!r}; choose one of {', '.join(PROGRAMS)}")
    corpus = local_corpus(args.program, config)
    if corpus is None:
        raise UsageError(f"{args.program} searches no local corpus (no [corpus] table, or no local pathway)")
    path = args.out or corpus.hit_cache
    if path is None:
        raise UsageError("say which file to fill: --out FILE (or corpus.hit_cache in the config)")
    try:
        recording = _validated({**corpus.model_dump(), "hit_cache": path, "hit_cache_mode": "record"})
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    settings = clear_variant_settings(args.program, config.program) or config.program
    return recording, settings.local_k


def _warm(cache: CachedRetriever, queries: list[str], k: int, err: Console) -> int:
    """Every query through the cache, with progress shown; the failures that were not stored (transient ones)."""
    failed = 0
    with step_progress(err, f"searching {cache.name}", len(queries), "questions") as update:
        for done, query in enumerate(queries, start=1):
            try:
                cache.retrieve(query, k)
            except EvidenceError as exc:
                if exc.kind in FATAL_FAILURES:
                    raise
                failed += exc.kind in TRANSIENT_FAILURES  # the others are stored, and replayed, as they happened
            update(done)
    return failed


def lucene_index_info(directory: Path) -> dict[str, Any]:
    """`index info` of a Lucene index folder (`<db_dir>/<corpus>/index/bm25`): state, size, documents."""
    from clearmed.retrieval.lucene import INDEX_SUBDIR, describe_index

    directory = directory.resolve()
    if directory.parts[-2:] != INDEX_SUBDIR.parts:
        raise EvidenceError(f"{directory}: a Lucene index of MedRAG's layout is <db_dir>/<corpus>/index/bm25")
    report = describe_index(directory.parents[2], directory.parents[1].name, queries=density_questions())
    return {"backend": "lucene", **report.model_dump(mode="json")}


DENSITY_QUESTIONS = 5


def density_questions() -> list[str]:
    """The first demo questions (MedQA-style vignettes), whose mean Σdf/N `doctor` and `index info` report."""
    from clearmed.demo import demo_questions

    return [question.text for question in demo_questions()[:DENSITY_QUESTIONS]]


def index_info(directory: Path) -> dict[str, Any]:
    """What `index info` shows, as plain data (raises EvidenceError for a non-index directory)."""
    manifest = read_manifest(directory)
    return {
        "directory": str(directory),
        "corpus": manifest.corpus,
        "passages": manifest.passages,
        "vocabulary": manifest.vocabulary,
        "disk_bytes": directory_size(directory),
        "built_at": manifest.built_at.isoformat(),
        "tokenizer": manifest.tokenizer.model_dump(),
        "bm25": {"method": manifest.method, "k1": manifest.k1, "b": manifest.b},
        "bm25s_version": manifest.bm25s_version,
        "format_version": manifest.format_version,
        "source": manifest.source,
        "source_settings": manifest.source_settings,
    }


def run_info(args: argparse.Namespace) -> int:
    # A Lucene folder has Lucene's commit file, or (half-built or absent) MedRAG's name and no bm25s manifest.
    lucene = any(args.directory.glob("segments_*")) or (
        args.directory.name == "bm25" and not (args.directory / "manifest.json").exists()
    )
    try:
        info = lucene_index_info(args.directory) if lucene else index_info(args.directory)
    except EvidenceError as exc:
        _error(user_console(stderr=True), exc)
        return EXIT_BAD_INPUT
    if args.json:
        json.dump(info, sys.stdout, indent=2)
        print()
        return EXIT_OK if not lucene or info["opens"] else EXIT_FAILED
    if lucene:
        print(f"{info['corpus']}: {lucene_summary(info)}")
        return EXIT_OK if info["opens"] else EXIT_FAILED
    table = Table(title=f"index {info['directory']}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    table.add_row("corpus", info["corpus"])
    table.add_row("source", info["source"] or "-")
    table.add_row("passages", f"{info['passages']:,}")
    table.add_row("vocabulary", f"{info['vocabulary']:,} terms")
    table.add_row("disk size", _human_bytes(info["disk_bytes"]))
    table.add_row("built", info["built_at"])
    tokenizer = info["tokenizer"]
    table.add_row("tokenizer", f"stopwords removed: {tokenizer['stopwords']}, stemming: {tokenizer['stem']}")
    table.add_row("bm25", f"{info['bm25']['method']} k1={info['bm25']['k1']} b={info['bm25']['b']}")
    table.add_row("bm25s", info["bm25s_version"])
    user_console().print(table)
    return EXIT_OK


def lucene_summary(report: dict[str, Any]) -> str:
    """One line for a Lucene index report: "<dir>: 2,000 documents, 1.2 MB, opens" or why it does not."""
    where = report["directory"]
    if report["state"] == "missing":
        return f"{where}: missing; build it with `clearmed index build`"
    size = _human_bytes(report["bytes"])
    if report["state"] == "half_built":
        return f"{where}: HALF-BUILT ({size}, no Lucene commit); `clearmed index build` rebuilds it"
    if not report["opens"]:
        return f"{where}: {size}, does NOT open: {report['detail']}"
    shards = report.get("shards", 1)
    summary = f"{where}: {report['documents']:,} documents, {size}, opens, {shards} shard{'s' * (shards > 1)}"
    if report.get("density") is not None:
        # The postings a query scores per document: query cost is about 6.7 ns a posting on one core.
        summary += f", mean Σdf/N {report['density']:.3f} over {report['density_queries']} demo questions"
    return summary


def _error(console: Console, problem: object) -> None:
    # Plain text, one line: messages hold paths and "[corpus]"-style names that rich would parse as markup.
    console.print(Text("error: ", style="red") + Text(str(problem)), soft_wrap=True, highlight=False)


def _human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{size} B"
        value /= 1024
    return f"{size} B"
