"""`tune_thresholds`: the adjudication thresholds tuned with Optuna by replaying stored eval runs (no new LM calls
unless `live`), the door of `clearmed tune`. `TuneRequest` holds one field per option of the command; the tuned
thresholds, the study's summary and (tuned on runs of a compiled program) its prompts go into one artifact folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from clearmed.config import ClearmedConfig
from clearmed.core.console import user_console
from clearmed.core.errors import UsageError

if TYPE_CHECKING:
    from clearmed.optimize.artifacts import ProgramArtifact
    from clearmed.optimize.rescore import LoadedRuns, ReplayItem, Rescorer
    from clearmed.optimize.splits import UsedIds
    from clearmed.optimize.tuning import TuneSummary


class TuneRequest(BaseModel):
    """One field per `clearmed tune` option of the same name (`--run` is `run`, a list; `-c` is `config`, `--set`
    is `overrides`)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    run: list[str | Path]  # finished eval run folders
    out: str | Path  # the artifact folder for the tuned thresholds and the study summary
    trials: int = 100  # trials to run in this process
    timeout: float | None = None  # stop starting trials after this many seconds
    seed: int = 0  # TPE seed and train/test split seed
    storage: str | None = None  # Optuna storage URL (default: sqlite:///<out>/optuna.db)
    study_name: str = "clearmed-thresholds"
    params: str | None = None  # comma-separated parameters (default: optimize.tuning.DEFAULT_PARAMETERS)
    learned_out_of_domain: Literal["fallback", "refuse"] = "fallback"
    on_miss: Literal["keep-original", "penalize"] = "keep-original"
    live: bool = False  # ask the LM (cached) for branches the records lack
    program_artifact: str | Path | None = None  # the compile artifact the runs were made with
    config: ClearmedConfig | str | Path | None = None  # default: the first run's config
    overrides: list[str] = []
    cost_weight: float = 0.0  # objective = accuracy - weight * cost
    cost_unit: Literal["calls", "seconds"] = "calls"
    train_ids: str | Path | None = None  # a file of ids to tune on
    train_fraction: float | None = None  # tune on this seeded fraction of the ids
    test_ids: str | Path | None = None  # a file of held-out ids to report on


@dataclass(frozen=True)
class Tuned:
    """What a tune wrote: the artifact folder and the study's summary."""

    out: Path
    summary: TuneSummary


def tune_parameter_names() -> tuple[list[str], list[str]]:
    """The parameter groups `tune --params` takes, and those it tunes when not told (`optimize.tuning`)."""
    from clearmed.optimize.tuning import DEFAULT_PARAMETERS, PARAMETERS

    return list(PARAMETERS), list(DEFAULT_PARAMETERS)


def tune_thresholds(request: TuneRequest | None = None, /, **fields: Any) -> Tuned:
    """Tune and write the artifact: `tune_thresholds(TuneRequest(...))` or its fields as keywords
    (`clearmed.tune(run=["runs/x"], out="tuned")`). What it tunes on is said on stderr."""
    from clearmed.optimize.rescore import load_items
    from clearmed.optimize.splits import question_groups, question_key_digest, refuse_seen_as_test, split_ids
    from clearmed.optimize.tuning import TuneSettings, parse_params, redact_storage, tune

    if request is None:
        request = TuneRequest(**fields)
    elif fields:
        raise UsageError("give a request or its fields as keywords, not both")
    if not request.run:
        raise UsageError("give at least one finished eval run folder (--run)")
    if request.cost_weight < 0:
        raise UsageError(f"--cost-weight must be >= 0, got {request.cost_weight}")
    params = parse_params(request.params)
    out, compiled = _out_and_compiled(request)
    items, loaded = load_items([str(run) for run in request.run])
    groups = question_groups(item.question for item in items)  # a question repeated under two ids: one side
    ids = split_ids(
        [item.question_id for item in items],
        train_ids=_ids(request.train_ids),
        test_ids=_ids(request.test_ids),
        train_fraction=request.train_fraction,
        seed=request.seed,
        groups=groups,
    )
    train = set(ids.train)
    ids.seen_keys = sorted({question_key_digest(item.question) for item in items if item.question_id in train})
    if compiled is not None:
        refuse_seen_as_test(ids.test, compiled.ids.seen(), what="compiling the program")
    config = _run_config(request)
    rescorer = _rescorer(request, items, config)
    settings = TuneSettings(
        params=params,
        on_miss=request.on_miss,
        cost_weight=request.cost_weight,
        cost_unit=request.cost_unit,
        seed=request.seed,
        live=request.live,
    )
    out.mkdir(parents=True, exist_ok=True)
    storage = request.storage or f"sqlite:///{(out / 'optuna.db').resolve()}"
    user_console(stderr=True).print(
        f"tuning {', '.join(params)} on {len(ids.train)} train ids ({len(ids.test)} held out) "
        f"from {loaded.records} records ({loaded.skipped_unscored} unscored skipped); "
        f"study {request.study_name!r} in {redact_storage(storage)}"
    )
    summary = tune(
        rescorer,
        ids,
        settings,
        n_trials=request.trials,
        study_name=request.study_name,
        storage=storage,
        timeout=request.timeout,
    )
    if summary.learned_fit is not None:  # where the fit does not apply: fall back (recorded) or refuse the question
        fit = summary.learned_fit
        model = fit.model.model_copy(update={"out_of_domain": request.learned_out_of_domain})
        summary = summary.model_copy(update={"learned_fit": fit.model_copy(update={"model": model})})
    _write_tune_artifact(out, summary, compiled, loaded, config, ids)
    return Tuned(out=out, summary=summary)


