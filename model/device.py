"""Device choice: `auto` picks CUDA, then Apple MPS, then the CPU."""

from __future__ import annotations

import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")


def resolve_device(name: str = "auto") -> torch.device:
    """Turn a setting ("auto", "cpu", "cuda", "cuda:1", "mps") into an available torch.device."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise ValueError(f"unknown device {name!r}; use one of {DEVICE_CHOICES}") from e
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "device 'cuda' was asked for but no CUDA GPU is available; use 'auto' or 'cpu'"
        )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            "device 'mps' was asked for but Apple MPS is not available; use 'auto' or 'cpu'"
        )
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"unsupported device {name!r}; use one of {DEVICE_CHOICES}")
    return device
