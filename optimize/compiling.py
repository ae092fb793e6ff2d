"""DSPy compilation of the program's prompts (`clearmed compile`): every predictor, or the stages named.

The metric is the metrics package's exact-set score of the program's Decision. GEPA gets the same score
with textual feedback: the route, the rule that decided, each pathway's answer and the gold. Teacher and
prompt/reflection models are the config's `teacher` and `prompt_model` roles (the main LM when absent).

CLEAR takes a `Question` record and picks each stage's LM from its run context, so predictors carry no LM
of their own; the compiled program is saved with none (see `optimize.artifacts`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import dspy
from dspy.utils.callback import BaseCallback
from pydantic import BaseModel, ConfigDict, Field

from clearmed.core.errors import UsageError
from clearmed.metrics import AccuracySummary, accuracy_summary, score_decision
from clearmed.signatures.records import Decision, Question

OptimizerName = Literal["bootstrap", "bootstrap-rs", "mipro", "gepa", "simba"]
OPTIMIZERS: dict[OptimizerName, str] = {
    "bootstrap": "BootstrapFewShot: demos bootstrapped from the teacher's successful traces",
    "bootstrap-rs": "BootstrapFewShotWithRandomSearch: several bootstrapped demo sets, the best on val",
    "mipro": "MIPROv2: proposed instructions and demo sets, searched with Optuna",
    "gepa": "GEPA: instructions evolved by a reflection LM from textual feedback",
    "simba": "SIMBA: mini-batch self-reflection that adds demos and rules",
}
Budget = Literal["light", "medium", "heavy"]


class CompileSettings(BaseModel):
    """Optimizer knobs exposed on the command line; None means the optimizer's own default."""

    model_config = ConfigDict(extra="forbid")

    optimizer: OptimizerName
    stages: list[str] = Field(default_factory=list, description="predictors to optimize; empty: all")
    max_demos: int = Field(default=2, ge=0, description="bootstrapped demos per predictor")
    candidates: int = Field(default=4, ge=1, description="candidate programs / instructions")
    auto: Budget | None = Field(default="light", description="MIPROv2 / GEPA budget preset; None: explicit budget")
    trials: int | None = Field(default=None, ge=1, description="MIPROv2 trials when auto is None")
    max_metric_calls: int | None = Field(default=None, ge=1, description="GEPA budget when auto is None")
    bsize: int | None = Field(default=None, ge=1, description="SIMBA mini-batch size (default: min(train, 8))")
    max_steps: int = Field(default=4, ge=1, description="SIMBA steps")
    threads: int = Field(default=1, ge=1)
    seed: int = 0


@dataclass(frozen=True)
class CompileLMs:
    task: dspy.BaseLM
    teacher: dspy.BaseLM | None = None
    prompt: dspy.BaseLM | None = None

    @property
    def proposer(self) -> dspy.BaseLM:
        return self.prompt or self.task


# ------------------------------------------------------------------------------------------------ data and metrics


def to_examples(questions: Sequence[Question]) -> list[dspy.Example]:
    """One Example per question. The gold sits in `gold` (no predictor has a field of that name), so a raw
    example never passes as a labelled demo of some predictor."""
    return [dspy.Example(question=q, gold=",".join(q.gold_letters or [])).with_inputs("question") for q in questions]


def _decision(pred: Any) -> Decision | None:
    decision = getattr(pred, "decision", None) if pred is not None else None
    return decision if isinstance(decision, Decision) else None


def decision_metric(example: dspy.Example, pred: Any, trace: object = None) -> float:
    """1.0 when the Decision's answer is exactly the gold set (metrics.score_decision), else 0.0."""
    decision = _decision(pred)
    if decision is None:
        return 0.0
    return float(score_decision(example.question, decision).correct)


