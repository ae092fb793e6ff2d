"""`clearmed.evaluate`: the one door of a run. `clearmed eval` parses its arguments into an `EvalRequest` and calls
it; a script builds the same request, or passes its fields as keywords.

The run: the questions (a benchmark's, sampled, listed by id or sharded; or a list you give), the config with its
`--set` overrides and an artifact's thresholds, the program with its recorded pathways, then the run harness
(`clearmed.evaluation.run_evaluation`: resumable, one line per question, the spend log and budget), and the run
folder finished in one call (`clearmed.report.run_folder.finish_run_folder`: summary.json, summary.md,
leakage.json, plots and the HTML report), so `clearmed compare`, `clearmed report` and `clearmed.results_frame`
read every folder alike. Questions may be plain: a string (free text), a dict with the question, its options and
the answer, or a `Question` record.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from clearmed.api.config_choice import request_config
from clearmed.api.questions import QuestionInput, given_questions, load_questions, question_of
from clearmed.api.request import EvalRequest
from clearmed.core.console import user_console
from clearmed.core.errors import UsageError

if TYPE_CHECKING:
    import dspy

    from clearmed.benchmarks import BenchmarkSet
    from clearmed.config import ClearmedConfig
    from clearmed.evaluation import EvalSpec, RunSummary
    from clearmed.evaluation.shard import RunShard
    from clearmed.numbers.estimate import Estimate
    from clearmed.optimize.artifacts import ProgramArtifact
    from clearmed.recorded import RecordedPathway
    from clearmed.signatures.records import Question

__all__ = [
    "EvalRequest",
    "LeftToRedo",
    "estimate_run",
    "evaluate",
    "left_to_redo",
    "question_of",
    "run_line",
    "unfinished_line",
]


def evaluate(
    program: EvalRequest | str | dspy.Module,
    questions: str | Sequence[QuestionInput] | None = None,
    /,
    **options: Any,
) -> RunSummary:
    """Run `program` (a name of `clearmed eval --program`, or a module you built) on `questions` and return the
    run's summary; or run one `EvalRequest`.

    `questions` is a benchmark name (`clearmed benchmarks`; "demo" for the built-in bundle) or a list: strings,
    dicts such as ``{"question": ..., "options": [...], "answer": "B"}``, or `Question` records; `name` is the
    benchmark the folder records for a list ("questions", as for a JSONL file of such dicts: "questions" with
    `source=FILE`, as `clearmed eval --benchmark questions` reads it). The keywords are `EvalRequest`'s fields, the options of `clearmed eval`
    (`run_dir`, `config`, `limit`, `seed`, `source`, `split`, `revision`, `ids`, `overrides`, `pathway`, `shard`,
    `program_artifact`, `threads` (or `num_threads`), `max_cost`, `keep_degraded`, ...). Running it again with the
    same `run_dir` resumes. As the command does, a fatal service error stops the run with no summary, and a budget
    reached (`max_cost`) writes the summary of what was done and raises `BudgetReached`. Degraded questions (a stage
    failed after its retries) raise nothing: check `summary.degraded` (they count wrong in `accuracy`;
    `degraded_stages` names the stages), and `summary.planned - summary.evaluated` for questions not recorded; a
    rerun with the same `run_dir` redoes both (`left_to_redo`; `clearmed eval` exits 4 on them).
    """
    request = program if isinstance(program, EvalRequest) else request_of(program, questions, **options)
    if request.estimate:
        raise UsageError("an estimate is no run: call clearmed.api.estimate_run(request) for it")
    run = _Run.prepared(request)
    run.execute(request.stop_after)
    summary = run.finish()
    if request.quiet:  # the run's one line
        run.console.print(run_line(summary, run.spec.run_dir), markup=False, highlight=False, soft_wrap=True)
    else:
        run.console.print(f"run folder: {run.spec.run_dir}")
    return summary


def run_line(summary: RunSummary, run_dir: Path) -> str:
    """A finished run in one line (`--quiet`): what ran, how many questions, the accuracy with its 95% Wilson
    interval, the degraded questions, the dollars spent, and the folder."""
    accuracy = summary.accuracy
    if accuracy is None or accuracy.accuracy is None:
        scored = "not scored"
    else:
        interval = accuracy.wilson
        bounds = f" [{interval.low:.1%}, {interval.high:.1%}]" if interval is not None else ""
        scored = f"accuracy {accuracy.accuracy:.1%}{bounds}"
    usd = summary.spend.usd if summary.spend is not None else None
    spent = f", ${usd:.2f}" if usd else ""
    interrupted = ", interrupted" if summary.interrupted else ""
    return (
        f"{summary.program} on {summary.benchmark}: {summary.evaluated}/{summary.planned} questions, {scored}, "
        f"{summary.degraded} degraded{spent}{interrupted}: {run_dir}"
    )


def evaluate_to_exit_code(request: EvalRequest, on_summary: Callable[[RunSummary], object]) -> int:
    """One run as `clearmed eval` and a suite cell end it (`clearmed.core.exit_codes.ExitCode`): 0 done, or 4 when
    its folder still holds degraded or unrecorded questions (said in one line: how many, and that a rerun redoes
    them), ``on_summary`` getting the summary either way; 3 the budget reached (one line; the folder summarized). A
    fatal service error is one line (`UsageError`, exit 2; the folder resumes)."""
    from clearmed.backbones.batch_api import BatchRejected, BatchUnavailable
    from clearmed.batch.run import BatchStalled
    from clearmed.core.errors import FatalServiceError
    from clearmed.core.exit_codes import ExitCode
    from clearmed.evaluation.runner import BudgetReached

    console = user_console(stderr=True, soft_wrap=True)
    try:
        summary = evaluate(request)
    except (FatalServiceError, BatchRejected, BatchUnavailable, BatchStalled) as err:
        raise UsageError(f"{err}; the run stopped (resume with the same command once that is mended)") from None
    except BudgetReached as err:
        console.print(f"clearmed: {err}", markup=False, highlight=False)
        return ExitCode.BUDGET
    on_summary(summary)
    left = left_to_redo(summary, partial=request.stop_after is not None)
    if not left:
        return ExitCode.DONE
    # --keep-degraded keeps them on every resume: only a rerun without it redoes them.
    rerun = "rerun without --keep-degraded" if request.keep_degraded and left.degraded else "rerun the same command"
    console.print(f"clearmed: {unfinished_line(summary, left, rerun)}", markup=False, highlight=False)
    return ExitCode.UNFINISHED


def unfinished_line(summary: RunSummary, left: LeftToRedo, rerun: str) -> str:
    """The line of a run summarized with questions left to redo (exit 4): how many degraded (by failed stage) and
    not recorded, and `rerun`, the command that resumes and redoes them."""
    said = []
    if left.degraded:
        stages = ", ".join(sorted(summary.degraded_stages))
        at = f"; at {', '.join(sorted(summary.degraded_endpoints))}" if summary.degraded_endpoints else ""
        said.append(
            f"{left.degraded} of {summary.planned} questions degraded (failed after their retries: {stages}{at})"
        )
    if left.unrecorded:
        said.append(f"{left.unrecorded} of {summary.planned} questions not recorded")
    return f"{'; '.join(said)}; summary written; {rerun} to resume and redo them"


@dataclass(frozen=True)
class LeftToRedo:
    """The questions of a summarized run that a rerun of it redoes: those degraded, and those not recorded."""

    degraded: int
    unrecorded: int

    def __bool__(self) -> bool:
        return bool(self.degraded or self.unrecorded)

    def __str__(self) -> str:
        counts = ((self.degraded, "degraded"), (self.unrecorded, "not recorded"))
        return ", ".join(f"{count} {what}" for count, what in counts if count)


def left_to_redo(summary: RunSummary, *, partial: bool = False) -> LeftToRedo:
    """What a rerun of the summarized run redoes. A `partial` run (`stop_after`) left its unrecorded questions on
    purpose."""
    return LeftToRedo(summary.degraded, 0 if partial else max(summary.planned - summary.evaluated, 0))


def estimate_run(request: EvalRequest) -> Estimate:
    """The expected calls, tokens, dollars, credits and wall time of the questions `request` has left: from stored
    runs of its program and config (nothing is built or spent), or, with `pilot`, from its first `pilot` questions
    run first (a budget reached raises `BudgetReached` with the folder summarized)."""
    run = _Run.prepared(request)
    if request.pilot:
        run.execute(request.pilot)
    return _estimate(run, pilot=bool(request.pilot))


def request_of(
    program: str | dspy.Module, questions: str | Sequence[QuestionInput] | None, **options: Any
) -> EvalRequest:
    """The request of the keyword call: `questions` a benchmark name or a list (`name` names a list), and the old
    `num_threads` spelling of `threads`."""
    if "num_threads" in options:
        options["threads"] = options.pop("num_threads")
    name = options.pop("name", "questions")
    if questions is None or isinstance(questions, str):
        benchmark = options.pop("benchmark", None) or questions
        if benchmark is None:
            raise UsageError("give the questions: a benchmark name or a list")
        return EvalRequest(program=program, benchmark=benchmark, **options)
    given = [question_of(item, position) for position, item in enumerate(questions)]
    return EvalRequest(program=program, benchmark=name, questions=given, **options)


@dataclass
class _Run:
    """One request made concrete: its spec (questions, folder, what the manifest records), the config, the
    artifact and recorded pathways the program is built with, its threads and budget, and the console."""

    request: EvalRequest
    spec: EvalSpec
    config: ClearmedConfig
    artifact: ProgramArtifact | None
    recorded: list[RecordedPathway]
    threads: int
    max_cost: float | None
    console: Console

    @classmethod
    def prepared(cls, request: EvalRequest) -> _Run:
        config = request_config(request)
        bench = _question_set(request)
        if not bench.questions:
            raise UsageError(f"{bench.name}: no questions to evaluate")
        spec, config, artifact, recorded = _eval_spec(request, config, bench)
        console = user_console(stderr=True)
        if bench.n_skipped:
            console.print(f"[yellow]{bench.n_skipped} malformed rows skipped[/]", highlight=False)
            for issue in bench.skipped[:3]:
                console.print(f"  {issue.location}: {issue.reason}", markup=False, highlight=False)
        max_cost = request.max_cost if request.max_cost is not None else config.run.max_cost
        if max_cost is not None and max_cost <= 0:
            raise UsageError(f"max_cost must be a positive number of US dollars, not {max_cost:g} (--max-cost)")
        if request.pilot is not None and (not request.estimate or request.pilot < 1):
            raise UsageError("--pilot N (N >= 1) runs the first N questions for --estimate; give both")
        if request.threads is not None and request.threads < 1:
            raise UsageError(f"threads must be at least 1, not {request.threads} (--threads)")
        threads = request.threads or config.run.num_threads
        if spec.run_dir.exists() and not spec.run_dir.is_dir():
            raise UsageError(f"{spec.run_dir} is a file, not a run folder: give --run-dir a folder (new or a run's)")
        return cls(request, spec, config, artifact, recorded, threads, max_cost, console)

    def execute(self, stop_after: int | None) -> None:
        """Run the questions left (the first `stop_after` of them, if given) into the folder; a budget reached
        summarizes the folder, as a stopped run is left, and raises `BudgetReached`."""
        from clearmed.api.assemble import program_with_artifact  # DSPy and the programs load when a run starts
        from clearmed.batch.run import batch_clients, run_batched
        from clearmed.core.endpoints import forget_reached
        from clearmed.core.retries import reset_cut, second_interrupt_cuts_retries
        from clearmed.evaluation import run_evaluation
        from clearmed.evaluation.runner import BudgetReached, RunInterrupted
        from clearmed.numbers.scoring import grader_for

        # A batch run is refused before anything loads when a backbone has no batch API (one line).
        note = functools.partial(self.console.print, style="yellow", markup=False, highlight=False, soft_wrap=True)
        clients = batch_clients(self.config, note=note) if self.request.batch else None
        module = program_with_artifact(self.request.program, self.config, self.artifact, self.recorded)
        self._start_from_smaller_run()
        reset_cut()  # a run an earlier second Ctrl-C cut short leaves no cut behind for this one
        # Each run meets its endpoints anew: a suite's next cell against a server that died since the last one stops
        # in one line, as a run of its own would, instead of degrading every question.
        forget_reached()
        try:
            # Ctrl-C lets the questions in flight finish (and raises `RunInterrupted`), a second one cuts their
            # retries and attempts short (and raises at once).
            with second_interrupt_cuts_retries():
                # Through the providers' batch APIs in passes, or question by question: the same run either way.
                run = (
                    functools.partial(run_batched, clients=clients, poll_s=self.config.run.batch_poll_s)
                    if clients is not None
                    else functools.partial(
                        run_evaluation,
                        show_progress=self.request.show_progress and not self.request.quiet,
                        stop_after=stop_after,
                    )
                )
                run(
                    self.spec,
                    self.config,
                    module,
                    scorer=grader_for(self.config),
                    num_threads=self.threads,
                    console=self.console,
                    keep_degraded=self.request.keep_degraded,
                    max_cost=self.max_cost,
                )
        except BudgetReached:
            self.finish()
            raise
        except RunInterrupted:  # Ctrl-C, its questions in flight finished: the folder summarized, marked so
            self.finish(interrupted=True)
            raise

    def _start_from_smaller_run(self) -> None:
        """A default folder not made yet starts from the default folder of the same run on a smaller `--limit` (the
        same seed draws a prefix of the same permutation), so a larger limit asks only the questions it adds; said in
        one line naming that folder, which is left as it was (`folder.start_from_smaller_run`)."""
        from clearmed.evaluation.folder import smaller_draws, start_from_smaller_run
        from clearmed.evaluation.store import read_records

        spec = self.spec
        if self.request.run_dir is not None or spec.shard is not None or spec.run_dir.exists():
            return
        older = start_from_smaller_run(
            spec.run_dir, smaller_draws(spec.run_dir, spec.limit, spec.seed), spec, self.config
        )
        if older is not None:
            carried = sum(1 for _ in read_records(spec.run_dir))
            self.console.print(
                f"note: {spec.run_dir} starts from {older} (the same run on a smaller --limit): its {carried} finished "
                f"questions carried over, that folder left as it was",
                style="yellow",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )

    def finish(self, *, interrupted: bool = False) -> RunSummary:
        """summary.json, summary.md, leakage.json, plots and the HTML report of what the run folder holds."""
        from clearmed.evaluation.spend import Prices
        from clearmed.report.run_folder import finish_run_folder

        # --quiet: its one line says where the report is (the folder), and nothing else of the finish is printed
        console = user_console(stderr=True, quiet=True) if self.request.quiet else self.console
        return finish_run_folder(self.spec.run_dir, Prices.of(self.config), console, interrupted=interrupted)


def _question_set(request: EvalRequest) -> BenchmarkSet:
    """The questions of the run: a benchmark's (as `clearmed eval --benchmark` loads them), or the list given."""
    if request.limit is not None and request.limit < 1:
        raise UsageError(f"limit must be a positive number of questions, not {request.limit}")
    if request.questions is None:
        return load_questions(request)
    if request.source is not None or request.split is not None:
        raise UsageError("source and split choose a benchmark's file; a list of questions takes neither")
    if request.ids or request.revision:
        raise UsageError("ids and revision choose a benchmark's questions; a list of questions takes neither")
    return given_questions(request.questions, name=request.benchmark, limit=request.limit, seed=request.seed)


