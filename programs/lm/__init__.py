"""The DSPy plumbing every LM step shares: one stage and the typed results the steps hand each other (`stage`),
the run context (`context`), what a prompt holds and how much of it fits (`prompting`), and reading what the model
wrote (`parsing`)."""
