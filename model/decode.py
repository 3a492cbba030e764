"""Greedy and beam-search decoding with a key/value cache.

Both return, per batch item, the output ids, each step's log-probability, the top-k alternatives
of each step, and the attention trace of the chosen output. The trace's encoder maps come from
the decoding call's own encoder pass; its decoder maps from one teacher-forced decoder pass over
the chosen output with weights on. For the paper's computation that equals the weights seen
while decoding step by step (a test proves it), and it costs one parallel pass instead of
materialising weights at every step of every beam.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from model.experiment import PAPER, Experiment
from model.trace import AttentionTrace
from model.transformer import EncoderOutput, Transformer


@dataclass
class Hypothesis:
    """One decoded output.

    tokens: generated ids y1..yT (ends with </s> unless max_len was reached);
    token_logprobs[t]: log p(y_t | y_<t, x); alternatives[t]: the top-k (id, probability) of step t;
    score: sum of token_logprobs; normalized_score: score after the length penalty (beam search).
    """

    tokens: list[int]
    token_logprobs: list[float]
    alternatives: list[list[tuple[int, float]]]
    score: float
    normalized_score: float


@dataclass
class DecodeOutput:
    """hypotheses[b] for each batch item; trace [L, B, H, T_max, ...] padded, or None."""

    hypotheses: list[Hypothesis]
    trace: AttentionTrace | None


def default_max_len(model: Transformer, source_len: int) -> int:
    """A translation rarely exceeds twice its source; never past the positional table."""
    return min(model.config.max_len, 2 * source_len + 10)


def max_lengths(model: Transformer, src: torch.Tensor, max_len: int | None) -> torch.Tensor:
    """Per item, how many tokens it may produce: [B] long. Without an explicit max_len, each
    item's default comes from its own unpadded length, so that what else shares the batch
    (and how long the batch is padded) never changes a sentence's output."""
    if max_len:
        return torch.full((src.size(0),), max_len, dtype=torch.long, device=src.device)
    real = (src != model.config.pad_id).sum(dim=1).tolist()
    limits = [default_max_len(model, int(n)) for n in real]
    return torch.tensor(limits, dtype=torch.long, device=src.device)


