"""MedRAG's corpus layout, as researchers who reproduce the paper already hold MedCorp:

    <db_dir>/<corpus>/chunk/<source>.jsonl      one snippet a line: id, title, content, contents
    <db_dir>/<corpus>/index/bm25/               the Lucene BM25 index (pyserini's JsonCollection indexer)
    <db_dir>/<corpus>/index/ncbi/MedCPT-Article-Encoder/   the MedCPT faiss index

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
    """The snippets of one chunk folder by (source, line); each file's line offsets are read on first use.

    Lines count as MedRAG's `read().strip().split("\\n")` counts them: leading blank lines are not lines.
    """

    def __init__(self, folder: Path, *, backend: str) -> None:
        self.folder = folder
        self.backend = backend
        self._offsets: dict[str, np.ndarray] = {}

    def row(self, source: str, line: int) -> dict[str, Any]:
        path = self.folder / f"{source}.jsonl"
        offsets = self._offsets.get(source)
        if offsets is None:
            offsets = self._offsets[source] = line_offsets(path, backend=self.backend)
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
