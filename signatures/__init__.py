"""clearmed.signatures: the typed records (`records/`, the nouns: read it first), then the DSPy signatures, whose
docstrings and field descriptions are the prompts: `clear` (CLEAR's steps), `option_judge` (the MedJudgeRAG judge),
`qpis` (query planning), `web_query` (the web query writer), `grading` (free-text and rubric grading)."""
