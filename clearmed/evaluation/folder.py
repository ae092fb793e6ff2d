"""A run folder's identity: what a run is (`EvalSpec`), its config as the folder keeps it (`config_snapshot`, the
snapshot `SNAPSHOT` read back by `snapshot_of`) and its digest (`config_digest`), whether a folder holds this run
(`same_run_config`, `open_run`: a new folder's manifest, or an existing one checked, grown by a longer list of the same
draw, or refused naming what differs), a run's default folder (`default_run_dir`), and a new one started from a smaller draw (`smaller_draws`,
`start_from_smaller_run`),
and whether a folder is finished (`finished`). The run loop (`runner`) opens its folder here; a suite's skip, the
estimate's earlier runs and an artifact's digest ask the same questions here.

The question list is fixed in the manifest when the folder is created, with a digest of each question (its text,
options and gold: `store.question_digest`), so a resumed run evaluates exactly the questions it started with (or
grows by the questions a longer list of the same draw adds, saying so; another list is refused naming both values),
and a benchmark file changed since is refused before anything runs; a list that names a question twice is refused
too (it would be answered and scored twice).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clearmed.config import SNAPSHOT, ClearmedConfig, ConfigError, answer_settings, without_operational
from clearmed.config import read_snapshot as read_config_snapshot
from clearmed.core.sanitize import redact_secrets
from clearmed.core.version import __version__
from clearmed.evaluation.shard import RunShard
from clearmed.evaluation.store import (
    DEGRADED,
    MANIFEST,
    RESULTS,
    UNREADABLE,
    RunManifest,
    RunStore,
    RunStoreError,
    load_manifest,
    question_digest,
    read_records,
)
from clearmed.signatures.records import Question

__all__ = [
    "SNAPSHOT",
    "EvalSpec",
    "config_differences",
    "config_digest",
    "config_snapshot",
    "default_run_dir",
    "finished",
    "open_run",
    "run_endpoints",
    "same_config_as_snapshot",
    "same_run_config",
    "smaller_draws",
    "snapshot_of",
    "start_from_smaller_run",
]


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
    # pathway -> the folder its answers were read from, or "absent" (`eval --pathway`): part of what the run is
    recorded_pathways: dict[str, str] = field(default_factory=dict)
    shard: RunShard | None = None  # `questions` are this shard of the run's list (`eval --shard K/N`)
    dataset_revision: str | None = None  # the hub revision the questions were read at (`BenchmarkSet.revision`)
    overrides: Sequence[str] = ()  # the `--set` overrides of the config (a sweep's cell), recorded in the manifest


def config_digest(config: ClearmedConfig) -> str:
    """A fingerprint of everything that changes answers: the config minus its operational settings (where it was read
    from, [run], timeouts, retries, caches, prices; `clearmed.config.answer_settings`)."""
    payload = json.dumps(answer_settings(config), sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def same_run_config(manifest: RunManifest, directory: str | Path, config: ClearmedConfig) -> bool:
    """Whether the folder's run (its manifest, and its config snapshot) was made with this config: the same digest,
    or the snapshot of an older clearmed that this config extends with settings at their defaults."""
    return manifest.config_digest == config_digest(config) or same_config_as_snapshot(directory, config)


def finished(directory: str | Path, config: ClearmedConfig) -> bool:
    """A run folder a rerun with `config` would find done: summary written, every question answered and none degraded
    (a resume redoes those), the same config (a changed one is left to the run, which refuses it in one line)."""
    folder = Path(directory)
    if not (folder / "summary.json").is_file() or not (folder / MANIFEST).is_file():
        return False
    manifest = load_manifest(folder / MANIFEST)
    clean = {record.question_id for record in read_records(folder) if not record.degraded}
    if any(qid not in clean for qid in manifest.question_ids):
        return False
    return same_run_config(manifest, folder, config)


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


def snapshot_of(directory: str | Path) -> dict[str, Any] | None:
    """The folder's config snapshot (`SNAPSHOT`, config.json) as JSON data: every setting the run was made with (read
    by `clearmed.config.read_snapshot`, the one reader of the file); None when it has none readable."""
    try:
        return read_config_snapshot(Path(directory))
    except ConfigError:
        return None


def _snapshot(directory: Path) -> dict[str, object] | None:
    """The folder's config snapshot minus its operational settings; None when it has none readable."""
    snapshot = snapshot_of(directory)
    return None if snapshot is None else without_operational(snapshot)


