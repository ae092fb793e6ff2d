"""`report_runs`: a static HTML report of run folders, the door of `clearmed report`. A suite's folder stands for
every run below it (`results_table.run_folders`): one report of all the suite's runs, with each run's pages and a
comparison per benchmark, in SUITE/report by default. `ReportRequest` holds one field per option of the command; the
pages are written by `clearmed.report.html_report`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from clearmed.core.errors import UsageError

if TYPE_CHECKING:
    from clearmed.report.html_report import HtmlReport


class ReportRequest(BaseModel):
    """One field per `clearmed report` option of the same name (the folders are `runs`)."""

    model_config = ConfigDict(extra="forbid")

    runs: list[str | Path]  # run folders of `clearmed eval`, or a suite's folder (every run below it)
    out: str | Path | None = None  # the report's folder; default with one folder: FOLDER/report


def report_runs(request: ReportRequest | None = None, /, **fields: Any) -> HtmlReport:
    """Write the report of the request's folders; several folders and no `out` is one `UsageError`."""
    from clearmed.numbers.results_table import run_folders
    from clearmed.report.html_report import write_html_report

    request = request if request is not None else ReportRequest(**fields)
    given = [Path(folder) for folder in request.runs]
    if request.out:
        out = Path(request.out)
    elif len(given) == 1:
        out = given[0] / "report"
    else:
        raise UsageError("several run folders need --out (the folder for the report)")
    return write_html_report(run_folders(given), out)
