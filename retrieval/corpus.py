"""Corpus ingestion: JSONL, Parquet and Hugging Face hub rows -> `Passage`s with provenance.

Every reader streams (a MedRAG shard has millions of rows), maps source fields through a `FieldMapping`, and
can cut long documents into overlapping word windows. Bad input raises `CorpusError` naming the file and
line (or row), or is skipped and counted when `on_error="skip"`. The shared corpora by name ("openstax",
"medquad") and the shared data folder are `corpus_presets`'.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clearmed.signatures.records import OnError, Passage, Provenance

Pathway = Literal["local", "dynamic"]


class CorpusError(ValueError):
    """A corpus file or row could not be read. The message names the file and line/row."""


class FieldMapping(BaseModel):
    """Which source fields make a passage. Several fields are joined (title: " — ", text: blank line)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = "id"
    title: str | list[str] | None = "title"
    text: str | list[str] = "text"
    url: str | None = None
    date: str | None = None

    def fields(self, value: str | list[str] | None) -> list[str]:
        if value is None:
            return []
        return [value] if isinstance(value, str) else list(value)

    def required(self) -> list[str]:
        return [self.id, *self.fields(self.text)]


class Chunking(BaseModel):
    """Split documents longer than `words` words into windows of `words`, neighbours sharing `overlap`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    words: int = Field(default=200, ge=10)
    overlap: int = Field(default=40, ge=0)

    @model_validator(mode="after")
    def _overlap_smaller(self) -> Chunking:
        if self.overlap >= self.words:
            raise ValueError(f"chunk overlap ({self.overlap}) must be smaller than the window ({self.words})")
        return self


@dataclass
class IngestStats:
    """What a reader saw; pass one in to learn how many rows were skipped and why."""

    rows: int = 0
    passages: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)

    def skip(self, message: str) -> None:
        self.skipped += 1
        # Keep the first few messages only: a broken 1M-row file must not fill memory with error strings.
        if len(self.problems) < 20:
            self.problems.append(message)


# How MedRAG's corpus rows (textbooks, PubMed, StatPearls, Wikipedia) name their fields.
MEDRAG_MAPPING = FieldMapping(id="id", title="title", text="content")


# ------------------------------------------------------------------------------------ row -> passages


def _join(row: Mapping[str, Any], names: list[str], sep: str) -> str:
    parts = [str(row[name]).strip() for name in names if row.get(name) not in (None, "")]
    return sep.join(part for part in parts if part)


def chunk_words(text: str, chunking: Chunking) -> list[str]:
    """Overlapping word windows; a text no longer than one window comes back whole."""
    words = text.split()
    if len(words) <= chunking.words:
        return [text]
    step = chunking.words - chunking.overlap
    windows: list[str] = []
    for start in range(0, len(words), step):
        windows.append(" ".join(words[start : start + chunking.words]))
        if start + chunking.words >= len(words):
            break
    return windows


def row_to_passages(
    row: Mapping[str, Any],
    mapping: FieldMapping,
    *,
    corpus: str,
    pathway: Pathway = "local",
    chunking: Chunking | None = None,
    where: str = "",
) -> list[Passage]:
    """Map one source row to passages (several when chunked: ids `docid#k`, doc_id stays the source id).

    Raises `CorpusError` (prefixed with `where`) when a required field is missing or empty.
    """
    if not isinstance(row, Mapping):
        raise CorpusError(f"{where}: expected a JSON object, got {type(row).__name__}")
    missing = [name for name in mapping.required() if name not in row]
    if missing:
        raise CorpusError(f"{where}: missing field(s) {missing} (row has {sorted(row)[:12]})")
    doc_id = "" if row[mapping.id] is None else str(row[mapping.id]).strip()
    if not doc_id:
        raise CorpusError(f"{where}: empty id field {mapping.id!r}")
    text = _join(row, mapping.fields(mapping.text), "\n\n")
    if not text:
        raise CorpusError(f"{where}: document {doc_id!r} has an empty text field {mapping.text!r}")
    title = _join(row, mapping.fields(mapping.title), " — ")
    url = str(row[mapping.url]).strip() if mapping.url and row.get(mapping.url) else None
    published = parse_date(row.get(mapping.date)) if mapping.date else None
    if pathway == "dynamic" and not url:
        raise CorpusError(f"{where}: web page {doc_id!r} has no URL in field {mapping.url!r}")
    provenance = Provenance(
        kind="web" if pathway == "dynamic" else "corpus",
        corpus=corpus,
        doc_id=doc_id,
        url=url,
        domain=domain_of(url) if url else None,
        published=published,
    )
    texts = chunk_words(text, chunking) if chunking else [text]
    if len(texts) == 1:
        return [Passage(id=doc_id, title=title, text=texts[0], pathway=pathway, provenance=provenance)]
    return [
        Passage(id=f"{doc_id}#{k}", title=title, text=chunk, pathway=pathway, provenance=provenance)
        for k, chunk in enumerate(texts)
    ]


def domain_of(url: str) -> str | None:
    host = urlparse(url if "//" in url else f"//{url}").hostname
    return host.rstrip(".").lower() if host else None


def parse_date(value: Any) -> date | None:
    """Accept ISO dates and datetimes, "YYYY-MM" and "YYYY"; anything else becomes None (dates are optional)."""
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    text = str(value).strip()
    for candidate in (text, text[:10]):
        try:
            return date.fromisoformat(candidate)
        except ValueError:
            continue
    if len(text) == 7:  # "2024-03"
        try:
            return date.fromisoformat(f"{text}-01")
        except ValueError:
            return None
    if len(text) == 4 and text.isdigit():
        return date(int(text), 1, 1)
    try:  # RFC 2822, as in news feeds and Tavily's news results: "Tue, 05 Mar 2024 10:00:00 GMT"
        return parsedate_to_datetime(text).date()
    except (TypeError, ValueError, IndexError):
        return None


def _emit(
    rows: Iterable[tuple[str, Any]],
    mapping: FieldMapping,
    *,
    corpus: str,
    pathway: Pathway,
    chunking: Chunking | None,
    on_error: OnError,
    stats: IngestStats,
    limit: int | None,
) -> Iterator[Passage]:
    for where, row in rows:
        if limit is not None and stats.rows >= limit:
            return
        stats.rows += 1
        try:
            if isinstance(row, CorpusError):
                raise row
            passages = row_to_passages(row, mapping, corpus=corpus, pathway=pathway, chunking=chunking, where=where)
        except CorpusError as exc:
            if on_error == "raise":
                raise
            stats.skip(str(exc))
            continue
        stats.passages += len(passages)
        yield from passages


# --------------------------------------------------------------------------------------------- readers


def _jsonl_rows(path: Path, encoding_errors: Literal["strict", "replace"]) -> Iterator[tuple[str, Any]]:
    if not path.is_file():
        raise CorpusError(f"{path}: no such corpus file")
    # Binary read and per-line decoding, so a bad byte is reported with its line instead of as a
    # UnicodeDecodeError from deep inside the file iterator.
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                line = raw.decode("utf-8", errors=encoding_errors)
            except UnicodeDecodeError as exc:
                yield (
                    where,
                    CorpusError(
                        f"{where}: not valid UTF-8 at byte {exc.start} of the line "
                        "(re-encode the file, or set encoding_errors='replace')"
                    ),
                )
                continue
            if not line.strip():
                continue
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as exc:
                yield where, CorpusError(f"{where}: malformed JSON ({exc.msg} at column {exc.colno})")


def read_jsonl(
    path: Path | str,
    mapping: FieldMapping,
    *,
    corpus: str | None = None,
    pathway: Pathway = "local",
    chunking: Chunking | None = None,
    on_error: OnError = "raise",
    encoding_errors: Literal["strict", "replace"] = "strict",
    stats: IngestStats | None = None,
    limit: int | None = None,
) -> Iterator[Passage]:
    """Stream passages from a JSONL file (one JSON object per line; blank lines ignored).

    `corpus` names the corpus in provenance (default: the file stem). Non-UTF-8 bytes raise (with the line)
    under `encoding_errors="strict"`, or become U+FFFD under `"replace"`.
    """
    path = Path(path)
    yield from _emit(
        _jsonl_rows(path, encoding_errors),
        mapping,
        corpus=corpus or path.stem,
        pathway=pathway,
        chunking=chunking,
        on_error=on_error,
        stats=stats if stats is not None else IngestStats(),
        limit=limit,
    )


def _parquet_rows(path: Path, mapping: FieldMapping) -> Iterator[tuple[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        raise CorpusError(f"{path}: no such corpus file")
    try:
        handle = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise CorpusError(f"{path}: not a readable Parquet file ({exc})") from None
    names = set(handle.schema_arrow.names)
    wanted = [
        *mapping.fields(mapping.text),
        *mapping.fields(mapping.title),
        mapping.id,
        *([mapping.url] if mapping.url else []),
        *([mapping.date] if mapping.date else []),
    ]
    missing = [name for name in mapping.required() if name not in names]
    if missing:
        raise CorpusError(f"{path}: Parquet columns {missing} not found (columns: {sorted(names)})")
    columns = [name for name in dict.fromkeys(wanted) if name in names]
    number = 0
    for batch in handle.iter_batches(batch_size=4096, columns=columns):
        for row in batch.to_pylist():
            number += 1
            yield f"{path}: row {number}", row


def read_parquet(
    path: Path | str,
    mapping: FieldMapping,
    *,
    corpus: str | None = None,
    pathway: Pathway = "local",
    chunking: Chunking | None = None,
    on_error: OnError = "raise",
    stats: IngestStats | None = None,
    limit: int | None = None,
) -> Iterator[Passage]:
    """Stream passages from a Parquet file, reading only the mapped columns in record batches."""
    path = Path(path)
    yield from _emit(
        _parquet_rows(path, mapping),
        mapping,
        corpus=corpus or path.stem,
        pathway=pathway,
        chunking=chunking,
        on_error=on_error,
        stats=stats if stats is not None else IngestStats(),
        limit=limit,
    )


def read_hub(
    hub_id: str,
    *,
    mapping: FieldMapping = MEDRAG_MAPPING,
    split: str = "train",
    corpus: str | None = None,
    chunking: Chunking | None = None,
    on_error: OnError = "raise",
    stats: IngestStats | None = None,
    limit: int | None = None,
) -> Iterator[Passage]:
    """Stream a Hugging Face hub corpus (MedRAG schema by default: id, title, content, contents).

    `contents` (title + content) is not used: title and text are kept apart in the Passage. Needs network and
    no HF offline variables; offline, a `CorpusError` says so.
    """
    import datasets

    try:
        dataset = datasets.load_dataset(hub_id, split=split, streaming=True)
    except (ConnectionError, OSError, ValueError, FileNotFoundError) as exc:
        raise CorpusError(f"hub corpus {hub_id!r} (split {split!r}) could not be opened: {exc}") from None
    name = corpus or hub_id.split("/")[-1]

    def rows() -> Iterator[tuple[str, Any]]:
        number = 0
        iterator = iter(dataset)
        while True:
            try:
                row = next(iterator)
            except StopIteration:
                return
            except (ConnectionError, OSError, ValueError) as exc:
                # A dropped connection mid-stream: say where, so a resumed build can use `limit`.
                raise CorpusError(f"{hub_id}[{split}]: streaming failed after row {number}: {exc}") from None
            number += 1
            yield f"{hub_id}[{split}] row {number}", row

    yield from _emit(
        rows(),
        mapping,
        corpus=name,
        pathway="local",
        chunking=chunking,
        on_error=on_error,
        stats=stats if stats is not None else IngestStats(),
        limit=limit,
    )


def read_file(
    path: Path | str,
    mapping: FieldMapping,
    **kwargs: Any,
) -> Iterator[Passage]:
    """JSONL or Parquet by file extension."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in {".jsonl", ".ndjson", ".json"}:
        return read_jsonl(path, mapping, **kwargs)
    if suffix in {".parquet", ".pq"}:
        kwargs.pop("encoding_errors", None)
        return read_parquet(path, mapping, **kwargs)
    raise CorpusError(f"{path}: unsupported corpus format {suffix!r} (use .jsonl or .parquet)")
