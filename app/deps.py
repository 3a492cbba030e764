"""FastAPI dependencies as `Annotated` aliases: the settings and the inference service."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request

from app.service import InferenceService
from app.settings import Settings, get_settings


def get_service(request: Request) -> InferenceService:
    """The service the lifespan stored on app.state (tests may override this dependency)."""
    service = getattr(request.app.state, "service", None)
    if service is None:
        # Only without the lifespan (a TestClient not used as a context manager) or mid-startup.
        raise HTTPException(status_code=503, detail="the models are not loaded yet; retry shortly")
    return service


ServiceDep = Annotated[InferenceService, Depends(get_service)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
