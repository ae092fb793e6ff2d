"""The typed DSPy signature that writes the dynamic pathway's web query from a long question.

Web search engines take short queries (Tavily refuses more than 400 characters) and rank better on the
findings than on a whole vignette. The query must never carry option letters: they mean nothing to a search
engine, and the options' texts would steer the results towards one answer.
"""

from __future__ import annotations

import dspy


class WriteWebQuery(dspy.Signature):
    """Write one web search query for the medical question: its key clinical findings and what it asks for
    (for example the most likely diagnosis, the mechanism of a drug, the next step in management), as a short
    phrase or keywords. Never include option letters or the answer options."""

    question: str = dspy.InputField(desc="the medical question, possibly a long clinical vignette")
    max_characters: int = dspy.InputField(desc="the longest query the search engine accepts")
    query: str = dspy.OutputField(desc="the search query, on one line")
