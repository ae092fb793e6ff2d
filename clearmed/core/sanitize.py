"""Text hygiene at the record boundary: invisible control characters out, secrets redacted.

`clean_text` runs on every question and passage text as the records are built, so terminal escape
sequences, NUL bytes and invisible formatting characters (bidi overrides, zero-width spaces) never reach a
prompt, a terminal or a result file; they also hide words from the evidence screen ("ig<ZWSP>nore").
`mend_surrogates` runs on a record that could not be written because a reply held half a character (a lone UTF-16
surrogate): it becomes U+FFFD, and the runner notes it in the trail. `redact_secrets` runs on every recorded error
message, because provider errors sometimes quote the
credentials they were sent, and recorded errors end up in run folders, logs and terminals.

Secrets are recognised by value, not only by shape: the config registers every credential it resolves
(`register_secret_env` for each `api_key_env` and the Tavily key's variable, `register_secret` for the user and
password in an `api_base`), and `redact_secrets` masks those values whatever they look like, as well as environment
values under credential-like names and anything shaped like a key.
"""

from __future__ import annotations

import base64
import os
import re
import threading
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

# C0 and C1 controls except tab and newline; DEL; and the invisible format characters that reorder or hide
# text (soft hyphen, zero-width space/joiners, LRM/RLM, bidi embeddings and isolates, word joiner, BOM).
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")

# Environment variables whose values are credentials, by name; shorter values are too common to redact.
_SECRET_NAME = re.compile(r"API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|ACCESS_?KEY", re.IGNORECASE)
_MIN_SECRET = 8
# Key shapes worth hiding even when they are not in this process's environment (a proxy echoing another key).
_KEY_SHAPES = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{12,}"
    r"|\btvly-[A-Za-z0-9_\-]{12,}"
    r"|\bhf_[A-Za-z0-9]{12,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|(?i:\bbearer\s+)[A-Za-z0-9._\-+/=]{12,}"
)
REDACTED = "***"
# A registered secret is known to be one: masked from this length on (shorter ones would mask common words).
_MIN_REGISTERED = 6
_REGISTRY_LOCK = threading.Lock()
_REGISTERED_VALUES: set[str] = set()
_REGISTERED_NAMES: set[str] = set()


def register_secret(value: str | None) -> None:
    """Mask `value` in every text `redact_secrets` cleans from now on (a key, a password)."""
    value = (value or "").strip()
    if len(value) >= _MIN_REGISTERED:
        with _REGISTRY_LOCK:
            _REGISTERED_VALUES.add(value)


def register_secret_env(name: str | None) -> None:
    """Mask the value of environment variable `name` (read at each redaction: a key set later is masked too)."""
    if name:
        with _REGISTRY_LOCK:
            _REGISTERED_NAMES.add(name)


def register_url_credentials(url: str | None) -> None:
    """Mask the user and password of a URL such as ``http://user:password@host/v1``, as written, decoded, and as
    the Basic authorization a client derives from them."""
    if not url:
        return
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    user, password = parts.username, parts.password
    if password is None:
        register_secret(user)
        return
    for raw in (password, unquote(password)):
        register_secret(raw)
    pair = f"{unquote(user or '')}:{unquote(password)}"
    register_secret(pair)
    register_secret(base64.b64encode(pair.encode()).decode())


def clean_text(text: str) -> str:
    """`text` with line breaks normalised to \\n and control and invisible formatting characters removed."""
    if not text:
        return text
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _INVISIBLE.sub("", text)


# UTF-16 surrogates: a pair is one character split in two (which `_PAIR` joins again); one alone is half a character,
# which no UTF-8 file can hold.
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def mend_surrogates(text: str) -> tuple[str, int]:
    """`text` with each surrogate pair joined into its character and each lone surrogate (half a character, as a model
    that cut an emoji in two sends it) replaced by U+FFFD; and how many were replaced."""
    if not _SURROGATE.search(text):
        return text, 0
    joined = _PAIR.sub(lambda m: m.group(0).encode("utf-16", "surrogatepass").decode("utf-16"), text)
    return _SURROGATE.subn(REPLACEMENT, joined)


def mend_surrogates_in(data: object) -> tuple[object, int]:
    """`mend_surrogates` over every string of JSON-like data (dicts, lists, strings); the data and the count."""
    if isinstance(data, str):
        return mend_surrogates(data)
    if isinstance(data, dict):
        items = [(mend_surrogates_in(key), mend_surrogates_in(value)) for key, value in data.items()]
        return {k: v for (k, _), (v, _) in items}, sum(a + b for (_, a), (_, b) in items)
    if isinstance(data, list | tuple):
        mended = [mend_surrogates_in(item) for item in data]
        return [item for item, _ in mended], sum(count for _, count in mended)
    return data, 0


def mend_inputs(inputs: Mapping[str, object]) -> dict[str, object]:
    """A call's inputs with every half character in their texts (and lists and dicts of texts) replaced
    (`mend_surrogates_in`): a reply cut mid-emoji that a later prompt quotes reaches the model as U+FFFD, where it
    would fail the call (no provider can receive a lone surrogate) and drop that step. Other values pass as they are."""
    mended: dict[str, object] = {}
    for name, value in inputs.items():
        repaired, count = mend_surrogates_in(value) if isinstance(value, str | list | dict) else (value, 0)
        mended[name] = repaired if count else value
    return mended


def _environment_secrets() -> list[str]:
    values = {
        value.strip()
        for name, value in os.environ.items()
        if _SECRET_NAME.search(name) and len(value.strip()) >= _MIN_SECRET
    }
    with _REGISTRY_LOCK:
        values |= _REGISTERED_VALUES
        names = list(_REGISTERED_NAMES)
    values |= {value for name in names if len(value := os.environ.get(name, "").strip()) >= _MIN_REGISTERED}
    return sorted(values, key=len, reverse=True)  # longest first, so a key containing another is hidden whole


def redact_secrets(text: str) -> str:
    """`text` with the registered secrets, credential values from the environment, and anything shaped like an API
    key, replaced."""
    if not text:
        return text
    for secret in _environment_secrets():
        text = text.replace(secret, REDACTED)
    return _KEY_SHAPES.sub(lambda match: _keep_scheme(match.group(0)), text)


def _keep_scheme(found: str) -> str:
    # "Bearer sk-..." -> "Bearer ***": the reader still sees what kind of credential was involved.
    scheme = re.match(r"(?i)bearer\s+", found)
    return (scheme.group(0) if scheme else "") + REDACTED
