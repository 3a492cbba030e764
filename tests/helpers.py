"""Small assertions shared by the test modules."""

from __future__ import annotations

import torch


def assert_close(
    actual: torch.Tensor, expected: torch.Tensor, atol: float = 1e-5, rtol: float = 1.3e-6
) -> None:
    """Like torch.testing.assert_close (same float32 defaults), without its first call's
    import of torch.distributed and sympy (seconds on a busy CPU)."""
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    if not torch.allclose(actual, expected, atol=atol, rtol=rtol):
        diff = (actual.detach().double() - expected.detach().double()).abs().max()
        raise AssertionError(f"not close: max abs difference {float(diff):.3g} (atol {atol})")
