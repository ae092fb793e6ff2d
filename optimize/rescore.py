"""Re-scoring stored eval runs under other thresholds: replay each decision, score it, estimate its cost.

A run folder's records are loaded once into `ReplayItem`s. `Rescorer.score(thresholds)` replays the
adjudication layer of every item (zero LM calls where the record holds every judgement the new thresholds
need), scores the replayed answer with the metrics package, and estimates what the question would have
cost from the recorded usage rows: the pathway calls as recorded, plus the verifier calls, follow-up rounds
and guard/audit assessments the replayed trail actually used.

A changed threshold can open a branch the record lacks (a guard follow-up the original run never searched,
say): that is a `ReplayMiss`. It is counted, and either keeps the original outcome, counts as wrong, or (with
live actions) is asked of the LM, whose calls DSPy's cache makes free on a second visit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from clearmed.core.errors import UsageError
from clearmed.evaluation.store import EvalRecord, read_records
from clearmed.metrics import score_mcq
from clearmed.optimize.replay import ReplayedActions, ReplayMiss, replay_decision
from clearmed.programs.adjudication import AdjudicationActions, Mechanisms
from clearmed.programs.adjudication.rules import gate_accepts
from clearmed.signatures.records import CallUsage, Decision, Question, Thresholds
from clearmed.signatures.records.settings import ProgramSettings, clear_variant_settings

if TYPE_CHECKING:
    # The live fallback alone needs the DSPy program: tuning by replay loads no DSPy (tests/test_layers.py).
    from clearmed.programs.clear import CLEAR
    from clearmed.programs.lm.context import Ledger

OnMiss = Literal["keep-original", "penalize"]
CostUnit = Literal["calls", "seconds"]

# Usage stages that belong to one adjudication action; every other stage is paid whatever the thresholds.
_ACTION_OF_STAGE = {
    "verifier": "verify",
    "followup_query": "follow_up",
    "followup_search": "follow_up",
    "followup_quality": "follow_up",
    "guard": "guard",
    "audit": "audit",
}


class Cost(NamedTuple):
    calls: float = 0.0
    seconds: float = 0.0

    def __add__(self, other: object) -> Cost:
        assert isinstance(other, Cost)
        return Cost(self.calls + other.calls, self.seconds + other.seconds)

    def times(self, factor: float) -> Cost:
        return Cost(self.calls * factor, self.seconds * factor)

    @classmethod
    def of(cls, rows: Sequence[CallUsage]) -> Cost:
        # LM calls as Decision.lm_calls counts them (tool rows and cache hits are free); seconds of every row.
        calls = sum(row.calls for row in rows if row.role != "tool" and not row.cached)
        return cls(float(calls), sum(row.seconds for row in rows))


@dataclass(frozen=True)
class DecisionCost:
    """A stored decision's usage rows, split into what any replay pays and what each action costs."""

    fixed: Cost
    verifications: tuple[Cost, ...]
    per_round: Cost
    guard: Cost
    audit: Cost
    original: Cost

    @classmethod
    def of(cls, decision: Decision) -> DecisionCost:
        fixed: list[CallUsage] = []
        by_action: dict[str, list[CallUsage]] = {"verify": [], "follow_up": [], "guard": [], "audit": []}
        for row in decision.usage:
            action = _ACTION_OF_STAGE.get(row.stage)
            (by_action[action] if action else fixed).append(row)
        rounds = len(decision.bundle.followups)
        # Rows do not say which round they belong to; a round's cost is the recorded average.
        per_round = Cost.of(by_action["follow_up"]).times(1 / rounds) if rounds else Cost()
        return cls(
            fixed=Cost.of(fixed),
            verifications=tuple(Cost.of([row]) for row in by_action["verify"]),
            per_round=per_round,
            guard=Cost.of(by_action["guard"]),
            audit=Cost.of(by_action["audit"]),
            original=Cost.of(decision.usage),
        )

    def replayed(self, actions: ReplayedActions) -> Cost:
        served = actions.served
        total = self.fixed
        for cost in self.verifications[: served["verify"]]:
            total = total + cost
        total = total + self.per_round.times(served["follow_up"])
        if served["guard"]:
            total = total + self.guard
        if served["audit"]:
            total = total + self.audit
        return total


