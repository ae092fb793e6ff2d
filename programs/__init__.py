"""clearmed.programs: the DSPy programs and the adjudication procedure, in layers (each imports only those
above it in this list, never one below or beside it):

- `adjudication/`: the kernel, CLEAR's procedure over typed records with no LM in reach (importing it loads no
  DSPy): `adjudicate`, the actions interface, the rules, the guard and audit contest, the calibrated verifier,
  letter and free-text agreement;
- `lm/`: the DSPy plumbing every LM step shares: one stage and the typed results it returns (`stage`), the run
  context (`context`), what a prompt holds and how much fits (`prompting`), reading what the model wrote (`parsing`);
- `assessors/`: the LM judgements adjudication consumes: verifier, guard and audit, source quality, free-text
  agreement;
- `judge/`: the option-wise judge (MedJudgeRAG) and its verdict rules;
- `pathways/`: the parametric, local and dynamic pathways, their evidence search, the scored answer step, the web
  query, QPIS, the follow-up search and the task adapters (format gate, response);
- `clear.py` (`CLEAR`, `LiveActions`) and `baselines.py`: the programs, composed of the parts above; `catalog.py`:
  the names a user runs them by (`clearmed eval --program`), each with what it runs.

Import a name from the module that defines it; this package re-exports nothing, so importing it (or the kernel)
loads neither DSPy nor a backend.
"""
