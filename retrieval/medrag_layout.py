"""MedRAG's corpus layout, as researchers who reproduce the paper already hold MedCorp:

    <db_dir>/<corpus>/chunk/<source>.jsonl      one snippet a line: id, title, content, contents
    <db_dir>/<corpus>/index/bm25/               the Lucene BM25 index (pyserini's JsonCollection indexer)
    <db_dir>/<corpus>/index/ncbi/MedCPT-Article-Encoder/   the MedCPT faiss index
    <db_dir>/<corpus>/index/offsets/<source>.offsets       clearmed's: each chunk file's line offsets

A snippet's id is `<source>_<line>`: line `line` of `chunk/<source>.jsonl`, which is how MedRAG finds a hit's
text (`Retriever.idx2txt`). `contents` (title and content joined) is what the BM25 index tokenizes; a passage
keeps title and content apart, with the corpus name and the snippet id as its provenance.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clearmed.retrieval.base import EvidenceError
from clearmed.signatures.records import Passage, Provenance

# MedRAG's `corpus_names["MedCorp"]`, in its order (the order breaks exact score ties when hits are merged).
MEDCORP = ("pubmed", "textbooks", "statpearls", "wikipedia")
CHUNK_DIR = "chunk"
OFFSETS_DIR = Path("index") / "offsets"
OFFSETS_SUFFIX = ".offsets"


def expand_corpora(names: Sequence[str]) -> list[str]:
    """The corpus folders a config names: "medcorp" stands for MedRAG's four; repeats are dropped."""
    expanded: list[str] = []
    for name in names:
        for corpus in MEDCORP if name.strip().lower() == "medcorp" else (name.strip(),):
            if corpus not in expanded:
                expanded.append(corpus)
    return expanded


def chunk_dir(db_dir: Path, corpus: str) -> Path:
    return db_dir / corpus / CHUNK_DIR


def offsets_dir(chunks: Path) -> Path:
    """Where the line offsets of the chunk folder `chunks` (`<db_dir>/<corpus>/chunk`) are kept."""
    return chunks.parent / OFFSETS_DIR


def chunk_address(chunk_id: str) -> tuple[str, int] | None:
    """(source file stem, line) of a MedRAG snippet id such as "pubmed23n0001_12", or None for another id."""
    source, _, line = chunk_id.rpartition("_")
    if not source or not line.isdigit():
        return None
    return source, int(line)


def medrag_contents(title: str, content: str) -> str:
    """MedRAG's `concat`: the title, a full stop unless it ends a sentence already, then the content."""
    title, content = title.strip(), content.strip()
    if not title:
        return content
    return f"{title} {content}" if title.endswith((".", "?", "!")) else f"{title}. {content}"


def snippet_row(passage: Passage) -> dict[str, str]:
    """A passage as one MedRAG chunk line."""
    return {
        "id": passage.id,
        "title": passage.title,
        "content": passage.text,
        "contents": medrag_contents(passage.title, passage.text),
    }


def snippet_passage(row: dict[str, Any], corpus: str, *, fallback_id: str) -> Passage:
    """One MedRAG snippet as a local passage with its corpus and chunk id (`fallback_id` when it has no id)."""
    chunk_id = str(row.get("id") or fallback_id)
    text = str(row.get("content") or row.get("contents") or "")
    return Passage(
        id=chunk_id,
        title=str(row.get("title") or ""),
        text=text,
        pathway="local",
        provenance=Provenance(kind="corpus", corpus=corpus, doc_id=chunk_id),
    )


