"""The ground every part stands on: the error types, the retry policy and secret redaction. It imports nothing
of clearmed above it."""
