"""The Python API, the one door of every work verb: each takes one typed request (one field per option of its
command, held equal to the parser by tests/test_one_door.py) or its fields as keywords.

A run: `evaluate` takes an `EvalRequest` (request.py; evaluate.py; the questions it runs: questions.py),
`estimate_run` the same request's expected spend; `evaluate_suite` runs a suite's cells as such requests in this
process (the suite as a file or a matrix: suite_file.py) and `merge_shards` joins a run's shards into one finished
folder (suite.py; `MergeRequest` in merge.py);
`compare_runs` puts finished runs side by side with paired tests (compare.py, `CompareRequest`). The other verbs:
`ask` one question (ask.py, `AskRequest`), `compile_prompts` a DSPy optimizer's artifact (compile.py,
`CompileRequest`), `tune_thresholds` the thresholds tuned by replay (tune.py, `TuneRequest`), `build_corpus_index`
and `warm_hit_cache` the local index and its hit cache (index.py, `IndexBuildRequest`, `IndexWarmRequest`; what a
built index holds: index_info.py),
`export_runs` run folders as one table (export.py, `ExportRequest`), `check_config` what `clearmed doctor` checks
(doctor.py, `DoctorRequest`, `DoctorReport`), `report_runs` the static HTML report (report.py, `ReportRequest`),
`export_teacher_traces` a teacher's judge traces as SFT JSONL (sft.py, `SftExportRequest`). errors.py holds the
errors a command ends with in one line, config_choice.py the
config every request names (`-c` and `--set`, or a loaded config).
`build_program` builds a program by name from the config and loads an artifact into it, for a run and for `ask`
alike (assemble.py).

The command line parses its arguments into these requests and calls these functions, so it sits one layer above
(pyproject's import contract: cli above api). The package face (`clearmed/__init__.py`) re-exports them (`compile`
and `tune` for `compile_prompts` and `tune_thresholds`) beside `load_config` and `results_frame`."""
