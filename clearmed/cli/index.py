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

A thin layer over `clearmed.api.index`: the flags parse into an `IndexBuildRequest` or `IndexWarmRequest`, the api
builds or warms, this prints.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

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

from clearmed.api.index import IndexBuildRequest, IndexWarmRequest, build_corpus_index, warm_hit_cache
from clearmed.api.index_info import index_info, lucene_index_info
from clearmed.cli.main import add_config_arguments, parsed_request
from clearmed.core.console import user_console
from clearmed.core.exit_codes import ExitCode
from clearmed.evaluation.progress import CountLines, wants_lines
from clearmed.report.index_lines import human_bytes, lucene_summary
from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.corpus import CorpusError


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
    build.set_defaults(func=_run_build)

    info = commands.add_parser("info", help="describe an index directory")
    info.add_argument("directory", type=Path)
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(func=_run_info)
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
    warm.set_defaults(func=_run_warm)


@contextlib.contextmanager
def step_progress(err: Console, label: str, total: int | None, unit: str) -> Iterator[Callable[[int], None]]:
    """`update(done)` for one long step: rich's bar on a terminal; in a log, where the bar draws nothing (or an empty
    line), eval's progress lines (`CountLines`). A unit of "" is a wait with nothing to count: said once in a log, a
    spinner on a terminal."""
    if unit == "":  # a wait with nothing to count
        if wants_lines(err):  # a spinner draws nothing in a log: say once what the silence is
            err.print(label, markup=False, highlight=False)
            yield lambda _done: None
        else:
            with err.status(escape(label)):
                yield lambda _done: None
        return
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


def _run_build(args: argparse.Namespace) -> int:
    err = user_console(stderr=True)
    try:
        built = build_corpus_index(
            parsed_request(IndexBuildRequest, args), progress=functools.partial(step_progress, err)
        )
    except ValueError as exc:  # bad settings
        _error(err, exc)
        return ExitCode.USAGE
    except (CorpusError, EvidenceError, OSError) as exc:
        _error(err, exc)
        return ExitCode.USAGE if isinstance(exc, CorpusError) else ExitCode.FAILED
    cfg = built.corpus
    if cfg.backend == "lucene":
        assert cfg.db_dir is not None
        for corpus, build in built.lucene.items():
            if build is not None:
                skipped = f", {build.skipped:,} lines skipped by the indexer" if build.skipped else ""
                shards = f", {build.shards} shards" if build.shards > 1 else ""
                print(
                    f"indexed {build.documents:,} snippets of {corpus} into {cfg.db_dir / corpus / 'index' / 'bm25'} "
                    f"in {build.seconds:.1f} s ({build.threads} threads{shards}{skipped})"
                )
            else:
                where = cfg.db_dir / corpus / "index" / "bm25"
                print(f"{corpus}: {where} is complete, kept (--rebuild to build it again)")
    else:
        print(
            f"indexed {built.passages:,} passages from {built.stats.rows:,} rows of {cfg.corpus_name()} "
            f"into {cfg.index_dir} in {built.seconds:.1f} s"
        )
    if built.stats.skipped:
        err.print(f"[yellow]skipped {built.stats.skipped:,} bad rows[/yellow]; first problems:", highlight=False)
        for problem in built.stats.problems[:5]:
            err.print(f"  {problem}", highlight=False, markup=False, soft_wrap=True)
    return ExitCode.DONE


def _run_warm(args: argparse.Namespace) -> int:
    """Search the local pathway's query of every question (skipping those already cached) into the hit cache."""
    err = user_console(stderr=True)
    warmed = warm_hit_cache(parsed_request(IndexWarmRequest, args), progress=functools.partial(step_progress, err))
    searched = f"{warmed.searched:,} searched, {warmed.cached:,} already cached"
    print(
        f"warmed {warmed.path}: {warmed.questions:,} questions of {warmed.benchmark} ({searched}), k={warmed.k}, "
        f"{warmed.retriever} at index version {warmed.index_version}, in {warmed.seconds:.1f} s"
    )
    if warmed.failed:
        searches = "search" if warmed.failed == 1 else "searches"
        err.print(
            Text(f"{warmed.failed:,} {searches} failed for a reason that may pass, not stored: warm again to fill them")
        )
        return ExitCode.FAILED
    return ExitCode.DONE


def _run_info(args: argparse.Namespace) -> int:
    # A Lucene folder has Lucene's commit file, or (half-built or absent) MedRAG's name and no bm25s manifest.
    lucene = any(args.directory.glob("segments_*")) or (
        args.directory.name == "bm25" and not (args.directory / "manifest.json").exists()
    )
    try:
        info = lucene_index_info(args.directory) if lucene else index_info(args.directory)
    except EvidenceError as exc:
        _error(user_console(stderr=True), exc)
        return ExitCode.USAGE
    if args.json:
        json.dump(info, sys.stdout, indent=2)
        print()
        return ExitCode.DONE if not lucene or info["opens"] else ExitCode.FAILED
    if lucene:
        print(f"{info['corpus']}: {lucene_summary(info)}")
        return ExitCode.DONE if info["opens"] else ExitCode.FAILED
    table = Table(title=f"index {info['directory']}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    table.add_row("corpus", info["corpus"])
    table.add_row("source", info["source"] or "-")
    table.add_row("passages", f"{info['passages']:,}")
    table.add_row("vocabulary", f"{info['vocabulary']:,} terms")
    table.add_row("disk size", human_bytes(info["disk_bytes"]))
    table.add_row("built", info["built_at"])
    tokenizer = info["tokenizer"]
    table.add_row("tokenizer", f"stopwords removed: {tokenizer['stopwords']}, stemming: {tokenizer['stem']}")
    table.add_row("bm25", f"{info['bm25']['method']} k1={info['bm25']['k1']} b={info['bm25']['b']}")
    table.add_row("bm25s", info["bm25s_version"])
    user_console().print(table)
    return ExitCode.DONE


def _error(console: Console, problem: object) -> None:
    # Plain text, one line: messages hold paths and "[corpus]"-style names that rich would parse as markup.
    console.print(Text("error: ", style="red") + Text(str(problem)), soft_wrap=True, highlight=False)
