"""The Python API, the one door of a run: `evaluate` takes an `EvalRequest` (every option of `clearmed eval`) or its
fields as keywords, `estimate_run` the same request's expected spend. The command line parses its arguments into
the request and calls it, so it sits one layer above (pyproject's import contract: cli above api). The package face
(`clearmed/__init__.py`) re-exports these beside `load_config`, `build_program` and `results_frame`."""
