"""Judge failures as short, recordable text."""

from __future__ import annotations


def describe_error(exc: Exception, *, limit: int = 1000) -> str:
    """`Type: message`, cut to `limit` characters (a parse error quotes the whole LM response)."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
