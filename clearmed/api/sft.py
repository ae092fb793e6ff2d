"""`export_teacher_traces`: the option-wise judge's validated traces from a teacher's eval runs, as chat JSONL for
supervised fine-tuning; the door of `clearmed export-sft`. `SftExportRequest` holds one field per option of the
command; the traces are validated and written by `optimize.teacher_traces.export_sft`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict

from clearmed.core.errors import UsageError

if TYPE_CHECKING:
    from clearmed.optimize.teacher_traces import ExportReport
    from clearmed.signatures.records import Decision, PathwayName


class SftExportRequest(BaseModel):
    """One field per `clearmed export-sft` option of the same name (`--run` is `run`, repeatable)."""

    model_config = ConfigDict(extra="forbid")

    run: list[str | Path]  # the teacher's eval run folders
    out: str | Path  # the JSONL file to write
    lambda_g: float = 0.0  # loss weight of the knowledge-graph segment, in [0, 1]
    pathways: str = "local,dynamic"  # whose judgements to export: local, dynamic or local,dynamic
    exclude_ids: str | Path | None = None  # a file of question ids (one per line) never to export, e.g. test ids


def export_teacher_traces(request: SftExportRequest | None = None, /, **fields: Any) -> ExportReport:
    """Write the request's traces; bad input (a folder that is no run, runs that truncated passages differently, an
    unknown pathway, a weight outside [0, 1], an unreadable id file) is one `UsageError` before anything is written."""
    from clearmed.optimize.teacher_traces import export_sft

    request = request if request is not None else SftExportRequest(**fields)
    runs = [Path(run) for run in request.run]
    for run in runs:
        if not (run / "results.jsonl").exists():
            raise UsageError(f"{run} is not a run folder (no results.jsonl)")
    words = {_passage_words(run) for run in runs}
    if len(words) > 1:
        raise UsageError(f"the runs truncated passages differently ({sorted(map(str, words))}); export them separately")
    names = tuple(request.pathways.split(","))
    if not names or any(p not in ("local", "dynamic") for p in names):
        raise UsageError("--pathways takes local, dynamic or local,dynamic")
    pathways = cast("tuple[PathwayName, ...]", names)
    if not 0.0 <= request.lambda_g <= 1.0:
        raise UsageError(f"--lambda-g must be in [0, 1], got {request.lambda_g}")
    return export_sft(
        _run_decisions(runs),
        Path(request.out),
        lambda_g=request.lambda_g,
        pathways=pathways,
        passage_words=words.pop(),
        exclude_ids=_read_ids(Path(request.exclude_ids) if request.exclude_ids else None),
    )


def _run_decisions(runs: list[Path]) -> Iterator[tuple[Decision, str]]:
    from clearmed.evaluation import read_records

    for run in runs:
        for record in read_records(run):
            yield record.decision, run.name


def _passage_words(run: Path) -> int | None:
    """The passage truncation the judge saw, from the run's resolved config (the export must show the same text)."""
    from clearmed.evaluation.folder import snapshot_of

    config = snapshot_of(run)
    if config is None:
        return None
    words = config.get("program", {}).get("passage_words")
    return int(words) if isinstance(words, int) else None


def _read_ids(path: Path | None) -> frozenset[str]:
    if path is None:
        return frozenset()
    try:
        return frozenset(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    except OSError as err:
        raise UsageError(f"cannot read --exclude-ids {path}: {err.strerror}") from None
