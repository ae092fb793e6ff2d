"""The composed project config: packaged configs validate; errors are one line naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearmed.backbones.errors import ConfigError
from clearmed.config import load_config, packaged_configs

MINIMAL = """
[backbones.main]
kind = "openai_compatible"
model = "m"
api_base = "http://127.0.0.1:9/v1"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(packaged_configs()))
def test_every_packaged_config_validates(name: str) -> None:
    config = load_config(name)
    assert "main" in config.backbones


def test_minimal_config_takes_the_paper_defaults(tmp_path: Path) -> None:
    config = load_config(str(write(tmp_path, MINIMAL)))
    assert config.thresholds.guard_min_high == 1
    assert config.program.local_k == 16
    assert config.corpus is None


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("[program]\nlocal_kk = 3\n", "program.local_kk: unknown key"),
        (
            "[thresholds]\nguard_min_high = -1\n",
            "thresholds.guard_min_high: Input should be greater than or equal to 0",
        ),
        ("[program]\nverifier_mode = 'magic'\n", "program.verifier_mode:"),
        ("[colour]\nx = 1\n", "colour: unknown key"),
        ("[search]\nbackend = 'bing'\n", "search.backend:"),
    ],
)
def test_errors_name_the_file_and_the_field(tmp_path: Path, extra: str, expected: str) -> None:
    path = write(tmp_path, MINIMAL + extra)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message


def test_missing_main_backbone(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="backbones"):
        load_config(str(write(tmp_path, "[program]\nlocal_k = 3\n")))


def test_invalid_toml_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(str(write(tmp_path, "[backbones.main\n")))


def test_unknown_config_name_lists_the_packaged_ones() -> None:
    with pytest.raises(ConfigError, match="embedded"):
        load_config("no-such-config")


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    text = MINIMAL + '[search]\nbackend = "offline"\npages = "pages/web.jsonl"\ncache_path = "~/x.sqlite"\n'
    config = load_config(str(write(tmp_path, text)))
    assert config.search is not None
    assert config.search.pages == (tmp_path / "pages" / "web.jsonl").resolve()
    assert config.search.cache_path == Path("~/x.sqlite").expanduser()
