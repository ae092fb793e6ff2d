"""`clearmed compare`: finished runs side by side, optionally on the questions they all share, with paired tests
(their tables are `clearmed.report.markdown`'s).

Runs of different sizes are not comparable question for question: a 40-question variant against a 50-question
baseline differs by ten questions before it differs by program. Every run is summarized with this version's report
code (a summary.json written by an older one may count degraded questions otherwise). `--common` summarizes each run on
the question ids that are clean in every run of its benchmark (answered, no stage failed after its retries), so
no run is charged or excused for another's failures; the paired table is computed on the ids each run shares with
the first run of its benchmark. A degraded question counts wrong there as it does in accuracy
(`evaluation.summary.RunSummary`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from clearmed.backbones.config import BackboneConfig
from clearmed.evaluation.spend import Prices
from clearmed.evaluation.store import (
    MANIFEST,
    EvalRecord,
    RunManifest,
    RunStoreError,
    load_manifest,
    read_records,
    read_set_aside_degraded,
)
from clearmed.evaluation.summary import RunSummary, summarize
from clearmed.metrics import PairedComparison, paired_comparison


class ComparedRun(BaseModel):
    """One run folder as the comparison sees it."""

    model_config = ConfigDict(extra="forbid")

    label: str
    folder: str
    summary: RunSummary
    correct: dict[str, bool]  # question id -> scored correct, degraded ones wrong (unscored questions are absent)


def _correct(records: Sequence[EvalRecord]) -> dict[str, bool]:
    return {r.question_id: r.counted_correct for r in records if r.counted_correct is not None}


def snapshot_backbone(table: dict[str, object]) -> BackboneConfig:
    """A backbone of a run's config snapshot. The snapshot writes every field, embedded-only defaults included, and a
    remote backbone refuses those: fields at their default are dropped before validating."""
    fields = BackboneConfig.model_fields
    return BackboneConfig.model_validate(
        {key: value for key, value in table.items() if key not in fields or fields[key].default != value}
    )


def snapshot_prices(folder: Path) -> Prices | None:
    """The prices of the backbones a run folder's config snapshot names; None when it cannot be read."""
    try:
        snapshot = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        backbones = {role: snapshot_backbone(table) for role, table in snapshot["backbones"].items()}
        # Tavily's credit price as the run had it (runs from before it was priced: 0, as their records were).
        per_credit = float(snapshot.get("run", {}).get("tavily_usd_per_credit", 0.0))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ValidationError):
        return None
    return Prices(backbones, usd_per_credit=per_credit)


def _labels(folders: Sequence[Path]) -> list[str]:
    """Folder names, qualified by as many parents as tell two runs of one name apart (e.g. medqa/clear-n50-s0, or
    o3-mini/medqa/clear-n50-s0 beside qwen/medqa/clear-n50-s0: a suite's cells)."""
    names = [folder.name for folder in folders]
    labels = []
    for folder in folders:
        others = [f for f in folders if f.parts != folder.parts]
        depth = 1 if names.count(folder.name) == 1 else 2
        while depth < len(folder.parts) and any(f.parts[-depth:] == folder.parts[-depth:] for f in others):
            depth += 1
        labels.append("/".join(folder.parts[-depth:]))
    return labels


def load_runs(folders: Sequence[Path], *, common: bool = False) -> list[ComparedRun]:
    """Each finished run folder (one with a summary.json) summarized from its records; with `common`, any run folder,
    on the ids that are clean in every run of the same benchmark."""
    from clearmed.evaluation.spend_log import paid_calls  # it imports the programs' usage sink

    runs: list[tuple[Path, RunManifest, list[EvalRecord]]] = []
    for folder in folders:
        manifest = load_manifest(folder / MANIFEST)
        if not common and not (folder / "summary.json").is_file():
            raise RunStoreError(f"{folder}: no summary.json (is it a finished run folder?)")
        runs.append((folder, manifest, list(read_records(folder))))
    shared: dict[str, set[str]] = {}  # benchmark -> the ids clean in all of its runs
    if common:
        for _, manifest, records in runs:
            ids = {r.question_id for r in records if not r.degraded}
            benchmark = manifest.benchmark
            shared[benchmark] = shared[benchmark] & ids if benchmark in shared else ids
        empty = sorted(benchmark for benchmark, ids in shared.items() if not ids)
        if empty:
            raise RunStoreError(f"the {', '.join(empty)} runs share no question ids; compare them without --common")
    compared = []
    for (folder, manifest, records), label in zip(runs, _labels(folders), strict=True):
        set_aside = read_set_aside_degraded(folder)
        if common:
            ids = shared[manifest.benchmark]
            records = [r for r in records if r.question_id in ids]
            manifest = manifest.model_copy(update={"question_ids": [q for q in manifest.question_ids if q in ids]})
            set_aside = [r for r in set_aside if r.question_id in ids]
        # The whole run's dollars are its spend log's, as in its summary.json; a --common subset is priced from its
        # records (the log does not say which question a call served).
        paid = None if common else paid_calls(folder)
        summary = summarize(
            records, manifest, seed=manifest.seed, prices=snapshot_prices(folder), set_aside=set_aside, paid=paid
        )
        compared.append(ComparedRun(label=label, folder=str(folder), summary=summary, correct=_correct(records)))
    return compared


def paired_comparisons(runs: Sequence[ComparedRun]) -> list[PairedComparison]:
    """Each run against the first run of the same benchmark, on the scored questions both contain."""
    baselines: dict[str, ComparedRun] = {}
    pairs = []
    for run in runs:
        base = baselines.setdefault(run.summary.benchmark, run)
        if base is run:
            continue
        pair = paired_comparison(base.label, base.correct, run.label, run.correct)
        if pair.common:
            pairs.append(pair)
    return pairs
