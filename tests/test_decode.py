"""Greedy and beam search: the key/value cache changes nothing, beam 1 is greedy, scores add up,
and the returned trace is what the decoder really computed step by step."""

from __future__ import annotations

import pytest
import torch

from model.config import ModelConfig
from model.decode import (
    DecodeOutput,
    beam_search,
    decode,
    decoder_inputs,
    default_max_len,
    greedy_decode,
    length_penalty,
)
from model.transformer import Transformer
from tests.helpers import assert_close

PAD, BOS, EOS = 0, 1, 2
# A small vocabulary makes </s> likely enough that a random model ends some outputs itself and
# runs others into the length limit: both paths of the decoders get exercised.
CONFIG = ModelConfig(
    vocab_size=24,
    d_model=32,
    n_heads=4,
    n_encoder_layers=2,
    n_decoder_layers=2,
    d_ff=64,
    dropout=0.0,
    max_len=64,
    tie_embeddings=False,
)
SRC = torch.tensor(
    [
        [5, 6, 7, 8, 9, 10, EOS],
        [11, 12, 13, EOS, PAD, PAD, PAD],
        [14, 15, 16, 17, EOS, PAD, PAD],
    ]
)
SRC_LEN = [7, 4, 5]


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(CONFIG).eval()


@pytest.fixture(scope="module")
def greedy(model: Transformer) -> DecodeOutput:
    return greedy_decode(model, SRC, top_k=3)


@pytest.fixture(scope="module")
def beam(model: Transformer) -> DecodeOutput:
    return beam_search(model, SRC, beam_size=4, alpha=0.6)


def teacher_forced_logprobs(model: Transformer, outputs: list[list[int]]) -> torch.Tensor:
    """log p(y_t | y_<t, x) of the given outputs from one parallel forward: [B, T_max]."""
    tgt = decoder_inputs(model, outputs)
    with torch.no_grad():
        logp = model(SRC, tgt).logits.log_softmax(-1)  # [B, T, V]
    labels = torch.full(tgt.shape, PAD, dtype=torch.long)
    for b, out in enumerate(outputs):
        labels[b, : len(out)] = torch.tensor(out)
    return logp.gather(-1, labels[..., None]).squeeze(-1)


def test_fixture_outputs_include_both_stopped_and_length_limited_hypotheses(
    model: Transformer, greedy: DecodeOutput
) -> None:
    ends = [h.tokens[-1] == EOS for h in greedy.hypotheses]
    assert any(ends)
    assert not all(ends)
    for h, n in zip(greedy.hypotheses, SRC_LEN, strict=True):
        assert len(h.tokens) <= default_max_len(model, n)
        if h.tokens[-1] != EOS:
            assert len(h.tokens) == default_max_len(model, n)


def test_greedy_with_the_kv_cache_equals_greedy_without_it(
    model: Transformer, greedy: DecodeOutput
) -> None:
    uncached = greedy_decode(model, SRC, top_k=3, use_cache=False)
    for cached_h, plain_h in zip(greedy.hypotheses, uncached.hypotheses, strict=True):
        assert cached_h.tokens == plain_h.tokens
        assert_close(
            torch.tensor(cached_h.token_logprobs),
            torch.tensor(plain_h.token_logprobs),
            atol=1e-5,
            rtol=1e-5,
        )


def test_beam_search_with_the_kv_cache_equals_beam_search_without_it(
    model: Transformer, beam: DecodeOutput
) -> None:
    uncached = beam_search(model, SRC, beam_size=4, alpha=0.6, use_cache=False)
    for cached_h, plain_h in zip(beam.hypotheses, uncached.hypotheses, strict=True):
        assert cached_h.tokens == plain_h.tokens
        assert cached_h.score == pytest.approx(plain_h.score, abs=1e-4)


def test_beam_search_of_size_one_equals_greedy(model: Transformer, greedy: DecodeOutput) -> None:
    one = beam_search(model, SRC, beam_size=1, top_k=3)
    for beam_h, greedy_h in zip(one.hypotheses, greedy.hypotheses, strict=True):
        assert beam_h.tokens == greedy_h.tokens
        assert_close(
            torch.tensor(beam_h.token_logprobs),
            torch.tensor(greedy_h.token_logprobs),
            atol=1e-5,
            rtol=1e-5,
        )
        assert beam_h.score == pytest.approx(greedy_h.score, abs=1e-4)
        assert [[i for i, _ in a] for a in beam_h.alternatives] == [
            [i for i, _ in a] for a in greedy_h.alternatives
        ]