def write_chunks(passages: Iterable[Passage], folder: Path, source: str) -> int:
    """Write passages as the chunk file `<folder>/<source>.jsonl` (atomically); returns how many."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{source}.jsonl"
    partial = target.with_name(target.name + ".partial")
    count = 0
    with partial.open("w", encoding="utf-8") as sink:
        for passage in passages:
            sink.write(json.dumps(snippet_row(passage), ensure_ascii=False) + "\n")
            count += 1
    partial.replace(target)
    return count


class ChunkFiles:
    """The snippets of one chunk folder by (source, line).

    Each file's line offsets come from `index/offsets/<source>.offsets` when a build wrote them for a file of
    this size (memory-mapped: a cold query reads only the two offsets it needs), else from a scan of the file on
    first use (22 ms a MiB: minutes over PubMed's chunk files, spread over the first queries).
    Lines count as MedRAG's `read().strip().split("\\n")` counts them: leading blank lines are not lines.
    """

    def __init__(self, folder: Path, *, backend: str) -> None:
        self.folder = folder
        self.backend = backend
        self._offsets: dict[str, np.ndarray] = {}

    def offsets(self, source: str) -> np.ndarray:
        offsets = self._offsets.get(source)
        if offsets is None:
            path = self.folder / f"{source}.jsonl"
            persisted = read_offsets(offsets_dir(self.folder) / f"{source}{OFFSETS_SUFFIX}", path)
            offsets = persisted if persisted is not None else line_offsets(path, backend=self.backend)
            self._offsets[source] = offsets
        return offsets

    def row(self, source: str, line: int) -> dict[str, Any]:
        path = self.folder / f"{source}.jsonl"
        offsets = self.offsets(source)
        if not 0 <= line < len(offsets) - 1:
            raise EvidenceError(
                f"the {self.backend} index points at line {line} of {path}, which has {len(offsets) - 1} lines: "
                "the index was built from other chunks; rebuild it",
                kind="index",
                backend=self.backend,
            )
        with path.open("rb") as handle:
            handle.seek(int(offsets[line]))
            raw = handle.read(int(offsets[line + 1] - offsets[line]))
        try:
            row = json.loads(raw)
        except ValueError:
            raise EvidenceError(
                f"{path}, line {line}: not a JSON snippet", kind="index", backend=self.backend
            ) from None
        if not isinstance(row, dict):
            raise EvidenceError(f"{path}, line {line}: not a JSON object", kind="index", backend=self.backend)
        return row

    def row_for_id(self, chunk_id: str) -> dict[str, Any]:
        """The snippet whose MedRAG id is `chunk_id`, checked against the id on that line."""
        address = chunk_address(chunk_id)
        if address is None:
            raise EvidenceError(
                f"{chunk_id!r} is not a MedRAG snippet id (<source>_<line>) and the index stores no raw document; "
                "rebuild it with `clearmed index build`, which stores them for such ids",
                kind="index",
                backend=self.backend,
            )
        row = self.row(*address)
        if str(row.get("id")) != chunk_id:
            raise EvidenceError(
                f"{self.folder / address[0]}.jsonl line {address[1]} holds {row.get('id')!r}, not {chunk_id!r}: "
                "the index was built from other chunks; rebuild it",
                kind="index",
                backend=self.backend,
            )
        return row


_WHITESPACE = np.frombuffer(b" \t\n\r\x0b\x0c", dtype=np.uint8)  # what bytes.strip() strips
_BLOCK = 1 << 24


def line_offsets(path: Path, *, backend: str) -> np.ndarray:
    """Start offset of every line of `path`, then the end: line i is bytes [offsets[i], offsets[i + 1]).

    Lines are those of the file stripped of leading and trailing whitespace, as MedRAG's
    `read().strip().split("\\n")` sees them. Read in 16 MiB blocks, so a large chunk file never sits in memory.
    """
    blocks: list[np.ndarray] = [np.zeros(1, np.int64)]
    first = last = -1  # offsets of the first and last bytes that are not whitespace
    position = 0
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(_BLOCK), b""):
                data = np.frombuffer(block, dtype=np.uint8)
                blocks.append(np.flatnonzero(data == ord("\n")).astype(np.int64) + position + 1)
                text = np.flatnonzero(~np.isin(data, _WHITESPACE))
                if text.size:
                    first = first if first >= 0 else position + int(text[0])
                    last = position + int(text[-1])
                position += len(block)
    except OSError as exc:
        raise EvidenceError(
            f"cannot read the chunk file {path} ({exc.strerror})", kind="index", backend=backend
        ) from None
    if first < 0:
        return np.zeros(1, np.int64)
    starts = np.concatenate(blocks)
    lead = starts[np.searchsorted(starts, first, side="right") - 1]  # the start of the first line with text
    end = last + 1
    return np.concatenate((starts[(starts >= lead) & (starts < end)], [end])).astype(np.int64)


# A persisted offsets file: the chunk file's size in bytes (so a changed file is scanned again, not misread), then
# `line_offsets` of it: little-endian int64, 8 bytes a line and 8 for the end.
_OFFSET_DTYPE = np.dtype("<i8")


def read_offsets(path: Path, chunk_file: Path) -> np.ndarray | None:
    """The persisted offsets of `chunk_file` (memory-mapped), or None when absent, unreadable or stale."""
    try:
        with path.open("rb") as handle:
            header = handle.read(_OFFSET_DTYPE.itemsize)
        size = chunk_file.stat().st_size
        if len(header) != _OFFSET_DTYPE.itemsize or int(np.frombuffer(header, _OFFSET_DTYPE)[0]) != size:
            return None
        offsets = np.memmap(path, dtype=_OFFSET_DTYPE, mode="r", offset=_OFFSET_DTYPE.itemsize)
    except (OSError, ValueError):
        return None
    return offsets if len(offsets) >= 1 and int(offsets[-1]) <= size else None


def write_offsets(chunks: Path, *, backend: str, fresh: bool = False) -> dict[str, int]:
    """Persist the line offsets of every chunk file of `chunks` that has none for its current size (every one,
    with `fresh`: an index build scans them all, since a rewritten file can keep its size); returns the lines of
    each file, by source. Each file is written beside its final name and renamed, so a killed build leaves no
    partial offsets behind."""
    target = offsets_dir(chunks)
    lines: dict[str, int] = {}
    for path in sorted(chunks.glob("*.jsonl")):
        persisted = target / f"{path.stem}{OFFSETS_SUFFIX}"
        offsets = None if fresh else read_offsets(persisted, path)
        if offsets is None:
            offsets = line_offsets(path, backend=backend)
            target.mkdir(parents=True, exist_ok=True)
            partial = persisted.with_name(persisted.name + ".partial")
            header = np.array([path.stat().st_size], _OFFSET_DTYPE)
            with partial.open("wb") as sink:
                sink.write(header.tobytes() + offsets.astype(_OFFSET_DTYPE).tobytes())
            partial.replace(persisted)
        lines[path.stem] = len(offsets) - 1
    return lines
