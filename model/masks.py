"""Attention masks as pure functions.

The boolean convention, used everywhere in attnscope: **True means "may attend"** (the key is
visible to the query), False means masked. This is the convention of
`torch.nn.functional.scaled_dot_product_attention`'s boolean `attn_mask` (and the opposite of
`nn.MultiheadAttention`'s `key_padding_mask`, where True means "ignore").

Masks are shaped to broadcast against attention scores [batch, heads, query, key].
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """tokens [batch, key_len] -> [batch, 1, 1, key_len], True where the key is a real token."""
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Look-ahead mask [1, 1, size, size]: query i may see keys 0..i (lower triangle)."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]


def hidden_positions_mask(
    key_len: int, hidden: Sequence[int], device: torch.device | str | None = None
) -> torch.Tensor:
    """[1, 1, 1, key_len], False at the hidden key positions (the "hide tokens" experiment)."""
    keep = torch.ones(key_len, dtype=torch.bool, device=device)
    if hidden:
        idx = torch.tensor([p for p in hidden if 0 <= p < key_len], dtype=torch.long)
        keep[idx.to(keep.device)] = False
    return keep[None, None, None, :]


def combine(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of the masks that are not None (broadcasting); None when all are None."""
    present = [m for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = out & m
    return out
