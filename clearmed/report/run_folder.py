"""A finished run folder's views: summary.json, summary.md, leakage.json, plots/ and the HTML report, written by the
one function every door calls when a run ends (`clearmed eval`, `clearmed.evaluate`, `clearmed merge`), also when a
budget stopped it. It lives above the harness (clearmed.evaluation keeps the numbers and draws nothing)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from clearmed.evaluation.spend import Prices
from clearmed.evaluation.store import RunStore, RunStoreError, read_records, read_set_aside_degraded
from clearmed.evaluation.summary import RunSummary, summarize
from clearmed.metrics import audit_leakage
from clearmed.report.markdown import comparison_table, details_markdown
from clearmed.report.plots import write_plots


def finish_run_folder(
    run_dir: Path, prices: Prices | None, console: Console, *, interrupted: bool = False
) -> RunSummary:
    """Summarize what a run folder holds into summary.json, summary.md, leakage.json and plots/, then write its HTML
    report (RUN_DIR/report; a report that cannot be written is a warning on `console`). `prices` are the run's
    backbones' (`Prices.of(config)`, or `compare.snapshot_prices` of the folder); `interrupted`: Ctrl-C stopped the
    run (the summary says so)."""
    from clearmed.evaluation.spend_log import paid_calls  # it imports the programs' usage sink
    from clearmed.report.html_report import write_run_report  # Jinja2 is imported when a report is written

    records = sorted(read_records(run_dir), key=lambda record: record.index)
    with RunStore(run_dir) as store:
        manifest = store.read_manifest()
        if manifest is None:
            raise RunStoreError(f"{run_dir}: no manifest.json (is it a run folder?)")
        audits = [audit_leakage(r.decision.bundle.question, r.decision) for r in records]
        summary = summarize(
            records,
            manifest,
            seed=manifest.seed,
            leaks=audits,
            prices=prices,
            set_aside=read_set_aside_degraded(run_dir),
            paid=paid_calls(run_dir),
            interrupted=interrupted,
        )
        store.write_json("summary.json", summary.model_dump_json(indent=2))
        store.write_json("summary.md", comparison_table([summary]) + details_markdown([summary]))
        store.write_json("leakage.json", json.dumps([a.model_dump() for a in audits if a.flagged], indent=2))
        write_plots([summary], run_dir / "plots")
    write_run_report(run_dir, console)  # after the lock is released: the report only reads the folder
    return summary
