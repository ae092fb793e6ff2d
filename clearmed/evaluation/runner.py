"""`clearmed eval`: run a program over a benchmark into a resumable run folder.

The folder is opened by `folder.open_run` (a new run's manifest, or an existing folder checked to be this run: its
questions fixed when it began, grown by a longer list of the same draw). Finished questions are never recomputed,
except degraded ones (a stage failed after its retries), which a resume redoes unless asked to keep them. Questions
run one at a time or on `run.num_threads` threads (for remote backends); each line is appended the moment its
question finishes. Half a
character in a reply (a lone surrogate) is replaced by U+FFFD as the record is written, with a step in its trail that
says so (`mended_record`); a record that would still not load back (a NaN) is reported and recorded as failed in its
place, and a line that cannot be read counts as not done (a resume redoes it): either way the run goes on.

A run stops early, cleanly and resumably, in three cases. Ctrl-C starts no further question and lets the questions in
flight finish (each runs on a worker thread, one thread too, so the interrupt never lands inside one), then raises
`RunInterrupted`; a second Ctrl-C is raised at once. A `FatalServiceError` (a rejected key, an exhausted balance, a
missing model, from the LM or from Tavily; a corrupt cache or index) starts no further question, lets the questions in
flight finish, writes no record for the question that met it, and is raised. A budget (`max_cost`, US dollars of LM
calls, Tavily credits and grading) starts no question once the run's spend has reached it (`BudgetReached`). The spend
is the run's spend log (`spend_log`: every paid call as it completed, kept across kills and resumes), so the documented
overshoot is what at most `num_threads` questions in flight cost, plus, per kill, the calls in flight at that moment
(paid, and never answered to the process that made them). A resume runs neither kind of question twice.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime

import dspy
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from clearmed.config import ClearmedConfig
from clearmed.core.console import user_console
from clearmed.core.errors import CallDeferred, FatalServiceError, UsageError
from clearmed.core.sanitize import mend_surrogates_in
from clearmed.evaluation.degraded import degraded_stages
from clearmed.evaluation.folder import EvalSpec, open_run
from clearmed.evaluation.lm_cache import watch_lm_cache
from clearmed.evaluation.progress import ProgressLines, wants_lines
from clearmed.evaluation.spend import Prices, record_usd
from clearmed.evaluation.spend_log import SpendLog
from clearmed.evaluation.store import (
    DEGRADED,
    UNREADABLE,
    EvalRecord,
    RunManifest,
    RunStore,
    UnwritableRecordError,
    read_records,
    read_set_aside_degraded,
)
from clearmed.metrics import QuestionScore, score_decision
from clearmed.signatures.records import AdjudicationStep, CallUsage, Decision, EvidenceBundle, Question

Scorer = Callable[[Question, Decision], QuestionScore | None]


class BudgetReached(Exception):
    """The run's spend reached its budget: no further question was started (the run resumes with a higher one)."""

    def __init__(self, spent: float, budget: float, not_started: int) -> None:
        self.spent, self.budget, self.not_started = spent, budget, not_started
        super().__init__(
            f"budget reached: spent ${spent:.2f} of ${budget:.2f} (--max-cost / [run] max_cost); {not_started} "
            "questions not started; rerun the same command with a higher budget to resume"
        )


def default_scorer(question: Question, decision: Decision) -> QuestionScore | None:
    """MCQ questions with their gold are scored here (one given without its answer is answered, not scored); free
    text needs a judge backbone (see `clearmed.numbers.scoring.grader_for`)."""
    return score_decision(question, decision) if question.is_mcq and question.gold_letters else None


def crashed_decision(question: Question, program: str, error: BaseException) -> Decision:
    """A program that raised despite its guards still yields a line: the failure is recorded, not lost."""
    message = f"{type(error).__name__}: {error}"
    return Decision(
        question_id=question.id,
        status="failed",
        bundle=EvidenceBundle(question=question, candidates=[]),
        steps=[AdjudicationStep(mechanism="fallback", outcome="program raised", rule="crashed")],
        error=message[:500],
        program=program,
    )


