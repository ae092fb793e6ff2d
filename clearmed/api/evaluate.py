"""`clearmed.evaluate`: a program over a benchmark or your own questions into a run folder, from Python.

It is `clearmed eval` without the command line: the same run harness (`clearmed.evaluation.run_evaluation`: resumable,
one line per question, the spend log and budget), then the same summary.json, summary.md, leakage.json, plots and
HTML report, so `clearmed compare`, `clearmed report` and `clearmed.results_frame` read the folder as they read the
command's. Questions may be plain: a string (free text), a dict with the question, its options and the answer, or a
`Question` record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from rich.console import Console

from clearmed.core.errors import UsageError
from clearmed.signatures.records import Question

if TYPE_CHECKING:
    import dspy

    from clearmed.benchmarks import BenchmarkSet
    from clearmed.config import ClearmedConfig
    from clearmed.evaluation import EvalSpec, RunSummary

# One question as you may give it: a `Question`, a free-text question's text, or a dict (`PlainQuestion`).
QuestionInput = Question | str | Mapping[str, object]


def evaluate(
    program: str | dspy.Module,
    questions: str | Sequence[QuestionInput],
    *,
    run_dir: str | Path,
    config: ClearmedConfig | str | Path | None = None,
    limit: int | None = None,
    seed: int = 0,
    source: str | Path | None = None,
    split: str | None = None,
    name: str = "questions",
    num_threads: int | None = None,
    max_cost: float | None = None,
    keep_degraded: bool = False,
    show_progress: bool = True,
) -> RunSummary:
    """Evaluate `program` (a name of `clearmed eval --program`, or a module you built) on `questions` into `run_dir`,
    and return the run's summary.

    `questions` is a benchmark name (`clearmed benchmarks`; `source`, `split` as in `clearmed eval`; "demo" for the
    built-in bundle) or a list: strings, dicts such as ``{"question": ..., "options": [...], "answer": "B"}``, or
    `Question` records; `name` is the benchmark the folder records for a list. `limit` and `seed` draw the same
    deterministic sample as the command. `config` is a `ClearmedConfig`, a packaged config name or a TOML path
    (default: the embedded config); give a built module the config it was built from. Running it again with the same
    `run_dir` resumes. As the command does, a fatal service error stops the run with no summary, and a budget
    reached (`max_cost`) writes the summary of what was done and raises `BudgetReached`.
    """
    from clearmed.config import ClearmedConfig, load_config
    from clearmed.evaluation import EvalSpec

    config = config if isinstance(config, ClearmedConfig) else load_config(str(config) if config else None)
    bench = _question_set(questions, name=name, limit=limit, seed=seed, source=source, split=split)
    module, label = _program(program, config)
    spec = EvalSpec(
        program=label,
        benchmark=bench.name,
        source=bench.source,
        questions=bench.questions,
        run_dir=Path(run_dir),
        limit=limit,
        seed=seed,
    )
    return _run(spec, config, module, num_threads, max_cost, keep_degraded=keep_degraded, progress=show_progress)


def _run(
    spec: EvalSpec,
    config: ClearmedConfig,
    module: dspy.Module,
    num_threads: int | None,
    max_cost: float | None,
    *,
    keep_degraded: bool,
    progress: bool,
) -> RunSummary:
    from clearmed.core.retries import reset_cut, second_interrupt_cuts_retries
    from clearmed.evaluation import run_evaluation
    from clearmed.evaluation.runner import BudgetReached
    from clearmed.evaluation.scoring import scorer_for
    from clearmed.evaluation.spend import Prices
    from clearmed.report.run_folder import finish_run_folder

    max_cost = max_cost if max_cost is not None else config.run.max_cost
    if max_cost is not None and max_cost <= 0:
        raise UsageError(f"max_cost must be a positive number of US dollars, not {max_cost:g}")
    console = Console(stderr=True)
    reset_cut()  # a run an earlier second Ctrl-C cut short leaves no cut behind for this one
    try:
        # As on the command line: Ctrl-C lets the questions in flight finish (and raises KeyboardInterrupt), a
        # second one cuts their retries and attempts short.
        with second_interrupt_cuts_retries():
            run_evaluation(
                spec,
                config,
                module,
                scorer=scorer_for(config),
                num_threads=num_threads or config.run.num_threads,
                console=console,
                show_progress=progress,
                keep_degraded=keep_degraded,
                max_cost=max_cost,
            )
    except BudgetReached:
        finish_run_folder(spec.run_dir, Prices.of(config), console)  # as `clearmed eval` leaves a stopped run
        raise
    return finish_run_folder(spec.run_dir, Prices.of(config), console)


def _program(program: str | dspy.Module, config: ClearmedConfig) -> tuple[dspy.Module, str]:
    """The module to run and the name its run folder records."""
    if isinstance(program, str):
        from clearmed.assemble import build_program

        return build_program(program, config), program
    import dspy

    if not isinstance(program, dspy.Module):
        raise UsageError(f"program must be a program name or a dspy.Module, not {type(program).__name__}")
    label = getattr(program, "program_name", None)
    return program, label if isinstance(label, str) and label else type(program).__name__.lower()


def _question_set(
    questions: str | Sequence[QuestionInput],
    *,
    name: str,
    limit: int | None,
    seed: int,
    source: str | Path | None,
    split: str | None,
) -> BenchmarkSet:
    """The questions of the run: a benchmark's (as `clearmed eval --benchmark` loads them), or the list given."""
    from clearmed.benchmarks import BenchmarkSet, load_benchmark, sample

    if limit is not None and limit < 1:
        raise UsageError(f"limit must be a positive number of questions, not {limit}")
    if isinstance(questions, str):
        if questions == "demo":
            from clearmed.demo import demo_questions

            chosen = sample(list(demo_questions()), limit=limit, seed=seed)
            bench = BenchmarkSet(name="demo", source="built-in demo bundle", split="demo", questions=chosen)
        else:
            bench = load_benchmark(questions, source=source, split=split, limit=limit, seed=seed)
    else:
        if source is not None or split is not None:
            raise UsageError("source and split choose a benchmark's file; a list of questions takes neither")
        given = [question_of(item, position) for position, item in enumerate(questions)]
        _refuse_repeated_ids(given)
        chosen = sample(given, limit=limit, seed=seed)
        bench = BenchmarkSet(name=name, source="Python API", split="given", questions=chosen)
    if not bench.questions:
        raise UsageError(f"{bench.name}: no questions to evaluate")
    return bench


