"""The sinusoidal positional encoding (paper section 3.5) against the formula, computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from model.positional import PositionalEncoding, sinusoidal_encoding
from tests.helpers import assert_close


def reference_encoding(n_positions: int, d_model: int) -> list[list[float]]:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), in a loop."""
    table = []
    for pos in range(n_positions):
        row = []
        for j in range(d_model):
            two_i = j - (j % 2)  # the even index 2i that the pair (2i, 2i+1) shares
            angle = pos / 10000 ** (two_i / d_model)
            row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
        table.append(row)
    return table


@pytest.mark.parametrize("d_model", [2, 8, 16, 33, 64])
def test_encoding_equals_the_sin_cos_formula_of_the_paper(d_model: int) -> None:
    n = 60
    expected = torch.tensor(reference_encoding(n, d_model), dtype=torch.float32)
    pe = sinusoidal_encoding(n, d_model)
    assert pe.shape == (n, d_model)
    assert pe.dtype == torch.float32
    assert_close(pe, expected, atol=1e-6, rtol=0)


def test_position_zero_is_zeros_and_ones_alternating() -> None:
    pe = sinusoidal_encoding(1, 10)
    assert pe[0].tolist() == [0.0, 1.0] * 5


def test_encodings_of_different_positions_differ() -> None:
    pe = sinusoidal_encoding(256, 32)
    distances = torch.cdist(pe, pe)  # [P, P]
    off_diagonal = distances + torch.eye(256) * 1e9
    assert float(off_diagonal.min()) > 1e-3


def test_odd_d_model_has_one_more_sine_than_cosine_column() -> None:
    d_model = 7
    pe = sinusoidal_encoding(50, d_model)
    assert pe.shape == (50, 7)
    assert_close(
        pe, torch.tensor(reference_encoding(50, d_model), dtype=torch.float32), atol=1e-6, rtol=0
    )
    # The last column is a sine (index 6 is even): it starts at 0 and is not constant.
    assert float(pe[0, -1]) == 0.0
    assert float(pe[:, -1].abs().max()) > 0


def test_every_value_lies_in_minus_one_to_one() -> None:
    pe = sinusoidal_encoding(500, 64)
    assert float(pe.abs().max()) <= 1.0


@pytest.mark.parametrize(("n_positions", "d_model"), [(0, 8), (8, 0), (-1, 8)])
def test_non_positive_sizes_are_rejected(n_positions: int, d_model: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        sinusoidal_encoding(n_positions, d_model)


def test_module_adds_the_table_from_the_given_offset() -> None:
    module = PositionalEncoding(d_model=12, max_len=40)
    x = torch.randn(2, 5, 12)
    table = sinusoidal_encoding(40, 12)
    assert_close(module(x), x + table[:5])
    assert_close(module(x, offset=7), x + table[7:12])
    assert torch.equal(module(x, enabled=False), x)


def test_module_refuses_positions_past_max_len() -> None:
    module = PositionalEncoding(d_model=8, max_len=10)
    with pytest.raises(ValueError, match="max_len 10"):
        module(torch.zeros(1, 4, 8), offset=8)


def test_the_table_is_not_saved_in_checkpoints() -> None:
    assert "pe" not in PositionalEncoding(d_model=8, max_len=10).state_dict()
