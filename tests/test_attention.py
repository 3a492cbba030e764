"""Multi-head attention against PyTorch's reference implementation and against itself.

Our masks say True = "may attend"; `nn.MultiheadAttention` says True = "ignore": the tests
translate between the two conventions explicitly.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from model.attention import KVCache, MultiHeadAttention, scaled_dot_product_attention
from model.config import ModelConfig
from model.masks import causal_mask
from model.transformer import Transformer
from tests.helpers import assert_close

D_MODEL, N_HEADS = 32, 4


def pair() -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    """Our module and torch's, holding the same (random, non-zero-bias) weights, in eval mode."""
    torch.manual_seed(0)
    ours = MultiHeadAttention(D_MODEL, N_HEADS).eval()
    with torch.no_grad():
        for lin in (ours.w_q, ours.w_k, ours.w_v, ours.w_o):
            lin.bias.normal_(0, 0.1)  # default init may be zero: make the biases matter
    ref = nn.MultiheadAttention(D_MODEL, N_HEADS, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        ref.out_proj.weight.copy_(ours.w_o.weight)
        ref.out_proj.bias.copy_(ours.w_o.bias)
    return ours, ref


def key_mask(lengths: list[int], key_len: int) -> torch.Tensor:
    """[B, Tk], True on real keys (our convention)."""
    return torch.arange(key_len)[None, :] < torch.tensor(lengths)[:, None]


def test_self_attention_equals_torch_multihead_attention() -> None:
    ours, ref = pair()
    x = torch.randn(3, 6, D_MODEL)
    with torch.no_grad():
        out, weights = ours(x, need_weights=True)
        ref_out, ref_weights = ref(x, x, x, need_weights=True, average_attn_weights=False)
    assert weights is not None
    assert weights.shape == (3, N_HEADS, 6, 6)
    assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    assert_close(weights, ref_weights, atol=1e-6, rtol=1e-5)


def test_cross_attention_with_padding_equals_torch_with_the_inverted_key_padding_mask() -> None:
    ours, ref = pair()
    query = torch.randn(3, 4, D_MODEL)
    memory = torch.randn(3, 7, D_MODEL)
    visible = key_mask([7, 5, 2], 7)  # ours: True = may attend
    with torch.no_grad():
        out, weights = ours(query, memory, visible[:, None, None, :], need_weights=True)
        ref_out, ref_weights = ref(
            query,
            memory,
            memory,
            key_padding_mask=~visible,  # torch: True = ignore
            need_weights=True,
            average_attn_weights=False,
        )
    assert weights is not None
    assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    assert_close(weights, ref_weights, atol=1e-6, rtol=1e-5)
    assert (weights[1, :, :, 5:] == 0).all()
    assert (weights[2, :, :, 2:] == 0).all()


def test_causal_self_attention_equals_torch_with_the_inverted_attn_mask() -> None:
    ours, ref = pair()
    x = torch.randn(2, 5, D_MODEL)
    with torch.no_grad():
        out, weights = ours(x, mask=causal_mask(5), need_weights=True)
        ref_out, ref_weights = ref(
            x, x, x, attn_mask=~causal_mask(5)[0, 0], need_weights=True, average_attn_weights=False
        )
    assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    assert_close(weights, ref_weights, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("masked", [False, True])
def test_fused_fast_path_gives_the_same_output_as_the_weights_path(masked: bool) -> None:
    ours, _ = pair()
    query, memory = torch.randn(3, 4, D_MODEL), torch.randn(3, 7, D_MODEL)
    mask = key_mask([7, 5, 2], 7)[:, None, None, :] if masked else None
    with torch.no_grad():
        fast, no_weights = ours(query, memory, mask, need_weights=False)
        slow, weights = ours(query, memory, mask, need_weights=True)
    assert no_weights is None
    assert weights is not None
    assert_close(fast, slow, atol=1e-5, rtol=1e-5)


def test_whole_model_logits_do_not_depend_on_whether_weights_were_asked_for() -> None:
    torch.manual_seed(1)
    config = ModelConfig(
        vocab_size=40,
        d_model=32,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        max_len=32,
    )
    model = Transformer(config).eval()
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    tgt = torch.tensor([[1, 11, 12, 13], [1, 14, 0, 0]])
    with torch.no_grad():
        fast = model(src, tgt, need_weights=False)
        slow = model(src, tgt, need_weights=True)
    assert fast.trace is None
    assert slow.trace is not None
    assert_close(fast.logits, slow.logits, atol=1e-5, rtol=1e-5)


def test_scaled_dot_product_attention_equals_the_formula_written_out() -> None:
    torch.manual_seed(2)
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    out, weights = scaled_dot_product_attention(q, k, v, need_weights=True)
    expected_weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    assert_close(weights, expected_weights, atol=1e-6, rtol=1e-5)
    assert_close(out, expected_weights @ v, atol=1e-6, rtol=1e-5)


def test_returned_weights_are_taken_before_dropout_and_rows_still_sum_to_one() -> None:
    torch.manual_seed(3)
    module = MultiHeadAttention(D_MODEL, N_HEADS, dropout=0.5).train()
    _, weights = module(torch.randn(2, 5, D_MODEL), need_weights=True)
    assert weights is not None
    assert_close(weights.sum(-1), torch.ones(2, N_HEADS, 5), atol=1e-5, rtol=0)
    assert (weights > 0).all()  # dropout would have zeroed about half of them


def test_incremental_self_attention_with_a_cache_equals_full_causal_attention() -> None:
    ours, _ = pair()
    x = torch.randn(2, 5, D_MODEL)
    with torch.no_grad():
        full, full_weights = ours(x, mask=causal_mask(5), need_weights=True)
        cache = KVCache()
        steps = [ours(x[:, t : t + 1], cache=cache, need_weights=True) for t in range(5)]
    assert cache.k is not None
    assert cache.k.shape == (2, N_HEADS, 5, D_MODEL // N_HEADS)
    assert_close(torch.cat([o for o, _ in steps], dim=1), full, atol=1e-5, rtol=1e-5)
    for t, (_, w) in enumerate(steps):
        assert w is not None
        assert_close(w[:, :, 0], full_weights[:, :, t, : t + 1], atol=1e-6, rtol=0)


def test_static_cross_attention_cache_projects_the_memory_once() -> None:
    ours, _ = pair()
    query, memory = torch.randn(2, 1, D_MODEL), torch.randn(2, 7, D_MODEL)
    cache = KVCache()
    with torch.no_grad():
        first, _ = ours(query, memory, cache=cache, static_kv=True)
        k_before = cache.k
        # A different memory is ignored: the cached projection is reused.
        second, _ = ours(query, torch.zeros_like(memory), cache=cache, static_kv=True)
    assert cache.k is k_before
    assert_close(first, second)


def test_model_dimension_must_split_evenly_into_heads() -> None:
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(30, 4)