def _as_utf8(model: BaseModel) -> bytes:
    """A record's JSON with every lone surrogate (half a character) replaced, so that it can be written."""
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False).encode("utf-8", "replace")


def mended_record(record: EvalRecord) -> EvalRecord | None:
    """The record with every half character (a lone surrogate, as a reply that cut an emoji in two holds) replaced by
    U+FFFD, and a step in its trail that says so; None when it holds none (it is unwritable for another reason)."""
    data, replaced = mend_surrogates_in(record.model_dump())
    if not replaced:
        return None
    mended = EvalRecord.model_validate(data)
    note = AdjudicationStep(
        mechanism="fallback",
        trigger="record",
        outcome=f"{replaced} half character{'s' if replaced > 1 else ''} (lone UTF-16 surrogates) in the replies "
        "replaced with U+FFFD so that the record could be written",
    )
    decision = mended.decision.model_copy(update={"steps": [*mended.decision.steps, note]})
    return mended.model_copy(update={"decision": decision})


def unwritable_record(record: EvalRecord, reason: str) -> EvalRecord:
    """The failed record written in place of one that could not be (its question with any half-character replaced)."""
    question = record.decision.bundle.question
    clean = Question.model_validate_json(_as_utf8(question))
    decision = Decision(
        question_id=question.id,
        status="failed",
        bundle=EvidenceBundle(question=clean, candidates=[]),
        steps=[AdjudicationStep(mechanism="fallback", outcome="record could not be written", rule="crashed")],
        error=reason.encode("utf-8", "replace").decode("utf-8")[:500],
        usage=[CallUsage.model_validate_json(_as_utf8(row)) for row in record.decision.usage],
        program=record.program,
    )
    score = default_scorer(clean, decision) if clean.is_mcq else None
    return record.model_copy(update={"decision": decision, "score": score, "degraded_stages": []})


class _Running:
    """Running accuracy (clean answers), degraded count and spend for the progress bar and the budget (the spend
    log's total)."""

    def __init__(self, records: Sequence[EvalRecord], *, log: SpendLog) -> None:
        self.lock = threading.Lock()
        self.log = log
        self.scored = self.correct = self.degraded = 0
        self.seconds = 0.0
        self.calls = self.count = 0
        for record in records:
            self.add(record)

    def add(self, record: EvalRecord) -> None:
        with self.lock:
            self.count += 1
            self.seconds += record.seconds
            self.calls += record.decision.lm_calls()
            if record.degraded:
                self.degraded += 1
            elif record.score is not None:
                self.scored += 1
                self.correct += int(record.score.correct)

    def spent_so_far(self) -> float:
        return self.log.total_usd()

    def describe(self) -> str:
        total = self.spent_so_far()
        with self.lock:
            accuracy = f"{self.correct / self.scored:.1%}" if self.scored else "-"
            per_q = f"{self.seconds / self.count:.1f}s {self.calls / self.count:.1f} calls/q" if self.count else ""
            degraded = f"  degraded {self.degraded}" if self.degraded else ""
            spent = f"  ${total:.2f}" if total else ""
            return f"acc {accuracy} ({self.correct}/{self.scored}){degraded}  {per_q}{spent}"


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the run: no further question was started, the questions in flight finished and were recorded
    (the run resumes with the same command). `line` is what the command says of it."""

    def __init__(self, recorded: int, planned: int) -> None:
        self.recorded, self.planned = recorded, planned
        self.line = (
            f"interrupted: the questions in flight finished ({recorded} of {planned} questions recorded); "
            "rerun the same command to resume"
        )
        super().__init__(self.line)


class _Stop:
    """Why no further question may start: a fatal service error (kept to raise), the budget, or Ctrl-C."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fatal: FatalServiceError | None = None
        self.budget = False
        self.interrupted = False

    def set_fatal(self, error: FatalServiceError) -> None:
        with self.lock:
            self.fatal = self.fatal or error

    @property
    def requested(self) -> bool:
        with self.lock:
            return self.fatal is not None or self.budget or self.interrupted


