"""The numbers the experiment pages show, computed with the model's own pieces (pure torch).

- Positional encoding: the matrix, chosen dimensions as curves, the position similarity
  PE(p)·PE(q), and a sentence's embedding, encoding and their sum with norms.
- The order experiment: encoder outputs of a sentence and of a permutation of its tokens; without
  positional encoding self-attention is permutation-equivariant, so the outputs are the same
  vectors permuted.
- Masks of a padded batch, built with `model.masks` and `Transformer.source_key_mask` (the same
  calls the forward pass makes), the mass attention leaks onto masked keys, and per-head entropy.
- Scaling: the variance of q·k for random vectors as d_k grows, and the softmax of a score vector
  saturating as its spread grows.

Masks follow `model.masks`: boolean, True = the key may be attended to.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from model.decode import decoder_inputs
from model.experiment import PAPER, AttentionKind, Experiment
from model.masks import causal_mask, combine, padding_mask
from model.transformer import Transformer

# -- positional encoding --------------------------------------------------------------------------


def wavelengths(d_model: int) -> torch.Tensor:
    """[d_model]: the wavelength (in positions) of each dimension, 2*pi * 10000^(2i/d_model) for
    the pair (2i, 2i+1)."""
    pair = torch.arange(d_model, dtype=torch.float64) // 2
    return (2 * math.pi * torch.pow(10000.0, 2 * pair / d_model)).float()


def position_similarity(pe: torch.Tensor) -> torch.Tensor:
    """pe [P, D] -> [P, P] with entry (p, q) = PE(p)·PE(q).

    Each sin/cos pair contributes sin(wp)sin(wq) + cos(wp)cos(wq) = cos(w(p - q)), so the entry
    depends only on the offset p - q (and the diagonal is D/2 for even D).
    """
    pe64 = pe.double()  # the offset-only property then holds to ~1e-12, not float32 noise
    return (pe64 @ pe64.T).float()


def dimension_curves(pe: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    """pe [P, D], dims -> [len(dims), P]: each chosen dimension as a curve over positions."""
    bad = [d for d in dims if not 0 <= d < pe.size(1)]
    if bad:
        raise ValueError(f"dimensions {bad} are outside 0..{pe.size(1) - 1}")
    return pe[:, list(dims)].T.contiguous()


@dataclass
class SentenceVectors:
    """What the first layer of the encoder receives for one sentence, all [S, d_model]:
    embedding = E[token] * sqrt(d_model), positional = PE(position), total = their sum."""

    embedding: torch.Tensor
    positional: torch.Tensor
    total: torch.Tensor

    def norms(self) -> dict[str, torch.Tensor]:
        """The L2 norm of each position's vector: {name: [S]}."""
        return {
            "embedding": self.embedding.norm(dim=-1),
            "positional": self.positional.norm(dim=-1),
            "total": self.total.norm(dim=-1),
        }


@torch.no_grad()
def sentence_vectors(model: Transformer, ids: Sequence[int]) -> SentenceVectors:
    """A sentence's token embeddings (scaled by sqrt(d_model), as `Transformer.embed_tokens`
    does), its positional encoding (the model's own table) and their sum (before dropout)."""
    src = torch.tensor(list(ids), dtype=torch.long, device=model.device)  # [S]
    emb = model.embed(src).float() * math.sqrt(model.config.d_model)  # [S, D]
    pos = model.positional.pe[: src.numel()].float()  # [S, D]
    return SentenceVectors(emb.cpu(), pos.cpu(), (emb + pos).cpu())


# -- the order experiment -------------------------------------------------------------------------


def check_permutation(permutation: Sequence[int], n: int) -> None:
    """Raise ValueError unless `permutation` is an ordering of 0..n-1."""
    if sorted(permutation) != list(range(n)):
        raise ValueError(
            f"must be a permutation of 0..{n - 1} (each of the {n} source positions once), "
            f"got {list(permutation)}"
        )


@torch.no_grad()
def encoder_outputs(
    model: Transformer, ids: Sequence[int], experiment: Experiment = PAPER
) -> torch.Tensor:
    """The encoder's output vectors of one sentence: [S, d_model] float32."""
    src = torch.tensor([list(ids)], dtype=torch.long, device=model.device)  # [1, S]
    return model.encode(src, experiment).memory[0].float()