def same_config_as_snapshot(directory: str | Path, config: ClearmedConfig) -> bool:
    """Whether the folder's config snapshot is this config as an older clearmed wrote it. A newer version that adds
    settings changes the digest of an unchanged config, so digests alone would refuse to resume every earlier run;
    settings the snapshot lacks count as the same when they are at their defaults. Operational settings (timeouts,
    retries, threads, caches, prices) are left out on both sides, as in the digest."""
    snapshot = _snapshot(Path(directory))
    if snapshot is None:
        return False
    current = answer_settings(config)
    non_default = answer_settings(config, exclude_defaults=True)
    return _extends(snapshot, current, non_default)


_UNSET = object()  # a setting one side does not hold


def config_differences(directory: str | Path, config: ClearmedConfig, *, most: int = 3) -> str:
    """The settings in which the folder's config snapshot and `config` differ, as `key old != new` items (the first
    `most`, and how many more), in the terms `same_config_as_snapshot` judges them; empty without a snapshot."""
    snapshot = _snapshot(Path(directory))
    if snapshot is None:
        return ""
    found = list(_differences(snapshot, answer_settings(config), answer_settings(config, exclude_defaults=True), ""))
    shown = [f"{key} {_shown(old)} != {_shown(new)}" for key, old, new in found[:most]]
    more = f" and {len(found) - most} more" if len(found) > most else ""
    return ", ".join(shown) + more


def _differences(old: object, new: object, non_default: object, key: str) -> Iterator[tuple[str, object, object]]:
    """(dotted key, snapshot's value, current value) of each setting that differs; a setting the snapshot lacks
    differs only where the current config sets it away from its default (as `_extends` reads it)."""
    if isinstance(old, dict) and isinstance(new, dict):
        non_default = non_default if isinstance(non_default, dict) else {}
        for name in [*old, *(name for name in new if name not in old)]:
            if name not in old and name not in non_default:
                continue
            yield from _differences(
                old.get(name, _UNSET), new.get(name, _UNSET), non_default.get(name), f"{key}.{name}" if key else name
            )
    elif old != new:
        yield key, old, new


def _shown(value: object) -> str:
    if value is _UNSET:
        return "unset"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def config_snapshot(config: ClearmedConfig) -> str:
    """The config as a run folder keeps it, credentials masked (a password inside an `api_base`). A backbone records
    only the fields of its kind (`BackboneConfig` is one model per kind), so `clearmed eval -c RUN_DIR` reruns it."""
    return redact_secrets(config.model_dump_json(indent=2, exclude_none=True))


def open_run(
    store: RunStore, spec: EvalSpec, config: ClearmedConfig, *, note: Callable[[str], object] | None = None
) -> RunManifest:
    """Create the manifest, or check that an existing folder is the same run and may be resumed.

    A run's questions are fixed when it begins. A resume that asks for a list holding every one of them and more (a
    larger `--limit` with the same seed, a longer `--ids` file) grows the run: the new questions are added after the
    old ones, and `note` is told so in one line. Any other list (another seed, a smaller limit) is refused in one
    line naming both values."""
    digest = config_digest(config)
    _refuse_repeated_ids([q.id for q in spec.questions], "the questions given")
    digests = {q.id: question_digest(q) for q in spec.questions}
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
            recorded_pathways=spec.recorded_pathways,
            overrides=[redact_secrets(item) for item in spec.overrides],
            shard=spec.shard,
            dataset_revision=spec.dataset_revision,
            question_digests=digests,
            endpoints={role: [address] for role, address in run_endpoints(config).items()},
        )
        # The config snapshot first: the manifest is what makes a folder a run, so a kill between the two
        # writes must not leave a run without its config.
        store.write_json(SNAPSHOT, config_snapshot(config))
        store.write_manifest(manifest)
        return manifest
    # A run that recorded no revision (a local file, a commit the cache did not say, a run from before revisions were
    # recorded) holds a resume to none; one that did resumes only at that revision.
    revision = spec.dataset_revision if existing.dataset_revision is not None else None
    same_config = same_run_config(existing, store.directory, config)
    mismatches = [
        f"{name} {old!r} != {new!r}"
        for name, old, new in (
            ("program", existing.program, spec.program),
            ("benchmark", existing.benchmark, spec.benchmark),
            ("config", existing.config_digest if not same_config else digest, digest),
            ("program artifact", existing.artifact, spec.artifact),
            ("recorded pathways", existing.recorded_pathways, spec.recorded_pathways),
            ("shard", existing.shard, spec.shard),
            ("hub revision", existing.dataset_revision, revision),
        )
        if old != new
    ]
    if not same_config and (differing := config_differences(store.directory, config)):
        mismatches = [f"{item}: {differing}" if item.startswith("config ") else item for item in mismatches]
    _refuse_repeated_ids(existing.question_ids, f"{store.directory}'s question list")
    dropped = [qid for qid in existing.question_ids if qid not in digests]
    if dropped:
        mismatches += _list_options(existing, spec, " != ")
    if mismatches:
        raise RunStoreError(
            f"{store.directory} holds a different run ({'; '.join(mismatches)}); choose another --run-dir"
        )
    if dropped:
        raise RunStoreError(
            f"{store.directory}: {len(dropped)} of this run's {len(existing.question_ids)} questions are not among "
            f"those asked now (first: {dropped[0]}): the benchmark or the --ids list changed; a run's questions are "
            "fixed when it begins, so run these in a new --run-dir"
        )
    if existing.question_digests is not None:
        changed = [qid for qid in existing.question_ids if existing.question_digests.get(qid) != digests[qid]]
        if changed:
            raise RunStoreError(
                f"{store.directory}: {len(changed)} of this run's questions changed in the benchmark since it began "
                f"(first: {changed[0]}: its text, options or gold differ); run it in a new --run-dir"
            )
    if not (store.directory / SNAPSHOT).is_file():  # a folder from before that ordering, killed in between
        store.write_json(SNAPSHOT, config_snapshot(config))
    existing = _with_endpoints(store, existing, run_endpoints(config), note)
    return _grown(store, existing, spec, digests, note)


