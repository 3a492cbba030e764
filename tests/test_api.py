"""JSON API, pages and security of the FastAPI app, on the tiny random bundle (CPU, seconds)."""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from app.deps import get_service
from app.main import create_app
from app.packing import MAX_ERROR, decode_compact
from app.security import CONTENT_SECURITY_POLICY
from app.settings import Settings
from model.checkpoint import WEIGHTS
from tests.conftest import make_tiny_bundle

SENTENCE = "The cat is sleeping on the sofa."
KINDS = ("encoder_self", "decoder_self", "cross")


def tiny_settings(model_dir: Path, **overrides: object) -> Settings:
    # One torch thread: the tiny model is fastest that way and tests share the CPU.
    return Settings(model_dir=model_dir, device="cpu", threads=1, **overrides)


@pytest.fixture(scope="module")
def client(tiny_bundle_dir: Path):
    with TestClient(create_app(tiny_settings(tiny_bundle_dir))) as c:
        yield c


@pytest.fixture(scope="module")
def nested(client: TestClient) -> dict:
    r = client.post("/api/translate", json={"text": SENTENCE, "top_k": 3})
    assert r.status_code == 200, r.text
    return r.json()


def weights(out: dict, kind: str) -> np.ndarray:
    m = out["attention"][kind]
    if m["encoding"] == "compact":
        return decode_compact(m["data"], m["shape"])
    return np.asarray(m["weights"], dtype=np.float64)