@dataclass
class OrderComparison:
    """Encoder outputs of a sentence vs. of a permutation of its tokens, un-permuted.

    position_diff [S]: per position j of the permuted sentence, max |out_perm[j] - out[perm[j]]|
    over the model dimensions; max_diff: the largest of them.
    """

    permutation: list[int]
    position_diff: torch.Tensor
    max_diff: float


@torch.no_grad()
def order_difference(
    model: Transformer,
    ids: Sequence[int],
    permutation: Sequence[int],
    experiment: Experiment = PAPER,
) -> OrderComparison:
    """Encode `ids` and `ids` reordered by `permutation` (position j holds ids[permutation[j]])
    and compare each output with the original output of the same token.

    Without positional encoding (and without masks that depend on position) the encoder is
    permutation-equivariant: the difference is float rounding only (~1e-6).
    """
    check_permutation(permutation, len(ids))
    perm = list(permutation)
    out = encoder_outputs(model, ids, experiment)  # [S, D]
    out_perm = encoder_outputs(model, [ids[p] for p in perm], experiment)  # [S, D]
    diff = (out_perm - out[perm]).abs().amax(dim=-1).cpu()  # [S]
    return OrderComparison(perm, diff, float(diff.max()))


# -- masks ----------------------------------------------------------------------------------------


@dataclass
class BatchMasks:
    """The masks of one teacher-forced padded batch, in the shapes the model uses them.

    source_padding [B, 1, 1, S]; target_padding [B, 1, 1, T]; causal [1, 1, T, T];
    and the combined mask each attention kind really applies:
    encoder_self [B, 1, 1, S] and cross [B, 1, 1, S] (`Transformer.source_key_mask`: padding and
    hidden source positions), decoder_self [B, 1, T, T] (causal AND target padding).
    A kind's mask is None when the experiment applies none. Every mask broadcasts against the
    scores [B, heads, queries, keys].
    """

    source_padding: torch.Tensor
    target_padding: torch.Tensor
    causal: torch.Tensor
    encoder_self: torch.Tensor | None
    decoder_self: torch.Tensor | None
    cross: torch.Tensor | None

    def kind(self, name: AttentionKind) -> torch.Tensor | None:
        return getattr(self, name)

    def expanded(self, name: AttentionKind, n_heads: int) -> torch.Tensor:
        """The kind's mask broadcast to its scores' shape [B, n_heads, q, k] (all True if None)."""
        b, s = self.source_padding.size(0), self.source_padding.size(-1)
        t = self.target_padding.size(-1)
        q, k = {"encoder_self": (s, s), "decoder_self": (t, t), "cross": (t, s)}[name]
        full = torch.ones(b, n_heads, q, k, dtype=torch.bool, device=self.causal.device)
        mask = self.kind(name)
        return full if mask is None else full & mask


def batch_masks(
    model: Transformer, src: torch.Tensor, tgt: torch.Tensor, experiment: Experiment = PAPER
) -> BatchMasks:
    """src [B, S], tgt [B, T] (decoder inputs, right-padded) -> the masks the forward pass of
    `model(src, tgt, experiment)` applies, built by the same calls (`Transformer.decode`, without a
    cache, combines the causal mask with the target padding mask)."""
    pad = model.config.pad_id
    causal = causal_mask(tgt.size(1), tgt.device)
    target_padding = padding_mask(tgt, pad)
    decoder_self = combine(
        causal if experiment.causal_mask else None,
        target_padding if experiment.padding_mask else None,
    )
    source = model.source_key_mask(src, experiment)
    return BatchMasks(
        source_padding=padding_mask(src, pad),
        target_padding=target_padding,
        causal=causal,
        encoder_self=source,
        decoder_self=decoder_self,
        cross=source,
    )


