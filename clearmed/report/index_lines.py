"""An index report as the lines a person reads (`clearmed index info`, `clearmed doctor`): a Lucene index's one-line
summary and a size in bytes as KB, MB or GB. The reports themselves are data, `clearmed.api.index_info`."""

from __future__ import annotations

from typing import Any

__all__ = ["human_bytes", "lucene_summary"]


def lucene_summary(report: dict[str, Any]) -> str:
    """One line for a Lucene index report: "<dir>: 2,000 documents, 1.2 MB, opens" or why it does not."""
    where = report["directory"]
    if report["state"] == "missing":
        return f"{where}: missing; build it with `clearmed index build`"
    size = human_bytes(report["bytes"])
    if report["state"] == "half_built":
        return f"{where}: HALF-BUILT ({size}, no Lucene commit); `clearmed index build` rebuilds it"
    if not report["opens"]:
        return f"{where}: {size}, does NOT open: {report['detail']}"
    shards = report.get("shards", 1)
    summary = f"{where}: {report['documents']:,} documents, {size}, opens, {shards} shard{'s' * (shards > 1)}"
    if report.get("density") is not None:
        # The postings a query scores per document: query cost is about 6.7 ns a posting on one core.
        summary += f", mean Σdf/N {report['density']:.3f} over {report['density_queries']} demo questions"
    return summary


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{size} B"
        value /= 1024
    return f"{size} B"
