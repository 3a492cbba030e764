"""HTML pages (Jinja2, autoescaped), the favicon, plotly.js from the installed plotly package, and
the API docs (Swagger UI from the installed `fastapi-offline` package, when it is there)."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import jinja2
import plotly
from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.templating import Jinja2Templates

from app.deps import ServiceDep, SettingsDep
from app.routes.api import app_version

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
PLOTLY_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
CACHE = "public, max-age=86400"

try:  # Swagger UI's files, shipped by fastapi-offline; FastAPI's own /docs loads them from a CDN.
    import fastapi_offline

    SWAGGER_DIR: Path | None = Path(fastapi_offline.__file__).resolve().parent / "static"
except ImportError:
    SWAGGER_DIR = None

#: Everyday sentences of the kind the model was trained on (Tatoeba-style, short).
EXAMPLES = [
    "The cat is sleeping on the sofa.",
    "I would like a cup of coffee, please.",
    "Where is the train station?",
    "We are going to the cinema tomorrow.",
    "My brother reads a book every week.",
    "It is raining, so take an umbrella.",
]

router = APIRouter(include_in_schema=False)

# autoescape on for every template, whatever its extension; data for JS goes through `tojson`.
templates = Jinja2Templates(
    env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR), autoescape=True, auto_reload=False
    )
)


@router.get("/", response_class=HTMLResponse)
def index(request: Request, service: ServiceDep, settings: SettingsDep) -> Response:
    models = [
        {
            "name": m.name,
            "source_language": m.source_language,
            "target_language": m.target_language,
            "n_encoder_layers": m.config.n_encoder_layers,
            "n_decoder_layers": m.config.n_decoder_layers,
            "n_heads": m.config.n_heads,
        }
        for m in service.model_infos()
    ]
    limits = {
        "max_chars": settings.max_chars,
        "max_beam": settings.max_beam,
        "max_top_k": settings.max_top_k,
    }
    page_data = {
        "version": app_version(),
        "device": service.device,
        "models": models,
        "limits": limits,
        "examples": EXAMPLES,
    }
    # Each value also on its own for the template; `page_data` is what JS reads (via tojson).
    return templates.TemplateResponse(request, "index.html", {**page_data, "page_data": page_data})


@router.get("/favicon.ico")
def favicon() -> Response:
    # No icon file: an empty answer the browser caches, so it makes no failing request.
    return Response(status_code=204, headers={"Cache-Control": CACHE})


@lru_cache(maxsize=1)
def _plotly_js() -> tuple[bytes, str]:
    data = PLOTLY_JS.read_bytes()
    return data, '"' + hashlib.sha256(data).hexdigest()[:32] + '"'


@router.get("/vendor/plotly.min.js")
def plotly_js(request: Request) -> Response:
    """plotly.js shipped inside the `plotly` Python package (never a CDN); cached by the browser."""
    data, etag = _plotly_js()
    headers = {"ETag": etag, "Cache-Control": CACHE}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(data, media_type="text/javascript; charset=utf-8", headers=headers)


# -- API docs: Swagger UI, offline and under our CSP (no inline script: the set-up is a file) ----
_DOCS_HTML = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>attnscope API</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
"""

# validatorUrl null: Swagger UI would otherwise send the schema to validator.swagger.io.
_DOCS_INIT_JS = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
"""

_DOCS_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
}


def docs_available() -> bool:
    return SWAGGER_DIR is not None and all((SWAGGER_DIR / n).is_file() for n in _DOCS_ASSETS)


@router.get("/docs", response_class=HTMLResponse)
def docs() -> Response:
    """Interactive API docs (Swagger UI) for /openapi.json."""
    if not docs_available():
        return HTMLResponse(
            "<!doctype html><title>attnscope API</title><p>Interactive docs need the "
            "<code>fastapi-offline</code> package; the schema is at "
            '<a href="/openapi.json">/openapi.json</a>.</p>',
            status_code=404,
        )
    return HTMLResponse(_DOCS_HTML)


@router.get("/docs/init.js")
def docs_init() -> Response:
    return Response(_DOCS_INIT_JS, media_type="text/javascript; charset=utf-8")


@router.get("/docs/assets/{name}")
def docs_asset(name: str) -> Response:
    # Only the two known file names: nothing else under the package can be reached.
    if name not in _DOCS_ASSETS or not docs_available():
        return Response(status_code=404)
    assert SWAGGER_DIR is not None
    return FileResponse(
        SWAGGER_DIR / name, media_type=_DOCS_ASSETS[name], headers={"Cache-Control": CACHE}
    )