# -- health, models -------------------------------------------------------------------------------
def test_health_reports_status_version_device_and_models(client: TestClient) -> None:
    r = client.get("/api/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok"
    assert body["device"] == "cpu"
    assert body["models"] == ["tiny"]
    assert re.match(r"^\d+\.\d+", body["version"])


def test_models_lists_languages_config_and_parameters(client: TestClient) -> None:
    r = client.get("/api/models")
    assert r.status_code == 200
    (m,) = r.json()
    assert (m["name"], m["source_language"], m["target_language"]) == ("tiny", "en", "de")
    assert m["config"] == {
        "d_model": 32,
        "n_heads": 4,
        "n_encoder_layers": 2,
        "n_decoder_layers": 2,
        "d_ff": 64,
        "vocab_size": m["config"]["vocab_size"],
        "max_len": 128,
        "norm_first": m["config"]["norm_first"],
    }
    assert m["parameters"] > 10_000
    assert m["metrics"] == {}
    assert m["description"] == "tiny random model for tests"


def test_every_bundle_in_a_directory_is_served_with_its_metrics_and_broken_ones_skipped(
    tmp_path: Path,
) -> None:
    make_tiny_bundle(tmp_path / "alpha", seed=1)
    (tmp_path / "alpha" / "metrics.json").write_text(json.dumps({"bleu": 12.5}))
    make_tiny_bundle(tmp_path / "beta", seed=2)
    broken = make_tiny_bundle(tmp_path / "broken", seed=3)
    (broken / WEIGHTS).unlink()
    # A bundle whose metadata name would escape the model directory is served by its folder name.
    evil = make_tiny_bundle(tmp_path / "gamma", seed=4)
    meta = json.loads((evil / "metadata.json").read_text())
    (evil / "metadata.json").write_text(json.dumps({**meta, "name": "../../etc"}))
    with TestClient(create_app(tiny_settings(tmp_path))) as c:
        r = c.get("/api/models")
        assert r.status_code == 200
        models = {m["name"]: m for m in r.json()}
        assert list(models) == ["alpha", "beta", "gamma"]
        assert models["alpha"]["metrics"] == {"bleu": 12.5}
        assert c.get("/api/health").json()["models"] == ["alpha", "beta", "gamma"]
        r = c.post("/api/translate", json={"text": SENTENCE, "model": "beta", "kinds": []})
        assert r.status_code == 200
        assert r.json()["model"] == "beta"
        default = c.post("/api/translate", json={"text": SENTENCE, "kinds": []})
        assert default.status_code == 200
        assert default.json()["model"] == "alpha"


# -- translate ------------------------------------------------------------------------------------
def test_translate_returns_tokens_steps_timings_and_all_kinds(nested: dict) -> None:
    assert nested["model"] == "tiny"
    assert nested["device"] == "cpu"
    assert nested["source_tokens"][-1] == "</s>"
    assert len(nested["source_tokens"]) > 5
    t = len(nested["target_tokens"])
    assert nested["decoder_input_tokens"][0] == "<s>"
    assert nested["decoder_input_tokens"][1:] == nested["target_tokens"][:-1]
    assert [s["position"] for s in nested["steps"]] == list(range(t))
    assert [s["token"] for s in nested["steps"]] == nested["target_tokens"]
    assert set(nested["timings_ms"]) == {"tokenize", "decode", "pack", "total"}
    assert nested["timings_ms"]["total"] >= nested["timings_ms"]["decode"] > 0
    assert list(nested["attention"]) == list(KINDS)
    assert isinstance(nested["score"], float)


def test_attention_shapes_match_the_token_counts(nested: dict) -> None:
    s, t = len(nested["source_tokens"]), len(nested["target_tokens"])
    expected = {"encoder_self": [2, 4, s, s], "decoder_self": [2, 4, t, t], "cross": [2, 4, t, s]}
    for kind, shape in expected.items():
        m = nested["attention"][kind]
        assert m["shape"] == shape
        assert list(weights(nested, kind).shape) == shape
        assert (m["layers"], m["heads"]) == ([0, 1], [0, 1, 2, 3])
        assert len(m["query_tokens"]) == shape[2] and len(m["key_tokens"]) == shape[3]
    assert nested["attention_shapes_full"] == expected
    a = nested["attention"]
    assert a["encoder_self"]["query_tokens"] == a["encoder_self"]["key_tokens"]
    assert a["encoder_self"]["key_tokens"] == nested["source_tokens"]
    assert a["decoder_self"]["query_tokens"] == nested["decoder_input_tokens"]
    assert a["cross"]["query_tokens"] == nested["target_tokens"]
    assert a["cross"]["key_tokens"] == nested["source_tokens"]


def test_every_row_sums_to_one(nested: dict) -> None:
    for kind in KINDS:
        w = weights(nested, kind)
        # Each entry is rounded to 4 decimals: the sum may drift by half a unit per key.
        tol = w.shape[-1] * 0.5e-4 + 1e-9
        assert np.all(np.abs(w.sum(-1) - 1.0) <= tol), kind
        assert w.min() >= 0.0 and w.max() <= 1.0


def test_decoder_self_attention_above_the_diagonal_is_exactly_zero(nested: dict) -> None:
    w = weights(nested, "decoder_self")
    t = w.shape[-1]
    above = np.triu(np.ones((t, t), dtype=bool), k=1)
    assert t > 1
    assert np.all(w[..., above] == 0.0)
    # ... and the first query, which can only see <s>, puts all its weight there.
    assert np.all(w[..., 0, 0] == 1.0)


def test_compact_and_nested_encodings_decode_to_the_same_maps(
    client: TestClient, nested: dict
) -> None:
    r = client.post("/api/translate", json={"text": SENTENCE, "top_k": 3, "encoding": "compact"})
    assert r.status_code == 200
    compact = r.json()
    assert compact["target_tokens"] == nested["target_tokens"]
    for kind in KINDS:
        m = compact["attention"][kind]
        assert (m["encoding"], m["dtype"], m["scale"]) == ("compact", "uint8", 255)
        assert m["weights"] is None and isinstance(m["data"], str)
        diff = np.abs(weights(compact, kind) - weights(nested, kind))
        # uint8 error (<= 0.5/255) plus the nested form's rounding to 4 decimals.
        assert diff.max() <= MAX_ERROR + 0.5e-4, kind
    assert len(r.content) < len(json.dumps(nested))


def test_filters_keep_only_the_requested_kinds_layers_and_heads(
    client: TestClient, nested: dict
) -> None:
    body = {"text": SENTENCE, "top_k": 3, "kinds": ["cross", "encoder_self"], "layers": [1]}
    r = client.post("/api/translate", json={**body, "heads": [3, 1, 3]})
    assert r.status_code == 200
    out = r.json()
    assert list(out["attention"]) == ["encoder_self", "cross"]  # canonical order
    for kind in ("encoder_self", "cross"):
        m = out["attention"][kind]
        assert (m["layers"], m["heads"]) == ([1], [1, 3])
        assert m["shape"][:2] == [1, 2]
        full = weights(nested, kind)
        np.testing.assert_array_equal(weights(out, kind), full[[1]][:, [1, 3]])
    # the unfiltered shapes are still reported
    assert out["attention_shapes_full"] == nested["attention_shapes_full"]


def test_no_kinds_returns_the_translation_without_maps(client: TestClient, nested: dict) -> None:
    r = client.post("/api/translate", json={"text": SENTENCE, "top_k": 3, "kinds": []})
    assert r.status_code == 200
    out = r.json()
    assert out["attention"] == {}
    assert out["target_tokens"] == nested["target_tokens"]


def test_steps_report_probabilities_and_top_k_alternatives(nested: dict) -> None:
    for step in nested["steps"]:
        assert 0.0 < step["prob"] <= 1.0
        alts = step["alternatives"]
        assert len(alts) == 3
        probs = [a["prob"] for a in alts]
        assert probs == sorted(probs, reverse=True)
        # greedy decoding keeps the most likely token, with the same probability
        assert alts[0]["token"] == step["token"]
        assert alts[0]["token_id"] == step["token_id"]
        assert abs(alts[0]["prob"] - step["prob"]) < 1e-5


def test_beam_search_max_length_and_top_k_zero(client: TestClient) -> None:
    body = {"text": SENTENCE, "beam_size": 3, "max_length": 4, "top_k": 0, "alpha": 1.0}
    r = client.post("/api/translate", json=body)
    assert r.status_code == 200
    out = r.json()
    assert 1 <= len(out["target_tokens"]) <= 4
    assert all(s["alternatives"] == [] for s in out["steps"])
    assert out["attention"]["cross"]["shape"][2] == len(out["target_tokens"])


def test_surrounding_whitespace_is_stripped(client: TestClient, nested: dict) -> None:
    r = client.post("/api/translate", json={"text": f"  \n{SENTENCE}\t ", "top_k": 3})
    assert r.status_code == 200
    assert r.json()["source_tokens"] == nested["source_tokens"]


def test_concurrent_requests_give_the_same_results_as_sequential_ones(
    client: TestClient,
) -> None:
    bodies = [
        {"text": text, "beam_size": beam, "encoding": "compact"}
        for text in (SENTENCE, "Where is the station?", "We like to read books.")
        for beam in (1, 2)
    ]

    def post(body: dict) -> dict:
        r = client.post("/api/translate", json=body)
        assert r.status_code == 200
        out = r.json()
        out.pop("timings_ms")
        return out

    sequential = [post(b) for b in bodies]
    with ThreadPoolExecutor(max_workers=4) as pool:
        concurrent = list(pool.map(post, bodies * 2))
    assert concurrent == sequential * 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_auto_device_serves_on_the_gpu_with_the_same_results(
    tiny_bundle_dir: Path, nested: dict
) -> None:
    with TestClient(create_app(Settings(model_dir=tiny_bundle_dir, device="auto"))) as c:
        assert c.get("/api/health").json()["device"].startswith("cuda")
        r = c.post("/api/translate", json={"text": SENTENCE, "top_k": 3})
    assert r.status_code == 200
    gpu = r.json()
    assert gpu["device"].startswith("cuda")
    assert gpu["target_tokens"] == nested["target_tokens"]
    for kind in KINDS:
        assert np.abs(weights(gpu, kind) - weights(nested, kind)).max() <= 2e-4, kind


# -- bad input ------------------------------------------------------------------------------------
BAD_INPUTS = [
    pytest.param({"text": ""}, 422, ["text", "must not be empty"], id="empty-text"),
    pytest.param({"text": " \n\t "}, 422, ["text", "must not be empty"], id="whitespace-text"),
    pytest.param({}, 422, ["text", "required"], id="missing-text"),
    pytest.param({"text": 5}, 422, ["text"], id="text-not-a-string"),
    pytest.param({"text": "a" * 1001}, 422, ["text", "1000", "max_chars"], id="too-many-chars"),
    pytest.param({"text": "a b " * 100}, 422, ["text", "tokens", "128"], id="too-many-tokens"),
    pytest.param({"text": "I ☃ snow ✈"}, 422, ["text", "☃", "✈"], id="unknown-chars"),
    pytest.param({"text": "hi", "model": "nope"}, 404, ["nope", "available: tiny"], id="model"),
    pytest.param({"text": "hi", "model": "../tiny"}, 422, ["model"], id="model-traversal"),
    pytest.param({"text": "hi", "model": "a/b"}, 422, ["model"], id="model-slash"),
    pytest.param({"text": "hi", "model": ".."}, 422, ["model"], id="model-dotdot"),
    pytest.param({"text": "hi", "beam_size": 0}, 422, ["beam_size", "1"], id="beam-zero"),
    pytest.param({"text": "hi", "beam_size": 9}, 422, ["beam_size", "8", "max_beam"], id="beam"),
    pytest.param({"text": "hi", "top_k": 21}, 422, ["top_k", "20", "max_top_k"], id="top-k"),
    pytest.param({"text": "hi", "top_k": -1}, 422, ["top_k"], id="top-k-negative"),
    pytest.param({"text": "hi", "max_length": 0}, 422, ["max_length"], id="max-length-zero"),
    pytest.param(
        {"text": "hi", "max_length": 257}, 422, ["max_length", "256", "max_tokens"], id="max-len"
    ),
    pytest.param({"text": "hi", "alpha": 3}, 422, ["alpha", "2"], id="alpha"),
    pytest.param({"text": "hi", "encoding": "png"}, 422, ["encoding"], id="encoding"),
    pytest.param({"text": "hi", "kinds": ["self"]}, 422, ["kinds"], id="kind"),
    pytest.param({"text": "hi", "layers": [2]}, 422, ["layers", "0..1"], id="layer-range"),
    pytest.param({"text": "hi", "layers": [-1]}, 422, ["layers", ">= 0"], id="layer-negative"),
    pytest.param({"text": "hi", "layers": []}, 422, ["layers"], id="layers-empty"),
    pytest.param({"text": "hi", "heads": [4]}, 422, ["heads", "0..3"], id="head-range"),
    pytest.param({"text": "hi", "beam": 2}, 422, ["beam", "not permitted"], id="unknown-field"),
    pytest.param([1, 2], 422, ["body"], id="not-an-object"),
]


@pytest.mark.parametrize(("body", "status", "words"), BAD_INPUTS)
def test_bad_input_gets_a_4xx_naming_the_field_and_limit(
    client: TestClient, body: object, status: int, words: list[str]
) -> None:
    r = client.post("/api/translate", json=body)
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str)
    for word in words:
        assert word in detail, (word, detail)


