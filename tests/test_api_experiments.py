"""The experiments API (/api/experiment, /api/positional, /api/order, /api/masks, /api/scaling)
and the experiment pages, on the tiny random bundle (CPU, seconds)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from app.experiments import ExperimentSettings, get_experiment_settings
from app.main import create_app
from app.packing import decode_compact
from app.settings import Settings

SENTENCE = "The cat is sleeping on the sofa."
KINDS = ("encoder_self", "decoder_self", "cross")
# The tiny random model never emits </s>: cap the output to keep every request fast.
FAST = {"max_length": 8, "top_k": 2}


@pytest.fixture(scope="module")
def client(tiny_bundle_dir: Path):
    app = create_app(Settings(model_dir=tiny_bundle_dir, device="cpu", threads=1))
    with TestClient(app) as c:
        yield c


def maps(out: dict, kind: str) -> np.ndarray:
    m = out["attention"][kind]
    if m["encoding"] == "compact":
        return decode_compact(m["data"], m["shape"])
    return np.asarray(m["weights"], dtype=np.float64)


def post_ok(client: TestClient, url: str, body: dict) -> dict:
    r = client.post(url, json=body)
    assert r.status_code == 200, r.text
    return r.json()


def source_len(client: TestClient, text: str = SENTENCE) -> int:
    r = client.post("/api/translate", json={"text": text, "kinds": [], "max_length": 1})
    return len(r.json()["source_tokens"])


def without_timings(out: dict) -> dict:
    return {k: v for k, v in out.items() if k != "timings_ms"}


# -- POST /api/experiment -------------------------------------------------------------------------
def test_the_baseline_equals_plain_translate_output(client: TestClient) -> None:
    for extra in ({}, {"encoding": "compact", "kinds": ["cross"], "heads": [1, 3]}, {"kinds": []}):
        body = {"text": SENTENCE, **FAST, **extra}
        plain = post_ok(client, "/api/translate", body)
        out = post_ok(client, "/api/experiment", {**body, "experiment": {"hide_source": [0]}})
        assert without_timings(out["baseline"]) == without_timings(plain), extra
        assert out["mode"] == "decode"


def test_the_paper_as_experiment_changes_nothing(client: TestClient) -> None:
    out = post_ok(client, "/api/experiment", {"text": SENTENCE, **FAST})
    d = out["diff"]
    assert out["applied"]["mask_fill"] == "-inf" and out["applied"]["positional_encoding"]
    assert not d["translation_changed"] and d["changed_positions"] == []
    assert d["logprob_change"] == 0.0
    assert without_timings(out["experiment"]) == without_timings(out["baseline"])
    for kind in KINDS:
        k = d["kinds"][kind]
        assert k["max_abs_diff"] == 0.0 and k["leaked_mass_max"] == 0.0
        assert k["entropy_baseline"] == k["entropy_experiment"]
        assert np.array(k["entropy_baseline"]).shape == (2, 4)


def test_hidden_source_tokens_get_no_weight_and_the_diff_reports_it(client: TestClient) -> None:
    body = {"text": SENTENCE, **FAST, "experiment": {"hide_source": [1, 2]}}
    out = post_ok(client, "/api/experiment", body)
    aligned, base = out["aligned"], out["baseline"]
    assert aligned["target_tokens"] == base["target_tokens"]  # the baseline's tokens, forced
    for kind in ("encoder_self", "cross"):
        m = maps(aligned, kind)
        assert np.all(m[..., [1, 2]] == 0.0), kind
        assert np.all(maps(base, kind)[..., 1] > 0), kind
        np.testing.assert_allclose(m.sum(-1), 1.0, atol=1e-3)
        assert out["diff"]["kinds"][kind]["max_abs_diff"] > 0
        assert out["diff"]["kinds"][kind]["leaked_mass_max"] == 0.0
    d = out["diff"]
    assert d["baseline_logprob"] == pytest.approx(base["score"], abs=0.5)
    assert d["logprob_change"] == pytest.approx(
        d["baseline_logprob_under_experiment"] - d["baseline_logprob"], abs=1e-5
    )
    assert [t["token"] for t in d["tokens"]] == base["target_tokens"]
    probs = [s["prob"] for s in aligned["steps"]]
    np.testing.assert_allclose(np.log(probs), [t["experiment"] for t in d["tokens"]], atol=1e-4)
    changed = [
        i
        for i, t in enumerate(out["experiment"]["target_tokens"])
        if i >= len(base["target_tokens"]) or t != base["target_tokens"][i]
    ]
    assert d["changed_positions"] == changed
    assert d["translation_changed"] == (out["experiment"]["translation"] != base["translation"])


def test_a_tiny_fill_value_leaks_weight_onto_hidden_tokens(client: TestClient) -> None:
    exp = {"hide_source": [0], "mask_fill": "-1e-12"}
    out = post_ok(client, "/api/experiment", {"text": SENTENCE, **FAST, "experiment": exp})
    for kind in ("encoder_self", "cross"):
        assert out["diff"]["kinds"][kind]["leaked_mass_max"] > 0.01, kind
        leaked = np.array(out["diff"]["kinds"][kind]["leaked_mass"])  # [L, H, q]
        np.testing.assert_allclose(leaked, maps(out["aligned"], kind)[..., 0], atol=1e-3)
    # -1e9 given as a JSON number is the same fill as "-1e9", and masks exactly
    same = {"hide_source": [0], "mask_fill": -1e9}
    out = post_ok(client, "/api/experiment", {"text": SENTENCE, **FAST, "experiment": same})
    assert out["applied"]["mask_fill"] == "-1e9"
    assert out["diff"]["kinds"]["cross"]["leaked_mass_max"] == 0.0


def test_teacher_forcing_with_the_causal_mask_off_sees_the_future(client: TestClient) -> None:
    body = {"text": "I go home.", "target": "Ich gehe nach Hause.", "top_k": 2}
    out = post_ok(client, "/api/experiment", {**body, "experiment": {"causal_mask": False}})
    assert out["mode"] == "force" and out["aligned"] is None
    base, exp = out["baseline"], out["experiment"]
    assert base["target_tokens"] == exp["target_tokens"]
    assert base["target_tokens"][-1] == "</s>" and len(base["target_tokens"]) > 3
    assert not out["diff"]["translation_changed"]
    upper = np.triu(np.ones((len(base["target_tokens"]),) * 2, dtype=bool), k=1)
    assert np.all(maps(base, "decoder_self")[..., upper] == 0)
    assert np.all(maps(exp, "decoder_self")[..., upper] > 0)
    k = out["diff"]["kinds"]["decoder_self"]
    assert k["leaked_mass_max"] > 0.1 and k["max_abs_diff"] > 0.1
    assert np.array(k["leaked_mass"])[..., -1].max() == 0  # the last row has no future
    assert out["diff"]["baseline_logprob"] == pytest.approx(base["score"], abs=1e-4)
    assert out["diff"]["baseline_logprob_under_experiment"] == pytest.approx(exp["score"], abs=1e-4)


def test_silencing_a_cross_head_leaves_the_encoder_alone(client: TestClient) -> None:
    exp = {"silence": [{"kind": "cross", "layer": 1, "head": 2}]}
    out = post_ok(client, "/api/experiment", {"text": SENTENCE, **FAST, "experiment": exp})
    d = out["diff"]["kinds"]
    assert d["encoder_self"]["max_abs_diff"] == 0.0
    # layer 1's own maps are computed before the silencing takes effect: only later layers or
    # the decoding can change; the output distribution does change.
    assert out["diff"]["logprob_change"] != 0.0


def test_no_scaling_and_a_low_temperature_sharpen_the_first_layer(client: TestClient) -> None:
    for exp in ({"scale_scores": False}, {"temperature": 0.25}):
        out = post_ok(client, "/api/experiment", {"text": SENTENCE, **FAST, "experiment": exp})
        k = out["diff"]["kinds"]["encoder_self"]
        before, after = np.array(k["entropy_baseline"]), np.array(k["entropy_experiment"])
        assert np.all(after[0] < before[0]), exp
    out = post_ok(
        client, "/api/experiment", {"text": SENTENCE, **FAST, "experiment": {"temperature": 4}}
    )
    k = out["diff"]["kinds"]["encoder_self"]
    assert np.all(np.array(k["entropy_experiment"])[0] > np.array(k["entropy_baseline"])[0])


def test_positional_encoding_off_and_padding_mask_off_run(client: TestClient) -> None:
    exp = {"positional_encoding": False, "padding_mask": False, "mask_mode": "renormalize"}
    out = post_ok(client, "/api/experiment", {"text": SENTENCE, **FAST, "experiment": exp})
    assert out["applied"] == {
        "positional_encoding": False,
        "scale_scores": True,
        "temperature": 1.0,
        "mask_fill": "-inf",
        "mask_mode": "renormalize",
        "causal_mask": True,
        "padding_mask": False,
        "hide_source": [],
        "silence": [],
    }
    assert out["diff"]["kinds"]["encoder_self"]["max_abs_diff"] > 0


def test_different_experiments_in_concurrent_requests_never_affect_each_other(
    client: TestClient,
) -> None:
    experiments = [
        {},
        {"hide_source": [0, 1]},
        {"positional_encoding": False},
        {"causal_mask": False, "mask_fill": "-1e-12"},
        {"scale_scores": False, "temperature": 3.0},
        {"silence": [{"kind": "encoder_self", "layer": 0, "head": h} for h in range(4)]},
    ]
    bodies = [
        {"text": text, **FAST, "encoding": "compact", "experiment": exp}
        for text, exp in zip(
            [SENTENCE, "I go home.", "Where is the station?"] * 2, experiments, strict=True
        )
    ]

    def post(body: dict) -> dict:
        out = post_ok(client, "/api/experiment", body)
        for key in ("baseline", "experiment", "aligned"):
            if out[key] is not None:
                out[key].pop("timings_ms")
        return out

    sequential = [post(b) for b in bodies]
    with ThreadPoolExecutor(max_workers=6) as pool:
        concurrent = list(pool.map(post, bodies * 2))
    assert concurrent == sequential * 2
    # and they really differ from each other
    assert len({str(o["diff"]["kinds"]["encoder_self"]["max_abs_diff"]) for o in sequential}) > 3


EXPERIMENT_ERRORS = [
    ({"positional_encoding": "maybe"}, ["experiment.positional_encoding", "boolean"]),
    ({"scale_scores": 1}, ["experiment.scale_scores", "boolean"]),
    ({"temperature": 0}, ["experiment.temperature", "0.05"]),
    ({"temperature": 100}, ["experiment.temperature", "20"]),
    ({"temperature": "hot"}, ["experiment.temperature"]),
    ({"mask_fill": "-1e5"}, ["experiment.mask_fill", "'-inf'", "'-1e9'", "'-1e-12'"]),
    ({"mask_fill": -5}, ["experiment.mask_fill"]),
    ({"mask_mode": "after"}, ["experiment.mask_mode", "'fill'", "'renormalize'"]),
    ({"causal_mask": None}, ["experiment.causal_mask"]),
    ({"padding_mask": "no"}, ["experiment.padding_mask"]),
    ({"hide_source": [-1]}, ["experiment.hide_source", ">= 0"]),
    ({"hide_source": "1"}, ["experiment.hide_source"]),
    ({"hide_source": [99]}, ["experiment.hide_source", "[99]", "outside the source"]),
    (
        {"silence": [{"kind": "cross", "layer": 2, "head": 0}]},
        ["experiment.silence[0].layer", "0..1"],
    ),
    (
        {
            "silence": [
                {"kind": "decoder_self", "layer": 0, "head": 0},
                {"kind": "cross", "layer": 0, "head": 4},
            ]
        },
        ["experiment.silence[1].head", "0..3"],
    ),
    ({"silence": [{"kind": "self", "layer": 0, "head": 0}]}, ["experiment.silence.0.kind"]),
    ({"silence": [{"kind": "cross", "layer": -1, "head": 0}]}, ["experiment.silence.0.layer"]),
    ({"silence": [{"kind": "cross", "layer": 0}]}, ["experiment.silence.0.head", "required"]),
    ({"silence": [{"kind": "cross", "layer": 0, "head": 0, "x": 1}]}, ["experiment.silence.0.x"]),
    ({"dropout": 0.5}, ["experiment.dropout", "not permitted"]),
]


@pytest.mark.parametrize(("experiment", "words"), EXPERIMENT_ERRORS)
def test_every_experiment_field_is_validated_naming_the_field(
    client: TestClient, experiment: dict, words: list[str]
) -> None:
    r = client.post("/api/experiment", json={"text": SENTENCE, "experiment": experiment})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    for word in words:
        assert word in detail, (word, detail)


def test_hiding_every_source_token_is_refused_with_the_reason(client: TestClient) -> None:
    n = source_len(client)
    body = {"text": SENTENCE, "experiment": {"hide_source": list(range(n))}}
    r = client.post("/api/experiment", json=body)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert detail.startswith("experiment.hide_source: cannot hide every source token")
    assert "no visible key has no softmax" in detail
    # one visible token is enough
    body["experiment"]["hide_source"] = list(range(n - 1))
    assert client.post("/api/experiment", json={**body, **FAST}).status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"target": ""}, 422, ["target", "must not be empty"]),
        ({"target": "Schnee ☃"}, 422, ["target", "☃"]),
        ({"target": "a" * 1001}, 422, ["target", "1000", "max_chars"]),
        ({"target": "a b " * 100}, 422, ["target", "tokens"]),
        ({"text": ""}, 422, ["text", "must not be empty"]),
        ({"beam_size": 9}, 422, ["beam_size", "max_beam"]),
        ({"layers": [2]}, 422, ["layers", "0..1"]),
        ({"heads": [4]}, 422, ["heads", "0..3"]),
        ({"model": "nope"}, 404, ["nope"]),
        ({"experiment": []}, 422, ["experiment"]),
    ],
)
def test_experiment_request_fields_are_validated(
    client: TestClient, body: dict, status: int, words: list[str]
) -> None:
    r = client.post("/api/experiment", json={"text": SENTENCE, **body})
    assert r.status_code == status, r.text
    for word in words:
        assert word in r.json()["detail"], (word, r.json()["detail"])


# -- positional encoding --------------------------------------------------------------------------
def test_positional_gives_the_matrix_curves_and_an_offset_only_similarity(
    client: TestClient,
) -> None:
    r = client.get("/api/positional", params={"positions": 30, "dims": [0, 5, 1]})
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["positions"], out["d_model"], out["model_d_model"]) == (30, 32, 32)
    pe = np.array(out["matrix"])
    assert pe.shape == (30, 32)
    np.testing.assert_allclose(pe[:, 0], np.sin(np.arange(30)), atol=1e-4)
    np.testing.assert_allclose(pe[:, 1], np.cos(np.arange(30)), atol=1e-4)
    assert out["dims"] == [0, 1, 5]
    np.testing.assert_allclose(np.array(out["curves"]), pe[:, [0, 1, 5]].T)
    assert out["wavelengths"][0] == pytest.approx(2 * np.pi, abs=1e-3)
    sim = np.array(out["similarity"])
    assert sim.shape == (30, 30)
    for offset in (1, 4):
        d = np.diagonal(sim, offset)
        assert d.max() - d.min() < 1e-3
    # defaults: the model's d_model and a few dimensions
    out = client.get("/api/positional", params={"d_model": 128}).json()
    assert (out["positions"], out["d_model"]) == (50, 128)
    assert out["dims"][:2] == [0, 1] and len(out["dims"]) <= 8


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"positions": 0}, ["positions"]),
        ({"positions": 201}, ["positions", "200", "max_pe_positions"]),
        ({"positions": "many"}, ["positions"]),
        ({"d_model": 1}, ["d_model"]),
        ({"d_model": 513}, ["d_model", "512", "max_pe_d_model"]),
        ({"dims": [32]}, ["dims", "0..31"]),
        ({"dims": list(range(9))}, ["dims", "8", "max_pe_dims"]),
        ({"model": "nope"}, ["nope"]),
    ],
)
def test_positional_limits(client: TestClient, params: dict, words: list[str]) -> None:
    r = client.get("/api/positional", params=params)
    assert r.status_code in (404, 422), r.text
    for word in words:
        assert word in r.json()["detail"], (word, r.json()["detail"])


def test_limits_come_from_the_settings(tiny_bundle_dir: Path) -> None:
    app = create_app(Settings(model_dir=tiny_bundle_dir, device="cpu", threads=1))
    app.dependency_overrides[get_experiment_settings] = lambda: ExperimentSettings(
        max_pe_positions=10, max_dk=8
    )
    with TestClient(app) as c:
        r = c.get("/api/positional", params={"positions": 11})
        assert r.status_code == 422 and "10 (max_pe_positions)" in r.json()["detail"]
        r = c.get("/api/scaling")
        assert r.status_code == 200 and r.json()["d_k"] == [1, 2, 4, 8]


def test_sentence_vectors_add_up_with_their_norms(client: TestClient) -> None:
    out = post_ok(client, "/api/positional/sentence", {"text": "I go home."})
    n = len(out["tokens"])
    assert out["tokens"][-1] == "</s>" and out["d_model"] == 32
    emb, pos, tot = (np.array(out[k]) for k in ("embedding", "positional", "total"))
    assert emb.shape == pos.shape == tot.shape == (n, 32)
    np.testing.assert_allclose(tot, emb + pos, atol=2e-4)
    np.testing.assert_allclose(out["norms"]["positional"], 4.0, atol=1e-3)  # sqrt(d_model / 2)
    np.testing.assert_allclose(out["norms"]["total"], np.linalg.norm(tot, axis=1), atol=1e-3)
    r = client.post("/api/positional/sentence", json={"text": "  "})
    assert r.status_code == 422 and "text" in r.json()["detail"]


# -- order ----------------------------------------------------------------------------------------
def test_order_without_positional_encoding_gives_permuted_outputs(client: TestClient) -> None:
    out = post_ok(client, "/api/order", {"text": "I go home."})
    n = len(out["source_tokens"])
    assert out["permutation"] == [*range(n - 2, -1, -1), n - 1]  # reversed, </s> last
    assert out["permuted_tokens"] == [out["source_tokens"][p] for p in out["permutation"]]
    with_pe, without = out["runs"]
    assert with_pe["positional_encoding"] and not without["positional_encoding"]
    assert without["encoder_max_diff"] < 1e-5
    assert with_pe["encoder_max_diff"] > 1e-2
    assert len(without["encoder_position_diff"]) == n
    # the decoder sees the same set of encoder vectors: the same translation
    assert without["same_translation"]
    assert without["original"]["target_tokens"] == without["permuted"]["target_tokens"]
    # the original's translation with PE equals /api/translate's
    plain = post_ok(client, "/api/translate", {"text": "I go home.", "kinds": []})
    assert with_pe["original"]["translation"] == plain["translation"]

    swap = [1, 0, *range(2, n)]
    out = post_ok(client, "/api/order", {"text": "I go home.", "permutation": swap})
    assert out["permutation"] == swap
    assert out["permuted_tokens"][:2] == out["source_tokens"][1::-1]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"permutation": [0, 1]}, ["permutation", "permutation of 0..", "tokens"]),
        ({"permutation": [0, 0, 1, 2, 3, 4, 5, 6]}, ["permutation"]),
        ({"permutation": "reverse"}, ["permutation"]),
        ({"beam_size": 9}, ["beam_size", "max_beam"]),
        ({"text": ""}, ["text"]),
    ],
)
def test_order_validation(client: TestClient, body: dict, words: list[str]) -> None:
    r = client.post("/api/order", json={"text": "I go home.", **body})
    assert r.status_code == 422, r.text
    for word in words:
        assert word in r.json()["detail"], (word, r.json()["detail"])


# -- masks ----------------------------------------------------------------------------------------
TEXTS = ["The cat is sleeping on the sofa.", "I go home.", "Where is the station?"]
TARGETS = ["Die Katze schläft auf dem Sofa.", "Ich gehe nach Hause.", "Wo ist der Bahnhof?"]


@pytest.fixture(scope="module")
def mask_out(client: TestClient) -> dict:
    return post_ok(client, "/api/masks", {"texts": TEXTS, "targets": TARGETS, "layer": 1})


def test_masks_of_a_padded_batch_and_their_shapes(mask_out: dict) -> None:
    out = mask_out
    s_len, t_len = out["source_lengths"], out["target_lengths"]
    b, s, t = 3, max(s_len), max(t_len)
    assert np.array(out["source_tokens"]).shape == (b, s)
    assert out["source_tokens"][1][s_len[1] :] == ["<pad>"] * (s - s_len[1])
    assert [row[0] for row in out["decoder_input_tokens"]] == ["<s>"] * 3
    m = out["masks"]
    assert m["source_padding"][1] == [True] * s_len[1] + [False] * (s - s_len[1])
    assert m["causal"] == np.tril(np.ones((t, t), dtype=bool)).tolist()
    assert np.array(m["combined"]["encoder_self"]).shape == (b, s, s)
    assert np.array(m["combined"]["cross"]).shape == (b, t, s)
    dec = np.array(m["combined"]["decoder_self"])
    assert dec.shape == (b, t, t)
    pad = np.array(m["target_padding"])
    np.testing.assert_array_equal(dec, np.tril(np.ones((t, t), dtype=bool)) & pad[:, None, :])
    shapes = {x["name"]: x for x in m["shapes"]}
    assert shapes["padding_mask(source)"]["shape"] == [b, 1, 1, s]
    assert shapes["causal_mask(T)"]["shape"] == [1, 1, t, t]
    assert shapes["decoder self: causal AND padding"]["shape"] == [b, 1, t, t]
    assert shapes["cross: source_key_mask"]["broadcasts_to"] == [b, 4, t, s]


def test_fill_values_minus_inf_and_minus_1e9_mask_and_a_tiny_one_leaks(mask_out: dict) -> None:
    fills = {f["mask_fill"]: f["kinds"] for f in mask_out["fills"]}
    assert list(fills) == ["-inf", "-1e9", "-1e-12"]
    for kind in KINDS:
        assert fills["-inf"][kind]["leaked_max"] == 0.0
        assert fills["-1e9"][kind]["leaked_max"] == 0.0
        assert fills["-1e9"][kind]["max_abs_diff_vs_inf"] == 0.0
        assert fills["-1e-12"][kind]["leaked_max"] > 0.05
        assert fills["-1e-12"][kind]["max_abs_diff_vs_inf"] > 0.01
        leaked = np.array(fills["-1e-12"][kind]["leaked"])
        assert leaked.shape == np.array(fills["-1e-12"][kind]["maps"]).shape[:2]
    # item 1 is padded: with -1e-12 its queries put weight on the <pad> keys
    n = mask_out["source_lengths"][1]
    enc = np.array(fills["-1e-12"]["encoder_self"]["maps"][1])
    np.testing.assert_allclose(
        enc[:, n:].sum(1), fills["-1e-12"]["encoder_self"]["leaked"][1], atol=1e-3
    )
    assert np.all(np.array(fills["-inf"]["encoder_self"]["maps"][1])[:, n:] == 0)
    for kind, diff in mask_out["renormalize_max_abs_diff"].items():
        assert diff < 1e-6, kind


def test_causal_mask_off_under_teacher_forcing(mask_out: dict) -> None:
    c = mask_out["causal"]
    t = len(c["target_tokens"])
    assert c["item"] == 0 and len(c["decoder_input_tokens"]) == t
    masked, unmasked = np.array(c["masked"]), np.array(c["unmasked"])
    upper = np.triu(np.ones((t, t), dtype=bool), k=1)
    assert np.all(masked[upper] == 0) and np.all(unmasked[upper] > 0)
    np.testing.assert_allclose(c["future_mass"], (unmasked * upper).sum(1), atol=1e-3)
    assert c["future_mass"][-1] == 0 and c["future_mass_max"] > 0.1
    assert len(c["prob_masked"]) == len(c["prob_unmasked"]) == t
    assert c["prob_masked"] != c["prob_unmasked"]
    assert all(0 < p <= 1 for p in c["prob_masked"] + c["prob_unmasked"])


def test_masks_default_targets_are_the_greedy_translations(client: TestClient) -> None:
    out = post_ok(client, "/api/masks", {"texts": TEXTS[1:], "item": 1, "head": 3})
    plain = post_ok(client, "/api/translate", {"text": TEXTS[2], "kinds": []})
    assert out["causal"]["item"] == 1 and out["head"] == 3
    assert out["causal"]["target_tokens"] == plain["target_tokens"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"texts": ["one"]}, ["texts", "at least 2"]),
        ({"texts": ["a", "b", "c", "d", "e"]}, ["texts", "at most 4"]),
        ({"texts": ["I go home.", " "]}, ["texts.1", "must not be empty"]),
        ({"texts": ["I go home.", "Schnee ☃"]}, ["texts[1]", "☃"]),
        ({"targets": ["Ich gehe."]}, ["targets", "one target per text (2)"]),
        ({"targets": ["Ich gehe.", "☃"]}, ["targets[1]", "☃"]),
        ({"layer": 2}, ["layer", "0..1"]),
        ({"head": 4}, ["head", "0..3"]),
        ({"item": 2}, ["item", "0..1"]),
        ({"item": -1}, ["item"]),
    ],
)
def test_masks_validation(client: TestClient, body: dict, words: list[str]) -> None:
    r = client.post("/api/masks", json={"texts": ["I go home.", "Where is the station?"], **body})
    assert r.status_code == 422, r.text
    for word in words:
        assert word in r.json()["detail"], (word, r.json()["detail"])


# -- scaling --------------------------------------------------------------------------------------
def test_scaling_variance_grows_with_dk_and_softmax_saturates(client: TestClient) -> None:
    r = client.get("/api/scaling", params={"d_k": [4, 64, 256], "samples": 3000, "seed": 3})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["d_k"] == [4, 64, 256] and out["samples"] == 3000
    np.testing.assert_allclose(np.array(out["variance_raw"]) / [4, 64, 256], 1.0, atol=0.15)
    np.testing.assert_allclose(out["variance_scaled"], 1.0, atol=0.15)
    sat = out["saturation"]
    probs = np.array(sat["probs"])
    assert probs.shape == (len(sat["spreads"]), 10)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-4)
    assert sat["max_weight"] == sorted(sat["max_weight"])
    assert sat["entropy"] == sorted(sat["entropy"], reverse=True)
    assert (
        client.get("/api/scaling", params={"seed": 3, "d_k": [4, 64, 256], "samples": 3000}).json()
        == out
    )


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"d_k": [0]}, ["d_k", "1024"]),
        ({"d_k": [2048]}, ["d_k", "1024", "max_dk"]),
        ({"d_k": list(range(1, 18))}, ["d_k", "16"]),
        ({"samples": 1}, ["samples"]),
        ({"samples": 5000}, ["samples", "4000", "max_samples"]),
        ({"n_scores": 65}, ["n_scores", "64"]),
        ({"spreads": [-1]}, ["spreads", "0 and 1000"]),
        ({"seed": -1}, ["seed"]),
    ],
)
def test_scaling_limits(client: TestClient, params: dict, words: list[str]) -> None:
    r = client.get("/api/scaling", params=params)
    assert r.status_code == 422, r.text
    for word in words:
        assert word in r.json()["detail"], (word, r.json()["detail"])


# -- schema, pages, no models ---------------------------------------------------------------------
def test_openapi_documents_the_experiment_endpoints(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    for path in ("/api/experiment", "/api/positional", "/api/positional/sentence", "/api/order",
                 "/api/masks", "/api/scaling"):  # fmt: skip
        assert path in paths, path
    assert "/positional" not in paths and "/heads" not in paths
    post = paths["/api/experiment"]["post"]
    assert post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ExperimentOut"
    )
    spec = schema["components"]["schemas"]["ExperimentSpec"]["properties"]
    assert set(spec) == {
        "positional_encoding", "scale_scores", "temperature", "mask_fill", "mask_mode",
        "causal_mask", "padding_mask", "hide_source", "silence",
    }  # fmt: skip
    assert spec["mask_fill"]["enum"] == ["-inf", "-1e9", "-1e-12"]
    assert all(p.get("description") for p in spec.values())


@pytest.mark.parametrize("path", ["/positional", "/masks", "/heads"])
def test_experiment_pages_render_with_page_data_and_no_inline_script(
    client: TestClient, path: str
) -> None:
    r = client.get(path)
    assert r.status_code == 200
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", r.text, re.S)
    inline = [a for a, body in scripts if body.strip() and 'type="application/json"' not in a]
    assert not inline
    assert any(f"/static/js/{path.strip('/')}.js" in a for a, _ in scripts)
    assert '<a href="/masks"' in r.text and '<a href="/heads"' in r.text
    assert re.search(rf'<a href="{path}"[^>]*aria-current="page"', r.text)


def test_without_models_experiments_answer_503_and_math_still_works(tmp_path: Path) -> None:
    app = create_app(Settings(model_dir=tmp_path / "none", device="cpu", threads=1))
    with TestClient(app) as c:
        r = c.post("/api/experiment", json={"text": SENTENCE})
        assert r.status_code == 503 and "no model is loaded" in r.json()["detail"]
        assert c.post("/api/masks", json={"texts": TEXTS[:2]}).status_code == 503
        out = c.get("/api/positional", params={"positions": 5}).json()
        assert out["d_model"] == 64 and out["model_d_model"] is None
        assert c.get("/api/scaling", params={"d_k": [2]}).status_code == 200
        assert c.get("/heads").status_code == 200


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_experiments_run_on_the_gpu_with_the_cpu_results(
    tiny_bundle_dir: Path, client: TestClient
) -> None:
    bodies = {
        "/api/experiment": {"text": SENTENCE, **FAST, "experiment": {"hide_source": [1]}},
        "/api/masks": {"texts": TEXTS, "targets": TARGETS},
        "/api/order": {"text": "I go home."},
        "/api/positional/sentence": {"text": "I go home."},
    }
    with TestClient(create_app(Settings(model_dir=tiny_bundle_dir, device="auto"))) as gpu:
        assert gpu.get("/api/health").json()["device"].startswith("cuda")
        for url, body in bodies.items():
            on_gpu, on_cpu = post_ok(gpu, url, body), post_ok(client, url, body)
            if url == "/api/experiment":
                assert (
                    on_gpu["experiment"]["target_tokens"] == on_cpu["experiment"]["target_tokens"]
                )
                for kind in KINDS:
                    a, b = on_gpu["diff"]["kinds"][kind], on_cpu["diff"]["kinds"][kind]
                    assert a["max_abs_diff"] == pytest.approx(b["max_abs_diff"], abs=1e-3)
            elif url == "/api/masks":
                for f_gpu, f_cpu in zip(on_gpu["fills"], on_cpu["fills"], strict=True):
                    assert f_gpu["kinds"]["cross"]["leaked_max"] == pytest.approx(
                        f_cpu["kinds"]["cross"]["leaked_max"], abs=1e-3
                    )
            elif url == "/api/order":
                assert on_gpu["runs"][1]["encoder_max_diff"] < 1e-4
            else:
                np.testing.assert_allclose(on_gpu["total"], on_cpu["total"], atol=1e-4)