def _run_config(request: TuneRequest) -> ClearmedConfig:
    """The config whose priors (and, with --live, LMs) replay uses: -c, else the first run's config.json."""
    from clearmed.numbers.compare import snapshot_backbone

    if request.config or request.overrides:
        from clearmed.api.config_choice import request_config

        return request_config(request)
    from clearmed.evaluation.folder import SNAPSHOT, snapshot_of

    path = Path(request.run[0]) / SNAPSHOT
    data = snapshot_of(request.run[0])
    if data is None:
        raise UsageError(f"{path}: missing or unreadable; pass -c/--config with the config the run used")
    try:
        for name, table in dict(data.get("backbones") or {}).items():
            if isinstance(table, dict):  # the snapshot's embedded-only defaults dropped (`snapshot_backbone`)
                data["backbones"][name] = snapshot_backbone(table)
        return ClearmedConfig.model_validate(data)
    except ValidationError as err:
        first = str(err).splitlines()[0]
        raise UsageError(f"{path}: not a config this version reads ({first}); pass -c/--config") from None


def _ids(path: str | Path | None) -> list[str] | None:
    from clearmed.api.questions import read_id_file

    return read_id_file(path) if path else None


def _out_and_compiled(request: TuneRequest) -> tuple[Path, ProgramArtifact | None]:
    """The artifact folder (never a compile artifact's), and the compile artifact the runs were made with, if any."""
    from clearmed.optimize.artifacts import MANIFEST, load_artifact

    out = Path(request.out)
    if (out / MANIFEST).exists() and load_artifact(out).manifest.kind != "tune":
        raise UsageError(f"{out} holds a compiled program artifact; choose another --out")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file, not a folder")
    compiled = load_artifact(request.program_artifact) if request.program_artifact else None
    if compiled is not None and compiled.program_state is None:
        raise UsageError(f"{request.program_artifact}: holds no compiled program (program.json) to carry")
    return out, compiled


def _rescorer(request: TuneRequest, items: list[ReplayItem], config: ClearmedConfig) -> Rescorer:
    from clearmed.optimize.rescore import LiveSession, Rescorer

    live = None
    if request.live:
        from clearmed.api.assemble import build_clear

        live = LiveSession(build_clear(config))
    return Rescorer(
        items,
        on_miss=request.on_miss,
        cost_weight=request.cost_weight,
        cost_unit=request.cost_unit,
        live=live,
    )


def _write_tune_artifact(
    out: Path,
    summary: TuneSummary,
    compiled: ProgramArtifact | None,
    loaded: LoadedRuns,
    config: ClearmedConfig,
    ids: UsedIds,
) -> None:
    """Tuned on runs of a compiled program: one artifact carries both, so `--program-artifact` loads them together."""
    from clearmed.optimize.artifacts import new_manifest, write_artifact

    state = compiled.program_state if compiled is not None else None
    optimizer = "optuna-tpe" if compiled is None else f"{compiled.manifest.optimizer}+optuna-tpe"
    manifest = new_manifest(
        "tune", loaded.programs[0], config, benchmark=None, optimizer=optimizer, has_program_state=state is not None
    )
    if compiled is not None:  # the prompts were optimised on the compile ids: they count as seen, never as test
        ids = ids.model_copy(update={"train": list(dict.fromkeys([*ids.train, *compiled.ids.seen()]))})
    reports = {"study.json": summary.model_dump_json(indent=2), "runs.json": loaded.model_dump_json(indent=2)}
    learned = summary.learned_fit.model if summary.learned_fit is not None else None
    write_artifact(
        out,
        manifest,
        thresholds=summary.thresholds,
        ids=ids,
        config=config,
        program_state=state,
        reports=reports,
        learned=learned,
    )
