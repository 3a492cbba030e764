"""The encoder-decoder Transformer: `encode`, `decode` and teacher-forced `forward`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from model.config import ModelConfig
from model.experiment import PAPER, Experiment
from model.layers import DecoderLayer, DecoderLayerCache, EncoderLayer
from model.masks import causal_mask, combine, hidden_positions_mask, padding_mask
from model.positional import PositionalEncoding
from model.trace import AttentionTrace


class ExperimentError(ValueError):
    """An experiment that does not fit the model or the input (e.g. a head that does not exist)."""


@dataclass
class EncoderOutput:
    """memory [B, S, d_model]; key_mask [B, 1, 1, S] (True = visible) used by cross-attention;
    weights [L_enc, B, H, S, S] when asked for."""

    memory: torch.Tensor
    key_mask: torch.Tensor | None
    weights: torch.Tensor | None


@dataclass
class DecoderOutput:
    """logits [B, T, vocab] (None when not asked for); self_weights [L_dec, B, H, T, T_total];
    cross_weights [L_dec, B, H, T, S]."""

    logits: torch.Tensor | None
    self_weights: torch.Tensor | None
    cross_weights: torch.Tensor | None


@dataclass
class ModelOutput:
    """Teacher-forced output: logits [B, T, vocab] and the trace when weights were asked for."""

    logits: torch.Tensor
    trace: AttentionTrace | None


def _stack(weights: list[torch.Tensor | None]) -> torch.Tensor | None:
    return None if not weights or weights[0] is None else torch.stack(weights)  # [L, B, H, q, k]


class Transformer(nn.Module):
    """Encoder-decoder with a shared source/target vocabulary and tied embeddings (section 3.4)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.positional = PositionalEncoding(c.d_model, c.max_len)
        self.embed_dropout = nn.Dropout(c.dropout)
        layer_args = (c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first, c.layer_norm_eps)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(*layer_args) for _ in range(c.n_encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(*layer_args) for _ in range(c.n_decoder_layers)
        )
        # Pre-norm stacks end with a LayerNorm (nothing else normalises their residual stream).
        norm = (
            (lambda: nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)) if c.norm_first else nn.Identity
        )
        self.encoder_norm = norm()
        self.decoder_norm = norm()
        self.generator = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self._init_weights()
        if c.tie_embeddings:
            self.generator.weight = self.embed.weight

    def _init_weights(self) -> None:
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        # Embeddings are multiplied by sqrt(d_model); N(0, d_model^-1/2) gives unit-scale inputs
        # and, with tied weights, logits of a sensible size.
        nn.init.normal_(self.embed.weight, mean=0.0, std=self.config.d_model**-0.5)
        with torch.no_grad():
            self.embed.weight[self.config.pad_id].zero_()

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    # ----------------------------------------------------------------------------------------
    def check_experiment(self, experiment: Experiment, source_len: int) -> None:
        """Raise ExperimentError if the experiment names heads/positions that do not exist."""
        c = self.config
        layers = {
            "encoder_self": c.n_encoder_layers,
            "decoder_self": c.n_decoder_layers,
            "cross": c.n_decoder_layers,
        }
        for ref in experiment.silence:
            if ref.layer >= layers[ref.kind]:
                raise ExperimentError(
                    f"silence: {ref.kind} layer {ref.layer} does not exist "
                    f"(the model has {layers[ref.kind]} layers, 0-based)"
                )
            if ref.head >= c.n_heads:
                raise ExperimentError(
                    f"silence: head {ref.head} does not exist "
                    f"(the model has {c.n_heads} heads, 0-based)"
                )
        bad = [p for p in experiment.hide_source if p >= source_len]
        if bad:
            raise ExperimentError(
                f"hide_source: positions {bad} are outside the source (length {source_len})"
            )
        if len(set(experiment.hide_source)) >= source_len:
            raise ExperimentError(
                "hide_source: cannot hide every source token: a query with no visible key has "
                "no softmax"
            )

    def embed_tokens(
        self, tokens: torch.Tensor, experiment: Experiment, offset: int = 0
    ) -> torch.Tensor:
        """tokens [B, T] -> dropout(embedding * sqrt(d_model) + PE(offset..)): [B, T, d_model]."""
        x = self.embed(tokens) * math.sqrt(self.config.d_model)
        x = self.positional(x, offset=offset, enabled=experiment.positional_encoding)
        return self.embed_dropout(x)

    def source_key_mask(self, src: torch.Tensor, experiment: Experiment) -> torch.Tensor | None:
        """[B, 1, 1, S]: which source keys every query (encoder self and cross) may see."""
        pad = padding_mask(src, self.config.pad_id) if experiment.padding_mask else None
        hidden = (
            hidden_positions_mask(src.size(1), experiment.hide_source, src.device)
            if experiment.hide_source
            else None
        )
        return combine(pad, hidden)

    def encode(
        self, src: torch.Tensor, experiment: Experiment = PAPER, need_weights: bool = False
    ) -> EncoderOutput:
        """src: [B, S] token ids -> memory [B, S, d_model] (+ weights [L, B, H, S, S])."""
        mask = self.source_key_mask(src, experiment)
        x = self.embed_tokens(src, experiment)
        weights = []
        for i, layer in enumerate(self.encoder_layers):
            x, w = layer(x, mask, experiment.attention_options("encoder_self", i), need_weights)
            weights.append(w)
        return EncoderOutput(self.encoder_norm(x), mask, _stack(weights))

    def new_cache(self) -> list[DecoderLayerCache]:
        """Empty incremental-decoding state, one entry per decoder layer."""
        return [DecoderLayerCache() for _ in self.decoder_layers]

    def decode(
        self,
        tgt: torch.Tensor,
        encoded: EncoderOutput,
        experiment: Experiment = PAPER,
        need_weights: bool = False,
        cache: list[DecoderLayerCache] | None = None,
        offset: int = 0,
        need_logits: bool = True,
    ) -> DecoderOutput:
        """tgt: [B, T] decoder input ids (starting at position `offset`) -> logits [B, T, vocab].

        need_logits False skips the output layer (a trace-only pass: the vocabulary projection is
        the largest matrix of the model).

        Without a cache, tgt is the whole prefix and the causal mask applies. With a cache, tgt
        holds only the new positions; earlier keys/values come from the cache, and the new
        positions may see all of them (the causal mask among the new positions still applies).
        """
        t = tgt.size(1)
        total = offset + t
        self_mask = None
        # One new position after cached ones may see all of them: its causal row is all True,
        # so incremental decoding skips building (and applying) a mask at every step.
        if experiment.causal_mask and not (cache is not None and t == 1):
            # Rows are the new positions offset..total-1; columns every position 0..total-1.
            self_mask = causal_mask(total, tgt.device)[:, :, offset:, :]
        if experiment.padding_mask and cache is None:
            self_mask = combine(self_mask, padding_mask(tgt, self.config.pad_id))
        x = self.embed_tokens(tgt, experiment, offset)
        self_ws, cross_ws = [], []
        for i, layer in enumerate(self.decoder_layers):
            x, sw, cw = layer(
                x,
                encoded.memory,
                self_mask,
                encoded.key_mask,
                experiment.attention_options("decoder_self", i),
                experiment.attention_options("cross", i),
                need_weights,
                cache[i] if cache is not None else None,
            )
            self_ws.append(sw)
            cross_ws.append(cw)
        logits = self.generator(self.decoder_norm(x)) if need_logits else None
        return DecoderOutput(logits, _stack(self_ws), _stack(cross_ws))

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        experiment: Experiment = PAPER,
        need_weights: bool = False,
    ) -> ModelOutput:
        """Teacher forcing: src [B, S], tgt [B, T] (decoder input, <s> first) -> logits."""
        encoded = self.encode(src, experiment, need_weights)
        decoded = self.decode(tgt, encoded, experiment, need_weights)
        assert decoded.logits is not None
        trace = None
        if need_weights:
            trace = AttentionTrace(
                encoder_self=encoded.weights,
                decoder_self=decoded.self_weights,
                cross=decoded.cross_weights,
            )
        return ModelOutput(decoded.logits, trace)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
