"""The numbers of finished runs, read from their folders (the harness that makes them is clearmed.evaluation; their
tables, plots and reports are clearmed.report's):

- `compare`: runs side by side, paired on their common questions (accuracy, McNemar, spend);
- `results_table`: run folders as data frames, a row per question or per run, each naming its run (a suite's folder
  as its runs);
- `estimate`: a run's expected spend and time before it starts (`--estimate`), from earlier runs of the same kind;
- `scoring`: the grader a run scores its answers with (free text needs a judge backbone).

It draws nothing (an import-linter contract: no matplotlib, Jinja2 or report/).
"""
