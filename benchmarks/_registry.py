"""The benchmark registry and `load_benchmark`, the one entry point for loading any benchmark."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from clearmed.benchmarks import (
    _afrimedqa,
    _healthbench,
    _medbullets,
    _medexqa,
    _medmcqa,
    _medqa,
    _medrbench,
    _mirage,
    _mmlu,
    _mmlu_pro,
    _nejm,
    _pubmedqa,
    _questions,
)
from clearmed.benchmarks._base import BenchmarkDef, RowContext
from clearmed.benchmarks._errors import (
    BenchmarkDataError,
    BenchmarkSourceError,
    Excluded,
    RowError,
    UnknownBenchmarkError,
    UnusableRow,
)
from clearmed.benchmarks._io import RawRow
from clearmed.benchmarks._sampling import sample
from clearmed.benchmarks._types import BenchmarkInfo, BenchmarkSet, RowIssue
from clearmed.signatures.records import OnError, Question

_REGISTRY: dict[str, BenchmarkDef] = {
    definition.info.name: definition
    for module in (
        _medqa,
        _pubmedqa,
        _medmcqa,
        _mmlu,
        _mmlu_pro,
        _nejm,
        _medbullets,
        _medexqa,
        _afrimedqa,
        _medrbench,
        _healthbench,
        _mirage,
    )
    for definition in module.BENCHMARKS
}


def available_benchmarks() -> list[BenchmarkInfo]:
    """Every registered benchmark: name, hub id, answer mode, scoring protocol, shared file (if any)."""
    return [definition.info for definition in _REGISTRY.values()]


def benchmark_info(name: str) -> BenchmarkInfo:
    return _definition(name).info


def _definition(name: str) -> BenchmarkDef:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownBenchmarkError(
            f"unknown benchmark {name!r}; available: {sorted(_REGISTRY)}, or {_questions.QUESTIONS!r} with your own "
            f"file as the source ({_questions.QUESTIONS_FORMAT})"
        ) from None


def _parse_with(definition: BenchmarkDef, context: RowContext, row: RawRow) -> Question:
    return definition.parse_row(row, context)


def _validation_reason(error: ValidationError) -> str:
    return "; ".join(str(item["msg"]).removeprefix("Value error, ") for item in error.errors())


def load_benchmark(
    name: str,
    *,
    source: str | Path | None = None,
    split: str | None = None,
    limit: int | None = None,
    seed: int | None = None,
    on_error: OnError = "raise",
    revision: str | None = None,
) -> BenchmarkSet:
    """Load a benchmark as `Question`s.

    `source=None` reads the Hugging Face hub copy named in the registry (network needed); a path reads a local
    file in the same upstream schema. `split` picks the hub split (for a local file it only labels the ids;
    see each benchmark's notes for exceptions). `limit`/`seed` take a deterministic subset (`sample`).
    `on_error="raise"` stops at the first malformed row with `BenchmarkDataError("<file>:<line>: <reason>")`;
    `"skip"` leaves such rows out and lists them in `BenchmarkSet.skipped`. Rows that are well formed but
    unusable upstream (duplicate option texts) are always skipped and listed. `revision` reads the hub copy at a
    branch, tag or commit; `BenchmarkSet.revision` is the commit read, where it can be known offline (`resolved_revision`).
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if revision is not None and source is not None:
        raise BenchmarkSourceError(f"{name}: a revision picks a hub copy; the local source {source} has none")
    path = Path(source).expanduser() if source is not None else None
    parse_row: Callable[[RawRow], Question]
    if name == _questions.QUESTIONS:  # your own file: each question says its own answer mode (see _questions)
        opened, parse_row = _questions.open_rows(path, split), _questions.parse_row
    else:
        definition = _definition(name)
        opened = definition.open_rows(path, split, revision)
        context = RowContext(benchmark=name, split=opened.split, answer_mode=definition.info.answer_mode)
        parse_row = functools.partial(_parse_with, definition, context)

    questions: list[Question] = []
    skipped: list[RowIssue] = []
    excluded: Counter[str] = Counter()
    first_seen: dict[str, str] = {}
    n_rows = 0
    revisions: set[str] = set()
    for row in opened.rows:
        n_rows += 1
        if row.revision is not None:
            revisions.add(row.revision)
        try:
            if row.error is not None:
                raise RowError(row.error)
            question = parse_row(row)
            if question.id in first_seen:
                raise RowError(f"duplicate question id {question.id} (first at {first_seen[question.id]})")
        except Excluded as signal:
            excluded[str(signal)] += 1
            continue
        except UnusableRow as problem:
            skipped.append(RowIssue(location=row.location, reason=f"unusable upstream row: {problem}"))
            continue
        except (RowError, ValidationError) as problem:
            reason = _validation_reason(problem) if isinstance(problem, ValidationError) else str(problem)
            if on_error == "raise":
                raise BenchmarkDataError(row.location, reason) from None
            skipped.append(RowIssue(location=row.location, reason=reason))
            continue
        first_seen[question.id] = row.location
        questions.append(question)
    if n_rows == 0:
        raise BenchmarkSourceError(f"{opened.description}: no rows")

    return BenchmarkSet(
        name=name,
        source=opened.description,
        split=opened.split,
        questions=sample(questions, limit=limit, seed=seed),
        skipped=skipped,
        excluded=dict(excluded),
        n_source_rows=n_rows,
        seed=seed,
        limit=limit,
        revision=",".join(sorted(revisions)) or None,
    )
