"""`clearmed merge`: the shards of one run (`clearmed eval --shard K/N`) joined into the folder one process makes.

The folders must be the finished shards of one run: the same manifest (program, benchmark and its source and
revision, config digest, limit, seed, program artifact, recorded pathways, clearmed version) and question list
(`RunShard`: its size and digest), each of the N shards given once and every question of each answered, no question
named twice. Anything else is refused in one line before anything is written, as is an output folder that holds
another run, or this run merged and changed since (a resume redid questions there: merging again would undo that and
count their spend and attempts twice; the same merge over an unchanged folder rewrites the same files). A folder that
holds only what a merge writes before its manifest is a merge killed midway, and is redone.

The joined folder holds the run's manifest (the whole question list in the run's order and the shards' question
digests, no shard), shard 1's config
snapshot, every record at its position in the whole list, the shards' set-aside degraded records, unreadable lines
and spend logs. Its caller finishes it as `clearmed eval` finishes a run (`report.run_folder.finish_run_folder`: the
summary, leakage audit, plots and HTML report). So it is the run one process would have made: `clearmed eval` resumes
it, and `clearmed compare` and `clearmed report` read it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from clearmed.config import SNAPSHOT
from clearmed.evaluation.shard import RunShard, ids_digest, interleave_shards
from clearmed.evaluation.spend_log import SPEND_LOG
from clearmed.evaluation.store import (
    DEGRADED,
    LOCK,
    MANIFEST,
    RESULTS,
    UNREADABLE,
    EvalRecord,
    RunManifest,
    RunStore,
    RunStoreError,
    load_manifest,
    read_records,
    read_set_aside_degraded,
    writable_line,
)

__all__ = ["ShardMergeError", "join_shard_folders", "unanswered_ids"]

# Every field of the manifest makes two shards shards of one run, but these: the shard's own questions and shard
# (compared as `RunShard`s), when it was created, where its config was read (its digest is compared) and the
# endpoints it reached (shards run on several nodes; the merged run lists them all); its `--set` overrides, as given
# (the config digest compares what they made).
_OF_THE_SHARD = frozenset(
    {"question_ids", "question_digests", "shard", "created", "config_source", "endpoints", "overrides"}
)
# What a merge writes before its manifest: a folder holding these alone (and their temporary files) is a merge killed
# before it finished, which the next merge redoes.
_JOINED = (RESULTS, DEGRADED, UNREADABLE, SPEND_LOG)
_MERGE_FILES = frozenset({SNAPSHOT, *_JOINED})
_HALF_WRITTEN = frozenset({*_MERGE_FILES, *(f"{name}.tmp" for name in _MERGE_FILES), "manifest.tmp", LOCK})
_SAME_RUN = tuple(name for name in RunManifest.model_fields if name not in _OF_THE_SHARD)


class ShardMergeError(RunStoreError):
    """The folders are not the finished shards of one run, or the output folder holds another run."""


@dataclass(frozen=True)
class _Shard:
    folder: Path
    manifest: RunManifest
    shard: RunShard
    records: list[EvalRecord]
    set_aside: list[EvalRecord]


def unanswered_ids(folder: Path, manifest: RunManifest) -> list[str]:
    """The ids of the run's questions with no record in its folder (degraded records count as answered)."""
    answered = {record.question_id for record in read_records(folder)}
    return [qid for qid in manifest.question_ids if qid not in answered]


def _read_shard(folder: Path) -> _Shard:
    manifest = load_manifest(folder / MANIFEST)
    if manifest.shard is None:
        raise ShardMergeError(f"{folder} is not a shard (a run of `clearmed eval ... --shard K/N`)")
    shard = manifest.shard
    left = unanswered_ids(folder, manifest)
    if left:
        done = len(manifest.question_ids) - len(left)
        raise ShardMergeError(
            f"{folder}: shard {shard.index}/{shard.count} is not finished ({done} of its "
            f"{len(manifest.question_ids)} questions answered); resume it with its eval command, then merge"
        )
    return _Shard(folder, manifest, shard, list(read_records(folder)), read_set_aside_degraded(folder))


