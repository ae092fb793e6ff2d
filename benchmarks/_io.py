"""Where rows come from: local files (JSONL, JSON, CSV/TSV, Parquet) or a Hugging Face hub dataset.

Both paths yield `RawRow`s with a human location (`file:line` or `hub dataset row i`), so row parsers never
know where a row came from and every error can say exactly which row it is about. A line that is not valid
JSON becomes a `RawRow` with `error` set rather than an exception, so `on_error="skip"` can count it; so does a row
holding a lone surrogate (JSON's escaped ``"\udcff"``, half of a character): no prompt, API or result file accepts
it, and it would stop the run at the first record it reached.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from clearmed.benchmarks._errors import BenchmarkDataError, BenchmarkSourceError

Row = Mapping[str, object]


def _surrogate_in(value: object, where: str = "") -> str | None:
    """The field (dotted path) of the first string in `value` holding a lone surrogate, or None."""
    if isinstance(value, str):
        return where or "(the row)" if any("\ud800" <= char <= "\udfff" for char in value) else None
    if isinstance(value, Mapping):
        items: Iterable[tuple[object, object]] = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        if isinstance(key, str) and _surrogate_in(key) is not None:
            return f"{where}.{key!r}".lstrip(".")
        found = _surrogate_in(item, f"{where}.{key}".lstrip("."))
        if found is not None:
            return found
    return None


def _row(location: str, index: int, value: dict, group: str | None) -> RawRow:
    field = _surrogate_in(value)
    if field is not None:
        return RawRow(location, index, None, group, error=f"field {field} holds a lone surrogate (not text)")
    return RawRow(location, index, value, group)


@dataclass(frozen=True)
class RawRow:
    """One source row. `index` is its 0-based position in its file or hub split (used for ids)."""

    location: str
    index: int
    data: Row | None
    group: str | None = None  # a specialty / subject taken from the file name or hub config
    error: str | None = None
    revision: str | None = None  # the hub revision the row was read at (`hub_rows`); None for a local file


class HubSpec(BaseModel):
    """One `datasets.load_dataset` call. `path` is a hub id, or a builder ("json", "csv") with `data_files`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    name: str | None = None
    data_files: str | None = None
    split: str = "train"
    sep: str | None = None
    column_names: tuple[str, ...] | None = None
    group: str | None = None
    revision: str | None = None  # a branch, tag or commit of the hub repository (None: its default branch)

    def describe(self) -> str:
        where = self.data_files or self.path
        config = f" config {self.name}" if self.name else ""
        revision = f" revision {self.revision}" if self.revision else ""
        return f"hub {where}{config} split {self.split}{revision}"

    def load_arguments(self) -> tuple[tuple[str, ...], dict[str, object]]:
        """The `datasets.load_dataset` arguments. A revision of files named by ``hf://`` goes into their address
        (``hf://datasets/<repo>@<revision>/...``): a builder's own `revision=` would pick the builder, not the files."""
        kwargs: dict[str, object] = {"split": self.split}
        data_files = self.data_files
        hub_file = (data_files or "").removeprefix(_HUB_FILES).split("/", 2)  # owner, name, path in the repository
        if self.revision is not None and data_files is not None and data_files.startswith(_HUB_FILES):
            owner, name, path = hub_file if len(hub_file) == 3 else ("", "", "")
            if not path:
                raise BenchmarkSourceError(f"{data_files}: not hf://datasets/<owner>/<name>/<file>, so no revision")
            data_files = f"{_HUB_FILES}{owner}/{name}@{self.revision}/{path}"
        elif self.revision is not None:
            kwargs["revision"] = self.revision
        if data_files is not None:
            kwargs["data_files"] = data_files
        if self.sep is not None:
            kwargs["sep"] = self.sep
        if self.column_names is not None:
            # Headerless files (MedExQA TSVs): without header=None the first question would become the header.
            kwargs["column_names"] = list(self.column_names)
            kwargs["header"] = None
        return ((self.path, self.name) if self.name is not None else (self.path,)), kwargs


_HUB_FILES = "hf://datasets/"
_COMMIT = re.compile(r"[0-9a-f]{40}")


def resolved_revision(spec: HubSpec, dataset: object) -> str | None:
    """The commit a hub load read, as far as it can be known offline: a hub repository's prepared copy is cached
    under the commit the hub resolved (the builder's hash, the folder its arrow files are in); files read by a
    builder (``json`` over ``hf://``) are not, so for them it is the revision asked for, if it names a commit or not."""
    if spec.data_files is None:
        for cached in getattr(dataset, "cache_files", None) or []:
            folder = Path(str(cached.get("filename", ""))).parent.name if isinstance(cached, Mapping) else ""
            if _COMMIT.fullmatch(folder):
                return folder
    return spec.revision