@dataclass(frozen=True)
class ReplayItem:
    """One stored question, ready to replay: its decision, how it was scored, and its cost model."""

    run: str
    question: Question
    decision: Decision
    mechanisms: Mechanisms
    original_correct: bool
    cost: DecisionCost
    # A record with nothing to replay (crashed, or no agreement recorded): its outcome never changes.
    static: bool = False

    @property
    def question_id(self) -> str:
        return self.question.id


class LoadedRuns(BaseModel):
    """What `load_items` read, and what it left out (and why)."""

    model_config = ConfigDict(extra="forbid")

    runs: list[str]
    records: int
    skipped_unscored: int = 0
    programs: list[str]


def _record_correct(record: EvalRecord) -> bool | None:
    if record.score is not None:
        return record.score.correct
    question = record.decision.bundle.question
    if question.is_mcq and question.gold_letters:
        answer = record.decision.answer if record.decision.status == "answered" else None
        return score_mcq(question, answer).correct
    return None


def _run_program_settings(run_dir: Path) -> ProgramSettings:
    """The `[program]` settings the run was made with (its config snapshot), defaults where absent."""
    from clearmed.evaluation.folder import snapshot_of

    table = (snapshot_of(run_dir) or {}).get("program") or {}
    try:
        known = {key: value for key, value in table.items() if key in ProgramSettings.model_fields}
        return ProgramSettings.model_validate(known)
    except (AttributeError, ValueError):
        return ProgramSettings()


def mechanisms_of(program: str, settings: ProgramSettings) -> Mechanisms | None:
    """The mechanisms a CLEAR variant ran with (None: not a CLEAR variant, nothing to replay)."""
    variant = clear_variant_settings(program, settings)
    if variant is None:
        return None
    return Mechanisms(
        guard=variant.enable_guard,
        audit=variant.enable_audit,
        followup=variant.enable_followup,
        answer_source=variant.answer_source,
    )


def load_items(run_dirs: Sequence[str | Path]) -> tuple[list[ReplayItem], LoadedRuns]:
    """Every scorable record of the runs. Free-text records count only when the run scored them."""
    items: list[ReplayItem] = []
    skipped = 0
    programs: set[str] = set()
    for raw in run_dirs:
        run_dir = Path(raw)
        if not (run_dir / "results.jsonl").is_file():
            raise UsageError(f"{run_dir}: not a run folder (no results.jsonl)")
        settings = _run_program_settings(run_dir)
        found = 0
        for record in read_records(run_dir):
            found += 1
            mechanisms = mechanisms_of(record.program, settings)
            if mechanisms is None:
                raise UsageError(f"{run_dir}: a {record.program!r} run; only CLEAR runs can be replayed")
            programs.add(record.program)
            correct = _record_correct(record)
            if correct is None:
                skipped += 1
                continue
            decision = record.decision
            items.append(
                ReplayItem(
                    run=str(run_dir),
                    question=decision.bundle.question,
                    decision=decision,
                    mechanisms=mechanisms,
                    original_correct=correct,
                    cost=DecisionCost.of(decision),
                    static=decision.agreement is None,
                )
            )
        if not found:
            raise UsageError(f"{run_dir}: the run folder holds no finished questions")
    if not items:
        raise UsageError("no scorable records in the runs (free-text records need a judge score)")
    loaded = LoadedRuns(
        runs=[str(r) for r in run_dirs], records=len(items), skipped_unscored=skipped, programs=sorted(programs)
    )
    return items, loaded


class Outcome(NamedTuple):
    correct: bool
    cost: Cost
    missed: bool
    rule: str


