"""Medical-aware tokenisation, shared by every BM25 backend so that they index and query alike.

Generic IR tokenisers (bm25s' default `\\b\\w\\w+\\b` with English stopwords) drop exactly the tokens that
carry medical meaning: "B12", "T4", "K", "IL-6", "5 mg". Here: Unicode-normalised, case-folded, alphanumeric
runs kept whole ("hba1c", "b12"), short tokens and numbers kept, hyphenated compounds indexed both as parts
and joined ("il-6" -> "il", "6", "il6") when a part is short or numeric, a compact stopword list, no
stemming by default.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from pydantic import BaseModel, ConfigDict

# Decimal numbers stay one token ("0.5", "7.4"); other runs of letters/digits joined by hyphens are
# compounds, split below. `[^\W_]` means "word character but not underscore", so Greek letters survive.
_TOKEN = re.compile(r"\d+(?:[.,]\d+)+|[^\W_]+(?:['’][^\W_]+)*(?:-[^\W_]+(?:['’][^\W_]+)*)*")
_POSSESSIVE = re.compile(r"['’]s$")

# Compact on purpose: common function words only. Negations ("no", "not", "without") are kept because in a
# clinical question they change the meaning; single letters other than "a"/"i" are kept (vitamin K).
STOPWORDS: frozenset[str] = frozenset(
    """a an and are as at be been being but by can could did do does doing for from had has have having he
    her here hers him his how i if in into is it its itself just me more most my of on or our ours she should
    so some such than that the their theirs them then there these they this those through to too under until
    up very was we were what when where which while who whom why will with would you your yours also may
    might must shall about above after again against all am any because before below between both during
    each few further once only other own same over out off""".split()  # noqa: SIM905
)

StemMode = Literal["none", "simple"]


class TokenizerConfig(BaseModel):
    """Tokeniser settings; stored in every saved index so queries are tokenised the way the index was."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stopwords: bool = True
    stem: StemMode = "none"


def _simple_stem(token: str) -> str:
    """A plural-only S-stemmer (Harman 1991): conservative, applied to documents and queries alike."""
    if len(token) <= 3 or not token.isalpha():
        return token
    if token.endswith("ies") and not token.endswith(("eies", "aies")):
        return token[:-3] + "y"
    if token.endswith("es") and not token.endswith(("aes", "ees", "oes")):
        # "diabetes", "herpes", "caries": Latin/Greek singulars ending in -es are common in medicine; only
        # strip
        # the -s so "doses" -> "dose" and "diabetes" -> "diabete" are at least applied to queries and docs
        # alike.
        return token[:-1]
    if token.endswith("s") and not token.endswith(("us", "ss", "is")):
        return token[:-1]
    return token


class Tokenizer:
    """Callable text -> tokens. Construct once; it is stateless and thread-safe."""

    def __init__(self, config: TokenizerConfig | None = None) -> None:
        self.config = config or TokenizerConfig()
        self._stop = STOPWORDS if self.config.stopwords else frozenset()
        self._stem = self.config.stem == "simple"

    def __call__(self, text: str) -> list[str]:
        return self.tokenize(text)

    def tokenize(self, text: str) -> list[str]:
        # NFKC folds full-width digits, ligatures and superscripts ("HbA₁c" -> "HbA1c") before case folding.
        normalised = unicodedata.normalize("NFKC", text).casefold()
        out: list[str] = []
        for match in _TOKEN.finditer(normalised):
            word = _POSSESSIVE.sub("", match.group())
            if "-" in word:
                parts = [part.replace("'", "").replace("’", "") for part in word.split("-") if part]
                out.extend(self._keep(part) for part in parts if part not in self._stop)
                # Joined form for things like IL-6, COVID-19, T-cell, so "IL6" and "IL-6" meet.
                if any(len(part) <= 2 or any(ch.isdigit() for ch in part) for part in parts):
                    out.append("".join(parts))
            else:
                word = word.replace("'", "").replace("’", "")
                if word and word not in self._stop:
                    out.append(self._keep(word))
        return out

    def _keep(self, token: str) -> str:
        return _simple_stem(token) if self._stem else token
