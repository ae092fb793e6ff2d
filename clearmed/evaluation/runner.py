"""`clearmed eval`: run a program over a benchmark into a resumable run folder.

The question list is fixed in the manifest when the folder is created, so a resumed run evaluates exactly
the questions it started with; finished questions are never recomputed. Questions run one at a time or on
`run.num_threads` threads (for remote backends); each line is appended the moment its question finishes. A question
whose record would not load back is reported and not written, and a line that cannot be read counts as not done:
either way the run goes on and a resume redoes that question.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import dspy
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from clearmed import __version__
from clearmed.config import ClearmedConfig
from clearmed.evaluation.store import (
    UNREADABLE,
    EvalRecord,
    RunManifest,
    RunStore,
    RunStoreError,
    UnwritableRecordError,
    read_records,
)
from clearmed.metrics import QuestionScore, score_decision
from clearmed.signatures.records import AdjudicationStep, Decision, EvidenceBundle, Question

Scorer = Callable[[Question, Decision], QuestionScore | None]


@dataclass(frozen=True)
class EvalSpec:
    program: str
    benchmark: str
    source: str
    questions: Sequence[Question]
    run_dir: Path
    limit: int | None = None
    seed: int = 0
    artifact: str | None = None


def config_digest(config: ClearmedConfig) -> str:
    """A fingerprint of everything that changes answers (the config minus where it was read from)."""
    payload = config.model_dump_json(exclude={"source", "run"})
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def default_scorer(question: Question, decision: Decision) -> QuestionScore | None:
    """MCQ questions are scored here; free text needs a judge backbone (see `judged_scorer`)."""
    return score_decision(question, decision) if question.is_mcq else None


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


class _Running:
    """Running accuracy and cost for the progress bar."""

    def __init__(self, records: Sequence[EvalRecord]) -> None:
        self.lock = threading.Lock()
        self.scored = self.correct = 0
        self.seconds = 0.0
        self.calls = self.count = 0
        for record in records:
            self.add(record)

    def add(self, record: EvalRecord) -> None:
        with self.lock:
            self.count += 1
            self.seconds += record.seconds
            self.calls += record.decision.lm_calls()
            if record.score is not None:
                self.scored += 1
                self.correct += int(record.score.correct)

    def describe(self) -> str:
        with self.lock:
            accuracy = f"{self.correct / self.scored:.1%}" if self.scored else "-"
            per_q = f"{self.seconds / self.count:.1f}s {self.calls / self.count:.1f} calls/q" if self.count else ""
            return f"acc {accuracy} ({self.correct}/{self.scored})  {per_q}"


def _extends(snapshot: object, current: object, non_default: object) -> bool:
    """Whether `current` (a config dump) is `snapshot` plus keys the snapshot's schema lacked, each at its default
    (absent from `non_default`, the same dump without defaults)."""
    if not isinstance(snapshot, dict) or not isinstance(current, dict):
        return snapshot == current
    if set(snapshot) - set(current):
        return False  # a setting this version no longer has: not provably the same run
    non_default = non_default if isinstance(non_default, dict) else {}
    return all(
        _extends(snapshot[key], value, non_default.get(key)) if key in snapshot else key not in non_default
        for key, value in current.items()
    )


def _same_config_as_snapshot(store: RunStore, config: ClearmedConfig) -> bool:
    """Whether the folder's config snapshot is this config as an older clearmed wrote it. A newer version that adds
    settings changes the digest of an unchanged config, so digests alone would refuse to resume every earlier run;
    settings the snapshot lacks count as the same when they are at their defaults."""
    try:
        snapshot = json.loads((store.directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    excluded = {"source", "run"}
    current = json.loads(config.model_dump_json(exclude_none=True, exclude=excluded))
    non_default = json.loads(config.model_dump_json(exclude_none=True, exclude_defaults=True, exclude=excluded))
    snapshot = {key: value for key, value in snapshot.items() if key not in excluded}
    return _extends(snapshot, current, non_default)


def open_run(store: RunStore, spec: EvalSpec, config: ClearmedConfig) -> RunManifest:
    """Create the manifest, or check that an existing folder is the same run and may be resumed."""
    digest = config_digest(config)
    existing = store.read_manifest()
    if existing is None:
        manifest = RunManifest(
            program=spec.program,
            benchmark=spec.benchmark,
            source=spec.source,
            config_source=config.source,
            config_digest=digest,
            limit=spec.limit,
            seed=spec.seed,
            question_ids=[q.id for q in spec.questions],
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            clearmed_version=__version__,
            artifact=spec.artifact,
        )
        # The config snapshot first: the manifest is what makes a folder a run, so a kill between the two
        # writes must not leave a run without its config.
        store.write_json("config.json", config.model_dump_json(indent=2, exclude_none=True))
        store.write_manifest(manifest)
        return manifest
    mismatches = [
        f"{name} {old!r} != {new!r}"
        for name, old, new in (
            ("program", existing.program, spec.program),
            ("benchmark", existing.benchmark, spec.benchmark),
            ("config", digest if _same_config_as_snapshot(store, config) else existing.config_digest, digest),
            ("program artifact", existing.artifact, spec.artifact),
        )
        if old != new
    ]
    if mismatches:
        raise RunStoreError(
            f"{store.directory} holds a different run ({'; '.join(mismatches)}); choose another --run-dir"
        )
    known = {q.id for q in spec.questions}
    missing = [qid for qid in existing.question_ids if qid not in known]
    if missing:
        raise RunStoreError(f"{store.directory}: {len(missing)} questions of this run are not in the benchmark now")
    if not (store.directory / "config.json").is_file():  # a folder from before that ordering, killed in between
        store.write_json("config.json", config.model_dump_json(indent=2, exclude_none=True))
    return existing


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
) -> list[EvalRecord]:
    """Evaluate the questions of `spec` not yet in its run folder; return every record of the run.

    `stop_after` ends the run after that many new questions (for tests of resume; the run stays resumable).
    """
    console = console or Console(stderr=True)
    with RunStore(spec.run_dir) as store:
        manifest = open_run(store, spec, config)
        scan = store.set_aside_unreadable()  # a torn last line of a killed run, or a damaged line: redone below
        if scan.skipped:
            first = scan.skipped[0]
            more = f" and {len(scan.skipped) - 1} more" if len(scan.skipped) > 1 else ""
            console.print(
                f"{len(scan.skipped)} unreadable line{'s' if len(scan.skipped) > 1 else ''} moved to "
                f"{spec.run_dir / UNREADABLE}, their questions redone "
                f"({first.describe()}{more})",
                style="yellow",
                markup=False,
                highlight=False,
            )
        done = {record.question_id: record for record in scan.records}
        by_id = {q.id: q for q in spec.questions}
        order = {qid: index for index, qid in enumerate(manifest.question_ids)}
        todo = [by_id[qid] for qid in manifest.question_ids if qid not in done]
        if stop_after is not None:
            todo = todo[:stop_after]
        running = _Running(list(done.values()))

        def evaluate(question: Question) -> EvalRecord | None:
            started = time.perf_counter()
            try:
                decision = program(question=question).decision
            except Exception as err:  # recorded as a failed decision; the run goes on
                decision = crashed_decision(question, spec.program, err)
            seconds = time.perf_counter() - started
            record = EvalRecord(
                question_id=question.id,
                index=order[question.id],
                program=spec.program,
                decision=decision,
                score=scorer(question, decision),
                seconds=round(seconds, 3),
                finished=datetime.now(UTC).isoformat(timespec="seconds"),
            )
            try:
                store.append(record)
            except UnwritableRecordError as err:  # reported and left undone: the run goes on, a resume redoes it
                console.print(str(err), style="red", markup=False, highlight=False)
                return None
            running.add(record)
            return record

        progress = Progress(
            TextColumn(f"{spec.program} on {spec.benchmark}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not show_progress,
        )
        with progress:
            task = progress.add_task(
                "eval", total=len(manifest.question_ids), completed=len(done), status=running.describe()
            )
            if num_threads <= 1:
                for question in todo:
                    evaluate(question)
                    progress.update(task, advance=1, status=running.describe())
            else:
                _evaluate_threaded(
                    todo, evaluate, num_threads, lambda: progress.update(task, advance=1, status=running.describe())
                )
    return sorted(read_records(spec.run_dir), key=lambda record: record.index)


def _evaluate_threaded(
    todo: Sequence[Question], evaluate: Callable[[Question], EvalRecord | None], threads: int, tick: Callable[[], None]
) -> None:
    pending: set[Future[EvalRecord | None]] = set()
    queue = list(reversed(todo))
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="clearmed-eval") as pool:
        while queue or pending:
            while queue and len(pending) < threads:
                pending.add(pool.submit(evaluate, queue.pop()))
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                future.result()
                tick()
