"""Run folders as tables: `results_frame` (one row per question: what `clearmed export` writes) and `runs_frame` (one
row per run), each row naming its run.

Every row carries the run's label (`RunLabel`): its folder, program, benchmark, the model that answered (the
config's main backbone, or the model of pathways recorded by another run: MIRAGE's GPT-4 and GPT-3.5 runs are two
models though one config adjudicated both), the model of each backbone role (the run folder's config snapshot,
config.json), the config's name and digest and its `--set` overrides (a sweep's cell), the benchmark's revision, the
seed and the shard. So frames of several runs concatenate, and grouping by `model` keeps two models apart. Both frames take a run
folder, a suite's folder (every run folder below it: one holding a manifest.json, less the shards of a run merged
there), or a list of either, as `str` or `Path` (`run_folders`).

A question's row holds what each pathway answered, the route and the rule that decided, the answer against the gold,
the status, whether a stage failed after its retries, and the cost in dollars, seconds, LM calls and tokens. `correct`
follows the summary's rule (`clearmed.evaluation.summary`): a degraded answer counts wrong, and a question with no
score (free text with no judge, a rubric grade) has none, so the mean of the column over its scored rows is the run's
headline accuracy. A run's row holds the run's summary figures (accuracy with its Wilson interval, degraded questions,
dollars: the summary's, computed from the folder as `clearmed compare` does) and the sums of its questions' seconds,
calls and tokens. pandas is imported only to build a frame.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from clearmed.backbones.config import BACKBONE_ROLES
from clearmed.config import config_name
from clearmed.evaluation.shard import ids_digest
from clearmed.evaluation.spend import record_usd
from clearmed.evaluation.store import (
    MANIFEST,
    EvalRecord,
    RunManifest,
    RunStoreError,
    load_manifest,
    read_records,
)
from clearmed.evaluation.summary import RunSummary
from clearmed.numbers.compare import folder_summary, snapshot_prices
from clearmed.signatures.records import PATHWAYS, Answer

if TYPE_CHECKING:
    import pandas as pd

# What the frames take: a run folder or a suite's folder, or a list of them.
RunFolders = str | Path | Sequence[str | Path]


class RunLabel(BaseModel):
    """What names a run, first in every row. `model` is what answered: the config's main model (`config_model`), or,
    where pathways were recorded by another run (`eval --pathway`), the recorded pathways' models, with the config's
    main model after them when a pathway still ran live (" + " between them). The other models are the config
    snapshot's `model` of each role ([backbones.<role>]); `assessor_model` is the main model where no assessor is
    configured, as the program then assesses with it; a role the config lacks is None (no judge: free text unscored;
    `teacher_model` and `prompt_model` play only in `clearmed compile`). `overrides` are the run's `--set` values (a
    sweep's cell: "program.dynamic_k=4; program.local_k=3", one per key, sorted), None without any. `config` is the
    config file's stem, as a suite names its folders; `shard` is "K/N" for one shard of a run, else None. `recorded_pathways` names the pathways read from
    another run instead of asked of the model (`eval --pathway`: "local=FOLDER; parametric=FOLDER"), and `artifact`
    the compiled program's folder (`--program-artifact`): both change what answered, as the model does."""

    model_config = ConfigDict(extra="forbid")

    run: str
    program: str
    benchmark: str
    model: str | None
    config_model: str | None
    assessor_model: str | None
    judge_model: str | None
    teacher_model: str | None
    prompt_model: str | None
    config: str
    config_digest: str
    overrides: str | None
    revision: str | None
    seed: int
    shard: str | None
    recorded_pathways: str | None
    artifact: str | None


# A backbone role -> its column (a role added to BACKBONE_ROLES needs one: tests/evaluation/test_results_table.py).
ROLE_COLUMNS: dict[str, str] = {
    "main": "config_model",
    "assessor": "assessor_model",
    "judge": "judge_model",
    "teacher": "teacher_model",
    "prompt_model": "prompt_model",
}


class ResultRow(RunLabel):
    """One question of a run. Answers are shown as `Answer.display()` gives them: "A", "A,C", or the text."""

    index: int
    question_id: str
    answer_mode: str
    status: str
    answer: str | None
    gold: str | None
    correct: bool | None
    degraded: bool
    degraded_stages: str  # the stages that failed after their retries, comma-separated ("" when none)
    route: str | None
    deciding_rule: str | None
    confidence: str
    parametric_answer: str | None
    local_answer: str | None
    dynamic_answer: str | None
    followup_rounds: int
    rubric_score: float | None
    cost_usd: float | None  # None: some call's price is unknown (never counted as free)
    seconds: float
    lm_calls: int
    prompt_tokens: int
    completion_tokens: int
    error: str | None


