"""The compact (uint8 + base64) and nested encodings of attention maps."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from app.packing import MAX_ERROR, SCALE, decode_compact, encode_compact, to_nested


def softmax_maps(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Random attention-like maps: rows (last axis) sum to 1."""
    x = np.random.default_rng(seed).normal(size=shape) * 3
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def test_round_trip_error_is_at_most_half_a_step() -> None:
    w = softmax_maps((2, 4, 7, 9))
    data, shape = encode_compact(w)
    assert shape == [2, 4, 7, 9]
    back = decode_compact(data, shape)
    assert back.shape == w.shape and back.dtype == np.float32
    assert np.abs(back - w).max() <= MAX_ERROR + 1e-7
    assert pytest.approx(1 / 510) == MAX_ERROR


def test_multiples_of_one_step_survive_exactly_and_order_is_c_order() -> None:
    w = (np.arange(24, dtype=np.float32) * 10 / SCALE).reshape(2, 3, 4)
    data, shape = encode_compact(w)
    assert list(base64.b64decode(data)) == [i * 10 for i in range(24)]
    np.testing.assert_array_equal(decode_compact(data, shape), w)


def test_torch_tensors_are_accepted() -> None:
    t = torch.tensor([[0.0, 0.25, 0.75, 1.0]])
    data, shape = encode_compact(t)
    assert shape == [1, 4]
    assert list(base64.b64decode(data)) == [0, 64, 191, 255]


def test_out_of_range_values_are_clipped_and_nan_is_zero() -> None:
    data, _ = encode_compact(np.array([-0.5, 1.5, np.nan, 0.5], dtype=np.float32))
    assert list(base64.b64decode(data)) == [0, 255, 0, 128]


def test_a_payload_that_does_not_match_its_shape_is_rejected() -> None:
    data, _ = encode_compact(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="needs 6"):
        decode_compact(data, [2, 3])
    with pytest.raises(ValueError):
        decode_compact("not base64!!", [1])


@settings(max_examples=200, deadline=None)
@given(
    arrays(
        np.float32,
        array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=6),
        elements=st.floats(0.0, 1.0, width=32),
    )
)
def test_decode_of_encode_is_within_one_step_for_any_shape(x: np.ndarray) -> None:
    data, shape = encode_compact(x)
    assert shape == list(x.shape)
    back = decode_compact(data, shape)
    assert back.shape == x.shape
    assert np.abs(back - x).max() <= 1 / 255
    assert np.abs(back - x).max() <= MAX_ERROR + 1e-7


def test_to_nested_rounds_to_four_decimals_and_keeps_the_layout() -> None:
    w = np.array([[[[0.123456, 0.876544]]]], dtype=np.float32)
    assert to_nested(w) == [[[[0.1235, 0.8765]]]]
    assert to_nested(torch.tensor([0.5, 0.25]), decimals=1) == [0.5, 0.2]
    # floats come out as short decimals, not float32 noise like 0.12349999845
    assert json.dumps(to_nested(w)) == "[[[[0.1235, 0.8765]]]]"


def test_payload_of_a_20_token_sentence_is_small() -> None:
    """A 20-token input to a 3+3-layer, 8-head model (the bundled size): all three kinds."""
    s, t = 20, 22
    shapes = {"encoder_self": (3, 8, s, s), "decoder_self": (3, 8, t, t), "cross": (3, 8, t, s)}
    compact = nested = full = 0
    for i, shape in enumerate(shapes.values()):
        w = softmax_maps(shape, seed=i)
        compact += len(json.dumps(encode_compact(w)[0]))
        nested += len(json.dumps(to_nested(w)))
        full += len(json.dumps(w.tolist()))  # what shipping raw float lists costs
    n = sum(int(np.prod(v)) for v in shapes.values())
    assert compact <= 4 * n / 3 + 3 * 3 + 6  # base64 of one byte per weight
    assert compact <= 60_000
    assert full >= 5 * compact
    assert nested >= 3 * compact
