"""The DSPy plumbing every LM step shares: one stage (`stage.py`: role LM, budget, usage row, recorded failure),
the run context, the adapter's parse fallback, answer parsing, formatting for prompts, and the typed results the
modules return to each other."""
