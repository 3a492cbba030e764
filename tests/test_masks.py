"""Masks as pure functions, and what they do inside a real forward pass of a tiny Transformer.

Convention (model/masks.py): True = the key may be attended to.
"""

from __future__ import annotations

import pytest
import torch

from model.config import ModelConfig
from model.masks import causal_mask, combine, hidden_positions_mask, padding_mask
from model.trace import AttentionTrace
from model.transformer import Transformer
from tests.helpers import assert_close

PAD = 0
# Two sources of real lengths 5 and 3, two decoder inputs of real lengths 4 and 2 (right-padded).
SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, PAD, PAD]])
TGT = torch.tensor([[1, 5, 6, 7], [1, 8, PAD, PAD]])
SRC_LEN, TGT_LEN = [5, 3], [4, 2]


@pytest.fixture(scope="module")
def trace() -> AttentionTrace:
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=30,
        d_model=32,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        max_len=64,
    )
    model = Transformer(config).eval()
    with torch.no_grad():
        out = model(SRC, TGT, need_weights=True)
    assert out.trace is not None
    return out.trace


def test_padding_mask_is_true_on_real_tokens_and_broadcasts_over_heads_and_queries() -> None:
    mask = padding_mask(SRC, PAD)
    assert mask.shape == (2, 1, 1, 5)
    assert mask.dtype == torch.bool
    assert mask[0, 0, 0].tolist() == [True] * 5
    assert mask[1, 0, 0].tolist() == [True, True, True, False, False]


def test_causal_mask_is_the_lower_triangle_including_the_diagonal() -> None:
    mask = causal_mask(4)
    assert mask.shape == (1, 1, 4, 4)
    for i in range(4):
        for j in range(4):
            assert bool(mask[0, 0, i, j]) == (j <= i)


def test_hidden_positions_mask_hides_exactly_the_given_keys() -> None:
    mask = hidden_positions_mask(5, (1, 3))
    assert mask.shape == (1, 1, 1, 5)
    assert mask[0, 0, 0].tolist() == [True, False, True, False, True]
    assert hidden_positions_mask(3, ()).all()


def test_combine_is_a_logical_and_that_skips_missing_masks() -> None:
    assert combine(None, None) is None
    pad = padding_mask(TGT, PAD)  # [2, 1, 1, 4]
    both = combine(causal_mask(4), None, pad)
    assert both is not None
    assert both.shape == (2, 1, 4, 4)
    assert torch.equal(both, causal_mask(4) & pad)


def test_decoder_self_attention_gives_exactly_zero_weight_to_future_positions(
    trace: AttentionTrace,
) -> None:
    t = TGT.size(1)
    future = torch.ones(t, t, dtype=torch.bool).triu(diagonal=1)  # key j > query i
    weights = trace.decoder_self  # [L, B, H, T, T]
    assert weights.shape == (2, 2, 4, t, t)
    assert (weights[..., future] == 0).all()
    # ...and the visible past really is used (the test would pass trivially on all-zero maps).
    assert (weights[..., ~future][:, 0] > 0).all()


def test_padded_source_keys_get_exactly_zero_weight_in_encoder_and_cross_attention(
    trace: AttentionTrace,
) -> None:
    for b, n in enumerate(SRC_LEN):
        assert (trace.encoder_self[:, b, :, :, n:] == 0).all()
        assert (trace.cross[:, b, :, :, n:] == 0).all()
        assert (trace.encoder_self[:, b, :, :, :n] > 0).all()
        assert (trace.cross[:, b, :, :, :n] > 0).all()


def test_padded_target_keys_get_exactly_zero_weight_in_decoder_self_attention(
    trace: AttentionTrace,
) -> None:
    for b, n in enumerate(TGT_LEN):
        assert (trace.decoder_self[:, b, :, :, n:] == 0).all()


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self", "cross"])
def test_every_attention_row_sums_to_one(trace: AttentionTrace, kind: str) -> None:
    weights = trace.kind(kind)  # type: ignore[arg-type]
    assert weights.dtype == torch.float32
    assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5, rtol=0)