def _eval_spec(
    request: EvalRequest, config: ClearmedConfig, bench: BenchmarkSet
) -> tuple[EvalSpec, ClearmedConfig, ProgramArtifact | None, list[RecordedPathway]]:
    """The run to make: its spec (named by the program, its artifact and its recorded pathways), the config carrying
    the artifact's thresholds, the artifact and the recorded pathways."""
    from clearmed.api.assemble import artifact_of
    from clearmed.benchmarks import benchmark_folder
    from clearmed.config import config_name, overrides_label
    from clearmed.evaluation import EvalSpec
    from clearmed.evaluation.folder import default_run_dir

    artifact, config = artifact_of(request.program_artifact, config)
    questions, shard = _sharded(request.shard, bench.questions)
    if artifact is not None:
        from clearmed.optimize.artifacts import refuse_seen_ids

        refuse_seen_ids(questions, artifact, allow=request.allow_train_overlap)
    name = _program_name(request.program)
    label = name if artifact is None else f"{name}+{artifact.path.resolve().name}"
    recorded = recorded_pathways(request.pathway, questions)
    label += "".join(f"+{r.pathway}={r.label}" for r in recorded)
    run_dir = (
        Path(request.run_dir)
        if request.run_dir
        else default_run_dir(
            config.run.runs_dir,
            config_name(config.source),
            benchmark_folder(request.benchmark, request.source),  # your own questions: named by their file too
            label,
            request.limit,
            request.seed,
            shard=(shard.index, shard.count) if shard else None,
            label=overrides_label(request.overrides),  # a sweep's runs apart, a run without --set as it was
        )
    )
    spec = EvalSpec(
        program=name,
        benchmark=request.benchmark,
        source=bench.source,
        questions=questions,
        run_dir=run_dir,
        limit=request.limit,
        seed=request.seed,
        artifact=str(artifact.path.resolve()) if artifact is not None else None,
        recorded_pathways={r.pathway: r.source for r in recorded},
        overrides=_overrides(request.overrides),
        shard=shard,
        dataset_revision=bench.revision,
    )
    return spec, config, artifact, recorded