def test_greedy_log_probs_equal_a_teacher_forced_forward_over_its_output(
    model: Transformer, greedy: DecodeOutput
) -> None:
    outputs = [h.tokens for h in greedy.hypotheses]
    forced = teacher_forced_logprobs(model, outputs)
    for b, h in enumerate(greedy.hypotheses):
        assert_close(
            torch.tensor(h.token_logprobs), forced[b, : len(h.tokens)], atol=1e-5, rtol=1e-5
        )
        assert h.score == pytest.approx(sum(h.token_logprobs))


def test_greedy_alternatives_are_the_top_k_with_the_chosen_token_first(
    greedy: DecodeOutput,
) -> None:
    for h in greedy.hypotheses:
        assert len(h.alternatives) == len(h.tokens)
        for token, logprob, alts in zip(h.tokens, h.token_logprobs, h.alternatives, strict=True):
            assert len(alts) == 3
            probs = [p for _, p in alts]
            assert probs == sorted(probs, reverse=True)
            assert alts[0][0] == token
            assert alts[0][1] == pytest.approx(torch.tensor(logprob).exp().item(), rel=1e-5)
            assert all(i not in (PAD, BOS) for i, _ in alts)


def reference_beam_search(
    model: Transformer, src: torch.Tensor, k: int, alpha: float
) -> tuple[list[int], float]:
    """Textbook beam search over one sentence (src [1, S]): no cache, every extension of every
    live hypothesis scored from a full forward pass, finished hypotheses kept at their score.
    Returns the best output by length-normalised score and its score."""
    limit = default_max_len(model, src.size(1))
    beams: list[tuple[list[int], float, bool]] = [([], 0.0, False)]
    while not all(done for _, _, done in beams):
        candidates = [hyp for hyp in beams if hyp[2]]
        for out, score, done in beams:
            if done:
                continue
            with torch.no_grad():
                logits = model(src, decoder_inputs(model, [[*out, PAD]])).logits[0, -1]
            logp = logits.log_softmax(-1)
            for tok in range(logp.size(0)):
                if tok not in (PAD, BOS):
                    seq = [*out, tok]
                    ended = tok == EOS or len(seq) >= limit
                    candidates.append((seq, score + float(logp[tok]), ended))
        beams = sorted(candidates, key=lambda hyp: hyp[1], reverse=True)[:k]
    out, score, _ = max(beams, key=lambda hyp: hyp[1] / length_penalty(len(hyp[0]), alpha))
    return out, score


@pytest.mark.parametrize(("beam_size", "top_k"), [(2, 0), (3, 5), (5, 1), (4, 8)])
def test_beam_search_equals_a_textbook_beam_search(
    model: Transformer, beam_size: int, top_k: int
) -> None:
    """The batched, cached, two-stage top-k search finds what the plain algorithm finds, for
    fewer, as many and more alternatives per step than beams."""
    found = beam_search(model, SRC, beam_size=beam_size, alpha=0.6, top_k=top_k)
    for b, n in enumerate(SRC_LEN):
        tokens, score = reference_beam_search(model, SRC[b : b + 1, :n], beam_size, 0.6)
        assert found.hypotheses[b].tokens == tokens
        assert found.hypotheses[b].score == pytest.approx(score, abs=1e-4)
        assert all(len(a) == top_k for a in found.hypotheses[b].alternatives)


def test_beam_search_on_a_batch_of_different_lengths_returns_valid_hypotheses(
    model: Transformer, beam: DecodeOutput
) -> None:
    forced = teacher_forced_logprobs(model, [h.tokens for h in beam.hypotheses])
    for b, (h, n) in enumerate(zip(beam.hypotheses, SRC_LEN, strict=True)):
        assert 1 <= len(h.tokens) <= default_max_len(model, n)
        assert all(t not in (PAD, BOS) for t in h.tokens)
        assert EOS not in h.tokens[:-1]  # </s> only ever ends a hypothesis
        assert len(h.token_logprobs) == len(h.tokens) == len(h.alternatives)
        assert h.score == pytest.approx(sum(h.token_logprobs), abs=1e-4)
        assert h.normalized_score == pytest.approx(
            h.score / length_penalty(len(h.tokens), 0.6), abs=1e-4
        )
        # Each token's log-prob is the model's, not an artefact of beam bookkeeping.
        assert_close(
            torch.tensor(h.token_logprobs), forced[b, : len(h.tokens)], atol=1e-4, rtol=1e-4
        )


