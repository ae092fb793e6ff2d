"""The LM judgements adjudication consumes (through `adjudication.AdjudicationActions`): the aggregation verifier,
the guard and audit assessments, the source-quality labels, and free-text agreement. Each is one LM step and
returns a typed record or a recorded error."""
