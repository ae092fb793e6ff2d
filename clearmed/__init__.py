"""clearmed: cross-source evidence adjudication for medical QA, as a DSPy program."""

__version__ = "0.1.0"
