"""Small typed accessors for row fields, so every parser reports missing or mistyped fields the same way."""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence

from clearmed.benchmarks._errors import RowError, UnusableRow
from clearmed.signatures.records import MetadataValue

LETTERS = string.ascii_uppercase


def field(row: Mapping[str, object], name: str) -> object:
    if name not in row:
        raise RowError(f"missing field {name!r} (fields present: {sorted(row)})")
    return row[name]


def text(row: Mapping[str, object], name: str, *, allow_empty: bool = False) -> str:
    value = field(row, name)
    if not isinstance(value, str):
        raise RowError(f"field {name!r} should be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise RowError(f"field {name!r} is empty")
    return value.strip()


def optional_text(row: Mapping[str, object], name: str) -> str | None:
    value = row.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RowError(f"field {name!r} should be a string, got {type(value).__name__}")
    return value.strip() or None


def integer(row: Mapping[str, object], name: str) -> int:
    value = field(row, name)
    if isinstance(value, bool):
        raise RowError(f"field {name!r} should be an integer, got a bool")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise RowError(f"field {name!r} should be an integer, got {value!r}")


def string_list(row: Mapping[str, object], name: str) -> list[str]:
    """A list of strings; also accepts a JSON- or Python-style list written as a string (CSV copies)."""
    value = field(row, name)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RowError(f"field {name!r} should be a list, got the string {value[:60]!r}") from exc
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise RowError(f"field {name!r} should be a list of strings")
    return [item for item in value]


def letter_options(texts: Sequence[str]) -> dict[str, str]:
    """Options A, B, C, ... from a list, refusing lists the `Question` schema cannot hold."""
    if len(texts) > len(LETTERS):
        raise RowError(f"{len(texts)} options is more than A-Z")
    return check_options({LETTERS[i]: option for i, option in enumerate(texts)})


def check_options(options: Mapping[str, str]) -> dict[str, str]:
    """Blank or repeated option texts are upstream data issues: the row is unusable, not malformed."""
    blank = [letter for letter, option in options.items() if not option.strip()]
    if blank:
        raise UnusableRow(f"options {blank} have empty text")
    seen: dict[str, str] = {}
    for letter, option in options.items():
        key = option.strip().casefold()
        if key in seen:
            raise UnusableRow(f"options {seen[key]} and {letter} have the same text {option.strip()!r}")
        seen[key] = letter
    return {letter: option.strip() for letter, option in options.items()}


def gold_in_options(gold: Sequence[str], options: Mapping[str, str]) -> list[str]:
    if not gold:
        raise RowError("the gold answer is empty")
    missing = [letter for letter in gold if letter not in options]
    if missing:
        raise RowError(f"gold {missing} is not among the options {sorted(options)}")
    return sorted(set(gold))


def split_letters(value: str) -> list[str]:
    """`"A"`, `"A,C"`, `"A, C"` -> letters; anything else is malformed."""
    letters = [part.strip().upper() for part in value.split(",") if part.strip()]
    bad = [letter for letter in letters if len(letter) != 1 or letter not in LETTERS]
    if bad or not letters:
        raise RowError(f"gold answer {value!r} is not a letter or comma-separated letters")
    return letters


def metadata_value(value: object) -> MetadataValue:
    """Keep metadata that fits `MetadataValue`; lists are kept when they are lists of strings."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return list(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def mapping_options(row: Mapping[str, object], name: str) -> dict[str, str]:
    """Options stored as {letter: text}. Missing (None) and blank slots are padding and are dropped: the hub's
    JSON builder fills absent keys with None, and MedBullets' 4-option split keeps an empty "E"."""
    value = field(row, name)
    if isinstance(value, list):  # bigbio "source" schema: [{"key": "A", "value": "..."}]
        pairs: dict[str, object] = {}
        for item in value:
            if not isinstance(item, dict) or "key" not in item or "value" not in item:
                raise RowError(f"field {name!r} should map letters to texts")
            pairs[str(item["key"])] = item["value"]
        value = pairs
    if not isinstance(value, dict):
        raise RowError(f"field {name!r} should map letters to texts, got {type(value).__name__}")
    options: dict[str, str] = {}
    for key, option in value.items():
        if option is None or (isinstance(option, str) and not option.strip()):
            continue
        if not isinstance(key, str) or len(key) != 1 or key not in LETTERS:
            raise RowError(f"option key {key!r} is not a capital letter")
        if not isinstance(option, str):
            raise RowError(f"option {key} should be a string, got {type(option).__name__}")
        options[key] = option
    if len(options) < 2:
        raise RowError(f"field {name!r} has fewer than two options")
    return check_options(options)
