"""Settings of the web app, read from the environment (prefix `ATTNSCOPE_`) by pydantic-settings.

Example: `ATTNSCOPE_DEVICE=cpu ATTNSCOPE_MAX_BEAM=4 attnscope serve`. The CLI's `serve` options
override the environment (see `app.server`).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from model.checkpoint import DEFAULT_BUNDLE_DIR
from model.device import DEVICE_CHOICES


class Settings(BaseSettings):
    """Every knob of the server; limits bound what one request may ask for."""

    model_config = SettingsConfigDict(
        env_prefix="ATTNSCOPE_", extra="ignore", protected_namespaces=(), frozen=True
    )

    model_dir: Path = Field(
        default=DEFAULT_BUNDLE_DIR,
        description="A model bundle directory, or a directory whose subdirectories are bundles "
        "(every bundle found is loaded; the first by name is the default).",
    )
    device: str = Field(
        default="auto",
        description="Where the models run: auto (CUDA, then Apple MPS, then CPU), cpu, cuda, "
        "cuda:N or mps.",
    )
    host: str = Field(default="127.0.0.1", description="Interface the server listens on.")
    port: int = Field(default=8000, ge=1, le=65535, description="TCP port the server listens on.")
    max_chars: int = Field(
        default=1000, ge=1, description="Most characters of input text per request (after strip)."
    )
    max_tokens: int = Field(
        default=256,
        ge=2,
        description="Most source tokens (incl. </s>) per input, and the cap on max_length; "
        "also capped by each model's own max_len.",
    )
    max_beam: int = Field(default=8, ge=1, description="Largest beam_size a request may ask for.")
    max_top_k: int = Field(
        default=20, ge=0, description="Most alternatives per decoder step a request may ask for."
    )
    max_batch: int = Field(
        default=16, ge=1, description="Most texts in one POST /api/translate/batch request."
    )
    max_body_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        description="Largest request body in bytes; larger bodies get 413, also when streamed "
        "without Content-Length.",
    )
    workers: int = Field(
        default=1,
        ge=1,
        description="uvicorn worker processes; each loads its own copy of the models.",
    )
    threads: int = Field(
        default=0,
        ge=0,
        description="torch intra-op threads per process (0 = torch's default, one per core).",
    )
    max_concurrent: int = Field(
        default=1,
        ge=1,
        description="POST /api/... requests (model inference) handled at once per worker; "
        "others wait their turn. Bounds memory (a 256-token answer with nested maps peaks at "
        "~300 MB while it is built) and keeps latency steady under load. 1 suits the default "
        "threads (one per core: each request uses every core); with threads=1, cores / threads.",
    )

    @field_validator("device")
    @classmethod
    def _known_device(cls, v: str) -> str:
        # Availability (is there a GPU?) is checked when the models load; here only the spelling.
        kind = v.split(":", 1)[0]
        if kind not in DEVICE_CHOICES or (":" in v and (kind != "cuda" or not v[5:].isdigit())):
            raise ValueError(f"device must be one of {', '.join(DEVICE_CHOICES)} or cuda:N")
        return v


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings from the environment (cached; tests pass their own Settings)."""
    return Settings()
