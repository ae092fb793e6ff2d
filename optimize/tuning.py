"""Optuna tuning of the adjudication `Thresholds` by replaying stored eval runs (`clearmed tune`).

Each trial proposes thresholds (TPE, seeded), and `Rescorer` re-scores the train ids of the stored runs
under them: zero LM calls where the records hold every judgement needed. The study lives in an Optuna
storage (SQLite by default, any database URL), so several workers can share it and `optuna-dashboard` can
watch it. The best thresholds go into an artifact folder with the study summary and the ids used.

The unanimity fast path is a boolean parameter like the others, and is kept in the result only when, with
everything else fixed at the best trial, turning it on costs no accuracy on the train ids.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import optuna
from pydantic import BaseModel, ConfigDict, Field

from clearmed.core.errors import UsageError
from clearmed.optimize.pool_fit import (
    MIN_BINDING_QUESTIONS,
    PooledWeights,
    binding_shortfall,
    weights_by_likelihood,
)
from clearmed.optimize.rescore import CostUnit, OnMiss, Rescorer, TrialScore
from clearmed.optimize.splits import UsedIds, refuse_seen_as_test
from clearmed.optimize.verifier_fit import LearnedFit, fit_learned, learned_items
from clearmed.signatures.records import Thresholds


@dataclass(frozen=True)
class _Param:
    """One tunable group: how to suggest it, and its paper-default trial values."""

    suggest: Callable[[optuna.Trial], dict[str, object]]
    defaults: dict[str, object]


def _int(name: str, low: int, high: int, default: int) -> _Param:
    return _Param(lambda trial: {name: trial.suggest_int(name, low, high)}, {name: default})


def _categorical(name: str, choices: Sequence[object], default: object) -> _Param:
    return _Param(lambda trial: {name: trial.suggest_categorical(name, list(choices))}, {name: default})  # type: ignore[arg-type]


# Name -> parameter group.
PARAMETERS: dict[str, _Param] = {
    "guard_min_high": _int("guard_min_high", 0, 3, 1),
    "audit_min_high": _int("audit_min_high", 0, 3, 1),
    "audit_min_medium": _int("audit_min_medium", 0, 4, 2),
    "max_followup_rounds": _int("max_followup_rounds", 0, 2, 1),
    "unanimity_fast_path": _categorical("unanimity_fast_path", [False, True], False),
    # The calibrated verifier's four pooling weights, fitted by maximum likelihood on the train records before the
    # study (`fitted_base`, `optimize.pool_fit`), not searched: nothing for a trial to suggest. (Searching them for
    # train accuracy, the removed `calibrated_weights` group, lost on held-out ids: docs/results.md.)
    "calibrated_fit": _Param(lambda trial: {}, {}),
    # Evidence binding's two betas, fitted jointly with the four pooling weights (implies calibrated_fit) from the
    # passage-only scores the train records hold (`[program] evidence_binding`): no LM call (`optimize.pool_fit`).
    "binding_fit": _Param(lambda trial: {}, {}),
    # The learned verifier (`verifier_mode = "learned"`): a logistic model over the competing answers' features,
    # fitted on the train records (`optimize.verifier_fit`) and written to the artifact's learned.json.
    "learned_fit": _Param(lambda trial: {}, {}),
}


# With no --params: the likelihood fit of the pooling weights, the one tuning measured to do no harm
# (docs/results.md: searching thresholds for train accuracy won questions by luck and lost them on held-out ids).
DEFAULT_PARAMETERS: tuple[str, ...] = ("calibrated_fit",)


def parse_params(raw: str | None) -> list[str]:
    """`--params a,b`: the parameter groups to tune (default: `DEFAULT_PARAMETERS`)."""
    if not raw:
        return list(DEFAULT_PARAMETERS)
    names = [name.strip() for name in raw.split(",") if name.strip()]
    unknown = [name for name in names if name not in PARAMETERS]
    if unknown:
        raise UsageError(f"--params: unknown parameter {unknown[0]!r}; choose from {', '.join(PARAMETERS)}")
    return [name for name in PARAMETERS if name in names]  # in the table's order


def thresholds_from(values: dict[str, object], base: Thresholds) -> Thresholds:
    """Thresholds from trial values (study parameter names, as suggested, or a finished trial's) over `base`."""
    return Thresholds.model_validate({**base.model_dump(), **values})


class TuneSettings(BaseModel):
    """What a study optimises: the same in every worker sharing it (checked through the study's attrs)."""

    model_config = ConfigDict(extra="forbid")

    params: list[str]
    on_miss: OnMiss = "keep-original"
    cost_weight: float = Field(default=0.0, ge=0.0)
    cost_unit: CostUnit = "calls"
    seed: int = 0
    live: bool = False

    def fingerprint(self, train_ids: Sequence[str]) -> str:
        payload = self.model_dump_json(exclude={"seed", "live"}) + "|" + ",".join(sorted(train_ids))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


class UnanimityCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    accuracy_with: float
    accuracy_without: float
    mean_calls_with: float
    mean_calls_without: float
    kept: bool


class HeldOut(BaseModel):
    """Scores on the held-out test ids (never seen by the study), best against paper defaults."""

    model_config = ConfigDict(extra="forbid")

    ids: int
    best: TrialScore
    paper_defaults: TrialScore


class TuneSummary(BaseModel):
    """study.json of a tune artifact."""

    model_config = ConfigDict(extra="forbid")

    study_name: str
    storage: str
    settings: TuneSettings
    trials_this_run: int
    trials_in_study: int
    seconds: float
    best_trial: int
    best_value: float
    best_params: dict[str, object]
    best_train: TrialScore
    paper_defaults_value: float
    paper_defaults_train: TrialScore
    recorded_train_accuracy: float
    unanimity: UnanimityCheck | None
    train_ids: int
    held_out: HeldOut | None
    pool_fit: PooledWeights | None = None
    learned_fit: LearnedFit | None = None
    thresholds: Thresholds


def _paper_trial(params: Sequence[str]) -> dict[str, object]:
    trial: dict[str, object] = {}
    for name in params:
        trial.update(PARAMETERS[name].defaults)
    return trial


def _objective(
    rescorer: Rescorer, params: Sequence[str], train: set[str], base: Thresholds
) -> Callable[[optuna.Trial], float]:
    def objective(trial: optuna.Trial) -> float:
        values: dict[str, object] = {}
        for name in params:
            values.update(PARAMETERS[name].suggest(trial))
        score = rescorer.score(thresholds_from(values, base), train)
        trial.set_user_attr("accuracy", score.accuracy)
        trial.set_user_attr("mean_calls", score.mean_calls)
        trial.set_user_attr("mean_seconds", score.mean_seconds)
        trial.set_user_attr("misses", score.misses)
        return score.objective

    return objective


MIN_POOL_FIT_QUESTIONS = 20  # fewer, and the fit mostly memorises their answers


@dataclass(frozen=True)
class FittedBase:
    """The thresholds every trial starts from, and the pooling-weight fit among them (when tuned)."""

    thresholds: Thresholds
    pool_fit: PooledWeights | None = None
    learned_fit: LearnedFit | None = None


def fitted_base(rescorer: Rescorer, params: Sequence[str], train: set[str], skip: Sequence[str] = ()) -> FittedBase:
    """The paper's thresholds plus what is fitted rather than searched, from the train ids' records only: with
    `calibrated_fit`, the four pooling weights; with `learned_fit`, the learned verifier (refused if a `skip` id,
    a held-out one, is among them; withheld, so that it falls back on every question, unless its repeated grouped
    cross-validation beats the deterministic verifier: `verifier_fit.ship_verdict`)."""
    items = [item for item in rescorer.items if item.question_id in train and not item.static]
    base = Thresholds()
    pool_fit = None
    if "calibrated_fit" in params or "binding_fit" in params:
        binding = "binding_fit" in params
        pool_fit = weights_by_likelihood((item.decision for item in items), binding=binding)
        if pool_fit.questions < MIN_POOL_FIT_QUESTIONS:
            raise UsageError(
                f"--params calibrated_fit: {pool_fit.questions} train questions have scored pathway distributions; "
                f'the fit needs at least {MIN_POOL_FIT_QUESTIONS} (record the runs with mcq_decoding = "score")'
            )
        if binding and pool_fit.bound_questions < MIN_BINDING_QUESTIONS:
            raise UsageError(binding_shortfall(pool_fit.bound_questions))
        base = base.model_copy(update=pool_fit.weights)
    learned_fit = None
    if "learned_fit" in params:
        pairs = [(item.decision.bundle.initial(), item.decision.agreement) for item in items]
        learned_fit = fit_learned(learned_items((b, a) for b, a in pairs if a is not None), skip_ids=skip)
        if learned_fit.withheld:  # it did not beat the deterministic verifier on its own pilot: it decides nothing
            model = learned_fit.model.model_copy(update={"withheld": learned_fit.withheld})
            learned_fit = learned_fit.model_copy(update={"model": model})
    return FittedBase(base, pool_fit, learned_fit)


def _sqlite_connector(path: str) -> Callable[[], sqlite3.Connection]:
    def connect() -> sqlite3.Connection:
        connection = sqlite3.connect(path, timeout=60, check_same_thread=False)
        # WAL with synchronous=NORMAL: no fsync per commit. A trial is a dozen small commits, and an fsync each
        # made 200 trials take minutes on a busy disk; WAL still lets several workers and a dashboard share it.
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        return connection

    return connect


def make_storage(url: str | None) -> optuna.storages.BaseStorage | None:
    """An Optuna storage for a database URL (None: in memory). SQLite files get WAL journaling."""
    if url is None:
        return None
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # not a database URL: let Optuna say what it accepts
        return optuna.storages.get_storage(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
        return optuna.storages.RDBStorage(url, engine_kwargs={"creator": _sqlite_connector(parsed.database)})
    return optuna.storages.RDBStorage(url)


def open_study(study_name: str, storage: str | None, seed: int) -> optuna.Study:
    sampler = optuna.samplers.TPESampler(seed=seed)
    try:
        return optuna.create_study(
            study_name=study_name,
            storage=make_storage(storage),
            sampler=sampler,
            direction="maximize",
            load_if_exists=True,
        )
    except Exception as err:  # bad URL, missing driver, unreachable server: one line, password masked
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UsageError(f"cannot open the Optuna storage {redact_storage(storage)}: {message}") from None


def redact_storage(storage: str | None) -> str:
    """A storage URL fit for an artifact: any password in it is masked."""
    if storage is None:
        return "in-memory"
    try:
        from sqlalchemy.engine import make_url

        return make_url(storage).render_as_string(hide_password=True)
    except Exception:  # not an SQLAlchemy URL (e.g. a journal file): no credentials to hide
        return storage


def tune(
    rescorer: Rescorer,
    ids: UsedIds,
    settings: TuneSettings,
    *,
    n_trials: int,
    study_name: str,
    storage: str | None,
    timeout: float | None = None,
) -> TuneSummary:
    """Run `n_trials` trials (adding to any shared study), then summarise the study's best trial."""
    if n_trials < 0:
        raise UsageError(f"--trials must be >= 0, got {n_trials}")
    train = set(ids.train)
    refuse_seen_as_test(ids.test, train)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(study_name, storage, settings.seed)
    fingerprint = settings.fingerprint(ids.train)
    recorded = study.user_attrs.get("fingerprint")
    if recorded is None:
        study.set_user_attr("fingerprint", fingerprint)
        study.set_user_attr("settings", settings.model_dump(mode="json"))
        study.set_user_attr("train_ids", len(ids.train))
    elif recorded != fingerprint:
        raise UsageError(f"study {study_name!r} was started with other train ids or settings; use another --study-name")
    if not study.trials:
        study.enqueue_trial(_paper_trial(settings.params))  # the paper's defaults are always trial 0
    fitted = fitted_base(rescorer, settings.params, train, ids.test)
    base = fitted.thresholds
    started = time.perf_counter()
    if n_trials:
        study.optimize(_objective(rescorer, settings.params, train, base), n_trials=n_trials, timeout=timeout)
    seconds = time.perf_counter() - started
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        raise UsageError(f"study {study_name!r} has no finished trial yet; run with --trials > 0")
    best = study.best_trial
    paper = Thresholds()
    thresholds = thresholds_from(best.params, base)
    unanimity = None
    if "unanimity_fast_path" in settings.params:
        thresholds, unanimity = _settle_fast_path(rescorer, thresholds, train)
    paper_train = rescorer.score(paper, train)
    held_out = None
    if ids.test:
        test = set(ids.test)
        held_out = HeldOut(
            ids=len(test), best=rescorer.score(thresholds, test), paper_defaults=rescorer.score(paper, test)
        )
    recorded_correct = sum(item.original_correct for item in rescorer.items if item.question_id in train)
    return TuneSummary(
        study_name=study_name,
        storage=redact_storage(storage),
        settings=settings,
        trials_this_run=n_trials,
        trials_in_study=len(complete),
        seconds=round(seconds, 3),
        best_trial=best.number,
        best_value=float(best.value),  # type: ignore[arg-type]
        best_params=dict(best.params),
        best_train=rescorer.score(thresholds, train),
        paper_defaults_value=paper_train.objective,
        paper_defaults_train=paper_train,
        recorded_train_accuracy=recorded_correct / max(1, paper_train.n),
        unanimity=unanimity,
        train_ids=len(train),
        held_out=held_out,
        pool_fit=fitted.pool_fit,
        learned_fit=fitted.learned_fit,
        thresholds=thresholds,
    )


def _settle_fast_path(rescorer: Rescorer, best: Thresholds, train: set[str]) -> tuple[Thresholds, UnanimityCheck]:
    """Keep the unanimity fast path only where it costs no accuracy (everything else as in the best trial)."""
    with_it = rescorer.score(best.model_copy(update={"unanimity_fast_path": True}), train)
    without = rescorer.score(best.model_copy(update={"unanimity_fast_path": False}), train)
    kept = with_it.accuracy >= without.accuracy
    check = UnanimityCheck(
        accuracy_with=with_it.accuracy,
        accuracy_without=without.accuracy,
        mean_calls_with=with_it.mean_calls,
        mean_calls_without=without.mean_calls,
        kept=kept,
    )
    return best.model_copy(update={"unanimity_fast_path": kept}), check