def hub_rows(spec: HubSpec) -> Iterator[RawRow]:
    """Rows of one hub dataset split, through `datasets.load_dataset` (imported late: it is slow to import)."""
    import datasets

    args, kwargs = spec.load_arguments()
    try:
        dataset = datasets.load_dataset(*args, **kwargs)
    except Exception as exc:  # hub errors come in many classes (ConnectionError, DatasetNotFoundError, ...)
        raise BenchmarkSourceError(
            f"could not load {spec.describe()}: {type(exc).__name__}: {exc}. "
            "Check the network (HF_HUB_OFFLINE unset), log in for gated datasets, or pass source=<local file>."
        ) from exc
    where, revision = spec.describe(), resolved_revision(spec, dataset)
    for index, record in enumerate(dataset):
        yield RawRow(f"{where} row {index}", index, dict(record), group=spec.group, revision=revision)


def check_file(path: Path) -> Path:
    if not path.exists():
        raise BenchmarkSourceError(f"{path}: no such file or directory")
    if path.is_dir():
        raise BenchmarkSourceError(f"{path}: is a directory, expected a file")
    return path


def read_jsonl(path: Path, *, group: str | None = None) -> Iterator[RawRow]:
    check_file(path)
    index = 0
    # Bytes in, decoded per line: a bad byte is one malformed row with its line number, not a
    # UnicodeDecodeError from deep inside the file iterator that ends the whole load.
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if line_no == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            location = f"{path}:{line_no}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield RawRow(location, index, None, group, error=f"not valid UTF-8 (byte {exc.start} of the line)")
                index += 1
                continue
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                yield RawRow(location, index, None, group, error=f"malformed JSON line ({exc.msg})")
            else:
                if isinstance(value, dict):
                    yield _row(location, index, value, group)
                else:
                    yield RawRow(location, index, None, group, error="JSON line is not an object")
            index += 1


def load_json(path: Path) -> object:
    """A whole JSON document; a syntax error is fatal for the file and names its line."""
    check_file(path)
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise BenchmarkDataError(f"{path}:{exc.lineno}", f"malformed JSON ({exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise BenchmarkSourceError(f"{path}: not valid UTF-8 (byte {exc.start}); re-encode the file as UTF-8") from None


def records_to_rows(path: Path, records: Iterable[object], *, group: str | None = None) -> Iterator[RawRow]:
    for index, value in enumerate(records):
        location = f"{path} [{index}]"
        if isinstance(value, dict):
            yield _row(location, index, value, group)
        else:
            yield RawRow(location, index, None, group, error="record is not an object")


def read_delimited(
    path: Path, *, delimiter: str = ",", fieldnames: tuple[str, ...] | None = None, group: str | None = None
) -> Iterator[RawRow]:
    """CSV/TSV rows with the line each record starts on. `fieldnames` for headerless files."""
    check_file(path)
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, fieldnames=list(fieldnames) if fieldnames else None, delimiter=delimiter)
        start_line = 2 if fieldnames is None else 1
        for index, record in enumerate(_decoded(reader, path, lambda: reader.line_num + 1)):
            location = f"{path}:{start_line}"
            start_line = reader.line_num + 1
            extra = record.pop(None, None)  # DictReader's key for the fields beyond the header
            if extra:
                yield RawRow(location, index, None, group, error=f"{len(extra)} more fields than the header")
            elif any(value is None for value in record.values()):
                missing = [key for key, value in record.items() if value is None]
                yield RawRow(location, index, None, group, error=f"missing columns {missing}")
            else:
                yield RawRow(location, index, record, group)


def _decoded(rows: Iterator[dict], path: Path, line: Callable[[], int]) -> Iterator[dict]:
    """CSV records, with a bad byte reported as the file and line it is on (the reader cannot resync past it)."""
    while True:
        try:
            record = next(rows)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise BenchmarkSourceError(
                f"{path}:{line()}: not valid UTF-8 (byte {exc.start} of the block read); re-encode the file as UTF-8"
            ) from None
        yield record


def read_parquet(path: Path, *, group: str | None = None) -> Iterator[RawRow]:
    check_file(path)
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid and friends
        raise BenchmarkSourceError(f"{path}: not a readable parquet file ({exc})") from exc
    for index, record in enumerate(table.to_pylist()):
        yield RawRow(f"{path} row {index}", index, record, group)


def read_table(path: Path, *, group: str | None = None) -> Iterator[RawRow]:
    """Rows of a file in the hub's row layout, whatever the container: .jsonl, .json (a list), .csv, .parquet."""
    suffix = path.suffix.lower()
    if suffix in {".jsonl", ".ndjson"}:
        return read_jsonl(path, group=group)
    if suffix == ".json":
        value = load_json(path)
        if not isinstance(value, list):
            raise BenchmarkSourceError(f"{path}: expected a JSON list of rows, got {type(value).__name__}")
        return records_to_rows(path, value, group=group)
    if suffix == ".csv":
        return read_delimited(path, group=group)
    if suffix == ".tsv":
        return read_delimited(path, delimiter="\t", group=group)
    if suffix == ".parquet":
        return read_parquet(path, group=group)
    check_file(path)
    raise BenchmarkSourceError(f"{path}: unsupported file type {suffix or '(none)'}; use .jsonl, .json, .csv, .parquet")