def _check_same_run(shards: Sequence[_Shard]) -> None:
    first = shards[0]
    for other in shards[1:]:
        differences = [
            f"{name.replace('_', ' ')} {getattr(first.manifest, name)!r} != {getattr(other.manifest, name)!r}"
            for name in _SAME_RUN
            if getattr(first.manifest, name) != getattr(other.manifest, name)
        ]
        if (first.shard.count, first.shard.ids_digest) != (other.shard.count, other.shard.ids_digest):
            differences.append(f"shard {first.shard!r} != {other.shard!r}")
        if differences:
            raise ShardMergeError(
                f"{other.folder} is not a shard of the run {first.folder} is a shard of ({'; '.join(differences)})"
            )


def _in_order(shards: Sequence[_Shard]) -> tuple[list[_Shard], list[str]]:
    """The shards by index, each once and all of them, and the run's question list they make up together."""
    count, total = shards[0].shard.count, shards[0].shard.of_questions
    by_index: dict[int, _Shard] = {}
    for shard in shards:
        seen = by_index.setdefault(shard.shard.index, shard)
        if seen is not shard:
            raise ShardMergeError(
                f"shard {shard.shard.index}/{count} is given twice ({seen.folder} and {shard.folder}); their "
                "questions overlap"
            )
    missing = [f"{index}/{count}" for index in range(1, count + 1) if index not in by_index]
    if missing:
        covered = sum(len(shard.manifest.question_ids) for shard in shards)
        raise ShardMergeError(
            f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing: the {len(shards)} given cover "
            f"{covered} of the run's {total} questions"
        )
    ordered = [by_index[index] for index in range(1, count + 1)]
    full = interleave_shards([shard.manifest.question_ids for shard in ordered])
    shares = [len(range(index - 1, total, count)) for index in range(1, count + 1)]
    sizes = [len(shard.manifest.question_ids) for shard in ordered]
    if sizes != shares or ids_digest(full) != ordered[0].shard.ids_digest:
        raise ShardMergeError(
            f"the shards' questions do not make up the run's {total} (shard sizes {sizes}, expected {shares})"
        )
    return ordered, full


def _check_out(out: Path, manifest: RunManifest, shards: Sequence[_Shard], files: dict[str, bytes]) -> None:
    """Refuse an output folder the merge would damage: a shard, another run, a folder of other files, or this run's
    merge changed since it was written (a resume redid questions there: merging again would undo that and count
    their spend twice). The same merge again rewrites the same files; a merge killed before its manifest is redone."""
    if out.resolve() in {shard.folder.resolve() for shard in shards}:
        raise ShardMergeError(f"--out {out} is one of the shards; choose a new folder for the merged run")
    if (out / MANIFEST).is_file():
        existing = load_manifest(out / MANIFEST)
        if existing.question_digests is None:  # merged before manifests kept digests: the same run all the same
            manifest = manifest.model_copy(update={"question_digests": None})
        if existing != manifest:
            raise ShardMergeError(f"--out {out} holds another run; choose a new folder for the merged run")
        changed = [name for name in _JOINED if _read_or_none(out / name) != files.get(name)]
        if changed:
            raise ShardMergeError(
                f"--out {out} holds this run merged and changed since ({', '.join(changed)}: a resume redid "
                f"questions there, or a shard changed); merging again would undo it: resume it with "
                f"`clearmed eval ... --run-dir {out}`, or merge into a new folder"
            )
    elif out.is_dir() and any(entry.name not in _HALF_WRITTEN for entry in out.iterdir()):
        raise ShardMergeError(f"--out {out} is not empty and holds no run; choose a new folder for the merged run")