# -- batch --------------------------------------------------------------------------------------
BATCH = [SENTENCE, "Good morning!", "Where is the station? I would like a ticket."]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_batch_translations_equal_one_by_one_translations(
    client: TestClient, beam_size: int
) -> None:
    """One padded batch, one beam search: each result is what translating it alone gives."""
    body = {"texts": [f" {t}\n" for t in BATCH], "beam_size": beam_size, "top_k": 2}
    r = client.post("/api/translate/batch", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["model"] == "tiny" and out["device"] == "cpu"
    assert [item["text"] for item in out["results"]] == BATCH
    for text, item in zip(BATCH, out["results"], strict=True):
        alone = client.post(
            "/api/translate", json={"text": text, "beam_size": beam_size, "top_k": 2, "kinds": []}
        ).json()
        for key in ("translation", "source_tokens", "target_tokens"):
            assert item[key] == alone[key], key
        assert item["score"] == pytest.approx(alone["score"], abs=1e-4)
        assert len(item["steps"]) == len(item["target_tokens"])
        assert [len(s["alternatives"]) for s in item["steps"]] == [2] * len(item["steps"])
        assert [s["token"] for s in item["steps"]] == item["target_tokens"]


BAD_BATCHES = [
    pytest.param({"texts": []}, ["texts", "at least 1"], id="empty-list"),
    pytest.param({"texts": ["hi", "  "]}, ["texts.1", "empty"], id="empty-text"),
    pytest.param({"texts": ["hi"] * 17}, ["texts", "17", "16", "max_batch"], id="too-many"),
    pytest.param({"texts": ["hi", "a" * 1001]}, ["texts.1", "1000", "max_chars"], id="chars"),
    pytest.param({"texts": ["hi", "a b " * 100]}, ["texts.1", "tokens", "128"], id="tokens"),
    pytest.param({"texts": ["I ☃ snow", "hi"]}, ["texts.0", "☃"], id="unknown-chars"),
    pytest.param({"texts": ["hi"], "beam_size": 9}, ["beam_size", "max_beam"], id="beam"),
    pytest.param({"texts": "hi"}, ["texts", "list"], id="not-a-list"),
    pytest.param({"text": "hi"}, ["texts", "text"], id="single-text-field"),
]


@pytest.mark.parametrize(("body", "words"), BAD_BATCHES)
def test_bad_batches_get_a_422_naming_the_text_and_limit(
    client: TestClient, body: dict, words: list[str]
) -> None:
    r = client.post("/api/translate/batch", json=body)
    assert r.status_code == 422, r.text
    for word in words:
        assert word in r.json()["detail"], (word, r.json()["detail"])


def test_validation_errors_also_carry_the_structured_error_list(client: TestClient) -> None:
    r = client.post("/api/translate", json={"text": "", "beam_size": 0})
    assert r.status_code == 422
    body = r.json()
    assert {tuple(e["loc"]) for e in body["errors"]} == {("body", "text"), ("body", "beam_size")}
    assert "text: text must not be empty" in body["detail"]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b'{"text": "a \\ud800 b"}', ["text", "lone surrogate"]),
        (b'{"text": "hi", "alpha": NaN}', ["alpha", "finite"]),
        (b'{"text": "hi", "beam_size": 1e400}', ["beam_size"]),
        (b'{"text": "hi", "layers": [100000000000000000000000]}', ["layers", "0..1"]),
        (b"\xff\xfe", ["malformed JSON"]),
        (b"null", ["body"]),
    ],
)
def test_hostile_json_gets_a_422_naming_the_field(
    client: TestClient, raw: bytes, words: list[str]
) -> None:
    r = client.post("/api/translate", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    for word in words:
        assert word in r.json()["detail"], (word, r.json()["detail"])


def test_malformed_json_is_a_422_that_says_so(client: TestClient) -> None:
    r = client.post(
        "/api/translate", content=b'{"text": "hi",', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert r.json()["detail"].startswith("body: malformed JSON")


def test_unexpected_errors_are_a_generic_500_without_internals(
    tiny_bundle_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Exploding:
        def translate(self, req: object) -> None:
            raise RuntimeError("secret internal detail")

    app = create_app(tiny_settings(tiny_bundle_dir))
    app.dependency_overrides[get_service] = lambda: Exploding()
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/api/translate", json={"text": "hi"})
    assert r.status_code == 500
    assert r.json() == {"detail": "internal server error"}
    assert "secret" not in r.text
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "secret internal detail" in caplog.text


# -- body limit, headers, OpenAPI -----------------------------------------------------------------
def test_a_body_over_the_limit_gets_413(client: TestClient) -> None:
    body = json.dumps({"text": "a" * (70 * 1024)})
    r = client.post("/api/translate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert "65536" in r.json()["detail"] and "max_body_bytes" in r.json()["detail"]
    assert r.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


def test_a_streamed_body_without_content_length_is_limited_too(client: TestClient) -> None:
    def chunks():
        yield b'{"text": "'
        for _ in range(20):
            yield b"a" * 4096
        yield b'"}'

    r = client.post(
        "/api/translate", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    assert "max_body_bytes" in r.json()["detail"]


def test_a_streamed_body_under_the_limit_is_served(client: TestClient) -> None:
    def chunks():
        yield b'{"text": "The cat is '
        yield b'sleeping on the sofa.", "kinds": []}'

    r = client.post(
        "/api/translate", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 200
    assert r.json()["source_tokens"][0] == "▁The"


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/"), ("GET", "/api/health"), ("GET", "/no/such/page"), ("POST", "/api/translate")],
)
def test_security_headers_are_on_every_response(client: TestClient, method: str, path: str) -> None:
    r = client.request(method, path, json={"text": ""} if method == "POST" else None)
    assert r.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert r.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


def test_openapi_schema_documents_the_api(client: TestClient) -> None:
    r = client.get("/openapi.json")
    assert r.status_code == 200
    schema = r.json()
    paths = schema["paths"]
    assert {"/api/health", "/api/models", "/api/translate"} <= set(paths)
    assert "/" not in paths and "/vendor/plotly.min.js" not in paths
    translate = paths["/api/translate"]["post"]
    assert translate["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/TranslateOut"
    )
    assert {"404", "413", "422", "503"} <= set(translate["responses"])
    props = schema["components"]["schemas"]["TranslateIn"]["properties"]
    assert {"text", "model", "beam_size", "max_length", "top_k", "alpha", "encoding"} <= set(props)
    assert {"kinds", "layers", "heads"} <= set(props)


# -- pages ----------------------------------------------------------------------------------------
def page_data(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="page-data">(.*?)</script>', html, re.S)
    assert m, "page-data script missing"
    return json.loads(m.group(1))


def test_index_page_renders_with_page_data(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    data = page_data(r.text)
    assert data["device"] == "cpu"
    assert data["limits"] == {"max_chars": 1000, "max_beam": 8, "max_top_k": 20}
    assert data["models"] == [
        {
            "name": "tiny",
            "source_language": "en",
            "target_language": "de",
            "n_encoder_layers": 2,
            "n_decoder_layers": 2,
            "n_heads": 4,
        }
    ]
    assert 4 <= len(data["examples"]) <= 8
    assert data["version"]
    assert "/vendor/plotly.min.js" in r.text


def test_page_data_cannot_break_out_of_its_script_tag(tmp_path: Path) -> None:
    make_tiny_bundle(tmp_path / "tiny")
    (tmp_path / "tiny" / "metadata.json").write_text(
        json.dumps({"name": "tiny", "source_language": "</script><script>alert(1)</script>"})
    )
    with TestClient(create_app(tiny_settings(tmp_path))) as c:
        r = c.get("/")
    assert r.status_code == 200
    assert "<script>alert(1)" not in r.text
    assert page_data(r.text)["models"][0]["source_language"].startswith("</script>")


def test_favicon_answers_without_error(client: TestClient) -> None:
    r = client.get("/favicon.ico")
    assert r.status_code == 204
    assert "max-age" in r.headers["cache-control"]


def test_plotly_js_is_served_from_the_installed_package(client: TestClient) -> None:
    r = client.get("/vendor/plotly.min.js")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/javascript")
    assert "max-age" in r.headers["cache-control"]
    assert len(r.content) > 1_000_000
    assert b"plotly" in r.content[:2000].lower()
    again = client.get("/vendor/plotly.min.js", headers={"if-none-match": r.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""


def test_api_docs_are_served_offline_without_inline_scripts(client: TestClient) -> None:
    pytest.importorskip("fastapi_offline")
    r = client.get("/docs")
    assert r.status_code == 200
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", r.text, re.S)
    assert scripts and all('src="/docs/' in attrs and not body.strip() for attrs, body in scripts)
    bundle = client.get("/docs/assets/swagger-ui-bundle.js")
    assert bundle.status_code == 200
    assert bundle.headers["content-type"].startswith("text/javascript")
    assert "SwaggerUIBundle" in bundle.text
    assert client.get("/docs/assets/swagger-ui.css").status_code == 200
    init = client.get("/docs/init.js")
    assert init.status_code == 200
    assert '"/openapi.json"' in init.text and "validatorUrl: null" in init.text
    # only the two asset names exist; nothing else in the package is reachable
    for name in ("core.py", "..%2F__init__.py", "favicon.png"):
        assert client.get(f"/docs/assets/{name}").status_code == 404


def test_static_files_are_mounted(client: TestClient) -> None:
    static = Path(__file__).resolve().parents[1] / "static"
    files = sorted(p for p in static.rglob("*") if p.is_file())
    if not files:
        pytest.skip("no static files yet")
    r = client.get("/static/" + files[0].relative_to(static).as_posix())
    assert r.status_code == 200
    assert r.content == files[0].read_bytes()


# -- no models ------------------------------------------------------------------------------------
def test_the_app_starts_without_models_and_says_how_to_get_one(tmp_path: Path) -> None:
    with TestClient(create_app(tiny_settings(tmp_path / "nothing-here"))) as c:
        r = c.get("/api/health")
        assert r.status_code == 200
        assert r.json()["status"] == "no_models"
        assert r.json()["models"] == []
        r = c.get("/api/models")
        assert r.status_code == 200
        assert r.json() == []
        r = c.post("/api/translate", json={"text": SENTENCE})
        assert r.status_code == 503
        assert "no model is loaded" in r.json()["detail"]
        assert "attnscope train" in r.json()["detail"]
        r = c.get("/")
        assert r.status_code == 200
        assert page_data(r.text)["models"] == []


def test_an_empty_bundle_directory_is_not_a_crash(tmp_path: Path) -> None:
    shutil.copytree(Path(__file__).parent / "fixtures", tmp_path / "not-a-bundle")
    with TestClient(create_app(tiny_settings(tmp_path))) as c:
        r = c.get("/api/health")
    assert r.status_code == 200
    assert r.json()["status"] == "no_models"
