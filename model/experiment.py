"""What-if experiments, passed explicitly to every forward call (never stored on a module).

A single `Experiment` describes every change attnscope can make to the paper's computation. The
default instance reproduces the paper exactly, and only the default lets attention take the fused
fast path (`torch.nn.functional.scaled_dot_product_attention`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

AttentionKind = Literal["encoder_self", "decoder_self", "cross"]
ATTENTION_KINDS: tuple[AttentionKind, ...] = ("encoder_self", "decoder_self", "cross")

MaskMode = Literal["fill", "renormalize"]


@dataclass(frozen=True)
class HeadRef:
    """One attention head: its kind, layer index and head index (all 0-based)."""

    kind: AttentionKind
    layer: int
    head: int


@dataclass(frozen=True)
class AttentionOptions:
    """How one attention call computes its weights; derived from an `Experiment` per layer.

    softmax((q k^T) * (1/sqrt(d_k) if scale else 1) / temperature, masked) per head, then the
    heads in `silenced` contribute zeros to the output projection.
    """

    scale: bool = True
    temperature: float = 1.0
    mask_fill: float = -math.inf
    mask_mode: MaskMode = "fill"
    silenced: tuple[int, ...] = ()

    @property
    def fusable(self) -> bool:
        """True when the fused SDPA kernel computes exactly this attention (mask by -inf)."""
        return self.mask_fill == -math.inf and self.mask_mode == "fill"


@dataclass(frozen=True)
class Experiment:
    """Every knob of the what-if experiments; the defaults are the paper's computation.

    - positional_encoding: add the sinusoidal encoding to the embeddings.
    - scale_scores: divide q.k by sqrt(d_k); temperature: further divide scores by it.
    - mask_fill: value written into masked scores before the softmax. -inf and -1e9 give the
      same maps (exp underflows to exactly 0); a tiny value such as -1e-12 masks nothing.
    - mask_mode: "fill" masks before the softmax; "renormalize" applies no fill, zeroes the
      masked weights after the softmax and renormalises each row (mathematically identical).
    - causal_mask / padding_mask: apply the look-ahead mask / the padding mask.
    - hide_source: source positions no query may attend to (encoder self and cross attention).
    - silence: heads whose output is replaced by zeros before the output projection.
    """

    positional_encoding: bool = True
    scale_scores: bool = True
    temperature: float = 1.0
    mask_fill: float = -math.inf
    mask_mode: MaskMode = "fill"
    causal_mask: bool = True
    padding_mask: bool = True
    hide_source: tuple[int, ...] = ()
    silence: tuple[HeadRef, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.temperature > 0 or math.isinf(self.temperature):
            raise ValueError(
                f"temperature must be a positive finite number, got {self.temperature}"
            )
        if math.isnan(self.mask_fill) or self.mask_fill > 0:
            raise ValueError(f"mask_fill must be <= 0 (e.g. -inf, -1e9), got {self.mask_fill}")
        if self.mask_mode not in ("fill", "renormalize"):
            raise ValueError(f"mask_mode must be 'fill' or 'renormalize', got {self.mask_mode!r}")
        if any(p < 0 for p in self.hide_source):
            raise ValueError("hide_source positions must be >= 0")
        for ref in self.silence:
            if ref.kind not in ATTENTION_KINDS or ref.layer < 0 or ref.head < 0:
                raise ValueError(f"invalid head to silence: {ref}")

    @property
    def is_paper(self) -> bool:
        """True when this experiment changes nothing."""
        return self == PAPER

    def attention_options(self, kind: AttentionKind, layer: int) -> AttentionOptions:
        """The options of the attention call of `kind` in `layer`."""
        silenced = tuple(
            sorted({r.head for r in self.silence if r.kind == kind and r.layer == layer})
        )
        return AttentionOptions(
            scale=self.scale_scores,
            temperature=self.temperature,
            mask_fill=self.mask_fill,
            mask_mode=self.mask_mode,
            silenced=silenced,
        )

    def with_changes(self, **changes: object) -> Experiment:
        return replace(self, **changes)


#: The paper's computation: no experiment.
PAPER = Experiment()
