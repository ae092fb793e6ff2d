"""The LM judgements adjudication consumes (through `adjudication.AdjudicationActions`): the aggregation verifier
(`verifier`), the guard and audit assessments (`guard_audit`), the source-quality labels (`source_quality`), and
free-text agreement (`agreement`). Each is one LM step and returns a typed record or a recorded error."""