class RunRow(RunLabel):
    """One run: its question counts and headline figures (`RunSummary`'s), and its questions' sums."""

    planned: int  # questions in the run's list
    n: int  # questions answered (a record in results.jsonl)
    scored: int  # questions with a score, the accuracy's denominator
    accuracy: float | None
    accuracy_low: float | None  # the 95% Wilson interval
    accuracy_high: float | None
    clean_accuracy: float | None  # over the questions no stage of which failed
    degraded: int
    cost_usd: float | None  # the run's dollars, degraded attempts a resume redid included; None: a price unknown
    seconds: float
    lm_calls: int
    prompt_tokens: int
    completion_tokens: int


COLUMNS: tuple[str, ...] = tuple(ResultRow.model_fields)
RUN_COLUMNS: tuple[str, ...] = tuple(RunRow.model_fields)


# ------------------------------------------------------------------------------------------------ which run folders


def run_folders(folders: RunFolders) -> list[Path]:
    """The run folders `folders` name: a run folder (one holding a manifest.json) as itself, any other folder as every
    run folder below it in path order, less the shard folders of a run merged below it too (a sharded suite cell's);
    a folder named twice, or one with no run in or below it, is one line (`RunStoreError`)."""
    given = [Path(folders)] if isinstance(folders, str | Path) else [Path(folder) for folder in folders]
    if not given:
        raise RunStoreError("give at least one run folder, or a suite's folder")
    found: list[Path] = []
    for folder in given:
        if (folder / MANIFEST).is_file():
            found.append(folder)
        elif not folder.is_dir():
            raise RunStoreError(f"{folder}: no such folder")
        elif below := _runs_below(folder):
            found.extend(below)
        else:
            raise RunStoreError(f"{folder}: no manifest.json in it or below it (is it a run folder, or a suite's?)")
    resolved = [folder.resolve() for folder in found]
    twice = sorted({str(folder) for folder in found if resolved.count(folder.resolve()) > 1})
    if twice:
        raise RunStoreError(f"run folder given twice: {', '.join(twice)}")
    return found


def _runs_below(root: Path) -> list[Path]:
    runs: list[Path] = []
    for here, subfolders, files in os.walk(root):
        if MANIFEST in files:
            runs.append(Path(here))
            subfolders.clear()  # a run folder's own folders (plots/, report/) hold no run
        subfolders.sort()
    manifests = {folder: load_manifest(folder / MANIFEST) for folder in sorted(runs)}
    # A merge writes the whole run's list and no shard; each of its shards records the digest of that list.
    merged = {_run_key(m, ids_digest(m.question_ids)) for m in manifests.values() if m.shard is None}
    return [
        folder for folder, m in manifests.items() if m.shard is None or _run_key(m, m.shard.ids_digest) not in merged
    ]


def _run_key(manifest: RunManifest, list_digest: str) -> tuple[str, ...]:
    return (manifest.program, manifest.benchmark, manifest.config_digest, str(manifest.seed), list_digest)


# ------------------------------------------------------------------------------------------------ the label


def run_label(run_dir: Path, manifest: RunManifest, records: Sequence[EvalRecord] = ()) -> RunLabel:
    """The label of a run folder: its manifest, the models its config snapshot names (None: none readable), and the
    model that answered (`answering_model`, from its `records`)."""
    models = _snapshot_models(run_dir)
    models.setdefault("assessor", models.get("main"))  # no [backbones.assessor]: the main model assesses
    shard = manifest.shard
    return RunLabel(
        run=str(run_dir),
        program=manifest.program,
        benchmark=manifest.benchmark,
        model=answering_model(manifest, records, models.get("main")),
        config=config_name(manifest.config_source),  # a rerun of a run folder's config: that folder's name
        config_digest=manifest.config_digest,
        overrides="; ".join(manifest.overrides) or None,
        revision=manifest.dataset_revision,
        seed=manifest.seed,
        shard=f"{shard.index}/{shard.count}" if shard is not None else None,
        recorded_pathways="; ".join(f"{name}={source}" for name, source in sorted(manifest.recorded_pathways.items()))
        or None,
        artifact=manifest.artifact,
        **{column: models.get(role) for role, column in ROLE_COLUMNS.items()},
    )


def answering_model(manifest: RunManifest, records: Sequence[EvalRecord], config_model: str | None) -> str | None:
    """The model whose answers a run holds: the config's main model; in a run over recorded pathways, the models the
    recorded candidates name (MIRAGE's "OpenAI/gpt-4-32k"), then the config's main model if a pathway ran live
    (neither recorded nor left out), joined by " + "."""
    if not manifest.recorded_pathways:
        return config_model
    recorded: dict[str, str] = {}
    for record in records:
        for candidate in record.decision.bundle.candidates:
            if candidate.recorded_from and candidate.model:
                recorded.setdefault(candidate.pathway, candidate.model)
    models = [recorded[pathway] for pathway in PATHWAYS if pathway in recorded]
    if config_model and any(pathway not in manifest.recorded_pathways for pathway in PATHWAYS):
        models.append(config_model)
    return " + ".join(dict.fromkeys(models)) or config_model


