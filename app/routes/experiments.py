"""The experiments API under /api (positional encoding, order, masks, heads, scaling) and the three
experiment pages (/positional, /masks, /heads). Plain `def` routes: FastAPI runs them in its
thread pool; the service functions run the model under `torch.inference_mode()`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import HTMLResponse

from app import experiments as svc
from app.deps import ServiceDep, SettingsDep
from app.experiments import ExperimentSettings, get_experiment_settings
from app.routes.api import app_version
from app.routes.pages import EXAMPLES, templates
from app.schemas import ErrorOut
from app.schemas_experiments import (
    ExperimentIn,
    ExperimentOut,
    MasksIn,
    MasksOut,
    OrderIn,
    OrderOut,
    PositionalOut,
    ScalingOut,
    SentenceIn,
    SentenceVectorsOut,
)

LimitsDep = Annotated[ExperimentSettings, Depends(get_experiment_settings)]

router = APIRouter(prefix="/api", tags=["experiments"])
pages = APIRouter(include_in_schema=False)

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "Unknown model."},
    413: {"model": ErrorOut, "description": "Request body over max_body_bytes."},
    422: {"model": ErrorOut, "description": "Invalid input; `detail` names field and limit."},
    503: {"model": ErrorOut, "description": "No model is loaded."},
}


def _json(model: Any) -> Response:
    # Serialise once in pydantic-core (as /api/translate does): the maps can be large.
    return Response(content=model.model_dump_json(), media_type="application/json")


@router.post(
    "/experiment",
    response_model=ExperimentOut,
    responses=_ERRORS,
    summary="Run one sentence with the paper's computation and with an experiment, side by side",
    description="Positional encoding on/off, score scaling and temperature, mask fill value and "
    "mode, causal and padding masks, hidden source positions, silenced heads; decoded, or "
    "teacher-forced when `target` is given. `baseline` equals POST /api/translate's answer; "
    "`diff` compares the two.",
)
def experiment(req: ExperimentIn, service: ServiceDep) -> Response:
    return _json(svc.run_experiment(service, req))


@router.get(
    "/positional",
    response_model=PositionalOut,
    responses=_ERRORS,
    summary="The sinusoidal positional encoding: matrix, chosen dimensions, similarity",
)
def positional(
    service: ServiceDep,
    limits: LimitsDep,
    positions: Annotated[
        int, Query(ge=1, description="Number of positions; at most max_pe_positions (200).")
    ] = 50,
    d_model: Annotated[
        int | None,
        Query(ge=2, description="Width; default the model's d_model; at most max_pe_d_model."),
    ] = None,
    dims: Annotated[
        list[int] | None,
        Query(description="Dimensions to draw as curves (repeat the parameter); at most 8."),
    ] = None,
    model: Annotated[str | None, Query(description="Model whose d_model is the default.")] = None,
) -> Response:
    return _json(svc.positional(service, limits, positions, d_model, dims, model))


@router.post(
    "/positional/sentence",
    response_model=SentenceVectorsOut,
    responses=_ERRORS,
    summary="A sentence's token embeddings, positional encodings and their sum, with norms",
)
def positional_sentence(req: SentenceIn, service: ServiceDep) -> Response:
    return _json(svc.sentence_vectors(service, req))


@router.post(
    "/order",
    response_model=OrderOut,
    responses=_ERRORS,
    summary="Translate a sentence and a reordering of its tokens, with positional encoding on "
    "and off",
)
def order(req: OrderIn, service: ServiceDep) -> Response:
    return _json(svc.order(service, req))


@router.post(
    "/masks",
    response_model=MasksOut,
    responses=_ERRORS,
    summary="A padded batch: masks and shapes, fill values, masking after the softmax, and the "
    "causal mask off under teacher forcing",
)
def masks(req: MasksIn, service: ServiceDep) -> Response:
    return _json(svc.masks(service, req))


@router.get(
    "/scaling",
    response_model=ScalingOut,
    responses={422: _ERRORS[422]},
    summary="Variance of q·k for random vectors as d_k grows; softmax saturation vs spread",
)
def scaling(
    limits: LimitsDep,
    d_k: Annotated[
        list[int] | None, Query(description="Key widths (repeat the parameter); at most 1024.")
    ] = None,
    samples: Annotated[
        int, Query(ge=2, description="Random (q, k) pairs per d_k; at most 4000.")
    ] = 2000,
    seed: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    n_scores: Annotated[int, Query(ge=2, description="Length of the score vector.")] = 10,
    spreads: Annotated[
        list[float] | None, Query(description="Multipliers of the score vector, 0..1000.")
    ] = None,
) -> Response:
    return _json(svc.scaling(limits, d_k, samples, seed, n_scores, spreads))


# -- pages ----------------------------------------------------------------------------------------
def _page(request: Request, template: str, service: ServiceDep, settings: SettingsDep) -> Response:
    models = [
        {
            "name": m.name,
            "source_language": m.source_language,
            "target_language": m.target_language,
            "n_encoder_layers": m.config.n_encoder_layers,
            "n_decoder_layers": m.config.n_decoder_layers,
            "n_heads": m.config.n_heads,
            "d_model": m.config.d_model,
        }
        for m in service.model_infos()
    ]
    page_data = {
        "version": app_version(),
        "device": service.device,
        "models": models,
        "limits": {
            "max_chars": settings.max_chars,
            "max_beam": settings.max_beam,
            "max_top_k": settings.max_top_k,
        },
        "examples": EXAMPLES,
    }
    return templates.TemplateResponse(request, template, {**page_data, "page_data": page_data})


@pages.get("/positional", response_class=HTMLResponse)
def positional_page(request: Request, service: ServiceDep, settings: SettingsDep) -> Response:
    return _page(request, "positional.html", service, settings)


@pages.get("/masks", response_class=HTMLResponse)
def masks_page(request: Request, service: ServiceDep, settings: SettingsDep) -> Response:
    return _page(request, "masks.html", service, settings)


@pages.get("/heads", response_class=HTMLResponse)
def heads_page(request: Request, service: ServiceDep, settings: SettingsDep) -> Response:
    return _page(request, "heads.html", service, settings)
