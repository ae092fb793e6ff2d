"""The Python API, the one door of a run: `evaluate` takes an `EvalRequest` (every option of `clearmed eval`,
request.py) or its fields as keywords (evaluate.py; the questions it runs: questions.py), `estimate_run` the same
request's expected spend; `evaluate_suite` runs a suite's cells as such requests in this process and `merge_shards`
joins a run's shards into one finished folder (suite.py); `compare_runs` puts finished runs side by side with paired
tests and writes a comparison's files (compare.py); `build_program` builds a program by name from the config, and
loads an artifact into it, for a run and for `clearmed ask` alike (assemble.py). The command line parses its
arguments into the request (or the suite) and calls these, so it sits one layer above (pyproject's import contract:
cli above api). The package face (`clearmed/__init__.py`) re-exports them beside `load_config`, `build_program` and
`results_frame`."""