def describe_outcome(example: dspy.Example, pred: Any, score: float, pred_name: str | None = None) -> str:
    """The textual feedback GEPA reflects on: what was answered, by which route and rule, against the gold."""
    question: Question = example.question
    gold = ", ".join(question.gold_letters or []) or "(no gold)"
    decision = _decision(pred)
    if decision is None:
        return f"The program produced no decision. The gold answer is {gold}."
    answer = decision.answer.display() if decision.answer else "no valid answer"
    verdict = "correct" if score else "wrong"
    pathways = "; ".join(
        f"{c.pathway} {c.answer.display() if c.answer else 'no answer'}" for c in decision.bundle.candidates
    )
    text = (
        f"The program answered {answer} ({verdict}); the gold answer is {gold}. "
        f"Route {decision.route or '-'}, decided by rule {decision.deciding_rule or '-'}. Pathway answers: {pathways}."
    )
    errors = [step.error.message for step in decision.steps if step.error is not None]
    if errors:
        text += f" Errors along the way: {'; '.join(errors[:2])}."
    if pred_name:
        text += f" (This feedback is for the {pred_name} step.)"
    return text


def feedback_metric(
    gold: dspy.Example, pred: Any, trace: object = None, pred_name: str | None = None, pred_trace: object = None
) -> dspy.Prediction:
    """GEPA's five-argument metric: the score with its textual feedback."""
    score = decision_metric(gold, pred)
    return dspy.Prediction(score=score, feedback=describe_outcome(gold, pred, score, pred_name))


# ------------------------------------------------------------------------------------------------ stages


def predictor_names(program: dspy.Module) -> list[str]:
    return [name for name, _ in program.named_predictors()]


def resolve_stages(program: dspy.Module, raw: str | None) -> list[str]:
    """`--stages a,b`: predictor names (`verifier.verify`) or module prefixes (`verifier`, `local`)."""
    names = predictor_names(program)
    if not raw:
        return names
    chosen: list[str] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        matched = [n for n in names if n == item or n.startswith(item + ".")]
        if not matched:
            raise UsageError(f"--stages: no predictor {item!r}; the program has {', '.join(names)}")
        chosen += [n for n in matched if n not in chosen]
    return [n for n in names if n in chosen]


def _owner(program: dspy.Module, predictor_name: str) -> tuple[dspy.Module, str]:
    """The module holding a predictor attribute, and that attribute's path."""
    parts = predictor_name.split(".")
    module: Any = program
    for part in parts[:-1]:
        module = getattr(module, part)
    return module, ".".join(parts[:-1])


@contextlib.contextmanager
def frozen_except(program: dspy.Module, stages: Sequence[str]) -> Iterator[list[str]]:
    """Hide every predictor not in `stages` from optimizers, by marking the modules holding them compiled
    (DSPy skips compiled sub-modules in `named_predictors`). Yields the frozen module paths.

    A module that holds both a chosen and a frozen predictor cannot be split; that is a usage error.
    """
    names = predictor_names(program)
    keep = set(stages)
    frozen: dict[str, dspy.Module] = {}
    for name in names:
        if name in keep:
            continue
        module, path = _owner(program, name)
        if module is program:
            raise UsageError(f"--stages: {name} sits on the program itself and cannot be frozen")
        siblings = [n for n in names if _owner(program, n)[1] == path and n in keep]
        if siblings:
            raise UsageError(f"--stages: {siblings[0]} and {name} share module {path}; choose both or neither")
        frozen[path] = module
    for module in frozen.values():
        module._compiled = True
    try:
        yield sorted(frozen)
    finally:
        for module in frozen.values():
            module._compiled = False


def unfreeze(program: dspy.Module, paths: Sequence[str]) -> None:
    """Optimizers return copies: clear the freeze marks on the copy too, so it saves every predictor."""
    for path in paths:
        module: Any = program
        for part in path.split("."):
            module = getattr(module, part)
        module._compiled = False


# ------------------------------------------------------------------------------------------------ scoring


Tick = Callable[[], None]


class CompileProgress(Protocol):
    """Where `compile_program` says how far it is (the CLI's lines in a batch log): each phase as it starts, then
    one tick per unit of it, from any thread."""

    def phase(self, label: str, total: int | None, unit: str) -> Tick: ...


def _no_tick() -> None:
    return None


