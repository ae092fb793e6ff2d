"""What a benchmark definition is: its registry card, where its rows come from, and how one row parses."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from clearmed.benchmarks._errors import BenchmarkSourceError
from clearmed.benchmarks._io import HubSpec, RawRow, hub_rows, read_table
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import AnswerMode, Question


@dataclass(frozen=True)
class RowContext:
    """What a row parser may know besides the row: the benchmark name, the split label used in ids, and the
    answer mode every question of the benchmark takes (`BenchmarkInfo.answer_mode`, never the row's gold)."""

    benchmark: str
    split: str
    answer_mode: AnswerMode


@dataclass(frozen=True)
class OpenedSource:
    description: str
    split: str
    rows: Iterator[RawRow]


# (source, split, revision): a local file or the hub (None), the split, and the hub revision (None: the default branch)
OpenRows = Callable[[Path | None, str | None, str | None], OpenedSource]
ParseRow = Callable[[RawRow, RowContext], Question]


@dataclass(frozen=True)
class BenchmarkDef:
    info: BenchmarkInfo
    open_rows: OpenRows
    parse_row: ParseRow


def choose_split(info: BenchmarkInfo, split: str | None) -> str:
    chosen = split or info.default_split
    if chosen is None:
        raise BenchmarkSourceError(f"{info.name}: choose a split from {info.splits}")
    if info.splits and chosen not in info.splits:
        raise BenchmarkSourceError(f"{info.name}: unknown split {chosen!r}; choose from {info.splits}")
    return chosen


def from_hub(specs: list[HubSpec], revision: str | None = None) -> tuple[str, Iterator[RawRow]]:
    """The rows of these hub loads, each at `revision` when one is given."""
    if revision is not None:
        specs = [spec.model_copy(update={"revision": revision}) for spec in specs]
    description = "; ".join(spec.describe() for spec in specs)
    return description, itertools.chain.from_iterable(hub_rows(spec) for spec in specs)


def standard_opener(
    info: BenchmarkInfo,
    hub: Callable[[str], list[HubSpec]] | None,
    local: Callable[[Path, str | None], Iterator[RawRow]] | None = None,
) -> OpenRows:
    """Hub: `split` picks the hub split(s). Local file: `split` is only the label used in ids (default: stem)."""

    def open_rows(source: Path | None, split: str | None, revision: str | None = None) -> OpenedSource:
        if source is None:
            if hub is None:
                raise BenchmarkSourceError(
                    f"{info.name} has no Hugging Face hub copy; download it ({info.notes}) and pass source=<file>"
                )
            chosen = choose_split(info, split)
            description, rows = from_hub(hub(chosen), revision)
            return OpenedSource(description, chosen, rows)
        # A file's stem names its split ("dev.jsonl"); a directory holds files of the default split.
        label = split or (info.default_split if source.is_dir() else None) or source.stem
        reader = local or (lambda path, _split: read_table(path))
        return OpenedSource(str(source), label, reader(source, split))

    return open_rows
