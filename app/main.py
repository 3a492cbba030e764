"""`create_app()`: assembles the FastAPI app (lifespan, middleware, error handlers, routers)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.routes import api, experiments, pages
from app.security import ConcurrencyLimitMiddleware, SecurityMiddleware
from app.service import InferenceService, InputError, NoModelsError, UnknownModelError
from app.settings import Settings, get_settings

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parents[1] / "static"


def _describe(error: dict[str, Any]) -> str:
    """One pydantic error -> "field: message", e.g. "beam_size: Input should be ... 1"."""
    loc = list(error.get("loc", ()))
    msg = str(error.get("msg", "invalid value"))
    if error.get("type") == "json_invalid":
        # loc is ("body", character offset): say where the JSON broke.
        where = f" at character {loc[1]}" if len(loc) > 1 else ""
        reason = (error.get("ctx") or {}).get("error")
        return f"body: malformed JSON{where}" + (f" ({reason})" if reason else "")
    parts = [str(p) for p in (loc[1:] if len(loc) > 1 and loc[0] == "body" else loc)]
    return f"{'.'.join(parts) or 'body'}: {msg}"


def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    detail = "; ".join(_describe(e) for e in errors)
    # `input` may echo a large body back; the field and message are what the caller needs.
    slim = [{k: e[k] for k in ("loc", "msg", "type") if k in e} for e in errors]
    return JSONResponse(
        status_code=422,
        content={"detail": detail or "invalid request", "errors": jsonable_encoder(slim)},
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    """FastAPI's own HTTP errors, except a body it could not parse as JSON for a reason other
    than a syntax error (it answers those with a bare 400): bytes that are not UTF-8, or
    nesting deeper than the parser's recursion limit. They get the same 422 as any malformed
    JSON, saying what is wrong with the body."""
    assert isinstance(exc, StarletteHTTPException)
    cause = exc.__cause__
    if exc.status_code == 400 and isinstance(cause, UnicodeDecodeError):
        detail = f"body: malformed JSON (not UTF-8 text: byte {cause.start} is invalid)"
        return JSONResponse(status_code=422, content={"detail": detail})
    if exc.status_code == 400 and isinstance(cause, RecursionError):
        detail = "body: malformed JSON (arrays or objects nested too deeply)"
        return JSONResponse(status_code=422, content={"detail": detail})
    return await http_exception_handler(request, exc)


def _error(status: int):
    def handler(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(status_code=status, content={"detail": str(exc)})

    return handler


def create_app(settings: Settings | None = None) -> FastAPI:
    """The app; `settings` default to the environment's (`get_settings()`)."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Loading reads files and moves weights to the device: keep it off the event loop.
        app.state.service = await run_in_threadpool(InferenceService.from_settings, settings)
        log.info("attnscope %s ready on device %s", api.app_version(), app.state.service.device)
        yield
        app.state.service = None

    app = FastAPI(
        title="attnscope",
        version=api.app_version(),
        description="Translate English to German with a Transformer and inspect every "
        "attention head.",
        lifespan=lifespan,
        # FastAPI's /docs and /redoc load their scripts from a CDN and run inline scripts: both
        # break the offline rule and our CSP. pages.py serves /docs from local files instead.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.service = None
    # Routes ask for settings through get_settings; make them see the ones given here.
    app.dependency_overrides[get_settings] = lambda: settings

    # Added first = innermost: the security middleware still answers (and adds its headers)
    # before a request waits for its turn.
    app.add_middleware(ConcurrencyLimitMiddleware, limit=settings.max_concurrent)
    app.add_middleware(SecurityMiddleware, max_body_bytes=settings.max_body_bytes)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(InputError, _error(422))
    app.add_exception_handler(UnknownModelError, _error(404))
    app.add_exception_handler(NoModelsError, _error(503))
    # Unexpected exceptions become a generic 500 in SecurityMiddleware (logged, no traceback sent).

    app.include_router(api.router)
    app.include_router(experiments.router)
    app.include_router(pages.router)
    app.include_router(experiments.pages)
    if STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