class CallCounter(BaseCallback):
    """Counts LM calls (cache hits included) made anywhere under a dspy context that installs it."""

    def __init__(self, tick: Tick = _no_tick) -> None:
        self.calls = 0
        self._lock = threading.Lock()
        self._tick = tick

    def on_lm_end(self, call_id: str, outputs: dict[str, Any] | None, exception: BaseException | None = None) -> None:
        with self._lock:
            self.calls += 1
        self._tick()


class SplitScore(BaseModel):
    """The program on one id split: accuracy with intervals and what it cost."""

    model_config = ConfigDict(extra="forbid")

    split: Literal["train", "val"]
    accuracy: AccuracySummary
    lm_calls: int
    mean_lm_calls: float
    seconds: float


def score_program(
    program: dspy.Module,
    questions: Sequence[Question],
    split: Literal["train", "val"],
    threads: int = 1,
    seed: int = 0,
    tick: Tick = _no_tick,
) -> SplitScore:
    """Run the program on each question and score its Decision (never raises for a failing question); `tick` as
    each question finishes."""

    def one(question: Question) -> tuple[Question, Decision | None]:
        try:
            return question, _decision(program(question=question))
        except Exception:  # a crashed question scores as wrong; the program records its own failures
            return question, None
        finally:
            tick()

    started = time.perf_counter()
    if threads > 1:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="clearmed-score") as pool:
            results = list(pool.map(one, questions))
    else:
        results = [one(q) for q in questions]
    scores = []
    calls = 0
    for question, decision in results:
        if decision is None:
            from clearmed.evaluation.runner import crashed_decision

            decision = crashed_decision(question, "compiled", RuntimeError("the program raised"))
        scores.append(score_decision(question, decision))
        calls += decision.lm_calls()
    return SplitScore(
        split=split,
        accuracy=accuracy_summary(scores, seed=seed),
        lm_calls=calls,
        mean_lm_calls=round(calls / max(1, len(results)), 3),
        seconds=round(time.perf_counter() - started, 3),
    )


# ------------------------------------------------------------------------------------------------ compile


class CompileReport(BaseModel):
    """scores.json of a compile artifact."""

    model_config = ConfigDict(extra="forbid")

    settings: CompileSettings
    stages: list[str]
    frozen_modules: list[str]
    train_ids: int
    val_ids: int
    val_before: SplitScore
    val_after: SplitScore
    compile_lm_calls: int
    compile_seconds: float


def _teacher(student: dspy.Module, lms: CompileLMs) -> dspy.Module | None:
    """A copy of the student answering with the teacher LM (the program picks LMs from `role_lms`)."""
    if lms.teacher is None or not hasattr(student, "role_lms"):
        return None
    teacher = student.deepcopy()
    teacher.role_lms = {**student.role_lms, "main": lms.teacher}
    return teacher


def _check_sizes(settings: CompileSettings, n_train: int, n_val: int) -> None:
    if n_train < 1:
        raise UsageError("--train must be at least 1")
    if n_val < 1:
        raise UsageError("--val must be at least 1")
    if settings.optimizer == "simba" and (settings.bsize or min(n_train, 8)) > n_train:
        raise UsageError(f"SIMBA's --bsize ({settings.bsize}) cannot exceed the {n_train} train questions")
    if settings.optimizer in ("mipro", "gepa") and settings.auto is None:
        needed = "--trials" if settings.optimizer == "mipro" else "--max-metric-calls"
        if (settings.trials if settings.optimizer == "mipro" else settings.max_metric_calls) is None:
            raise UsageError(f"{settings.optimizer} with --auto none needs {needed}")


