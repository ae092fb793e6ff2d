"""MIRAGE's predictions (github.com/Teddy-XiongGZ/MIRAGE ``prediction/``) as recorded pathways: one folder per
setting and model, ``<subset>/cot/OpenAI/<model>/`` (CoT, no retrieval: the parametric pathway) and
``<subset>/rag_32/OpenAI/<model>/medcorp/RRF-4/`` (MedRAG over MedCorp: the local pathway), holding ``test_<id>.json``
(``dev_<id>.json`` for MedMCQA): a JSON list whose first string is the model's raw reply, normally
``{"step_by_step_thinking": ..., "answer_choice": ...}``.

The answer is located as MIRAGE's own evaluation does (``src/utils.py`` ``locate_answer``: the text after
``"answer_choice": "``, then its chain of patterns), with two differences, both so that no answer is made up:
where MIRAGE falls back to letter A, a reply whose answer cannot be located is recorded as unparseable; and an
answer that names an option's text without its letter takes that option's letter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from clearmed.recorded.pathway import LocatedBy, RecordedPathway, RecordedPathwayError, RecordedReply
from clearmed.signatures.records import PathwayName, Question

__all__ = ["locate_answer", "mirage_reply", "normalised", "read_mirage"]


def _choice_pattern(letters: Sequence[str]) -> str:
    return "(" + "|".join(re.escape(letter) for letter in letters) + ")"


def _mirage_patterns(letters: Sequence[str]) -> list[re.Pattern[str]]:
    """MIRAGE's ``locate_answer`` chain, in its order, over the question's own letters (A-D there)."""
    x = _choice_pattern(letters)
    return [
        re.compile(rf"^\s*{x}$"),
        re.compile(rf"^\s*{x} or"),
        re.compile(rf"^\s*{x} and"),
        re.compile(rf"^\s*{x}/"),
        re.compile(rf"^\s*{x},"),
        re.compile(rf"[Oo]ption {x}"),
        re.compile(rf":\s*{x}"),
        re.compile(rf"^\s*{x}\."),
        re.compile(rf'^\s*{x}"'),
        re.compile(rf"^\s*{x}:"),
    ]


def normalised(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def locate_answer(choice: str, options: Mapping[str, str]) -> tuple[str | None, LocatedBy | None]:
    """The option letter a recorded answer names, and how it was found; (None, None) when it names none."""
    letters = sorted(options)
    stripped = choice.strip()
    if stripped in letters:
        return stripped, "letter"
    for pattern in _mirage_patterns(letters):
        found = pattern.search(choice)
        if found:
            return found.group(1), "pattern"
    wanted = normalised(stripped.removesuffix('"}'))
    named = [letter for letter, text in options.items() if wanted and normalised(text) == wanted]
    return (named[0], "option_text") if len(named) == 1 else (None, None)


def _unfenced(reply: str) -> str:
    text = reply.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


def mirage_reply(question: Question, raw: object, source: str) -> RecordedReply:
    """One MIRAGE prediction file's content (already JSON-decoded) as a recorded reply."""
    reply = raw[0] if isinstance(raw, list) and raw and isinstance(raw[0], str) else None
    if reply is None:
        return RecordedReply(question_id=question.id, status="unparseable", source=source)
    rationale, choice = reply, reply.split('"answer_choice": "')[-1]
    try:
        decoded = json.loads(_unfenced(reply))
    except json.JSONDecodeError:
        decoded = None
    if isinstance(decoded, dict) and "answer_choice" in decoded:
        choice = str(decoded.get("answer_choice") or "")
        rationale = str(decoded.get("step_by_step_thinking") or "")
    letter, located_by = locate_answer(choice, question.options or {})
    return RecordedReply(
        question_id=question.id,
        status="ok" if letter else "unparseable",
        letters=(letter,) if letter else (),
        located_by=located_by,
        rationale=rationale.strip(),
        raw_reply=reply,
        source=source,
    )


def _mirage_file(folder: Path, question: Question) -> Path:
    from clearmed.benchmarks._mirage import PREDICTION_SPLIT, native_id

    try:
        subset, native = native_id(question.id)
    except ValueError as exc:
        raise RecordedPathwayError(
            f"{folder}: MIRAGE predictions are filed under MIRAGE's ids; {exc} (run a mirage-* benchmark)"
        ) from None
    return folder / f"{PREDICTION_SPLIT.get(subset, 'test')}_{native}.json"


def _mirage_model(folder: Path) -> str:
    # prediction/<subset>/cot/<org>/<model>/ or prediction/<subset>/rag_32/<org>/<model>/<corpus>/<retriever>/
    parts = folder.resolve().parts
    for setting in ("cot", "rag_32"):
        if setting in parts:
            index = parts.index(setting)
            return "/".join(parts[index + 1 : index + 3])
    return folder.name


def read_mirage(folder: Path, pathway: PathwayName, questions: Sequence[Question]) -> RecordedPathway:
    replies: dict[str, RecordedReply] = {}
    for question in questions:
        path = _mirage_file(folder, question)
        if not path.is_file():
            replies[question.id] = RecordedReply(question_id=question.id, status="missing", source=str(path))
            continue
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raw = None
        replies[question.id] = mirage_reply(question, raw, str(path))
    return RecordedPathway(
        pathway=pathway, layout="mirage", path=str(folder), model=_mirage_model(folder), replies=replies
    )
