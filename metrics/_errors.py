"""Judge failures as short, recordable text."""

from __future__ import annotations

from clearmed.core.sanitize import redact_secrets


def describe_error(exc: Exception, *, limit: int = 1000) -> str:
    """`Type: message`, cut to `limit` characters (a parse error quotes the whole LM response)."""
    text = redact_secrets(f"{type(exc).__name__}: {exc}")  # a judge server may echo the key it was sent
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_transient(exc: BaseException) -> bool:
    """A judge failure a later attempt may not meet (a rate limit, a 5xx, a timeout, a malformed 200): the question is
    degraded and regraded on resume, never scored wrong. The one policy of every LM call (`backbones.failures`)."""
    from clearmed.backbones.failures import classify

    return classify(exc) == "transient"
