"""One-line configuration errors, shared by every section of a clearmed config file.

A user who mistypes a TOML value should see *where* (file and dotted field path) and *what* in one line,
never a traceback or the pydantic multi-line report. Values are deliberately never echoed: a misplaced
API key must not end up in a terminal, a log or a CI transcript.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

__all__ = ["ConfigError", "FieldRuleError", "format_validation_error", "join_location"]


class ConfigError(Exception):
    """A configuration problem, reported as one line: ``<file>: <dotted.field>: <what is wrong>``."""

    def __init__(self, message: str) -> None:
        super().__init__(_one_line(message))


class FieldRuleError(ValueError):
    """Raised by cross-field (model) validators to attribute a problem to one field.

    Pydantic gives model-level validation errors an empty location; carrying the field name here lets
    `format_validation_error` print ``backbones.main.api_base: ...`` rather than ``backbones.main: ...``.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# Extra keys that are almost always a secret pasted into the file: say where the secret belongs instead.
_EXTRA_KEY_HINTS = {
    "api_key": "put the key in an environment variable and name that variable in api_key_env",
    "key": "put the key in an environment variable and name that variable in api_key_env",
    "token": "put the token in an environment variable and name that variable in api_key_env",
}


def join_location(*parts: str | int) -> str:
    """Dotted path for display: ``("backbones", "main", "temperature") -> "backbones.main.temperature"``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part:
            out = f"{out}.{part}" if out else str(part)
    return out


def format_validation_error(err: ValidationError, source: str, prefix: str) -> str:
    """Render a pydantic ValidationError as ONE line naming the file and each failing dotted field.

    ``source`` is the config file (``""`` when unknown); ``prefix`` the dotted path of the validated table
    (e.g. ``"backbones.main"``). Several errors are joined with ``"; "``. Input values are never included.
    """
    items: list[str] = []
    for detail in err.errors(include_url=False, include_input=False, include_context=True):
        loc: list[str | int] = [p for p in detail["loc"] if isinstance(p, str | int)]
        msg = str(detail["msg"])
        cause = (detail.get("ctx") or {}).get("error")
        if isinstance(cause, FieldRuleError):
            loc.append(cause.field)
            msg = str(cause)
        elif detail["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")
        elif detail["type"] == "extra_forbidden":
            msg = "unknown key"
            hint = _EXTRA_KEY_HINTS.get(str(loc[-1]).lower()) if loc else None
            if hint:
                msg = f"{msg} ({hint})"
        elif detail["type"] == "missing":
            msg = "required key is missing"
        items.append(f"{join_location(prefix, *loc) or '<root>'}: {msg}")
    body = "; ".join(items) or "invalid configuration"
    return _one_line(f"{source}: {body}" if source else body)


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
