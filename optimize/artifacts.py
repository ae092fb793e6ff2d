"""Optimized-program artifacts: what `clearmed compile` and `clearmed tune` write, and `--program-artifact` loads.

An artifact folder holds

    manifest.json    what it is: kind (compile/tune), program, optimizer, backbone labels, versions
    program.json     the DSPy state of every predictor (instructions, demos); compile artifacts only
    thresholds.json  the adjudication Thresholds
    config.json      the resolved config it was made with (key variable names only, never keys)
    ids.json         the question ids the optimizer saw (train, val) and any held-out test ids
    learned.json     the learned verifier's fitted model (`verifier_mode = "learned"`); tune artifacts with
                     `--params learned_fit` only
    scores.json / study.json   what the optimizer measured

LMs are never part of an artifact: predictors are saved with no LM and loaded onto a program whose LMs come
from the config, so an artifact moves between backbones (with a warning when the backbone differs from the
one it was optimized on).
"""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import dspy
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clearmed.config import ClearmedConfig
from clearmed.core.errors import UsageError
from clearmed.core.version import __version__
from clearmed.optimize.splits import UsedIds, question_key_digest
from clearmed.programs.adjudication.learned import LearnedModel
from clearmed.signatures.records import Question, Thresholds

logger = logging.getLogger("clearmed.optimize")

MANIFEST = "manifest.json"
PROGRAM = "program.json"
THRESHOLDS = "thresholds.json"
CONFIG = "config.json"
IDS = "ids.json"
LEARNED = "learned.json"

ArtifactKind = Literal["compile", "tune"]


class ArtifactManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: ArtifactKind
    program: str
    created: str
    clearmed_version: str
    dspy_version: str
    backbone: str = Field(description="the main backbone it was optimized on, kind:model")
    roles: dict[str, str] = Field(default_factory=dict, description="every configured role's backbone label")
    config_source: str = ""
    config_digest: str = ""
    benchmark: str | None = None
    optimizer: str | None = None
    stages: list[str] = Field(default_factory=list, description="predictors the optimizer could change")
    has_program_state: bool = False


@dataclass(frozen=True)
class ProgramArtifact:
    path: Path
    manifest: ArtifactManifest
    thresholds: Thresholds
    ids: UsedIds
    learned: LearnedModel | None = None

    @property
    def program_state(self) -> Path | None:
        path = self.path / PROGRAM
        return path if self.manifest.has_program_state and path.is_file() else None


def backbone_labels(config: ClearmedConfig) -> dict[str, str]:
    return {role: f"{cfg.kind}:{cfg.model}" for role, cfg in sorted(config.backbones.items())}


def new_manifest(
    kind: ArtifactKind,
    program: str,
    config: ClearmedConfig,
    *,
    benchmark: str | None = None,
    optimizer: str | None = None,
    stages: list[str] | None = None,
    has_program_state: bool = False,
) -> ArtifactManifest:
    from clearmed.evaluation.folder import config_digest

    labels = backbone_labels(config)
    return ArtifactManifest(
        kind=kind,
        program=program,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        clearmed_version=__version__,
        dspy_version=dspy.__version__,
        backbone=labels.get("main", ""),
        roles=labels,
        config_source=config.source,
        config_digest=config_digest(config),
        benchmark=benchmark,
        optimizer=optimizer,
        stages=stages or [],
        has_program_state=has_program_state,
    )


def _write(path: Path, text: str) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def prepare_out_dir(out: str | Path) -> Path:
    """The artifact folder, refused when it already holds an artifact (one folder, one artifact)."""
    folder = Path(out)
    if (folder / MANIFEST).exists():
        raise UsageError(f"{folder} already holds an artifact; choose another --out")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is a file, not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save_program_state(program: dspy.Module, path: Path) -> None:
    """DSPy state of every predictor, with no LM: LMs always come from the config."""
    for _, predictor in program.named_predictors():
        predictor.lm = None
    program.save(str(path))


def write_artifact(
    out: Path,
    manifest: ArtifactManifest,
    *,
    thresholds: Thresholds,
    ids: UsedIds,
    config: ClearmedConfig,
    program: dspy.Module | None = None,
    program_state: Path | None = None,
    reports: dict[str, str] | None = None,
    learned: LearnedModel | None = None,
) -> Path:
    """Write every file of an artifact; the manifest last, so a folder with a manifest is complete.

    `program` saves a live program's state; `program_state` copies an existing program.json (a compiled
    artifact's, carried into the tune artifact made on top of it).
    """
    out.mkdir(parents=True, exist_ok=True)
    if program is not None:
        save_program_state(program, out / PROGRAM)
    elif program_state is not None:
        _write(out / PROGRAM, program_state.read_text(encoding="utf-8"))
    _write(out / THRESHOLDS, thresholds.model_dump_json(indent=2))
    _write(out / IDS, ids.model_dump_json(indent=2))
    if learned is not None:
        _write(out / LEARNED, learned.model_dump_json(indent=2))
    # The config names key variables, never keys: safe to write whole.
    resolved = config.model_copy(update={"thresholds": thresholds})
    _write(out / CONFIG, resolved.model_dump_json(indent=2, exclude_none=True))
    for name, text in (reports or {}).items():
        _write(out / name, text)
    _write(out / MANIFEST, manifest.model_dump_json(indent=2))
    return out


