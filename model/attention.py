"""Scaled dot-product attention and multi-head attention (paper section 3.2).

Attention returns `(output, weights or None)`: the weights are computed only when asked for, and
otherwise the fused `torch.nn.functional.scaled_dot_product_attention` kernel does the work.
Masks follow `model.masks`: boolean, True = may attend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from model.experiment import AttentionOptions

DEFAULT_OPTIONS = AttentionOptions()


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    options: AttentionOptions = DEFAULT_OPTIONS,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(q k^T / sqrt(d_k)) v with the mask and experiment options applied.

    q: [batch, heads, q_len, d_k]; k, v: [batch, heads, k_len, d_k];
    mask: bool, broadcastable to [batch, heads, q_len, k_len], True = may attend.
    Returns output [batch, heads, q_len, d_k] and, if need_weights, the weights
    [batch, heads, q_len, k_len] in float32 (before dropout, which is what the model "looked at").
    """
    d_k = q.size(-1)
    scale = (1.0 / math.sqrt(d_k) if options.scale else 1.0) / options.temperature
    if not need_weights and options.fusable:
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale
        )
        return out, None

    # The readable path. Scores in float32 so that -1e9 / -1e-12 fills mean what they say
    # even under bf16 autocast.
    scores = torch.matmul(q.float(), k.float().transpose(-2, -1)) * scale  # [B, H, Tq, Tk]
    if mask is not None and options.mask_mode == "fill":
        scores = scores.masked_fill(~mask, options.mask_fill)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None and options.mask_mode == "renormalize":
        weights = weights * mask
        weights = weights / weights.sum(dim=-1, keepdim=True)
    attn = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    out = torch.matmul(attn.to(v.dtype), v)
    return out, (weights if need_weights else None)


@dataclass
class KVCache:
    """Projected keys and values of one attention module, [batch, heads, len, d_k] each.

    Decoder self-attention appends one position per step; cross-attention computes the
    projection of the encoder memory once and reuses it.
    """

    k: torch.Tensor | None = None
    v: torch.Tensor | None = None

    def reorder(self, index: torch.Tensor) -> None:
        """Select batch rows (beam search keeps the caches of the surviving beams)."""
        if self.k is not None and self.v is not None:
            self.k = self.k.index_select(0, index)
            self.v = self.v.index_select(0, index)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O; head_i = Attention(QW_i^Q, KW_i^K, VW_i^V).

    Returns (output, weights or None); weights are computed only when asked for.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, d_model] -> [B, heads, T, d_k]."""
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.d_k).transpose(1, 2)

    def forward(
        self,
        query: torch.Tensor,
        key_value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        options: AttentionOptions = DEFAULT_OPTIONS,
        need_weights: bool = False,
        cache: KVCache | None = None,
        static_kv: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from `query` [B, Tq, d_model] to `key_value` [B, Tk, d_model].

        key_value None means self-attention. With a `cache`, self-attention appends this call's
        keys/values to it (incremental decoding); with `static_kv` (cross-attention) the memory's
        projection is computed once and reused. Returns output [B, Tq, d_model] and the weights
        [B, heads, Tq, Tk] if need_weights.
        """
        source = query if key_value is None else key_value
        q = self._split(self.w_q(query))
        if cache is not None and static_kv and cache.k is not None:
            k, v = cache.k, cache.v
        else:
            k, v = self._split(self.w_k(source)), self._split(self.w_v(source))
            if cache is not None:
                if not static_kv and cache.k is not None:
                    k = torch.cat([cache.k, k], dim=2)
                    v = torch.cat([cache.v, v], dim=2)
                cache.k, cache.v = k, v
        p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(q, k, v, mask, options, p, need_weights)
        if options.silenced:
            # Silencing a head removes its whole contribution to the output projection.
            keep = torch.ones(self.n_heads, device=out.device, dtype=out.dtype)
            keep[list(options.silenced)] = 0
            out = out * keep[None, :, None, None]
        b, _, tq, _ = out.shape
        out = out.transpose(1, 2).reshape(b, tq, self.n_heads * self.d_k)
        return self.w_o(out), weights
