"""The JSON API under /api: health, models, translate; plain `def` routes (thread pool)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from fastapi import APIRouter, Response

from app.deps import ServiceDep
from app.schemas import (
    ErrorOut,
    HealthOut,
    ModelOut,
    TranslateBatchIn,
    TranslateBatchOut,
    TranslateIn,
    TranslateOut,
)

router = APIRouter(prefix="/api", tags=["api"])

_ERRORS = {
    404: {"model": ErrorOut, "description": "Unknown model."},
    413: {"model": ErrorOut, "description": "Request body over max_body_bytes."},
    422: {"model": ErrorOut, "description": "Invalid input; `detail` names field and limit."},
    503: {"model": ErrorOut, "description": "No model is loaded."},
}


def app_version() -> str:
    try:
        return version("attnscope")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


@router.get("/health", response_model=HealthOut, summary="Server status, device and models")
def health(service: ServiceDep) -> HealthOut:
    return HealthOut(
        status="ok" if service.models else "no_models",
        version=app_version(),
        device=service.device,
        models=service.names,
    )


@router.get("/models", response_model=list[ModelOut], summary="The loaded models")
def models(service: ServiceDep) -> list[ModelOut]:
    return service.model_infos()


@router.post(
    "/translate",
    response_model=TranslateOut,
    responses=_ERRORS,
    summary="Translate one sentence; tokens, decoder steps and attention maps",
)
def translate(req: TranslateIn, service: ServiceDep) -> Response:
    out = service.translate(req)
    # Serialise once in pydantic-core (the maps can hold ~10^5 floats); returning the model
    # would make FastAPI validate and serialise it a second time.
    return Response(content=out.model_dump_json(), media_type="application/json")


@router.post(
    "/translate/batch",
    response_model=TranslateBatchOut,
    responses=_ERRORS,
    summary="Translate up to max_batch sentences at once; tokens and steps, no maps",
)
def translate_batch(req: TranslateBatchIn, service: ServiceDep) -> Response:
    out = service.translate_batch(req)
    return Response(content=out.model_dump_json(), media_type="application/json")