def _read_or_none(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _joined_lines(folders: Sequence[Path], name: str) -> bytes | None:
    """The shards' files `name` one after another (each ended by a newline); None when no shard has one."""
    parts = [(folder / name).read_bytes() for folder in folders if (folder / name).is_file()]
    if not parts:
        return None
    return b"".join(part + (b"" if part.endswith(b"\n") else b"\n") for part in parts if part)


def _joined_files(shards: Sequence[_Shard], manifest: RunManifest) -> dict[str, bytes]:
    """The joined folder's files, by name, before its manifest: config, records, set-aside records, spend log."""
    position = {qid: index for index, qid in enumerate(manifest.question_ids)}

    def lines(records: Sequence[EvalRecord]) -> bytes:
        placed = [record.model_copy(update={"index": position[record.question_id]}) for record in records]
        return b"".join(writable_line(record) for record in sorted(placed, key=lambda r: r.index))

    folders = [shard.folder for shard in shards]
    files = {
        SNAPSHOT: (folders[0] / SNAPSHOT).read_bytes(),  # copied as it is: the shards' configs are one digest
        RESULTS: lines([record for shard in shards for record in shard.records]),
    }
    if set_aside := [record for shard in shards for record in shard.set_aside]:
        files[DEGRADED] = lines(set_aside)
    for name in (UNREADABLE, SPEND_LOG):
        if (joined := _joined_lines(folders, name)) is not None:
            files[name] = joined
    return files


def _write(out: Path, files: dict[str, bytes], manifest: RunManifest) -> None:
    """The joined folder's files, each in one rename, and what a killed earlier attempt left and this one does not
    write removed; the manifest last, as it is what makes a folder a run."""
    with RunStore(out) as store:
        for name in sorted(_MERGE_FILES - set(files)):
            (out / name).unlink(missing_ok=True)
        for name, content in files.items():
            store.write_bytes(name, content)
        store.write_manifest(manifest)


def _merged_manifest(ordered: Sequence[_Shard], full: list[str]) -> RunManifest:
    """The run's manifest: shard 1's, with the whole question list (and the shards' question digests, where every
    shard kept them), no shard, and the first shard's creation time."""
    repeated = [qid for qid, count in Counter(full).items() if count > 1]
    if repeated:
        raise ShardMergeError(
            f"the shards name the question {repeated[0]!r} twice (an older clearmed let a list repeat an id); run "
            "them again with each question once"
        )
    digests = [shard.manifest.question_digests for shard in ordered]
    joined = {qid: d for part in digests if part is not None for qid, d in part.items()}
    created = min(shard.manifest.created for shard in ordered)
    endpoints: dict[str, list[str]] = {}
    for shard in ordered:
        for role, addresses in shard.manifest.endpoints.items():
            endpoints.setdefault(role, []).extend(a for a in addresses if a not in endpoints[role])
    return ordered[0].manifest.model_copy(
        update={
            "question_ids": full,
            "question_digests": joined if all(part is not None for part in digests) else None,
            "shard": None,
            "created": created,
            "endpoints": endpoints,
        }
    )


def join_shard_folders(folders: Sequence[Path], out: Path) -> None:
    """Join the shards in `folders` into the run folder `out` (its caller writes the summary); `ShardMergeError`
    (nothing written) when they are not the finished shards of one run. Each shard is locked while it is read: none is
    being written."""
    if not folders:
        raise ShardMergeError("give the run folders of the shards to merge")
    seen: dict[Path, Path] = {}
    for folder in folders:
        if not (folder / MANIFEST).is_file():
            raise ShardMergeError(f"{folder}: no manifest.json (is it a run folder?)")
        if folder.resolve() in seen:
            raise ShardMergeError(f"{folder} is given twice ({seen[folder.resolve()]} and {folder})")
        seen[folder.resolve()] = folder
    with ExitStack() as locks:
        for folder in folders:
            locks.enter_context(RunStore(folder))
        shards = [_read_shard(folder) for folder in folders]
        _check_same_run(shards)
        ordered, full = _in_order(shards)
        manifest = _merged_manifest(ordered, full)
        files = _joined_files(ordered, manifest)
        _check_out(out, manifest, ordered, files)
        _write(out, files, manifest)