class PlainQuestion(BaseModel):
    """A question as a dict gives it: its text, its options (a list, lettered A, B, C, ... in order, or letters to
    texts; none for free text), the gold (`Question.of`), and an id if it has one."""

    model_config = ConfigDict(extra="forbid")

    question: str
    options: list[str] | dict[str, str] | None = None
    answer: str | list[str] | None = None
    id: str | None = None
    multi: bool = False
    context: str | None = None

    @field_validator("options", mode="before")
    @classmethod
    def _not_one_string(cls, value: object) -> object:
        if isinstance(value, str):  # "A: x, B: y" is no list: refused in the words of the list, not of the union
            raise ValueError("give a list of option texts (or letters to texts), not one string")
        return value

    def record(self) -> Question:
        return Question.of(
            self.question, self.options, answer=self.answer, id=self.id, multi=self.multi, context=self.context
        )


def question_of(item: QuestionInput, position: int = 0) -> Question:
    """One question of a list, as a `Question`; a malformed one is one line naming its position (from 0)."""
    if isinstance(item, Question):
        return item
    try:
        if isinstance(item, str):
            return Question.of(item)
        if isinstance(item, Mapping):
            return PlainQuestion.model_validate(item).record()
    except ValidationError as err:
        raise UsageError(f"question {position}: {_reasons(err)}") from None
    except ValueError as err:
        raise UsageError(f"question {position}: {err}") from None
    raise UsageError(f"question {position}: a question is a string, a dict or a Question, not {type(item).__name__}")


def _reasons(err: ValidationError) -> str:
    return "; ".join(
        ".".join(map(str, e["loc"])) + ": " + e["msg"].removeprefix("Value error, ") if e["loc"] else e["msg"]
        for e in err.errors()
    )


def _refuse_repeated_ids(questions: Sequence[Question]) -> None:
    seen: dict[str, int] = {}
    for position, question in enumerate(questions):
        if question.id in seen:
            raise UsageError(
                f"questions {seen[question.id]} and {position} have the same id {question.id!r} (the same question "
                "twice, or give each an id)"
            )
        seen[question.id] = position
