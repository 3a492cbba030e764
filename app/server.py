"""`attnscope serve`: settings from the environment plus CLI overrides, then uvicorn."""

from __future__ import annotations

import argparse
import logging
import os

import uvicorn
from pydantic import ValidationError

from app.settings import Settings
from model.device import resolve_device

log = logging.getLogger(__name__)

#: CLI option -> Settings field (the CLI's --model is the settings' model_dir).
_OVERRIDES = {
    "host": "host",
    "port": "port",
    "device": "device",
    "model": "model_dir",
    "workers": "workers",
}


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Environment settings with every CLI option that was given (not None) on top."""
    overrides = {
        field: getattr(args, opt)
        for opt, field in _OVERRIDES.items()
        if getattr(args, opt, None) is not None
    }
    return Settings(**overrides)


def run_server(args: argparse.Namespace) -> int:
    """Start uvicorn with `create_app` as a factory; returns a process exit code."""
    try:
        settings = settings_from_args(args)
        resolve_device(settings.device)  # fail here with a clear message, not inside a worker
    except (ValidationError, ValueError) as e:
        log.error("cannot start the server: %s", e)
        return 2
    # uvicorn's workers (and its factory) build the app in fresh processes that read only the
    # environment, so the overrides travel as ATTNSCOPE_* variables.
    for field, value in settings.model_dump().items():
        os.environ[f"ATTNSCOPE_{field.upper()}"] = str(value)
    from app.settings import get_settings

    get_settings.cache_clear()
    log.info(
        "attnscope on http://%s:%d (device %s, models from %s)",
        settings.host,
        settings.port,
        settings.device,
        settings.model_dir,
    )
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        log_level="info",
        # Bodies are limited by our middleware; keep the server's own limits modest too.
        timeout_keep_alive=5,
    )
    return 0
