"""Regenerate the HTML report of some run folders and take the README's screenshots of it with headless Chromium.

    python scripts/report_screenshots.py RUN_DIR [RUN_DIR ...] [--out report/] [--docs docs/]
    python scripts/report_screenshots.py --synthetic      # no model: two scripted synthetic runs (see below)

Writes docs/report-overview.png, docs/report-question.png and (given two runs of one benchmark)
docs/report-comparison.png. The question shown is the first one whose trail has the most to show (a follow-up
search and a guard or audit step), else the first question. With --synthetic the runs are built by the scripted
LM of `clearmed.testing.synthetic_run` (the paper's thresholds against a stricter variant), so the pictures show the
layout, not a model's behaviour; point the script at real embedded runs to redo them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from clearmed.evaluation import read_records
from clearmed.report.headless import find_chromium, screenshot
from clearmed.report.html_report import load_run_views, write_html_report
from clearmed.report.html_views import page_name


def synthetic_runs(base: Path, n: int = 40) -> list[Path]:
    from clearmed.signatures.records import Thresholds
    from clearmed.testing.synthetic_run import write_synthetic_run

    strict = Thresholds(guard_min_high=3, audit_min_high=2)
    write_synthetic_run(base / "clear-paper", n=n)
    write_synthetic_run(base / "clear-strict", n=n, thresholds=strict)
    return [base / "clear-paper", base / "clear-strict"]


def showcase_page(report: Path, run_dir: Path, slug: str) -> Path:
    records = list(read_records(run_dir))
    if not records:
        raise SystemExit(f"{run_dir} has no finished questions")

    def richness(record) -> int:  # type: ignore[no-untyped-def]
        mechanisms = {step.mechanism for step in record.decision.steps}
        return 2 * bool(record.decision.bundle.followups) + bool(mechanisms & {"guard", "audit"})

    best = max(records, key=lambda r: (richness(r), -r.index))
    return report / "runs" / slug / "q" / page_name(best.index, best.question_id)


def _shrink(png: Path) -> None:
    """A 256-colour palette: the pages are flat colours and text, so this keeps them sharp at a third of the size."""
    try:
        from PIL import Image  # installed with matplotlib
    except ImportError:
        return
    with Image.open(png) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(png, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", type=Path, help="run folders")
    parser.add_argument("--synthetic", action="store_true", help="build two scripted synthetic runs and use them")
    parser.add_argument("--out", type=Path, help="report folder (default: a temporary folder)")
    parser.add_argument("--docs", type=Path, default=Path(__file__).resolve().parents[1] / "docs")
    parser.add_argument("--width", type=int, default=1280)
    args = parser.parse_args(argv)
    if find_chromium() is None:
        print("no Chromium found: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="clearmed-screenshots-") as scratch:
        runs = synthetic_runs(Path(scratch) / "runs") if args.synthetic else args.runs
        if not runs:
            parser.error("give run folders, or --synthetic")
        out = args.out or Path(scratch) / "report"
        report = write_html_report(runs, out)
        print(f"report: {report.index} ({report.pages} pages, {report.bytes / 1e6:.2f} MB)")
        views = load_run_views(runs)
        shots = [
            screenshot(report.index, args.docs / "report-overview.png", width=args.width, height=1500),
            screenshot(
                showcase_page(out, runs[0], views[0].slug),
                args.docs / "report-question.png",
                width=args.width,
                height=2900,
            ),
            screenshot(
                out / "runs" / views[0].slug / "index.html",
                args.docs / "report-questions.png",
                width=args.width,
                height=800,
                fragment="correct=wrong",
            ),
        ]
        comparisons = sorted((out / "compare").glob("*.html")) if (out / "compare").is_dir() else []
        if comparisons:
            shots.append(screenshot(comparisons[0], args.docs / "report-comparison.png", width=args.width, height=1100))
        for shot in shots:
            _shrink(shot)
            print(f"screenshot: {shot} ({shot.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