def decoder_inputs(model: Transformer, outputs: list[list[int]]) -> torch.Tensor:
    """<s> y1 .. y_{T-1} per item, right-padded: [B, T_max] (the input that produced y1..yT)."""
    c = model.config
    t_max = max(1, max(len(o) for o in outputs))
    tgt = torch.full((len(outputs), t_max), c.pad_id, dtype=torch.long)
    for b, out in enumerate(outputs):
        seq = [c.bos_id, *out[:-1]] if out else [c.bos_id]
        tgt[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return tgt.to(model.device)


def trace_outputs(
    model: Transformer,
    src: torch.Tensor,
    outputs: list[list[int]],
    experiment: Experiment = PAPER,
    encoded: EncoderOutput | None = None,
) -> AttentionTrace:
    """Teacher-forced pass with weights over the given outputs: the trace of that output.

    `encoded` is the encoder pass over `src` with weights (`model.encode(..., need_weights=True)`)
    when decoding already ran it; without it the encoder runs here. The output layer is skipped:
    a trace needs no logits.
    """
    if encoded is None or encoded.weights is None:
        encoded = model.encode(src, experiment, need_weights=True)
    tgt = decoder_inputs(model, outputs)
    decoded = model.decode(tgt, encoded, experiment, need_weights=True, need_logits=False)
    assert encoded.weights is not None and decoded.self_weights is not None
    assert decoded.cross_weights is not None
    return AttentionTrace(encoded.weights, decoded.self_weights, decoded.cross_weights)


def alternatives_of(lp: torch.Tensor, ids: torch.Tensor) -> list[list[tuple[int, float]]]:
    """Top-k log-probs and ids [N, k] -> per row, the (id, probability) pairs."""
    probs = lp.exp().tolist()
    return [list(zip(i, p, strict=True)) for i, p in zip(ids.tolist(), probs, strict=True)]


def _next_token_logprobs(model: Transformer, logits: torch.Tensor) -> torch.Tensor:
    """logits [N, V] of the last position -> log-probs [N, V]; <pad> and <s> are never generated."""
    logp = logits.float().log_softmax(dim=-1)
    # Two plain column fills: indexing with a list would go through the much slower index_put.
    logp[:, model.config.pad_id] = float("-inf")
    logp[:, model.config.bos_id] = float("-inf")
    return logp


def _decoding_memory(encoded: EncoderOutput, repeats: int = 1) -> EncoderOutput:
    """The encoder output that decoding attends to, each item repeated `repeats` times (beams).

    A key mask that hides nothing (no padding, no hidden positions: one sentence) is dropped, so
    cross-attention at every step runs without one; the result is the same.
    """
    mask = encoded.key_mask
    if mask is not None and bool(mask.all()):
        mask = None
    memory = encoded.memory
    if repeats > 1:
        memory = memory.repeat_interleave(repeats, dim=0)
        mask = None if mask is None else mask.repeat_interleave(repeats, dim=0)
    return EncoderOutput(memory, mask, None)


def _encode(model: Transformer, src: torch.Tensor, experiment: Experiment) -> EncoderOutput:
    """The encoder pass of a decoding call, always with weights: they are the trace's encoder
    maps (the trace pass reuses this memory rather than encoding again), and taking the same
    arithmetic whether or not a trace is wanted keeps the output bit-identical either way. The
    encoder runs once per call, so the unfused path costs little."""
    return model.encode(src, experiment, need_weights=True)


def _use_cache(experiment: Experiment, use_cache: bool) -> bool:
    # A cache assumes earlier positions never see later ones; with the causal mask off every
    # step must recompute the whole prefix.
    return use_cache and experiment.causal_mask


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    src: torch.Tensor,
    max_len: int | None = None,
    experiment: Experiment = PAPER,
    top_k: int = 5,
    use_cache: bool = True,
    need_trace: bool = True,
) -> DecodeOutput:
    """Pick the most likely token at each step. src: [B, S] (right-padded)."""
    c = model.config
    b = src.size(0)
    limits = max_lengths(model, src, max_len)  # [B]
    source = _encode(model, src, experiment)
    encoded = _decoding_memory(source)
    cache = model.new_cache() if _use_cache(experiment, use_cache) else None
    ys = torch.full((b, 1), c.bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(b, dtype=torch.bool, device=src.device)
    outputs: list[list[int]] = [[] for _ in range(b)]
    logprobs: list[list[float]] = [[] for _ in range(b)]
    alternatives: list[list[list[tuple[int, float]]]] = [[] for _ in range(b)]
    for step in range(int(limits.max())):
        if cache is not None:
            out = model.decode(ys[:, -1:], encoded, experiment, cache=cache, offset=step)
        else:
            out = model.decode(ys, encoded, experiment)
        logp = _next_token_logprobs(model, out.logits[:, -1])  # [B, V]
        # One top-k gives both the choice (its first entry) and the alternatives shown.
        top_lp, top_id = logp.topk(min(max(top_k, 1), logp.size(-1)), dim=-1)
        best = top_id[:, 0]
        best_lp = top_lp[:, 0].tolist()
        alts = alternatives_of(top_lp[:, :top_k], top_id[:, :top_k])
        done = finished.tolist()  # one transfer per step, not one per batch item
        for i, tok in enumerate(best.tolist()):
            if not done[i]:
                outputs[i].append(tok)
                logprobs[i].append(best_lp[i])
                alternatives[i].append(alts[i])
        nxt = torch.where(finished, torch.full_like(best, c.pad_id), best)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        finished |= (best == c.eos_id) | (step + 1 >= limits)
        if bool(finished.all()):
            break
    hyps = [
        Hypothesis(o, lp, a, sum(lp), sum(lp))
        for o, lp, a in zip(outputs, logprobs, alternatives, strict=True)
    ]
    trace = trace_outputs(model, src, outputs, experiment, source) if need_trace else None
    return DecodeOutput(hyps, trace)


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty ((5 + |Y|) / 6)^alpha (Wu et al., 2016); the paper uses alpha 0.6."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    beam_size: int = 4,
    max_len: int | None = None,
    alpha: float = 0.6,
    experiment: Experiment = PAPER,
    top_k: int = 5,
    use_cache: bool = True,
    need_trace: bool = True,
) -> DecodeOutput:
    """Beam search over a batch. src: [B, S]. Finished beams stay in the beam, extended by padding
    at no cost; the final choice among the beams uses the length penalty."""
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    c = model.config
    b, k = src.size(0), beam_size
    dev = src.device
    limits = max_lengths(model, src, max_len).repeat_interleave(k)  # [B*K]
    # Encode each sentence once and give every beam a copy of its memory: [B*K, S, d_model].
    source = _encode(model, src, experiment)
    encoded = _decoding_memory(source, repeats=k)
    cache = model.new_cache() if _use_cache(experiment, use_cache) else None

    scores = torch.full((b, k), float("-inf"), device=dev)
    scores[:, 0] = 0.0  # all beams start identical: expand only the first
    ys = torch.full((b * k, 1), c.bos_id, dtype=torch.long, device=dev)
    finished = torch.zeros(b * k, dtype=torch.bool, device=dev)
    lengths = torch.zeros(b * k, dtype=torch.long, device=dev)
    tok_lp = torch.zeros(b * k, 0, device=dev)  # per-step log-prob of each beam's token
    alt_ids = torch.zeros(b * k, 0, max(top_k, 0), dtype=torch.long, device=dev)
    alt_lp = torch.zeros(b * k, 0, max(top_k, 0), device=dev)
    kk = min(max(k, top_k), model.config.vocab_size)  # candidates kept per beam and step

    for step in range(int(limits.max())):
        if cache is not None:
            out = model.decode(ys[:, -1:], encoded, experiment, cache=cache, offset=step)
        else:
            out = model.decode(ys, encoded, experiment)
        logp = _next_token_logprobs(model, out.logits[:, -1])  # [B*K, V]
        # Two-stage selection: the best K continuations of the whole batch item are among the
        # best K of each beam, so a top-k per beam (which also gives the alternatives shown
        # per step) and a top-K over those K*kk candidates replace a top-K over K*V.
        best_lp, best_id = logp.topk(kk, dim=-1)  # [B*K, kk]
        # A finished beam continues only with padding, at log-prob 0, so its score is frozen.
        cand_lp = best_lp.masked_fill(finished[:, None], float("-inf"))
        cand_lp[:, 0] = torch.where(finished, 0.0, cand_lp[:, 0])
        cand_id = best_id.clone()
        cand_id[:, 0] = torch.where(finished, c.pad_id, cand_id[:, 0])
        cand = (scores.view(b * k, 1) + cand_lp).view(b, k * kk)
        scores, flat = cand.topk(k, dim=-1)  # [B, K]
        beam_idx = (flat // kk + torch.arange(b, device=dev)[:, None] * k).view(-1)
        token = cand_id.view(b, k * kk).gather(1, flat).view(-1)
        step_lp = cand_lp.view(b, k * kk).gather(1, flat).view(-1)
        was_finished = finished[beam_idx]
        ys = torch.cat([ys[beam_idx], token[:, None]], dim=1)
        tok_lp = torch.cat([tok_lp[beam_idx], step_lp[:, None]], dim=1)
        alt_ids = torch.cat([alt_ids[beam_idx], best_id[beam_idx, None, :top_k]], dim=1)
        alt_lp = torch.cat([alt_lp[beam_idx], best_lp[beam_idx, None, :top_k]], dim=1)
        lengths = lengths[beam_idx] + (~was_finished).long()
        finished = was_finished | (token == c.eos_id) | (lengths >= limits)
        if cache is not None:
            for layer_cache in cache:
                # Only self-attention states differ between beams: every beam of a sentence
                # holds the same cross-attention keys/values (its encoder memory), and beams
                # only ever take over beams of their own sentence.
                layer_cache.self_attn.reorder(beam_idx)
        if bool(finished.all()):
            break

    lp = torch.tensor(
        [[length_penalty(int(n), alpha) for n in row] for row in lengths.view(b, k).tolist()],
        device=dev,
    )
    normalized = scores / lp
    best = normalized.argmax(dim=-1)  # [B]
    hyps = []
    for i in range(b):
        j = i * k + int(best[i])
        n = int(lengths[j])
        alts = alternatives_of(alt_lp[j, :n], alt_ids[j, :n])  # [] per step when top_k is 0
        hyps.append(
            Hypothesis(
                tokens=ys[j, 1 : n + 1].tolist(),
                token_logprobs=tok_lp[j, :n].tolist(),
                alternatives=alts,
                score=float(scores[i, int(best[i])]),
                normalized_score=float(normalized[i, int(best[i])]),
            )
        )
    outputs = [h.tokens for h in hyps]
    trace = trace_outputs(model, src, outputs, experiment, source) if need_trace else None
    return DecodeOutput(hyps, trace)


def decode(
    model: Transformer,
    src: torch.Tensor,
    beam_size: int = 1,
    max_len: int | None = None,
    alpha: float = 0.6,
    experiment: Experiment = PAPER,
    top_k: int = 5,
    need_trace: bool = True,
) -> DecodeOutput:
    """Greedy when beam_size is 1, else beam search."""
    if beam_size == 1:
        return greedy_decode(model, src, max_len, experiment, top_k, need_trace=need_trace)
    return beam_search(
        model, src, beam_size, max_len, alpha, experiment, top_k, need_trace=need_trace
    )