def test_trace_of_decoding_equals_a_teacher_forced_forward_over_the_decoded_output(
    model: Transformer, greedy: DecodeOutput
) -> None:
    outputs = [h.tokens for h in greedy.hypotheses]
    with torch.no_grad():
        forced = model(SRC, decoder_inputs(model, outputs), need_weights=True).trace
    assert greedy.trace is not None
    assert forced is not None
    for kind in ("encoder_self", "decoder_self", "cross"):
        assert_close(greedy.trace.kind(kind), forced.kind(kind))


def test_trace_rows_equal_the_weights_seen_while_decoding_step_by_step_with_the_cache(
    model: Transformer, greedy: DecodeOutput
) -> None:
    """Independently of trace_outputs: re-run the cached decoder one token at a time with
    weights on and compare each step's attention row with the trace's row."""
    trace = greedy.trace
    assert trace is not None
    outputs = [h.tokens for h in greedy.hypotheses]
    tgt = decoder_inputs(model, outputs)  # [B, T]
    with torch.no_grad():
        encoded = model.encode(SRC, need_weights=True)
        cache = model.new_cache()
        steps = [
            model.decode(tgt[:, t : t + 1], encoded, cache=cache, offset=t, need_weights=True)
            for t in range(tgt.size(1))
        ]
    assert encoded.weights is not None
    assert_close(encoded.weights, trace.encoder_self, atol=1e-6, rtol=1e-5)
    for b, out in enumerate(outputs):
        for t in range(len(out)):
            step = steps[t]
            assert step.self_weights is not None
            assert step.cross_weights is not None
            assert step.self_weights.shape[-2:] == (1, t + 1)
            assert_close(
                step.self_weights[:, b, :, 0],
                trace.decoder_self[:, b, :, t, : t + 1],
                atol=1e-5,
                rtol=1e-4,
            )
            assert (trace.decoder_self[:, b, :, t, t + 1 :] == 0).all()
            assert_close(
                step.cross_weights[:, b, :, 0], trace.cross[:, b, :, t], atol=1e-5, rtol=1e-4
            )
            # ...and that step's logits chose this very token with the reported log-prob.
            logp = step.logits[b, 0].log_softmax(-1)
            allowed = logp.clone()
            allowed[[PAD, BOS]] = float("-inf")  # never generated
            assert int(allowed.argmax()) == out[t]
            assert greedy.hypotheses[b].token_logprobs[t] == pytest.approx(
                float(logp[out[t]]), abs=1e-5
            )


@pytest.mark.parametrize("beam_size", [1, 3])
def test_asking_for_a_trace_does_not_change_the_output_by_a_single_bit(
    model: Transformer, beam_size: int
) -> None:
    with_trace = decode(model, SRC, beam_size=beam_size, need_trace=True)
    without = decode(model, SRC, beam_size=beam_size, need_trace=False)
    assert with_trace.trace is not None and without.trace is None
    for a, b in zip(with_trace.hypotheses, without.hypotheses, strict=True):
        assert (a.tokens, a.token_logprobs, a.alternatives) == (
            b.tokens,
            b.token_logprobs,
            b.alternatives,
        )


def test_explicit_max_len_caps_every_output(model: Transformer) -> None:
    for out in (greedy_decode(model, SRC, max_len=3), beam_search(model, SRC, 3, max_len=3)):
        assert all(1 <= len(h.tokens) <= 3 for h in out.hypotheses)
        assert out.trace is not None
        assert out.trace.decoder_self.shape[-1] <= 3


def test_decode_dispatches_to_greedy_for_beam_one_and_to_beam_search_otherwise(
    model: Transformer, greedy: DecodeOutput, beam: DecodeOutput
) -> None:
    assert [h.tokens for h in decode(model, SRC, top_k=3).hypotheses] == [
        h.tokens for h in greedy.hypotheses
    ]
    assert [h.tokens for h in decode(model, SRC, beam_size=4).hypotheses] == [
        h.tokens for h in beam.hypotheses
    ]
    assert decode(model, SRC, need_trace=False).trace is None


def test_beam_size_below_one_is_rejected(model: Transformer) -> None:
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, SRC, beam_size=0)


def test_length_penalty_is_the_gnmt_formula() -> None:
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert length_penalty(10, 0.0) == 1.0