def run_evaluation(
    spec: EvalSpec,
    config: ClearmedConfig,
    program: dspy.Module,
    *,
    scorer: Scorer = default_scorer,
    num_threads: int = 1,
    console: Console | None = None,
    show_progress: bool = True,
    stop_after: int | None = None,
    keep_degraded: bool = False,
    max_cost: float | None = None,
    batched_roles: frozenset[str] = frozenset(),
) -> list[EvalRecord]:
    """Evaluate the questions of `spec` not yet in its run folder; return every record of the run.

    Degraded records are set aside and their questions redone, unless `keep_degraded`. `max_cost` (US dollars) starts no
    question once the run has spent that much (`BudgetReached`); a `FatalServiceError` starts no further question and is
    raised once the questions in flight have finished. `stop_after` ends the run after that many new questions (for
    tests of resume; the run stays resumable). `batched_roles`: one pass of a batch run (`clearmed.batch.run`), whose calls of
    those roles are answered from provider batches or deferred (a deferred question is left unrecorded, for the next
    pass) and priced at the batch price.
    """
    run = EvalRun(
        spec,
        config,
        program,
        scorer=scorer,
        num_threads=num_threads,
        console=console or user_console(stderr=True),
        show_progress=show_progress,
        stop_after=stop_after,
        keep_degraded=keep_degraded,
        max_cost=max_cost,
        batched_roles=batched_roles,
    )
    watch_lm_cache()  # a cache that cannot write says so
    run.refuse_unpriced_budget()
    with RunStore(spec.run_dir) as store:
        run.open(store)
        run.resume()
        run.drive()
    return run.finish()