class TrialScore(BaseModel):
    """Accuracy and cost of one threshold setting over a set of questions."""

    model_config = ConfigDict(extra="forbid")

    n: int
    correct: int
    accuracy: float
    mean_calls: float
    mean_seconds: float
    misses: int
    objective: float


class Rescorer:
    """Scores threshold settings over loaded items; each (thresholds, ids) score is computed once."""

    def __init__(
        self,
        items: Sequence[ReplayItem],
        *,
        on_miss: OnMiss = "keep-original",
        cost_weight: float = 0.0,
        cost_unit: CostUnit = "calls",
        live: LiveSession | None = None,
    ) -> None:
        self.items = list(items)
        self.on_miss = on_miss
        self.cost_weight = cost_weight
        self.cost_unit = cost_unit
        self.live = live
        self._memo: dict[str, TrialScore] = {}

    def outcome(self, item: ReplayItem, thresholds: Thresholds) -> Outcome:
        decision = item.decision
        if item.static:
            return Outcome(item.original_correct, item.cost.original, False, decision.deciding_rule)
        try:
            if self.live is None:
                result, actions = replay_decision(decision, thresholds, item.mechanisms)
                extra = Cost()
            else:
                with self.live.session() as session:
                    result, actions = replay_decision(decision, thresholds, item.mechanisms, live=session.actions)
                extra = Cost.of(session.rows())
        except ReplayMiss:
            correct = item.original_correct if self.on_miss == "keep-original" else False
            return Outcome(correct, item.cost.original, True, "replay_miss")
        question = item.question
        answer = result.answer if gate_accepts(result.answer, question) else None
        if question.is_mcq:
            correct = score_mcq(question, answer).correct
        elif answer == decision.answer:  # free text: the judge's score holds only for the same answer
            correct = item.original_correct
        else:
            correct = item.original_correct if self.on_miss == "keep-original" else False
            return Outcome(correct, item.cost.replayed(actions) + extra, True, result.rule)
        return Outcome(correct, item.cost.replayed(actions) + extra, bool(actions.misses), result.rule)

    def score(self, thresholds: Thresholds, ids: Collection[str] | None = None) -> TrialScore:
        """Accuracy, mean cost and objective over the items (only `ids`, when given)."""
        key = thresholds.model_dump_json() + ("" if ids is None else "|" + ",".join(sorted(ids)))
        if key in self._memo:
            return self._memo[key]
        chosen = [item for item in self.items if ids is None or item.question_id in ids]
        if not chosen:
            raise UsageError("no records to score for these ids")
        outcomes = [self.outcome(item, thresholds) for item in chosen]
        n = len(outcomes)
        correct = sum(o.correct for o in outcomes)
        calls = sum(o.cost.calls for o in outcomes) / n
        seconds = sum(o.cost.seconds for o in outcomes) / n
        cost = calls if self.cost_unit == "calls" else seconds
        score = TrialScore(
            n=n,
            correct=correct,
            accuracy=correct / n,
            mean_calls=round(calls, 4),
            mean_seconds=round(seconds, 4),
            misses=sum(o.missed for o in outcomes),
            objective=correct / n - self.cost_weight * cost,
        )
        self._memo[key] = score
        return score


class LiveSession:
    """Live adjudication actions of a built CLEAR program, each question in its own run context and ledger."""

    def __init__(self, program: CLEAR) -> None:
        self.program = program

    @contextlib.contextmanager
    def session(self) -> Iterator[_Session]:
        from clearmed.programs.clear import LiveActions
        from clearmed.programs.lm.context import Ledger, RunContext, activate

        ledger = Ledger()
        context = RunContext(settings=self.program.settings, role_lms=self.program.role_lms, ledger=ledger)
        with activate(context):
            yield _Session(LiveActions(self.program), ledger)


@dataclass(frozen=True)
class _Session:
    actions: AdjudicationActions
    ledger: Ledger

    def rows(self) -> list[CallUsage]:
        return list(self.ledger.rows)
