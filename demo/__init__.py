"""The built-in demo bundle (CC0, see README.md in this folder): a dozen questions, a small textbook and web-like
pages, written for clearmed.

It lets `clearmed ask --demo ...` and a demo evaluation run anywhere, with no data download and no network.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path

from clearmed.core.errors import UsageError
from clearmed.signatures.records import Question

__all__ = [
    "demo_dir",
    "demo_question",
    "demo_questions",
]


def demo_dir() -> Path:
    return Path(str(resources.files("clearmed.demo")))


@cache
def demo_questions() -> tuple[Question, ...]:
    path = demo_dir() / "questions.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    return tuple(Question.model_validate(json.loads(line)) for line in lines if line.strip())


def demo_question(question_id: str) -> Question:
    """A demo question by id (`demo-01`), or by number (`1`)."""
    questions = demo_questions()
    wanted = question_id if not question_id.isdigit() else f"demo-{int(question_id):02d}"
    for question in questions:
        if question.id == wanted:
            return question
    raise UsageError(f"no demo question {question_id!r}; the ids are {', '.join(q.id for q in questions)}")
