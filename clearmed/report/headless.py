"""Headless Chromium for the report: the rendered DOM of a page, and screenshots. Stdlib only (no driver).

Chromium runs with a fresh profile and with everything that would reach the network switched off, so it opens
the report exactly as a reader's browser opens a file from disk. Used by the browser test and by
scripts/report_screenshots.py.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

# Debian names the binary `chromium`; other systems `chromium-browser` or Google's `google-chrome`.
_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
)


class ChromiumError(Exception):
    """Chromium is missing or failed to render a page."""


def find_chromium() -> str | None:
    return next((path for name in _NAMES if (path := shutil.which(name))), None)


def _run(url: str, extra: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    binary = find_chromium()
    if binary is None:
        raise ChromiumError("no Chromium found (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="clearmed-chromium-") as profile:
        try:
            result = subprocess.run(
                [binary, *_FLAGS, f"--user-data-dir={profile}", *extra, url],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ChromiumError(f"Chromium did not finish {url} within {timeout:.0f} s") from None
    if result.returncode != 0:
        tail = " ".join(result.stderr.strip().splitlines()[-2:])
        raise ChromiumError(f"Chromium failed on {url} (exit {result.returncode}): {tail}")
    return result


def file_url(path: Path, fragment: str = "") -> str:
    return path.resolve().as_uri() + (f"#{fragment}" if fragment else "")


def dump_dom(path: Path, fragment: str = "", *, timeout: float = 60) -> str:
    """The page's DOM after its scripts ran (`fragment` is the part after #, e.g. a list filter)."""
    return _run(file_url(path, fragment), ["--dump-dom", "--virtual-time-budget=2000"], timeout).stdout


def screenshot(
    path: Path, png: Path, *, width: int = 1280, height: int = 900, fragment: str = "", timeout: float = 60
) -> Path:
    png.parent.mkdir(parents=True, exist_ok=True)
    _run(file_url(path, fragment), [f"--screenshot={png.resolve()}", f"--window-size={width},{height}"], timeout)
    if not png.is_file():
        raise ChromiumError(f"Chromium wrote no screenshot of {path}")
    return png
