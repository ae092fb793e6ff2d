"""`clearmed index build|info|warm`: build the local pathway's index (bm25s, or Lucene in MedRAG's layout), describe
one, and search a benchmark's questions once into the local hit cache (`retrieval.hit_cache`).

    clearmed index build --preset openstax --out indexes/openstax
    clearmed index build --path my_corpus.parquet --id-field doc_id --text-field body --out indexes/mine
    clearmed index build --config configs/embedded.toml         # the [corpus] table; flags and --set override it
    clearmed index build --backend lucene --db-dir /data/medcorp --corpus textbooks --corpus statpearls
    clearmed index build --backend lucene --db-dir /data/medcorp --preset openstax   # written as MedRAG chunks
    clearmed index build --backend lucene --db-dir /data/medcorp --corpus pubmed --shards 8
    clearmed index info indexes/openstax [--json]
    clearmed index info /data/medcorp/textbooks/index/bm25 [--json]
    clearmed index warm --benchmark medqa --source shared -c medcorp.toml --out hits.sqlite   # the local hit cache

A thin layer over `clearmed.api.index`: the flags parse into an `IndexBuildRequest` or `IndexWarmRequest`, the api
builds or warms, this prints. The corpus is configured one way, by `-c` and `--set`: each corpus flag (`--path`,
`--out`, `--text-field`, ...) is a shorthand the parser writes as `--set corpus.KEY=VALUE` (`CorpusFlag`), so
`--path x.jsonl` and `--set corpus.path=x.jsonl` are the same request. A flag and a `--set` of the same setting
together are refused in one line, whichever comes first: neither silently wins.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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
from clearmed.core.errors import UsageError
from clearmed.core.exit_codes import ExitCode
from clearmed.evaluation.progress import CountLines, wants_lines
from clearmed.report.index_lines import human_bytes, lucene_summary
from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.corpus import CorpusError

# While the parser parses: each corpus flag's setting -> (the flag, its values, the override it wrote).
_GIVEN = "corpus_flags"
# How a flag's value is written: as a TOML string, as given (a number), or repeatable, as a list of strings ("list"),
# or as one string or a list of several ("texts"). Any other kind is a TOML constant the flag sets, taking no value.
_VALUED = ("text", "number", "list", "texts")

# The corpus flags of `index build`: (flag, its setting under [corpus], kind, metavar, help). --preset, --path and --hub
# (SOURCES) exclude one another.
SOURCES = ("--preset", "--path", "--hub")
BUILD_FLAGS: list[tuple[str, str, str, str | None, str]] = [
    ("--backend", "backend", "text", "{bm25s,lucene}", "the index to build (default: the config's, else bm25s)"),
    ("--db-dir", "db_dir", "text", "DIR", "lucene: the MedRAG folder holding <corpus>/chunk"),
    ("--corpus", "corpora", "list", "NAME", "lucene: a corpus folder under the db dir (repeat; medcorp)"),
    ("--threads", "threads", "number", "N", "lucene: indexing threads (default: every core)"),
    ("--rebuild", "rebuild", "true", None, "lucene: rebuild complete indexes too"),
    ("--shards", "shards", "number", "N", "lucene: index shards (default: about 2x the cores, each of 250k+ snippets)"),
    ("--preset", "preset", "text", "NAME", "a shared corpus: openstax or medquad"),
    ("--path", "path", "text", "FILE", "a .jsonl or .parquet corpus file"),
    ("--hub", "hub", "text", "ID", "a Hugging Face corpus id, e.g. MedRAG/textbooks (needs network)"),
    ("--out", "index_dir", "text", "DIR", "bm25s: the index directory"),
    ("--name", "name", "text", "NAME", "corpus name recorded in passage provenance"),
    ("--id-field", "fields.id", "text", "FIELD", "source field holding the document id (default: id)"),
    ("--title-field", "fields.title", "texts", "FIELD", "title field; repeat to join several"),
    ("--text-field", "fields.text", "texts", "FIELD", "text field; repeat to join several"),
    ("--url-field", "fields.url", "text", "FIELD", "source field holding the page URL"),
    ("--date-field", "fields.date", "text", "FIELD", "source field holding the publication date"),
    ("--chunk-words", "chunking.words", "number", "N", "split documents into windows of this many words"),
    ("--chunk-overlap", "chunking.overlap", "number", "N", "words shared by neighbouring windows"),
    ("--stem", "tokenizer.stem", "text", "{none,simple}", "tokenizer stemming (default: none)"),
    ("--keep-stopwords", "tokenizer.stopwords", "false", None, "index stopwords too"),
    ("--limit", "limit", "number", "N", "read at most this many source rows"),
    ("--skip-bad-rows", "on_error", '"skip"', None, "skip and count malformed rows"),
    ("--data-root", "data_root", "text", "DIR", "shared data folder for presets"),
]


def _toml_string(text: str) -> str:
    """`text` as a TOML basic string (JSON's escapes are TOML's; DEL, which JSON leaves be, TOML wants escaped)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