@dataclass
class EvalRun:
    """One `run_evaluation`, in its phases: `open` the folder's manifest (new, or checked to be this run), `resume`
    (set aside unreadable and degraded lines, carry the spend over, choose the questions left), `drive` them through
    `step` (one question, appended the moment it finishes) under the progress bar, and `finish` (raise the stop that
    ended the run early, else return every record). `step` runs on the worker threads: what it shares is locked."""

    spec: EvalSpec
    config: ClearmedConfig
    program: dspy.Module
    scorer: Scorer
    num_threads: int
    console: Console
    show_progress: bool
    stop_after: int | None
    keep_degraded: bool
    max_cost: float | None
    batched_roles: frozenset[str] = frozenset()
    prices: Prices = field(init=False)
    stop: _Stop = field(default_factory=_Stop)
    started: int = 0  # questions started by `drive`
    # Set by `open` and `resume`:
    store: RunStore = field(init=False)
    manifest: RunManifest = field(init=False)
    done: dict[str, EvalRecord] = field(init=False)
    order: dict[str, int] = field(init=False)
    todo: list[Question] = field(init=False)
    log: SpendLog = field(init=False)
    running: _Running = field(init=False)

    def __post_init__(self) -> None:
        self.prices = Prices.of(self.config, batched_roles=self.batched_roles)

    def refuse_unpriced_budget(self) -> None:
        """A budget is only kept if every call can be priced: refuse it before anything is spent."""
        if self.max_cost is not None and (unpriced := self.prices.unpriced()):
            raise UsageError(
                f"a budget needs every backbone's price, and {', '.join(unpriced)} has none: set its "
                "price = {input = ..., output = ...} (USD per million tokens) in the config"
            )

    def open(self, store: RunStore) -> None:
        self.store = store
        self.manifest = open_run(store, self.spec, self.config, note=self._note)
        if self.manifest.question_digests is None:  # a run from before they were kept: resumed as it was
            self._warn(
                f"note: {self.spec.run_dir} keeps no digest of its questions (made by an older clearmed), so a "
                "benchmark file changed since it began cannot be noticed; it resumes as before"
            )

    def _note(self, message: str) -> None:  # one line, unwrapped in a log
        self.console.print(message, style="yellow", markup=False, highlight=False, soft_wrap=True)

    def _warn(self, message: str) -> None:
        self.console.print(message, style="yellow", markup=False, highlight=False)

    def resume(self) -> None:
        """What the folder already holds decides what is left to do, and what the run has already spent."""
        spec = self.spec
        scan = self.store.set_aside_unreadable()  # a torn last line of a killed run, or a damaged line: redone below
        if scan.skipped:
            first = scan.skipped[0]
            more = f" and {len(scan.skipped) - 1} more" if len(scan.skipped) > 1 else ""
            self._warn(
                f"{len(scan.skipped)} unreadable line{'s' if len(scan.skipped) > 1 else ''} moved to "
                f"{spec.run_dir / UNREADABLE}, their questions redone "
                f"({first.describe()}{more})"
            )
        records = scan.records
        if not self.keep_degraded and (redo := self.store.set_aside_degraded()):
            stages = sorted({stage for record in redo for stage in record.degraded_stages})
            self._warn(
                f"{len(redo)} degraded question{'s' if len(redo) > 1 else ''} (failed stages: {', '.join(stages)}) "
                f"moved to {spec.run_dir / DEGRADED} and redone; their good calls come from the caches "
                "(--keep-degraded keeps them)"
            )
            records = [record for record in records if not record.degraded]
        self.done = {record.question_id: record for record in records}
        by_id = {q.id: q for q in spec.questions}
        self.order = {qid: index for index, qid in enumerate(self.manifest.question_ids)}
        self.todo = [by_id[qid] for qid in self.manifest.question_ids if qid not in self.done]
        if self.stop_after is not None:
            self.todo = self.todo[: self.stop_after]
        self.log = SpendLog(spec.run_dir, self.prices)
        if self.log.new:  # questions finished before this run folder had a spend log count by their records' prices
            for record in [*records, *read_set_aside_degraded(spec.run_dir)]:
                retries = sum(row.retries for row in record.decision.usage)
                self.log.carry_over(record.question_id, record_usd(record, self.prices), retries)
        self.running = _Running(list(self.done.values()), log=self.log)

    def may_start(self) -> bool:
        if self.stop.requested:
            return False
        if self.max_cost is not None and self.running.spent_so_far() >= self.max_cost:
            with self.stop.lock:
                self.stop.budget = True
            return False
        return True

    def step(self, question: Question) -> EvalRecord | None:
        """Answer, score and append one question; None when it is left undone (a fatal error, an unwritable record)."""
        started = time.perf_counter()
        with self.log.question(question.id):  # each paid call is logged as it completes, grading included
            try:
                decision = self.program(question=question).decision
            except CallDeferred:  # a batch run's call waits for its batch: no record, the next pass runs it again
                return None
            except FatalServiceError as err:  # no record: the question is not done, and no later one starts
                self.stop.set_fatal(err)
                return None
            except Exception as err:  # recorded as a failed decision; the run goes on
                decision = crashed_decision(question, self.spec.program, err)
            try:
                score = self.scorer(question, decision)
            except CallDeferred:  # the grade's call waits for its batch: as above
                return None
            except FatalServiceError as err:  # the judge backbone refused for good: as above
                self.stop.set_fatal(err)
                return None
        seconds = time.perf_counter() - started
        record = EvalRecord(
            question_id=question.id,
            index=self.order[question.id],
            program=self.spec.program,
            decision=decision,
            score=score,
            seconds=round(seconds, 3),
            finished=datetime.now(UTC).isoformat(timespec="seconds"),
            degraded_stages=degraded_stages(decision) + (["grading"] if score and score.judge_transient else []),
            cost_usd=self.prices.decision_usd(decision),
        )
        return self._append(record)

    def _append(self, record: EvalRecord) -> EvalRecord | None:
        """Append the question's record. Half a character in a reply is mended at this boundary (U+FFFD, and a step
        in the trail says so); a record unwritable for another reason is recorded as failed, saying why, and the run
        goes on; None when not even that can be written (a resume tries the question again)."""
        try:
            self.store.append(record)
        except UnwritableRecordError as err:
            mended = mended_record(record)
            if mended is None or not self._appended(mended, quiet=True):
                self.console.print(f"{err}; recorded as failed", style="red", markup=False, highlight=False)
                mended = unwritable_record(mended or record, str(err))
                if not self._appended(mended):
                    return None
            record = mended
        self.running.add(record)
        return record

    def _appended(self, record: EvalRecord, *, quiet: bool = False) -> bool:
        try:
            self.store.append(record)
        except UnwritableRecordError as err:
            if not quiet:
                self.console.print(str(err), style="red", markup=False, highlight=False)
            return False
        return True

    def drive(self) -> None:
        """Run the questions left, one at a time or on threads, until done or stopped: under the progress bar on a
        terminal, with a line every so often in a batch log (`progress.ProgressLines`)."""
        label = f"{self.spec.program} on {self.spec.benchmark}"
        total, completed = len(self.manifest.question_ids), len(self.done)
        logged = self.show_progress and wants_lines(self.console)
        lines = ProgressLines(self.console, label, total=total, done=completed) if logged else None
        progress = Progress(
            TextColumn(escape(label)),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.show_progress or logged,
        )
        with progress:
            task = progress.add_task("eval", total=total, completed=completed, status=self.running.describe())

            def tick() -> None:
                progress.update(task, advance=1, status=self.running.describe())
                if lines is not None:
                    lines.tick(self.running)

            # One thread too runs its question on a worker: the main thread only waits, so Ctrl-C (which Python
            # raises in the main thread) never lands inside a question, and the question in flight finishes.
            self.started = _evaluate_threaded(
                self.todo, self.step, max(1, self.num_threads), tick, self.may_start, self._interrupted
            )
        if lines is not None:
            lines.end(self.running)

    def _interrupted(self) -> None:
        with self.stop.lock:
            self.stop.interrupted = True
        self._warn("interrupted: letting the questions in flight finish (Ctrl-C again stops at once)")

    def finish(self) -> list[EvalRecord]:
        """Raise what stopped the run early; else every record of the run, in the manifest's order."""
        if self.stop.fatal is not None:
            raise self.stop.fatal
        if self.stop.interrupted:
            raise RunInterrupted(self.running.count, len(self.manifest.question_ids))
        if self.stop.budget and self.max_cost is not None:
            raise BudgetReached(self.running.spent_so_far(), self.max_cost, len(self.todo) - self.started)
        return sorted(read_records(self.spec.run_dir), key=lambda record: record.index)


