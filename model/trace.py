"""`AttentionTrace`: every attention map of one forward pass, as an explicit return value.

Maps are float32 tensors shaped [layers, batch, heads, query_len, key_len]. Every row sums to 1
over the keys it may see, and masked positions are exactly 0 (with the paper's -inf fill).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from model.experiment import ATTENTION_KINDS, AttentionKind


@dataclass
class AttentionTrace:
    """Attention weights of the three kinds, plus the token strings they are labelled with.

    encoder_self: [L_enc, B, H, S, S]   query = source position, key = source position
    decoder_self: [L_dec, B, H, T, T]   query/key = decoder input position (<s> y1 .. y_{T-1})
    cross:        [L_dec, B, H, T, S]   query = decoder position t (which predicts y_t)
    source_tokens[b] / target_tokens[b]: token strings of item b (target = produced tokens
    y1..yT; decoder_input_tokens[b] = <s> y1 .. y_{T-1}), filled in by the caller that
    knows the tokenizer; None at the pure-model level.
    """

    encoder_self: torch.Tensor
    decoder_self: torch.Tensor
    cross: torch.Tensor
    source_tokens: list[list[str]] | None = None
    target_tokens: list[list[str]] | None = None
    decoder_input_tokens: list[list[str]] | None = field(default=None)

    def kind(self, name: AttentionKind) -> torch.Tensor:
        """The maps of one attention kind by name."""
        if name not in ATTENTION_KINDS:
            raise KeyError(f"unknown attention kind {name!r}; expected one of {ATTENTION_KINDS}")
        return getattr(self, name)

    def shapes(self) -> dict[str, list[int]]:
        return {k: list(self.kind(k).shape) for k in ATTENTION_KINDS}

    def item(self, b: int, source_len: int, target_len: int) -> AttentionTrace:
        """Item b of the batch, trimmed to its real lengths (drops padding rows/columns).

        Returned maps have batch size 1: [layers, 1, heads, q, k].
        """
        return AttentionTrace(
            encoder_self=self.encoder_self[:, b : b + 1, :, :source_len, :source_len],
            decoder_self=self.decoder_self[:, b : b + 1, :, :target_len, :target_len],
            cross=self.cross[:, b : b + 1, :, :target_len, :source_len],
            source_tokens=None if self.source_tokens is None else [self.source_tokens[b]],
            target_tokens=None if self.target_tokens is None else [self.target_tokens[b]],
            decoder_input_tokens=(
                None if self.decoder_input_tokens is None else [self.decoder_input_tokens[b]]
            ),
        )
