"""Folding look-alike characters to the Latin letters they imitate, so that the evidence screen reads what a model reads.

A model reads "Ignоre previous instructions" (a Cyrillic о) as the English sentence it imitates; a regular expression
over the raw text does not. `fold` returns text in which such look-alikes are the letters they pass for: Unicode
"tag" characters (U+E0020-U+E007E, which spell ASCII text that no one sees) decoded, NFKC (full-width and
mathematical letters, ligatures, circled letters), invisible format characters and combining marks removed, case
folded, and the letters of other scripts that are drawn like Latin ones mapped by `LATIN_LOOK_ALIKES`.

`LATIN_LOOK_ALIKES` is the part of Unicode's confusables table (UTS #39, confusables.txt) whose targets are single
lowercase Latin letters, restricted to the scripts an attacker reaches for (Cyrillic, Greek, Armenian, and Latin's
own small capitals and variants): what is left after NFKC and case folding, which handle the rest. It is written out
as data rather than taken from a package because those 74 rows are all the screen needs, and they never change.

`unleet` is a second, rougher reading for the screen's instruction patterns only: digits and symbols inside words
read as letters ("1gn0re prev10us 1nstruct10ns"), and letters spelt out one by one joined up ("i g n o r e",
"i.g.n.o.r.e"). It is never used for option letters, where "the answer is 4" would read as "the answer is a".
"""

from __future__ import annotations

import re
import unicodedata

# Look-alike -> the Latin letter it is drawn like (lowercase forms: `fold` case-folds first). From UTS #39's
# confusables.txt where the target is one Latin letter; rows for characters NFKC maps to a Latin letter are left out.
LATIN_LOOK_ALIKES: dict[str, str] = {
    # Cyrillic
    "\u0430": "a",  # а
    "\u0432": "b",  # в (drawn as a small capital B)
    "\u0441": "c",  # с
    "\u0501": "d",  # ԁ
    "\u0435": "e",  # е
    "\u04bd": "e",  # ҽ
    "\u0261": "g",  # ɡ (Latin script G, listed with the Cyrillic as both are used)
    "\u04bb": "h",  # һ
    "\u043d": "h",  # н (small capital H)
    "\u0456": "i",  # і
    "\u04cf": "l",  # ӏ (palochka)
    "\u0458": "j",  # ј
    "\u043a": "k",  # к
    "\u043c": "m",  # м (small capital M)
    "\u043e": "o",  # о
    "\u0440": "p",  # р
    "\u051b": "q",  # ԛ
    "\u0455": "s",  # ѕ
    "\u0442": "t",  # т (small capital T)
    "\u0443": "y",  # у
    "\u04af": "y",  # ү
    "\u0445": "x",  # х
    "\u051d": "w",  # ԝ
    "\u0475": "v",  # ѵ
    "\u044c": "b",  # ь
    # Greek
    "\u03b1": "a",  # α
    "\u03b2": "b",  # β
    "\u03f2": "c",  # ϲ (lunate sigma)
    "\u03b5": "e",  # ε
    "\u03b3": "y",  # γ
    "\u03b7": "n",  # η
    "\u03b9": "i",  # ι
    "\u03f3": "j",  # ϳ
    "\u03ba": "k",  # κ
    "\u03bd": "v",  # ν
    "\u03bf": "o",  # ο
    "\u03c1": "p",  # ρ
    "\u03c4": "t",  # τ
    "\u03c5": "u",  # υ
    "\u03c7": "x",  # χ
    "\u03c9": "w",  # ω
    # Armenian
    "\u0561": "w",  # ա
    "\u0563": "q",  # գ
    "\u0566": "q",  # զ
    "\u0570": "h",  # հ
    "\u0578": "n",  # ո
    "\u057d": "u",  # ս
    "\u0581": "g",  # ց
    "\u0585": "o",  # օ
    # Latin letters drawn like other Latin letters: dotless i and j, small capitals, script and turned forms
    "\u0131": "i",  # ı
    "\u0237": "j",  # ȷ
    "\u0251": "a",  # ɑ
    "\u026a": "i",  # ɪ
    "\u029f": "l",  # ʟ
    "\u0274": "n",  # ɴ
    "\u0280": "r",  # ʀ
    "\u0299": "b",  # ʙ
    "\u029c": "h",  # ʜ
    "\u0262": "g",  # ɢ
    "\u1d00": "a",  # ᴀ
    "\u1d04": "c",  # ᴄ
    "\u1d05": "d",  # ᴅ
    "\u1d07": "e",  # ᴇ
    "\u1d0a": "j",  # ᴊ
    "\u1d0b": "k",  # ᴋ
    "\u1d0d": "m",  # ᴍ
    "\u1d0f": "o",  # ᴏ
    "\u1d18": "p",  # ᴘ
    "\u1d1b": "t",  # ᴛ
    "\u1d1c": "u",  # ᴜ
    "\u1d20": "v",  # ᴠ
    "\u1d21": "w",  # ᴡ
    "\u1d22": "z",  # ᴢ
    "\ua731": "s",  # ꜱ
}
_TABLE = str.maketrans(LATIN_LOOK_ALIKES)
# Before case folding and NFKC, the capitals too (NFKC would make "Ϲ" a sigma before case folding saw it).
_TABLE_ANY_CASE = str.maketrans(
    LATIN_LOOK_ALIKES | {key.upper(): latin for key, latin in LATIN_LOOK_ALIKES.items() if len(key.upper()) == 1}
)

# Unicode tag characters spell ASCII invisibly ("ASCII smuggling"); a model may still read them.
_TAG_FIRST, _TAG_LAST, _TAG_OFFSET = 0xE0020, 0xE007E, 0xE0000
_TAGS = re.compile(f"[{chr(_TAG_FIRST)}-{chr(_TAG_LAST)}]")

# Digits and symbols that stand for letters inside a word, and single characters spelt out one by one.
LEET: dict[str, str] = {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "|": "l"}
_LEET_TABLE = str.maketrans(LEET)
_HAS_LEET = re.compile(r"[a-z][0-9@$|]|[0-9@$|][a-z]")
_LEET_WORD = re.compile(r"[\w@$|]*[a-z][\w@$|]*")
_SPELT_OUT = re.compile(r"(?<!\w)(?:\w[ .\-_*·]){2,}\w(?!\w)")
_SEPARATORS = re.compile(r"[ .\-_*·]")


def fold(text: str) -> str:
    """`text` as the letters it shows: NFKC, no invisible characters or accents, tags decoded, case folded,
    look-alikes mapped to Latin."""
    if text.isascii():  # most passages: nothing to fold but case
        return text.lower()
    text = _TAGS.sub(lambda found: chr(ord(found.group(0)) - _TAG_OFFSET), text)
    # The table before NFKC too: NFKC turns a few look-alikes into letters that look like nothing Latin (ϲ -> ς).
    text = unicodedata.normalize("NFKC", text.translate(_TABLE_ANY_CASE))
    text = "".join(
        ch for ch in unicodedata.normalize("NFD", text.casefold()) if unicodedata.category(ch) not in ("Mn", "Cf")
    )
    return unicodedata.normalize("NFC", text.translate(_TABLE))


def unleet(folded: str) -> str:
    """A folded text with in-word digits read as letters and spelt-out words joined (for instruction patterns)."""
    text = folded
    if _HAS_LEET.search(text):
        text = _LEET_WORD.sub(lambda found: found.group(0).translate(_LEET_TABLE), text)
    return _SPELT_OUT.sub(lambda found: _SEPARATORS.sub("", found.group(0)), text)
