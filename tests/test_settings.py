"""Settings from the environment and the CLI."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.server import settings_from_args
from app.settings import Settings, get_settings
from model.checkpoint import DEFAULT_BUNDLE_DIR


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(__import__("os").environ):
        if name.startswith("ATTNSCOPE_"):
            monkeypatch.delenv(name)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_defaults_match_the_documented_limits() -> None:
    s = Settings()
    assert s.model_dir == DEFAULT_BUNDLE_DIR
    assert (s.device, s.host, s.port) == ("auto", "127.0.0.1", 8000)
    assert (s.max_chars, s.max_tokens, s.max_beam, s.max_top_k) == (1000, 256, 8, 20)
    assert s.max_body_bytes == 64 * 1024
    assert (s.workers, s.threads) == (1, 0)


def test_every_setting_is_documented() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description and len(field.description) > 10, name


def test_environment_variables_with_the_prefix_override_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ATTNSCOPE_MAX_BEAM", "4")
    monkeypatch.setenv("ATTNSCOPE_MODEL_DIR", str(tmp_path))
    monkeypatch.setenv("ATTNSCOPE_DEVICE", "cpu")
    monkeypatch.setenv("MAX_BEAM", "99")  # without the prefix: ignored
    s = get_settings()
    assert (s.max_beam, s.model_dir, s.device) == (4, tmp_path, "cpu")
    assert get_settings() is s  # cached


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:1", "mps"])
def test_known_devices_are_accepted(device: str) -> None:
    assert Settings(device=device).device == device


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "cpu:0", "", "tpu"])
def test_unknown_devices_are_rejected_with_the_choices(device: str) -> None:
    with pytest.raises(ValidationError, match="auto, cpu, cuda, mps"):
        Settings(device=device)


@pytest.mark.parametrize(
    "bad", [{"port": 0}, {"max_beam": 0}, {"max_body_bytes": 10}, {"workers": 0}, {"threads": -1}]
)
def test_out_of_range_values_are_rejected(bad: dict) -> None:
    with pytest.raises(ValidationError, match=next(iter(bad))):
        Settings(**bad)


def test_cli_options_override_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ATTNSCOPE_PORT", "9000")
    monkeypatch.setenv("ATTNSCOPE_HOST", "0.0.0.0")
    args = argparse.Namespace(host=None, port=8123, device="cpu", model=str(tmp_path), workers=None)
    s = settings_from_args(args)
    assert (s.host, s.port, s.device, s.model_dir, s.workers) == (
        "0.0.0.0",
        8123,
        "cpu",
        tmp_path,
        1,
    )