def _overrides(given: Sequence[str]) -> list[str]:
    """`--set` overrides as a run records them: one per key (its last value), sorted by key, so that one sweep cell is
    named alike however its values were ordered (as `clearmed.config.overrides_label` names its folder)."""
    latest = {key.strip(): value.strip() for key, _, value in (item.partition("=") for item in given)}
    return [f"{key}={value}" for key, value in sorted(latest.items())]


def _sharded(given: str | None, questions: Sequence[Question]) -> tuple[list[Question], RunShard | None]:
    """`--shard K/N`: shard K of the run's questions (clearmed.evaluation.shard), else all of them."""
    if given is None:
        return list(questions), None
    from clearmed.evaluation.shard import parse_shard, take_shard

    index, count = parse_shard(given)
    return take_shard(questions, [q.id for q in questions], index, count)


def recorded_pathways(given: Sequence[str], questions: Sequence[Question]) -> list[RecordedPathway]:
    """`--pathway NAME=SOURCE` as recorded (or absent) pathways; a bad form or an unreadable source is one line."""
    from clearmed.recorded import RecordedPathwayError, absent_pathway, read_recorded_pathway

    chosen: dict[str, RecordedPathway] = {}
    for item in given:
        name, sep, source = item.partition("=")
        if not sep or name not in ("parametric", "local", "dynamic") or not source:
            raise UsageError(f"--pathway {item!r}: give NAME=SOURCE with NAME parametric, local or dynamic")
        if name in chosen:
            raise UsageError(f"--pathway {name} is given twice")
        try:
            chosen[name] = (
                absent_pathway(name, questions)  # type: ignore[arg-type]
                if source == "absent"
                else read_recorded_pathway(Path(source), name, questions)  # type: ignore[arg-type]
            )
        except RecordedPathwayError as err:
            raise UsageError(f"--pathway {name}: {err}") from None
    return list(chosen.values())