def leaked_mass(weights: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """weights [..., q, k], allowed bool broadcastable to it (True = may attend) -> [..., q]:
    the attention mass each row puts on keys it should not see (0 where nothing is masked)."""
    w = weights.float()
    if allowed is None:
        return torch.zeros(w.shape[:-1], dtype=w.dtype, device=w.device)
    return (w * (~allowed).to(w.dtype)).sum(dim=-1)


def attention_entropy(weights: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
    """weights [..., q, k] -> [...]: the mean over query rows of each row's entropy in bits,
    -sum_k w log2 w (0 for a row on one key; log2(k) for a uniform row).

    rows: optional bool [..., q] broadcastable, which rows count (e.g. not padding queries).
    """
    w = weights.double()
    per_row = -torch.special.xlogy(w, w).sum(dim=-1) / math.log(2)  # [..., q]
    if rows is None:
        return per_row.mean(dim=-1).float()
    keep = rows.expand_as(per_row).double()
    return ((per_row * keep).sum(dim=-1) / keep.sum(dim=-1).clamp_min(1)).float()


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| of two same-shaped tensors (ValueError if the shapes differ)."""
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {list(a.shape)} vs {list(b.shape)}")
    return float((a.float() - b.float()).abs().max()) if a.numel() else 0.0


@torch.no_grad()
def token_logprobs(
    model: Transformer,
    src: torch.Tensor,
    outputs: Sequence[Sequence[int]],
    experiment: Experiment = PAPER,
) -> list[torch.Tensor]:
    """Teacher forcing: src [B, S] and each item's output ids y1..yT -> per item, log p(y_t |
    y_<t, x) under the experiment, a [T] float32 tensor on the CPU (full-vocabulary softmax)."""
    outs = [list(o) for o in outputs]
    tgt = decoder_inputs(model, outs)  # [B, T_max]
    logp = model(src, tgt, experiment).logits.float().log_softmax(dim=-1)  # [B, T_max, V]
    result = []
    for b, out in enumerate(outs):
        ids = torch.tensor(out, dtype=torch.long, device=logp.device)
        result.append(logp[b, : len(out)].gather(1, ids[:, None]).squeeze(1).cpu())
    return result


# -- scaling --------------------------------------------------------------------------------------


@dataclass
class QKVariance:
    """For each d_k: the sample variance of q·k (q, k ~ N(0, I)), which grows like d_k, and of
    q·k / sqrt(d_k), which stays near 1."""

    d_k: list[int]
    raw: torch.Tensor  # [n]
    scaled: torch.Tensor  # [n]


def qk_variance(d_ks: Sequence[int], samples: int, seed: int = 0) -> QKVariance:
    """Draw `samples` random (q, k) pairs per d_k with a seeded generator (reproducible)."""
    if samples < 2:
        raise ValueError(f"samples must be >= 2, got {samples}")
    gen = torch.Generator().manual_seed(seed)
    raw, scaled = [], []
    for d in d_ks:
        q = torch.randn(samples, d, generator=gen)  # float32: 4x faster to draw than float64
        k = torch.randn(samples, d, generator=gen)
        dots = (q * k).sum(dim=-1).double()  # [samples]
        raw.append(dots.var())
        scaled.append((dots / math.sqrt(d)).var())
    return QKVariance(list(d_ks), torch.stack(raw).float(), torch.stack(scaled).float())


@dataclass
class SoftmaxSaturation:
    """softmax(spread * scores) for one fixed score vector: as the spread grows the weight piles
    onto the largest score (entropy -> 0, max -> 1). probs [n_spreads, n]."""

    scores: torch.Tensor  # [n], zero mean, unit standard deviation
    spreads: list[float]
    probs: torch.Tensor  # [n_spreads, n]

    @property
    def max_weight(self) -> torch.Tensor:
        return self.probs.amax(dim=-1)

    @property
    def entropy(self) -> torch.Tensor:
        """[n_spreads] entropy in bits."""
        return attention_entropy(self.probs[:, None, :]).flatten()


def softmax_saturation(n_scores: int, spreads: Sequence[float], seed: int = 0) -> SoftmaxSaturation:
    """A seeded random score vector of n_scores entries, standardised, softmaxed at each spread.

    A spread of s is what an unscaled q·k of d_k = s^2 would give: its standard deviation is
    sqrt(d_k).
    """
    if n_scores < 2:
        raise ValueError(f"n_scores must be >= 2, got {n_scores}")
    gen = torch.Generator().manual_seed(seed)
    s = torch.randn(n_scores, generator=gen, dtype=torch.float64)
    s = (s - s.mean()) / s.std()
    spread = torch.tensor(list(spreads), dtype=torch.float64)[:, None]  # [n_spreads, 1]
    probs = torch.softmax(spread * s[None, :], dim=-1)
    return SoftmaxSaturation(s.float(), list(spreads), probs.float())
