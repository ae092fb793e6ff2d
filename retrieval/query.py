"""Queries for the local and dynamic pathways, built from a `Question`."""

from __future__ import annotations

from clearmed.signatures.records import Question


def build_query(question: Question, include_options: bool = False) -> str:
    """The retrieval query for a question.

    Question text only by default: the CLEAR/MIRAGE convention, which keeps retrieval from being steered
    towards whichever option shares the most words with the corpus. `include_options=True` appends the
    option texts (without letters), which raises recall when the stem alone is vague ("Which of the
    following ...").
    """
    query = question.text
    if include_options and question.options:
        query = f"{query} {' '.join(question.options[letter] for letter in question.letters)}"
    return " ".join(query.split())
