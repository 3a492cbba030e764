"""Sinusoidal positional encoding (paper section 3.5).

PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).
"""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_encoding(n_positions: int, d_model: int) -> torch.Tensor:
    """The encoding matrix, shape [n_positions, d_model], float32.

    Even columns hold sines, odd columns cosines; the pair (2i, 2i+1) shares the wavelength
    2*pi * 10000^(2i/d_model), so the wavelengths grow geometrically from 2*pi to 10000*2*pi.
    """
    if n_positions <= 0 or d_model <= 0:
        raise ValueError(f"n_positions and d_model must be positive, got {n_positions}, {d_model}")
    position = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)  # [P, 1]
    # 1 / 10000^(2i/d) computed in log space (float64 so the table is exact to float32 precision).
    inv_freq = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
    )  # [ceil(d/2)]
    angles = position * inv_freq  # [P, ceil(d/2)]
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])  # odd d_model: one fewer cosine column
    return pe.float()


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding to embeddings; the table is a non-persistent buffer."""

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        # Not saved in checkpoints: it is a pure function of (max_len, d_model).
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0, enabled: bool = True) -> torch.Tensor:
        """x: [batch, seq, d_model] -> same shape, with PE(offset .. offset+seq-1) added.

        `offset` is the position of x's first element (used by cached decoding, one token a step).
        `enabled=False` is the "no positional encoding" experiment.
        """
        if not enabled:
            return x
        seq = x.size(1)
        if offset + seq > self.pe.size(0):
            raise ValueError(
                f"sequence of {offset + seq} positions exceeds max_len {self.pe.size(0)}"
            )
        return x + self.pe[offset : offset + seq].to(x.dtype)