def run_endpoints(config: ClearmedConfig) -> dict[str, str]:
    """Where the config reaches each service, by role: a backbone's `api_base` (an embedded model has none) and
    Tavily's address as `search`, credentials masked. Not part of a run's identity (`clearmed.config`: the same
    server as localhost or 127.0.0.1 is the same run); the manifest records each one a run used."""
    found = {
        role: redact_secrets(address)
        for role, backbone in config.backbones.items()
        if isinstance(address := getattr(backbone, "api_base", None), str)
    }
    if config.search is not None and config.search.backend == "tavily":
        from clearmed.retrieval.tavily import DEFAULT_API_BASE

        found["search"] = redact_secrets(config.search.tavily.api_base_url or DEFAULT_API_BASE)
    return found


def _with_endpoints(
    store: RunStore, manifest: RunManifest, current: dict[str, str], note: Callable[[str], object] | None
) -> RunManifest:
    """The manifest with each endpoint this session reaches added where it is new to the run, said in one line (the
    run resumes all the same: the address is no part of what it is)."""
    used = {role: list(addresses) for role, addresses in manifest.endpoints.items()}
    moved = [
        f"{role} at {address} (before: {', '.join(used[role])})"
        for role, address in current.items()
        if used.get(role) and address not in used[role]
    ]
    for role, address in current.items():
        if address not in used.setdefault(role, []):
            used[role].append(address)
    if used == manifest.endpoints:
        return manifest
    updated = manifest.model_copy(update={"endpoints": used})
    store.write_manifest(updated)
    if moved and note is not None:
        note(
            f"note: {store.directory} resumes on another endpoint: {'; '.join(moved)}; the summary lists every "
            "endpoint the run used"
        )
    return updated


def default_run_dir(
    runs_dir: Path,
    config_name: str,
    benchmark: str,
    program: str,
    limit: int | None,
    seed: int,
    shard: tuple[int, int] | None = None,
    *,
    label: str = "",
) -> Path:
    """A run's default folder: the same command always names the same folder, so rerunning it resumes; shard K of N
    is a sibling folder of
    the run's own (where `clearmed merge` puts the joined run). `label` names what sets the run apart from its config
    (its `--set` overrides: `clearmed.config.overrides_label`), so a sweep's runs never share a folder; without one
    the name is what it always was."""
    from clearmed.config import filename_slug as _slug

    size = f"n{limit}" if limit else "all"
    named = f"-{label}" if label else ""
    part = f"-shard{shard[0]}of{shard[1]}" if shard else ""
    return runs_dir / _slug(config_name) / _slug(benchmark) / f"{_slug(program)}-{size}-s{seed}{named}{part}"


