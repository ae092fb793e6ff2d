"""The questions of a run: a benchmark's (its file, split, revision, a seeded sample or an id list), your own file
("questions" with its path as the source, in the format of a list given here), or the list a Python caller gives
(strings, dicts or `Question` records). Every bad input is one line naming the option."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from clearmed.benchmarks import QUESTIONS, plain_question
from clearmed.core.errors import UsageError
from clearmed.signatures.records import Question

if TYPE_CHECKING:
    from clearmed.benchmarks import BenchmarkInfo, BenchmarkSet, OnError

# One question as you may give it: a `Question`, a free-text question's text, or a dict (`PlainQuestion`).
QuestionInput = Question | str | Mapping[str, object]


@dataclass(frozen=True)
class BenchmarkListing:
    """What `clearmed benchmarks` lists: every benchmark a run can name, and the name and format of your own file."""

    benchmarks: list[BenchmarkInfo]
    own_name: str  # `--benchmark questions --source FILE`
    own_format: str  # the objects such a file holds


def benchmark_listing() -> BenchmarkListing:
    from clearmed.benchmarks import QUESTIONS_FORMAT, available_benchmarks

    return BenchmarkListing(available_benchmarks(), QUESTIONS, QUESTIONS_FORMAT)


def shared_source(benchmark: str) -> Path:
    """`--source shared`: the benchmark's file in the shared development data folder."""
    from clearmed.benchmarks import benchmark_info
    from clearmed.retrieval.corpus_presets import shared_data_root

    if benchmark == QUESTIONS:
        raise UsageError(
            f"--source shared reads a benchmark's shared copy; {QUESTIONS} reads your own file (--source FILE)"
        )
    info = benchmark_info(benchmark)
    if not info.shared_file:
        raise UsageError(f"{benchmark} has no file in the shared data; pass --source <file> or use the hub")
    return shared_data_root() / "benchmarks" / info.shared_file


class QuestionOptions(Protocol):
    """The options that choose a benchmark's questions: an `EvalRequest`, or the parsed arguments of a command
    (one without `--ids` or `--revision` has neither attribute)."""

    benchmark: str
    source: str | Path | None
    split: str | None
    limit: int | None
    seed: int
    skip_bad_rows: bool


def load_questions(options: QuestionOptions) -> BenchmarkSet:
    """A benchmark's questions: the ids of the `ids` file in its order, else a seeded sample of `limit` (all
    without one); "demo" is the built-in bundle, "questions" your own file (`source`), `source` "shared" the
    shared data folder's file."""
    from clearmed.benchmarks import BenchmarkSet, load_benchmark, sample

    benchmark, limit, seed = options.benchmark, options.limit, options.seed
    revision: str | None = getattr(options, "revision", None)
    wanted = wanted_ids(getattr(options, "ids", None), limit)
    if benchmark == "demo":
        if revision is not None:
            raise UsageError("--revision picks a Hugging Face hub revision; the demo bundle has none")
        from clearmed.demo import demo_questions

        chosen = list(demo_questions()) if wanted else sample(list(demo_questions()), limit=limit, seed=seed)
        bench = BenchmarkSet(name="demo", source="built-in demo bundle", split="demo", questions=chosen)
        return _only(bench, wanted, benchmark) if wanted else bench
    source = shared_source(benchmark) if options.source == "shared" else options.source
    on_error: OnError = "skip" if options.skip_bad_rows else "raise"
    split = options.split
    if wanted:  # exactly these questions, in the file's order (a held-out test split, say)
        bench = load_benchmark(benchmark, source=source, split=split, on_error=on_error, revision=revision)
        return _only(bench, wanted, benchmark)
    return load_benchmark(
        benchmark, source=source, split=split, limit=limit, seed=seed, on_error=on_error, revision=revision
    )


def read_id_file(path: str | Path) -> list[str]:
    """Ids from a file (`--ids`, `--exclude-ids`, `--train-ids`, `--test-ids`): a JSON list, an artifact's ids.json
    (its train and val ids), or one id per line."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise UsageError(f"{file}: cannot read the id file: {err.strerror or err}") from None
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as err:
            raise UsageError(f"{file}: not valid JSON: {err.msg} (line {err.lineno})") from None
        if isinstance(data, dict):
            from clearmed.optimize.splits import UsedIds

            return sorted(UsedIds.model_validate(data).seen())
        if isinstance(data, list) and all(isinstance(item, str) for item in data):
            return list(data)
        raise UsageError(f"{file}: expected a JSON list of ids or an ids.json object")
    ids = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not ids:
        raise UsageError(f"{file}: no ids in the file")
    return ids


def wanted_ids(ids: str | Path | None, limit: int | None) -> list[str]:
    """`--ids FILE`: its ids, in order (none without it). An id listed twice is refused in one line naming it: the
    run would answer one question twice, and a summary scores each question once."""
    if not ids:
        return []
    if limit:
        raise UsageError("give --ids or --limit, not both")
    wanted = read_id_file(ids)
    seen: set[str] = set()
    for qid in wanted:
        if qid in seen:
            raise UsageError(f"--ids {ids}: the id {qid!r} is listed twice; list each question once")
        seen.add(qid)
    return wanted


def _only(bench: BenchmarkSet, wanted: Sequence[str], benchmark: str) -> BenchmarkSet:
    """The benchmark's questions with these ids, in this order; an id it lacks is one line."""
    by_id = {q.id: q for q in bench.questions}
    missing = [qid for qid in wanted if qid not in by_id]
    if missing:
        raise UsageError(f"--ids: {len(missing)} ids are not in {benchmark} (first: {missing[0]})")
    return bench.model_copy(update={"questions": [by_id[qid] for qid in wanted]})


def given_questions(questions: Sequence[Question], *, name: str, limit: int | None, seed: int) -> BenchmarkSet:
    """A list the caller gave, as a benchmark named `name` (a seeded sample of `limit` of it)."""
    from clearmed.benchmarks import BenchmarkSet, sample

    _refuse_repeated_ids(questions)
    chosen = sample(list(questions), limit=limit, seed=seed)
    return BenchmarkSet(name=name, source="Python API", split="given", questions=chosen)


def question_of(item: QuestionInput, position: int = 0) -> Question:
    """One question of a list, as a `Question`; a malformed one is one line naming its position (from 0)."""
    if isinstance(item, Question):
        return item
    if not isinstance(item, str | Mapping):
        raise UsageError(
            f"question {position}: a question is a string, a dict or a Question, not {type(item).__name__}"
        )
    try:
        return plain_question(item)
    except ValueError as err:
        raise UsageError(f"question {position}: {err}") from None


def _refuse_repeated_ids(questions: Sequence[Question]) -> None:
    seen: dict[str, int] = {}
    for position, question in enumerate(questions):
        if question.id in seen:
            raise UsageError(
                f"questions {seen[question.id]} and {position} have the same id {question.id!r} (the same question "
                "twice, or give each an id)"
            )
        seen[question.id] = position
