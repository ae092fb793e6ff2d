"""`clearmed compare`: finished runs side by side, optionally on the questions they all share, with paired tests
(their tables are `clearmed.report.markdown`'s).

Runs of different sizes are not comparable question for question: a 40-question variant against a 50-question
baseline differs by ten questions before it differs by program. Every run is summarized with this version's report
code (a summary.json written by an older one may count degraded questions otherwise). `--common` summarizes each run on
the question ids that are clean in every run of its benchmark (answered, no stage failed after its retries), so
no run is charged or excused for another's failures; the paired table is computed on the ids each run shares with
its baseline: the first run of its benchmark, a chosen `--baseline`, or each earlier run with `--all-pairs`. A
degraded question counts wrong there as it does in accuracy (`evaluation.summary.RunSummary`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from clearmed.backbones.config import BackboneConfig
from clearmed.core.errors import UsageError
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
from clearmed.metrics import PairedComparison, holm_adjust, paired_comparison


class ComparedRun(BaseModel):
    """One run folder as the comparison sees it, named by what produced it as `results_frame` names it (`RunLabel`):
    the model that answered, the config, its `--set` overrides and the seed."""

    model_config = ConfigDict(extra="forbid")

    label: str
    folder: str
    model: str | None = None
    config: str = ""
    overrides: str | None = None
    seed: int = 0
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
    from clearmed.evaluation.folder import snapshot_of

    snapshot = snapshot_of(folder)
    if snapshot is None:
        return None
    try:
        backbones = {role: snapshot_backbone(table) for role, table in snapshot["backbones"].items()}
        # Tavily's credit price as the run had it (runs from before it was priced: 0, as their records were).
        per_credit = float(snapshot.get("run", {}).get("tavily_usd_per_credit", 0.0))
    except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
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


def folder_summary(
    folder: Path,
    manifest: RunManifest,
    records: Sequence[EvalRecord],
    *,
    set_aside: Sequence[EvalRecord] | None = None,
    whole: bool = True,
) -> RunSummary:
    """A run's summary made again from its folder, as its summary.json has it: degraded attempts a resume set aside
    counted, and the whole run's dollars its spend log's. A subset of its questions (`whole` false: `--common`) is
    priced from its records, since the log does not say which question a call served."""
    from clearmed.evaluation.spend_log import paid_calls  # it imports the programs' usage sink

    return summarize(
        records,
        manifest,
        seed=manifest.seed,
        prices=snapshot_prices(folder),
        set_aside=read_set_aside_degraded(folder) if set_aside is None else set_aside,
        paid=paid_calls(folder) if whole else None,
    )


def load_runs(folders: Sequence[Path], *, common: bool = False) -> list[ComparedRun]:
    """Each finished run folder (one with a summary.json) summarized from its records; with `common`, any run folder,
    on the ids that are clean in every run of the same benchmark."""
    from clearmed.numbers.results_table import run_label  # it builds on this module's summaries

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
        named = run_label(folder, manifest, records)
        set_aside = read_set_aside_degraded(folder)
        if common:
            ids = shared[manifest.benchmark]
            records = [r for r in records if r.question_id in ids]
            manifest = manifest.model_copy(update={"question_ids": [q for q in manifest.question_ids if q in ids]})
            set_aside = [r for r in set_aside if r.question_id in ids]
        summary = folder_summary(folder, manifest, records, set_aside=set_aside, whole=not common)
        compared.append(
            ComparedRun(
                label=label,
                folder=str(folder),
                model=named.model,
                config=named.config,
                overrides=named.overrides,
                seed=named.seed,
                summary=summary,
                correct=_correct(records),
            )
        )
    return compared


Pairing = Literal["first", "baseline", "all"]


class Comparison(BaseModel):
    """Runs side by side and their paired comparisons, as `clearmed compare` writes them.

    `pairing` says which pairs were made (each run against the first run of its benchmark, against a chosen
    `baseline`, or all pairs of a benchmark); `multiplicity` is how many, and with more than one each pair carries a
    Holm-adjusted p over all of them (`clearmed.metrics.holm_adjust`)."""

    model_config = ConfigDict(extra="forbid")

    runs: list[ComparedRun]
    pairs: list[PairedComparison]
    pairing: Pairing = "first"
    baseline: str | None = None  # the chosen baseline's label (pairing "baseline")
    common: bool = False  # summarized on the ids clean in every run of a benchmark

    @property
    def multiplicity(self) -> int:
        return len(self.pairs)


def paired_comparisons(
    runs: Sequence[ComparedRun], *, baseline: str | None = None, all_pairs: bool = False
) -> list[PairedComparison]:
    """Each run against the first run of the same benchmark (or against the run labelled `baseline`, or every pair
    of runs of a benchmark with `all_pairs`, the earlier run the baseline), on the scored questions both contain.
    With more than one pair, each carries its Holm-adjusted p over all of them."""
    if baseline is not None and all_pairs:
        raise UsageError("give --baseline or --all-pairs, not both")
    candidates = [(base, run) for i, run in enumerate(runs) for base in _baselines(runs, i, baseline, all_pairs)]
    pairs = [paired_comparison(base.label, base.correct, run.label, run.correct) for base, run in candidates]
    pairs = [pair for pair in pairs if pair.common]
    if len(pairs) > 1:
        adjusted = holm_adjust([pair.mcnemar_p for pair in pairs])
        pairs = [pair.model_copy(update={"holm_p": p}) for pair, p in zip(pairs, adjusted, strict=True)]
    return pairs


def _baselines(runs: Sequence[ComparedRun], index: int, baseline: str | None, all_pairs: bool) -> list[ComparedRun]:
    """The runs that run `index` is paired against (as the other run): earlier runs of its benchmark."""
    run = runs[index]
    same = [r for r in runs[:index] if r.summary.benchmark == run.summary.benchmark]
    if all_pairs:
        return same
    if baseline is None:
        return same[:1]
    chosen = [r for r in runs if r.label == baseline]
    if not chosen:
        raise UsageError(f"--baseline {baseline} is none of the runs compared ({', '.join(r.label for r in runs)})")
    base = chosen[0]
    if base.summary.benchmark != run.summary.benchmark:
        raise UsageError(
            f"--baseline {baseline} is on {base.summary.benchmark}, {run.label} on {run.summary.benchmark}: "
            "compare each benchmark apart"
        )
    return [] if base is run else [base]


def compare(
    folders: Sequence[Path], *, common: bool = False, baseline: Path | None = None, all_pairs: bool = False
) -> Comparison:
    """The runs in `folders` (`load_runs`) and their pairs (`paired_comparisons`); `baseline` is one of the folders
    (a folder not among them is compared first)."""
    folders = list(folders)
    if baseline is not None and not any(_same_folder(baseline, folder) for folder in folders):
        folders.insert(0, baseline)
    runs = load_runs(folders, common=common)
    chosen = None
    if baseline is not None:
        chosen = next(run.label for run, f in zip(runs, folders, strict=True) if _same_folder(baseline, f))
    pairing: Pairing = "all" if all_pairs else "baseline" if baseline is not None else "first"
    pairs = paired_comparisons(runs, baseline=chosen, all_pairs=all_pairs)
    return Comparison(runs=runs, pairs=pairs, pairing=pairing, baseline=chosen, common=common)


def _same_folder(one: Path, other: Path) -> bool:
    return one.resolve() == other.resolve()
