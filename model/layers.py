"""Encoder and decoder layers: attention and FFN sub-layers, each in residual + LayerNorm."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from model.attention import DEFAULT_OPTIONS, KVCache, MultiHeadAttention
from model.experiment import AttentionOptions

SublayerOut = tuple[torch.Tensor, torch.Tensor | None]


class FeedForward(nn.Module):
    """Position-wise FFN(x) = max(0, x W1 + b1) W2 + b2 (paper eq. 2)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [B, T, d_model] -> [B, T, d_model]."""
        h = torch.relu(self.w_1(x))
        # In eval dropout is the identity; skipping the call saves time at every decoding step.
        return self.w_2(self.dropout(h) if self.training else h)


class Residual(nn.Module):
    """Residual connection and LayerNorm around a sub-layer.

    Post-norm (the paper): LayerNorm(x + Dropout(Sublayer(x))).
    Pre-norm (option): x + Dropout(Sublayer(LayerNorm(x))), easier to train deep or fast.
    """

    def __init__(self, d_model: int, dropout: float, norm_first: bool, eps: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(
        self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], SublayerOut]
    ) -> SublayerOut:
        if self.norm_first:
            out, weights = sublayer(self.norm(x))
            return x + self._drop(out), weights
        out, weights = sublayer(x)
        return self.norm(x + self._drop(out)), weights

    def _drop(self, x: torch.Tensor) -> torch.Tensor:
        # In eval dropout is the identity: skip the module call (it runs 9 times per decoding
        # step of a 3-layer decoder).
        return self.dropout(x) if self.training else x


class EncoderLayer(nn.Module):
    """Self-attention, then FFN."""

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, dropout: float, norm_first: bool, eps: float
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.res_attn = Residual(d_model, dropout, norm_first, eps)
        self.res_ffn = Residual(d_model, dropout, norm_first, eps)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        options: AttentionOptions = DEFAULT_OPTIONS,
        need_weights: bool = False,
    ) -> SublayerOut:
        """x: [B, S, d_model], mask: [B, 1, 1|S, S] -> (x', weights [B, H, S, S] or None)."""
        x, weights = self.res_attn(
            x, lambda h: self.self_attn(h, None, mask, options, need_weights)
        )
        x, _ = self.res_ffn(x, lambda h: (self.ffn(h), None))
        return x, weights


@dataclass
class DecoderLayerCache:
    """Incremental-decoding state of one decoder layer."""

    self_attn: KVCache = field(default_factory=KVCache)
    cross_attn: KVCache = field(default_factory=KVCache)

    def reorder(self, index: torch.Tensor) -> None:
        self.self_attn.reorder(index)
        self.cross_attn.reorder(index)


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder (cross) attention, then FFN."""

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, dropout: float, norm_first: bool, eps: float
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.res_self = Residual(d_model, dropout, norm_first, eps)
        self.res_cross = Residual(d_model, dropout, norm_first, eps)
        self.res_ffn = Residual(d_model, dropout, norm_first, eps)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None,
        cross_mask: torch.Tensor | None,
        self_options: AttentionOptions = DEFAULT_OPTIONS,
        cross_options: AttentionOptions = DEFAULT_OPTIONS,
        need_weights: bool = False,
        cache: DecoderLayerCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """x: [B, T, d_model], memory: [B, S, d_model].

        Returns x' and, if need_weights, self weights [B, H, T, T_total] and cross weights
        [B, H, T, S] (T_total includes cached positions).
        """
        self_cache = cache.self_attn if cache is not None else None
        cross_cache = cache.cross_attn if cache is not None else None
        x, self_w = self.res_self(
            x, lambda h: self.self_attn(h, None, self_mask, self_options, need_weights, self_cache)
        )
        x, cross_w = self.res_cross(
            x,
            lambda h: self.cross_attn(
                h, memory, cross_mask, cross_options, need_weights, cross_cache, static_kv=True
            ),
        )
        x, _ = self.res_ffn(x, lambda h: (self.ffn(h), None))
        return x, self_w, cross_w