def _program_name(program: object) -> str:
    """The name the run folder records: the program's name, or a built module's `program_name` (else its class)."""
    if isinstance(program, str):
        return program
    import dspy

    if not isinstance(program, dspy.Module):
        raise UsageError(f"program must be a program name or a dspy.Module, not {type(program).__name__}")
    label = getattr(program, "program_name", None)
    return label if isinstance(label, str) and label else type(program).__name__.lower()


def _estimate(run: _Run, *, pilot: bool) -> Estimate:
    """The expected calls, tokens, dollars, credits and wall time of the questions the run has left."""
    from clearmed.evaluation.spend import Prices
    from clearmed.evaluation.store import read_records
    from clearmed.numbers.estimate import basis_records, estimate, stored_runs

    spec, config = run.spec, run.config
    done = {r.question_id for r in read_records(spec.run_dir) if not r.degraded} if spec.run_dir.is_dir() else set()
    left = sum(1 for q in spec.questions if q.id not in done)
    if pilot:
        runs = [(spec.run_dir, spec.benchmark)]
    else:
        found = stored_runs(
            config.run.runs_dir,
            config,
            program=spec.program,
            artifact=spec.artifact,
            recorded_pathways=spec.recorded_pathways,
            extra=[spec.run_dir],
        )
        runs = [(folder, manifest.benchmark) for folder, manifest in found]
        if not runs:
            raise UsageError(
                f"no stored run of {spec.program} with this config under {config.run.runs_dir} to estimate from; "
                "run a short pilot instead: add --pilot 5"
            )
    same = [folder for folder, benchmark in runs if benchmark == spec.benchmark]
    folders = same or [folder for folder, _ in runs]
    records = basis_records(folders)
    if not records:
        raise UsageError(f"the stored runs ({', '.join(map(str, folders))}) hold no clean question to estimate from")
    credits = None
    if config.search is not None and config.search.backend == "tavily":
        from clearmed.retrieval.tavily import search_credits

        credits = float(search_credits(config.search.tavily.search_depth))
    return estimate(
        records,
        Prices.of(config),
        questions=left,
        threads=run.threads,
        basis_runs=[str(folder) for folder in folders],
        same_benchmark=bool(same),
        credits_per_search=credits,
    )