def run_optimizer(
    student: dspy.Module,
    trainset: list[dspy.Example],
    valset: list[dspy.Example],
    settings: CompileSettings,
    lms: CompileLMs,
) -> dspy.Module:
    """One optimizer's compile call, with the settings mapped onto its own arguments."""
    from dspy.teleprompt import GEPA, SIMBA, BootstrapFewShot, BootstrapFewShotWithRandomSearch, MIPROv2

    teacher = _teacher(student, lms)
    demos = settings.max_demos
    name = settings.optimizer
    if name == "bootstrap":
        optimizer = BootstrapFewShot(metric=decision_metric, max_bootstrapped_demos=demos, max_labeled_demos=0)
        return optimizer.compile(student, teacher=teacher, trainset=trainset)
    if name == "bootstrap-rs":
        optimizer = BootstrapFewShotWithRandomSearch(
            metric=decision_metric,
            max_bootstrapped_demos=demos,
            max_labeled_demos=0,
            num_candidate_programs=settings.candidates,
            num_threads=settings.threads,
        )
        return optimizer.compile(student, teacher=teacher, trainset=trainset, valset=valset)
    if name == "mipro":
        explicit = settings.auto is None
        mipro = MIPROv2(
            metric=decision_metric,
            prompt_model=lms.proposer,
            task_model=lms.task,
            max_bootstrapped_demos=demos,
            max_labeled_demos=0,
            auto=settings.auto,
            num_candidates=settings.candidates if explicit else None,
            num_threads=settings.threads,
            seed=settings.seed,
            verbose=False,
            track_stats=False,
        )
        return mipro.compile(
            student,
            trainset=trainset,
            valset=valset,
            teacher=teacher,
            num_trials=settings.trials if explicit else None,
            minibatch=len(valset) > 35,
        )
    if name == "gepa":
        gepa = GEPA(
            metric=feedback_metric,
            auto=settings.auto,
            max_metric_calls=settings.max_metric_calls if settings.auto is None else None,
            reflection_lm=lms.proposer,
            reflection_minibatch_size=min(3, len(trainset)),
            num_threads=settings.threads,
            seed=settings.seed,
            track_stats=False,
        )
        return gepa.compile(student, trainset=trainset, valset=valset)
    simba = SIMBA(
        metric=decision_metric,
        bsize=settings.bsize or min(len(trainset), 8),
        num_candidates=settings.candidates,
        max_steps=settings.max_steps,
        max_demos=demos,
        prompt_model=lms.proposer,
        num_threads=settings.threads,
    )
    return simba.compile(student, trainset=trainset, seed=settings.seed)


def compile_program(
    student: dspy.Module,
    train: Sequence[Question],
    val: Sequence[Question],
    settings: CompileSettings,
    lms: CompileLMs,
    progress: CompileProgress | None = None,
) -> tuple[dspy.Module, CompileReport]:
    """Score the student on val, compile it on train (val for optimizers that select), score it again; each phase
    told to `progress`."""

    def phase(label: str, total: int | None, unit: str) -> Tick:
        return progress.phase(label, total, unit) if progress is not None else _no_tick

    _check_sizes(settings, len(train), len(val))
    overlap = {q.id for q in train} & {q.id for q in val}
    if overlap:
        raise UsageError(f"train and val share {len(overlap)} ids")
    stages = settings.stages or predictor_names(student)
    before = score_program(
        student, val, "val", settings.threads, settings.seed, phase("val before", len(val), "questions")
    )
    counter = CallCounter(phase("optimizing", None, "LM calls"))
    started = time.perf_counter()
    # Optimizers read dspy.settings.lm (SIMBA, MIPROv2's defaults); no history kept on deep-copied LMs.
    callbacks = [*dspy.settings.get("callbacks", []), counter]
    with dspy.context(lm=lms.task, callbacks=callbacks, max_history_size=0), frozen_except(student, stages) as frozen:
        compiled = run_optimizer(student, to_examples(train), to_examples(val), settings, lms)
    compile_seconds = time.perf_counter() - started
    unfreeze(compiled, frozen)
    for _, predictor in compiled.named_predictors():
        predictor.lm = None  # SIMBA binds sampling copies of the LM; the program's LMs come from its config
    after = score_program(
        compiled, val, "val", settings.threads, settings.seed, phase("val after", len(val), "questions")
    )
    report = CompileReport(
        settings=settings,
        stages=list(stages),
        frozen_modules=frozen,
        train_ids=len(train),
        val_ids=len(val),
        val_before=before,
        val_after=after,
        compile_lm_calls=counter.calls,
        compile_seconds=round(compile_seconds, 3),
    )
    return compiled, report
