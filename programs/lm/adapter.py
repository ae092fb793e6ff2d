"""A ChatAdapter that forgives the formatting slips of small models on enumerated and boolean fields.

DSPy parses `Literal` outputs case-sensitively and booleans as JSON, so "Consensus", "keep local",
"Yes" or "**high**" fail a whole call. Here such values are normalised onto the allowed spelling before
DSPy's own parser runs; a value that still matches nothing fails as before and is recorded upstream.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any, Literal, get_args, get_origin

import dspy
from dspy.adapters.chat_adapter import ChatAdapter

_HEADER = re.compile(r"^\s*\[\[ ## (\w+) ## \]\](.*)$")
_TRUE = {"true", "yes", "y", "1"}
_FALSE = {"false", "no", "n", "0"}


def _key(text: str) -> str:
    return re.sub(r"[\s\-]+", "_", re.sub(r"[*`\"'.,;:!()]", "", text).strip().casefold())


def normalise_literal(value: str, allowed: tuple[Any, ...]) -> str:
    """Map a loosely written value onto one allowed Literal value, or return it unchanged."""
    wanted = _key(value)
    by_key = {_key(str(option)): str(option) for option in allowed}
    if wanted in by_key:
        return by_key[wanted]
    first_word = _key(value.split()[0]) if value.split() else ""
    return by_key.get(first_word, value)


def normalise_bool(value: str) -> str:
    word = _key(value.split()[0]) if value.split() else ""
    if word in _TRUE:
        return "true"
    if word in _FALSE:
        return "false"
    return value


def _is_literal(annotation: object) -> bool:
    return get_origin(annotation) is Literal


def _is_optional_bool(annotation: object) -> bool:
    if annotation is bool:
        return True
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return bool in get_args(annotation)
    return False


class TolerantChatAdapter(ChatAdapter):
    """ChatAdapter whose parse step first normalises Literal and bool field values."""

    def parse(self, signature: type[dspy.Signature], completion: str) -> dict[str, Any]:
        return super().parse(signature, self._normalise(signature, completion))

    def _normalise(self, signature: type[dspy.Signature], completion: str) -> str:
        out: list[str] = []
        field: str | None = None
        for line in completion.splitlines():
            header = _HEADER.match(line)
            if header:
                field = header.group(1)
                rest = header.group(2).strip()
                out.append(line[: header.start(2)].rstrip())
                if not rest:
                    continue
                line = rest
            out.append(self._normalise_value(signature, field, line))
        return "\n".join(out)

    @staticmethod
    def _normalise_value(signature: type[dspy.Signature], field: str | None, line: str) -> str:
        info = signature.output_fields.get(field) if field else None
        if info is None or not line.strip():
            return line
        if _is_literal(info.annotation):
            return normalise_literal(line.strip(), get_args(info.annotation))
        if _is_optional_bool(info.annotation):
            return normalise_bool(line.strip())
        return line