class CorpusFlag(argparse.Action):
    """A corpus flag: a shorthand the parser writes into `overrides` as `--set corpus.KEY=VALUE`, so that a config
    and its overrides are the one way the corpus is configured. Given again, a flag replaces its value (a repeatable
    one adds to it); with a `--set` of the same setting it is refused (`refuse_doubles`)."""

    def __init__(self, option_strings: list[str], dest: str, *, key: str, kind: str, **kwargs: Any) -> None:
        super().__init__(option_strings, "overrides", nargs=None if kind in _VALUED else 0, default=[], **kwargs)
        self.key, self.kind = f"corpus.{key}", kind

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: Any = None
    ) -> None:
        given: dict[str, tuple[str, list[str], str]] = dict(getattr(namespace, _GIVEN, {}))
        overrides = list(getattr(namespace, "overrides", None) or [])  # a copy: the default list is shared
        _, earlier, written = given.get(self.key, ("", [], ""))
        if written:
            overrides.reverse()  # its own override, the last one equal to it
            overrides.remove(written)
            overrides.reverse()
        if self.kind in _VALUED:
            values = [*earlier, values] if self.kind in ("list", "texts") else [values]
        override = f"{self.key}={self.value(values)}"
        given[self.key] = (option_string or self.option_strings[-1], values, override)
        setattr(namespace, _GIVEN, given)
        namespace.overrides = [*overrides, override]

    def value(self, values: list[str]) -> str:
        """The override's value, as TOML."""
        if self.kind == "number":  # as given: TOML reads a number; anything else the config refuses, naming the key
            return values[-1]
        if self.kind == "text" or (self.kind == "texts" and len(values) == 1):
            return _toml_string(values[-1])
        if self.kind in ("list", "texts"):
            return "[" + ", ".join(map(_toml_string, values)) + "]"
        return self.kind


def add_corpus_flag(parser: Any, flag: str, key: str, kind: str, metavar: str | None, help: str) -> None:
    """Add a corpus flag (`CorpusFlag`), its help naming the setting it stands for."""
    value = f"[{metavar}, ...]" if kind == "list" else metavar if kind in _VALUED else kind
    said = f"{help} (= --set corpus.{key}={value})"
    if kind in _VALUED:
        parser.add_argument(flag, action=CorpusFlag, key=key, kind=kind, metavar=metavar, help=said)
    else:
        parser.add_argument(flag, action=CorpusFlag, key=key, kind=kind, help=said)


def refuse_doubles(args: argparse.Namespace) -> None:
    """A corpus flag and a `--set` of the same setting (or of a table holding it, `--set corpus.fields={...}` for
    `--text-field`): refused in one line, whichever comes first, so neither silently wins."""
    for key, (flag, _, written) in getattr(args, _GIVEN, {}).items():
        others = list(args.overrides)
        others.remove(written)  # the flag's own (a --set can be written alike: `--limit 2 --set corpus.limit=2`)
        for item in others:
            other = item.partition("=")[0].strip()
            if other == key or key.startswith(f"{other}.") or other.startswith(f"{key}."):
                raise UsageError(f"{flag} and --set {other} set the same setting ({flag} is --set {key}=...): give one")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `index` with its `build`, `info` and `warm` subcommands to the CLI."""
    index = subparsers.add_parser("index", help="build or inspect a local BM25 index (bm25s or Lucene)")
    commands = index.add_subparsers(dest="index_command", metavar="{build,info,warm}", required=True)
    build = commands.add_parser(
        "build",
        help="index a corpus (bm25s into corpus.index_dir; lucene under corpus.db_dir)",
        description="Build the index of the [corpus] table of -c, with --set overrides over it. Each flag below but "
        "-c and --set is a shorthand for one --set corpus.KEY=VALUE (its help names it); a flag and a --set of the "
        "same setting together are refused.",
    )
    add_config_arguments(
        build, help="packaged config name, TOML path or run folder whose [corpus] table is read (default: none)"
    )
    sources = build.add_mutually_exclusive_group()
    for flag, key, kind, metavar, help in BUILD_FLAGS:
        add_corpus_flag(sources if flag in SOURCES else build, flag, key, kind, metavar, help)
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
    add_corpus_flag(warm, "--out", "hit_cache", "text", "FILE", "the cache file to fill (default: the config's)")
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
        refuse_doubles(args)
        built = build_corpus_index(
            parsed_request(IndexBuildRequest, args), progress=functools.partial(step_progress, err)
        )
    except (ValueError, UsageError) as exc:  # bad settings
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
    refuse_doubles(args)
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