def smaller_draws(run_dir: Path, limit: int | None, seed: int) -> list[Path]:
    """The default folders beside `run_dir` (a default folder, `default_run_dir`) that differ from it only in a smaller
    `--limit` (any limit, for a run of all the questions), the largest first."""
    named = re.match(rf"^(?P<head>.+)-(?:n\d+|all)-s{seed}(?P<tail>.*)$", run_dir.name)
    if named is None or not run_dir.parent.is_dir():
        return []
    pattern = re.compile(rf"^{re.escape(named['head'])}-n(\d+)-s{seed}{re.escape(named['tail'])}$")
    found = [
        (int(match[1]), folder)
        for folder in run_dir.parent.iterdir()
        if (match := pattern.match(folder.name)) and folder.is_dir() and (limit is None or int(match[1]) < limit)
    ]
    return [folder for _, folder in sorted(found, reverse=True)]


def start_from_smaller_run(
    run_dir: Path, candidates: Sequence[Path], spec: EvalSpec, config: ClearmedConfig
) -> Path | None:
    """Start the new folder `run_dir` from the first of `candidates` (default folders of smaller draws: the same
    command with a smaller `--limit`, largest first) that holds this run on fewer of its questions: the same program,
    benchmark, config, seed, artifact and recorded pathways, every question among those asked now. Its records, the
    ones it set aside, its spend log, config and manifest are copied (that folder is left as it is), so its finished
    questions are not asked again and `open_run` grows the copy. The folder it started from, or None."""
    from clearmed.evaluation.spend_log import SPEND_LOG

    asked = {q.id for q in spec.questions}
    for older in candidates:
        try:
            manifest = load_manifest(older / MANIFEST)
        except (OSError, ValueError, RunStoreError):
            continue
        same = (
            (manifest.program, manifest.benchmark, manifest.seed, manifest.artifact, manifest.recorded_pathways)
            == (spec.program, spec.benchmark, spec.seed, spec.artifact, spec.recorded_pathways)
            and manifest.shard is None
            and set(manifest.question_ids) <= asked
            and same_run_config(manifest, older, config)
        )
        if not same:
            continue
        staging = run_dir.with_name(run_dir.name + ".starting")
        shutil.rmtree(staging, ignore_errors=True)  # a start killed midway is begun again
        staging.mkdir(parents=True)
        with RunStore(older):  # no eval is writing it while it is read
            for name in (SNAPSHOT, RESULTS, DEGRADED, UNREADABLE, SPEND_LOG, MANIFEST):
                if (older / name).is_file():
                    shutil.copy2(older / name, staging / name)
        staging.rename(run_dir)  # whole or not at all: a folder with a manifest is a run
        return older
    return None


def _list_options(existing: RunManifest, spec: EvalSpec, sep: str) -> list[str]:
    """How the options that choose a run's questions differ between the folder's run and this one: `limit 2 != 3`,
    `seed 7 != 8` (none: the list itself differs, an `--ids` file or a list given)."""
    return [
        f"{name} {_option(old)}{sep}{_option(new)}"
        for name, old, new in (("limit", existing.limit, spec.limit), ("seed", existing.seed, spec.seed))
        if old != new
    ]


def _option(value: int | None) -> str:
    return "none" if value is None else str(value)


def _grown(
    store: RunStore,
    existing: RunManifest,
    spec: EvalSpec,
    digests: dict[str, str],
    note: Callable[[str], object] | None,
) -> RunManifest:
    """The folder's manifest, with the questions asked now that it lacks added after its own (their order and
    indices kept); the growth said in one line."""
    known = set(existing.question_ids)
    added = [q.id for q in spec.questions if q.id not in known]
    if not added:
        return existing
    kept = existing.question_digests
    manifest = existing.model_copy(
        update={
            "question_ids": [*existing.question_ids, *added],
            "limit": spec.limit,
            "seed": spec.seed,
            "question_digests": None if kept is None else {**kept, **{qid: digests[qid] for qid in added}},
        }
    )
    store.write_manifest(manifest)
    if note is not None:
        why = ", ".join(_list_options(existing, spec, " -> ")) or "a longer question list"
        note(
            f"note: {store.directory} grows from {len(existing.question_ids)} to {len(manifest.question_ids)} "
            f"questions ({why}): the {len(existing.question_ids)} it had are kept, {len(added)} added"
        )
    return manifest


def _refuse_repeated_ids(question_ids: Sequence[str], where: str) -> None:
    """One question listed twice would be answered twice and scored twice: refused in one line naming it."""
    seen: set[str] = set()
    for qid in question_ids:
        if qid in seen:
            raise RunStoreError(f"{where}: the question {qid!r} is listed twice; give each question once")
        seen.add(qid)
