"""Model hyperparameters, stored in every checkpoint so loading rebuilds the same network."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of the encoder-decoder Transformer (Vaswani et al., 2017).

    The defaults are the small model attnscope ships (about 9.6M parameters, trains on a laptop
    CPU); the comment on each field gives the paper's "base" value.
    """

    vocab_size: int = 8000  # base: 37000 (shared BPE vocabulary, section 5.1)
    d_model: int = 256  # base: 512
    n_heads: int = 8  # base: 8; d_k = d_v = d_model / n_heads
    n_encoder_layers: int = 3  # base: 6
    n_decoder_layers: int = 3  # base: 6
    d_ff: int = 1024  # base: 2048 (inner size of the position-wise FFN)
    dropout: float = 0.1  # base: 0.1 (residual, embedding and attention dropout)
    max_len: int = 256  # longest sequence the positional-encoding buffer covers
    norm_first: bool = False  # base: False (post-norm: LayerNorm(x + Sublayer(x)))
    tie_embeddings: bool = True  # base: True (shared source/target embedding and output, 3.4)
    layer_norm_eps: float = 1e-6
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def d_head(self) -> int:
        """Size of one head's queries, keys and values (d_k = d_v)."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Build a config from a dict, rejecting unknown keys (a typo must not pass silently)."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown ModelConfig fields: {sorted(unknown)}")
        return cls(**data)


#: The paper's "base" model, for reference and for tests that want its shapes.
PAPER_BASE = ModelConfig(
    vocab_size=37000, d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048
)
