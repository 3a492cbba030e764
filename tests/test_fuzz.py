"""Schemathesis fuzzes every operation of the app's own OpenAPI schema, in process (ASGI, no
network), on the tiny random bundle: no input may get a 5xx, and every answer must match the
schema (status codes, content types and bodies as documented).

Short by design (CI): a bounded number of examples per operation, positive and negative
(schema-violating) inputs, no deadline. Run longer locally with FUZZ_EXAMPLES=500.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from app.deps import get_service
from app.main import create_app
from app.service import InferenceService
from app.settings import Settings

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))


@pytest.fixture(scope="module")
def api_schema(tiny_bundle_dir: Path):
    # Small limits keep each generated request quick: the tiny model (max_len 128) decodes at
    # most 32 tokens per request here, and a text needs few characters to hit the limits.
    app_settings = Settings(
        model_dir=tiny_bundle_dir, device="cpu", threads=1, max_tokens=32, max_beam=4
    )
    app = create_app(app_settings)
    # ASGI calls do not run the lifespan: provide the loaded models the way tests do.
    service = InferenceService.from_settings(app_settings)
    app.dependency_overrides[get_service] = lambda: service
    return schemathesis.openapi.from_asgi("/openapi.json", app)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples on every CI run: a failure reproduces
    suppress_health_check=list(HealthCheck),
)
def test_no_input_gets_a_server_error_and_answers_match_the_schema(case) -> None:
    case.call_and_validate(
        checks=[
            checks.not_a_server_error,
            checks.status_code_conformance,
            checks.content_type_conformance,
            checks.response_schema_conformance,
        ],
    )


def test_the_fuzzer_sees_every_api_operation(api_schema) -> None:
    # A schema that lost its operations would make the fuzz test above pass vacuously.
    ops = {
        f"{op.method.upper()} {op.path}"
        for op in (result.ok() for result in api_schema.get_all_operations())
    }
    assert {"GET /api/health", "GET /api/models", "POST /api/translate"} <= ops


# -- what the fuzzer found, pinned ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"text": "\xff\xfe hi"}', "not UTF-8 text: byte 10 is invalid"),
        (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
        (b'{"text": ' + b"[" * 5000, "nested too deeply"),
    ],
)
def test_a_body_json_cannot_parse_for_other_reasons_is_a_422_not_a_bare_400(
    tiny_bundle_dir: Path, body: bytes, says: str
) -> None:
    from fastapi.testclient import TestClient

    with TestClient(create_app(Settings(model_dir=tiny_bundle_dir, device="cpu"))) as client:
        r = client.post(
            "/api/translate", content=body, headers={"content-type": "application/json"}
        )
        assert r.status_code == 422, r.text
        assert r.json()["detail"].startswith("body: malformed JSON")
        assert says in r.json()["detail"]
        # Other HTTP errors keep FastAPI's answers.
        assert client.get("/no-such-page").status_code == 404
        assert client.delete("/api/translate").status_code == 405


class _SlowService:
    """Stands in for InferenceService: each translate holds its slot until released and counts
    how many run at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = self.most = self.calls = 0
        self.release = threading.Event()
        self.models = {"slow": None}
        self.names = ["slow"]
        self.device = "cpu"

    def translate(self, req: object) -> object:
        with self.lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        self.release.wait(10)
        time.sleep(0.05)
        with self.lock:
            self.running -= 1
        return SimpleNamespace(model_dump_json=lambda: "{}")


def test_inference_requests_run_at_most_max_concurrent_at_once_and_gets_never_wait(
    tiny_bundle_dir: Path,
) -> None:
    from fastapi.testclient import TestClient

    app = create_app(Settings(model_dir=tiny_bundle_dir, device="cpu", max_concurrent=2))
    slow = _SlowService()
    app.dependency_overrides[get_service] = lambda: slow
    with TestClient(app) as client, ThreadPoolExecutor(6) as pool:
        futures = [
            pool.submit(client.post, "/api/translate", json={"text": "hi"}) for _ in range(6)
        ]
        deadline = time.monotonic() + 10
        while slow.running < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # the other four would have started by now if nothing held them
        assert (slow.running, slow.calls) == (2, 2)
        # Pages and GETs under /api are not held back by busy inference slots.
        assert client.get("/api/health").status_code == 200
        slow.release.set()
        assert [f.result().status_code for f in futures] == [200] * 6
    assert slow.most == 2 and slow.calls == 6
