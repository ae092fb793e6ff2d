"""The LM judgements adjudication consumes (through `adjudication.AdjudicationActions`): the aggregation verifier,
the follow-up search, the guard and audit assessments, the source-quality labels, and free-text agreement."""
