"""Model bundles: a directory with weights.safetensors, config.json, tokenizer.json, metadata.json.

Loading never unpickles anything: weights come from safetensors, everything else from JSON.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from model.config import ModelConfig
from model.device import resolve_device
from model.tokenizer import Tokenizer
from model.transformer import Transformer

log = logging.getLogger(__name__)

WEIGHTS, CONFIG, TOKENIZER, METADATA = (
    "weights.safetensors",
    "config.json",
    "tokenizer.json",
    "metadata.json",
)
REQUIRED_FILES = (WEIGHTS, CONFIG, TOKENIZER, METADATA)
#: The English->German bundle shipped in the repository (loaded by default by the CLI and app).
DEFAULT_BUNDLE_DIR = Path(__file__).resolve().parent / "bundles" / "en-de"
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class BundleError(ValueError):
    """A bundle directory that is missing, incomplete or corrupt; the message names the file."""


@dataclass
class Bundle:
    """A loaded bundle: the model in eval mode on its device, its tokenizer and metadata."""

    model: Transformer
    tokenizer: Tokenizer
    metadata: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def name(self) -> str:
        return str(self.metadata.get("name") or (self.path.name if self.path else "model"))


def _weights_state(model: Transformer) -> dict[str, torch.Tensor]:
    state = model.state_dict()
    if model.config.tie_embeddings:
        # safetensors stores no aliases; the tied output weight is rebuilt from the embedding.
        state.pop("generator.weight", None)
    return state


def save_bundle(
    path: str | Path,
    model: Transformer,
    tokenizer: Tokenizer,
    metadata: dict[str, Any] | None = None,
    dtype: str = "float32",
) -> Path:
    """Write the bundle directory (created if needed); weights stored as `dtype`."""
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {list(_DTYPES)}, got {dtype!r}")
    if tokenizer.vocab_size > model.config.vocab_size:
        raise ValueError(
            f"tokenizer has {tokenizer.vocab_size} tokens but the model only "
            f"{model.config.vocab_size}"
        )
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    state = {
        k: v.detach().to("cpu", _DTYPES[dtype]).contiguous()
        for k, v in _weights_state(model).items()
    }
    save_file(state, str(out / WEIGHTS), metadata={"dtype": dtype})
    (out / CONFIG).write_text(json.dumps(model.config.to_dict(), indent=2) + "\n")
    tokenizer.save(out / TOKENIZER)
    meta = dict(metadata or {})
    meta.setdefault("name", out.name)
    meta["weights_dtype"] = dtype
    (out / METADATA).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return out


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BundleError(f"{path.name} in bundle {path.parent} is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise BundleError(f"{path.name} in bundle {path.parent} must hold a JSON object")
    return data


def load_bundle(path: str | Path, device: str | torch.device = "auto") -> Bundle:
    """Load a bundle onto `device` ("auto" = CUDA, then MPS, then CPU), in eval mode, float32.

    Raises BundleError naming the missing or corrupt file.
    """
    root = Path(path)
    if not root.is_dir():
        raise BundleError(f"model bundle directory {root} does not exist")
    missing = [f for f in REQUIRED_FILES if not (root / f).is_file()]
    if missing:
        raise BundleError(f"model bundle {root} is incomplete: missing {', '.join(missing)}")
    try:
        config = ModelConfig.from_dict(_read_json(root / CONFIG))
    except (TypeError, ValueError) as e:
        if isinstance(e, BundleError):
            raise
        raise BundleError(f"config.json in bundle {root} is not a valid ModelConfig: {e}") from e
    metadata = _read_json(root / METADATA)
    try:
        tokenizer = Tokenizer.from_file(root / TOKENIZER)
    except Exception as e:  # the tokenizers library raises plain Exception subclasses
        raise BundleError(f"tokenizer.json in bundle {root} cannot be read: {e}") from e
    if tokenizer.vocab_size > config.vocab_size:
        raise BundleError(
            f"bundle {root}: tokenizer has {tokenizer.vocab_size} tokens, "
            f"model only {config.vocab_size}"
        )
    try:
        state = load_file(str(root / WEIGHTS))
    except (SafetensorError, OSError, ValueError) as e:
        raise BundleError(f"weights.safetensors in bundle {root} is corrupt: {e}") from e
    model = Transformer(config)
    expected = set(_weights_state(model))
    if set(state) != expected:
        miss, extra = sorted(expected - set(state)), sorted(set(state) - expected)
        raise BundleError(
            f"weights.safetensors in bundle {root} does not match config.json "
            f"(missing {miss[:5]}, unexpected {extra[:5]})"
        )
    try:
        model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    except RuntimeError as e:
        raise BundleError(f"weights.safetensors in bundle {root} has wrong shapes: {e}") from e
    dev = resolve_device(device) if isinstance(device, str) else device
    model.to(dev).eval()
    log.info("loaded bundle %s (%d parameters) on %s", root, model.num_parameters(), dev)
    return Bundle(model=model, tokenizer=tokenizer, metadata=metadata, path=root)