def load_artifact(path: str | Path) -> ProgramArtifact:
    folder = Path(path)
    if not (folder / MANIFEST).is_file():
        raise UsageError(f"{folder}: not a program artifact (no {MANIFEST}); make one with `clearmed compile`")
    try:
        manifest = ArtifactManifest.model_validate_json((folder / MANIFEST).read_text(encoding="utf-8"))
        thresholds = Thresholds.model_validate_json((folder / THRESHOLDS).read_text(encoding="utf-8"))
        ids = UsedIds.model_validate_json((folder / IDS).read_text(encoding="utf-8"))
        learned_file = folder / LEARNED
        learned = (
            LearnedModel.model_validate_json(learned_file.read_text(encoding="utf-8"))
            if learned_file.is_file()
            else None
        )
    except (OSError, ValidationError) as err:
        first = str(err).splitlines()[0]
        raise UsageError(f"{folder}: damaged artifact: {first}") from None
    if manifest.has_program_state and not (folder / PROGRAM).is_file():
        raise UsageError(f"{folder}: damaged artifact: {PROGRAM} is missing")
    return ProgramArtifact(path=folder, manifest=manifest, thresholds=thresholds, ids=ids, learned=learned)


def load_program_state(program: dspy.Module, path: Path) -> list[str]:
    """Load predictor states onto `program`; return warnings. Any LM in the file is ignored.

    Every entry is tried on a copy first, so a file that does not fit leaves the program untouched.
    """
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise UsageError(f"{path}: unreadable program state: {err}") from None
    predictors = dict(program.named_predictors())
    shared = [name for name in predictors if name in state]
    if not shared:
        raise UsageError(f"{path}: the saved program has none of this program's predictors")
    warnings = []
    missing = [name for name in predictors if name not in state]
    extra = [name for name in state if name != "metadata" and name not in predictors]
    if missing:
        warnings.append(f"predictors not in the artifact keep their built-in prompts: {', '.join(missing)}")
    if extra:
        warnings.append(f"artifact predictors this program lacks were ignored: {', '.join(extra)}")
    entries = {name: {**state[name], "lm": None} for name in shared}
    for name in shared:  # DSPy pairs saved fields with the signature's by position and says nothing if they differ
        saved_fields = (entries[name].get("signature") or {}).get("fields")
        wanted = len(predictors[name].signature.fields)
        if isinstance(saved_fields, list) and len(saved_fields) != wanted:
            raise UsageError(
                f"{path}: predictor {name} was compiled for an older signature ({len(saved_fields)} fields, this "
                f"program's has {wanted}): compile the program again"
            )
    try:
        for name in shared:
            copy.deepcopy(predictors[name]).load_state(entries[name])
    except Exception as err:  # a state from other code: say which predictor, never half-load
        raise UsageError(f"{path}: predictor {name} does not fit this program: {type(err).__name__}: {err}") from None
    for name in shared:
        predictors[name].load_state(entries[name])
    saved = state.get("metadata", {}).get("dependency_versions", {}).get("dspy")
    if saved and saved != dspy.__version__:
        warnings.append(f"saved with dspy {saved}, loading with dspy {dspy.__version__}")
    return warnings


def with_artifact(path: str | None, config: ClearmedConfig) -> tuple[ProgramArtifact | None, ClearmedConfig]:
    """The artifact at `path` (None: none given) and the config carrying its thresholds, so that what is built
    from the config, and a run's config.json and digest, show them."""
    if not path:
        return None, config
    artifact = load_artifact(path)
    return artifact, config.model_copy(update={"thresholds": artifact.thresholds})


def apply_artifact(program: dspy.Module, artifact: ProgramArtifact | None, config: ClearmedConfig) -> list[str]:
    """Load the artifact's prompts and thresholds onto a freshly built program; return warnings to show."""
    if artifact is None:
        return []
    warnings: list[str] = []
    current = backbone_labels(config).get("main", "")
    if artifact.manifest.backbone and current != artifact.manifest.backbone:
        warnings.append(
            f"the artifact was optimized on {artifact.manifest.backbone}; loading it onto {current} "
            "(prompts and thresholds may not transfer)"
        )
    name = getattr(program, "program_name", None)
    if name and name != artifact.manifest.program:
        warnings.append(f"the artifact was made for program {artifact.manifest.program}, not {name}")
    state = artifact.program_state
    if state is not None:
        warnings.extend(load_program_state(program, state))
    if hasattr(program, "thresholds"):
        program.thresholds = artifact.thresholds
    if artifact.learned is not None and hasattr(program, "learned_model"):
        program.learned_model = artifact.learned
    for warning in warnings:
        logger.warning("%s: %s", artifact.path, warning)
    return warnings


def refuse_seen_ids(questions: Sequence[Question], artifact: ProgramArtifact, *, allow: bool) -> None:
    """`clearmed eval` on questions the artifact was optimized on is not an evaluation: refuse unless allowed. A
    question is seen by its id, or by its text (`question_key_digest`: a twin under another id) where the artifact
    recorded the digests of what it saw."""
    seen_ids = artifact.ids.seen()
    seen_keys = set(artifact.ids.seen_keys)
    seen = {q.id for q in questions if q.id in seen_ids or (seen_keys and question_key_digest(q) in seen_keys)}
    if seen and not allow:
        twins = sum(qid not in seen_ids for qid in seen)
        how = f"; {twins} of them a repeat of a seen question under another id" if twins else ""
        examples = ", ".join(sorted(seen)[:3])
        raise UsageError(
            f"{len(seen)} of the questions were used to optimize {artifact.path} ({examples}{how}); "
            "evaluate on other ids, or pass --allow-train-overlap to do it knowingly"
        )