def _snapshot_models(run_dir: Path) -> dict[str, str | None]:
    """Role -> model of the folder's config snapshot, read as plain JSON: every clearmed version's snapshot names
    them so."""
    from clearmed.evaluation.folder import snapshot_of

    backbones = (snapshot_of(run_dir) or {}).get("backbones", {})
    try:
        return {role: str(table["model"]) for role, table in backbones.items() if role in BACKBONE_ROLES}
    except (KeyError, TypeError):
        return {}


# ------------------------------------------------------------------------------------------------ one row per question


def _shown(answer: Answer | None) -> str | None:
    return answer.display() if answer is not None else None


def _row(label: RunLabel, record: EvalRecord, cost_usd: float | None) -> ResultRow:
    decision, score = record.decision, record.score
    question = decision.bundle.question
    answered = {candidate.pathway: _shown(candidate.answer) for candidate in decision.bundle.candidates}
    lm_rows = [row for row in decision.usage if row.role != "tool"]
    return ResultRow(
        **label.model_dump(),
        index=record.index,
        question_id=record.question_id,
        answer_mode=question.answer_mode,
        status=decision.status,
        answer=_shown(decision.answer),
        gold=",".join(question.gold_letters) if question.gold_letters else question.gold_text,
        correct=record.counted_correct,
        degraded=record.degraded,
        degraded_stages=",".join(record.degraded_stages),
        route=decision.route,
        deciding_rule=decision.deciding_rule or None,
        confidence=decision.confidence,
        parametric_answer=answered.get("parametric"),
        local_answer=answered.get("local"),
        dynamic_answer=answered.get("dynamic"),
        followup_rounds=len(decision.bundle.followups),
        rubric_score=score.rubric_grade.score if score is not None and score.rubric_grade is not None else None,
        cost_usd=cost_usd,
        seconds=record.seconds,
        lm_calls=decision.lm_calls(),
        prompt_tokens=sum(row.prompt_tokens for row in lm_rows),
        completion_tokens=sum(row.completion_tokens for row in lm_rows),
        error=decision.error,
    )


@dataclass(frozen=True)
class _Run:
    folder: Path
    manifest: RunManifest
    label: RunLabel
    records: list[EvalRecord]
    rows: list[ResultRow]


def _read_run(run_dir: Path) -> _Run:
    manifest = load_manifest(run_dir / MANIFEST)
    records = sorted(read_records(run_dir), key=lambda record: record.index)
    label = run_label(run_dir, manifest, records)
    prices = snapshot_prices(run_dir)  # prices a record written before records carried dollars
    rows = [_row(label, record, record_usd(record, prices)) for record in records]
    return _Run(run_dir, manifest, label, records, rows)


def result_rows(folders: RunFolders) -> list[ResultRow]:
    """The rows of each run folder (`run_folders`), run by run, each in its manifest's order."""
    return [row for run_dir in run_folders(folders) for row in _read_run(run_dir).rows]


def results_frame(folders: RunFolders) -> pd.DataFrame:
    """A pandas DataFrame of run folders, one row per finished question (columns: `ResultRow`'s fields): a run folder,
    a suite's folder (all its runs) or a list of them, as `str` or `Path`."""
    return _frame(result_rows(folders), COLUMNS)


# ------------------------------------------------------------------------------------------------ one row per run


def rows_per_run(folders: RunFolders) -> list[RunRow]:
    """One row per run folder (`run_folders`)."""
    return [_run_row(_read_run(run_dir)) for run_dir in run_folders(folders)]


def runs_frame(folders: RunFolders) -> pd.DataFrame:
    """A pandas DataFrame with one row per run (columns: `RunRow`'s fields), of the folders `results_frame` takes."""
    return _frame(rows_per_run(folders), RUN_COLUMNS)


def _run_row(run: _Run) -> RunRow:
    summary = _summary(run)
    accuracy, clean, rows = summary.accuracy, summary.clean_accuracy, run.rows
    wilson = accuracy.wilson if accuracy is not None else None
    return RunRow(
        **run.label.model_dump(),
        planned=summary.planned,
        n=summary.evaluated,
        scored=accuracy.n if accuracy is not None else 0,
        accuracy=accuracy.accuracy if accuracy is not None else None,
        accuracy_low=wilson.low if wilson is not None else None,
        accuracy_high=wilson.high if wilson is not None else None,
        clean_accuracy=clean.accuracy if clean is not None else None,
        degraded=summary.degraded,
        cost_usd=summary.spend.usd if summary.spend is not None else None,
        seconds=sum(row.seconds for row in rows),
        lm_calls=sum(row.lm_calls for row in rows),
        prompt_tokens=sum(row.prompt_tokens for row in rows),
        completion_tokens=sum(row.completion_tokens for row in rows),
    )


def _summary(run: _Run) -> RunSummary:
    """The run's summary from its folder, as `clearmed compare` makes it."""
    return folder_summary(run.folder, run.manifest, run.records)


def _frame(rows: Sequence[BaseModel], columns: tuple[str, ...]) -> pd.DataFrame:
    import pandas as pd

    records: list[dict[str, Any]] = [row.model_dump() for row in rows]
    return pd.DataFrame(records, columns=list(columns))