def _evaluate_threaded(
    todo: Sequence[Question],
    evaluate: Callable[[Question], EvalRecord | None],
    threads: int,
    tick: Callable[[], None],
    may_start: Callable[[], bool],
    interrupted: Callable[[], None],
) -> int:
    """Keep `threads` questions in flight while `may_start()` allows; return how many were started. Once it refuses,
    the questions in flight finish and nothing else starts. The first Ctrl-C calls `interrupted` (which makes
    `may_start` refuse) and the questions in flight finish; a second one is raised at once (and, through
    `clearmed.core.retries.second_interrupt_cuts_retries`, cuts their attempts short)."""
    pending: set[Future[EvalRecord | None]] = set()
    queue = list(reversed(todo))
    started = 0
    pressed = False
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="clearmed-eval")
    try:
        while queue or pending:
            while queue and len(pending) < threads and may_start():
                pending.add(pool.submit(evaluate, queue.pop()))
                started += 1
            if not pending:
                break
            try:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt:
                if pressed:
                    raise
                pressed = True
                interrupted()
                continue
            for future in finished:
                future.result()
                tick()
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)  # the second Ctrl-C waits for nothing
        raise
    except BaseException:
        pool.shutdown()  # a failure lets the questions in flight finish, as ever
        raise
    pool.shutdown()
    return started
