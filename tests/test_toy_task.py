"""A tiny Transformer learns to reverse short random sequences in seconds, and its
cross-attention then shows the expected anti-diagonal: target position t reads source
position L-1-t. This proves that training, masking and the trace fit together."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from model.config import ModelConfig
from model.decode import greedy_decode
from model.transformer import Transformer

PAD, BOS, EOS, FIRST_TOKEN = 0, 1, 2, 4
VOCAB = 20  # 16 content tokens after the 4 special ids
MIN_LEN, MAX_LEN = 4, 7
STEPS, BATCH, PEAK_LR, WARMUP = 250, 64, 5e-3, 30
D_MODEL, D_FF = 32, 64
SEED = int(os.environ.get("ATTNSCOPE_TOY_SEED", "0"))  # to check other seeds by hand

# It trains for a few seconds: `-m "not slow"` skips it for a quick loop.
pytestmark = pytest.mark.slow


@dataclass
class Batch:
    src: torch.Tensor  # [B, MAX_LEN + 1]: x1..xL </s> <pad>..
    dec_in: torch.Tensor  # [B, MAX_LEN + 1]: <s> y1..yL <pad>..
    labels: torch.Tensor  # [B, MAX_LEN + 1]: y1..yL </s> <pad>..
    lengths: list[int]  # L per item


def reverse_batch(n: int, gen: torch.Generator) -> Batch:
    """n random sequences of length MIN_LEN..MAX_LEN and their reversals, right-padded."""
    lengths = torch.randint(MIN_LEN, MAX_LEN + 1, (n, 1), generator=gen)  # [n, 1]
    x = torch.randint(FIRST_TOKEN, VOCAB, (n, MAX_LEN), generator=gen)  # [n, MAX_LEN]
    pos = torch.arange(MAX_LEN + 1)[None, :]  # [1, MAX_LEN + 1]
    # y_j = x_{L-1-j}: gather with reversed indices (clamped where j >= L, masked below).
    y = x.gather(1, (lengths - 1 - pos[:, :MAX_LEN]).clamp(min=0))
    pad = torch.full((n, 1), PAD)
    real, at_end = pos < lengths, pos == lengths
    src = torch.cat([x, pad], 1).where(real, PAD).masked_fill(at_end, EOS)
    labels = torch.cat([y, pad], 1).where(real, PAD).masked_fill(at_end, EOS)
    dec_in = torch.cat([torch.full((n, 1), BOS), y], 1).where(pos <= lengths, PAD)
    return Batch(src, dec_in, labels, lengths.squeeze(1).tolist())


def lr_at(step: int) -> float:
    """Linear warm-up, flat, then linear decay over the last 40% of the steps."""
    return PEAK_LR * min(1.0, (step + 1) / WARMUP) * min(1.0, (STEPS - step) / (0.4 * STEPS))


@pytest.fixture(scope="module")
def single_thread() -> Iterator[None]:
    # Tiny matrices gain nothing from threads; on a busy machine extra threads only contend.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def trained(single_thread: None) -> Transformer:
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    config = ModelConfig(
        vocab_size=VOCAB,
        d_model=D_MODEL,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=D_FF,
        dropout=0.0,
        max_len=32,
    )
    model = Transformer(config)
    opt = torch.optim.Adam(model.parameters(), lr=PEAK_LR, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    for step in range(STEPS):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        batch = reverse_batch(BATCH, gen)
        logits = model(batch.src, batch.dec_in).logits
        loss = F.cross_entropy(
            logits.reshape(-1, VOCAB), batch.labels.reshape(-1), ignore_index=PAD
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="module")
def held_out() -> Batch:
    return reverse_batch(100, torch.Generator().manual_seed(10_000 + SEED))


def test_tiny_model_learns_to_reverse_sequences_to_near_zero_loss(
    trained: Transformer, held_out: Batch
) -> None:
    with torch.no_grad():
        logits = trained(held_out.src, held_out.dec_in).logits
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), held_out.labels.reshape(-1), ignore_index=PAD)
    assert float(loss) < 0.1


def test_greedy_decoding_reverses_held_out_sequences(trained: Transformer, held_out: Batch) -> None:
    out = greedy_decode(trained, held_out.src, need_trace=False)
    exact = [
        h.tokens == held_out.labels[b, : held_out.lengths[b] + 1].tolist()
        for b, h in enumerate(out.hypotheses)
    ]
    assert sum(exact) >= 0.9 * len(exact)


def hit_rate(cross: torch.Tensor, batch: Batch, reverse: bool) -> float:
    """cross [B, H, T, S] of one layer: share of target rows t < L whose head-averaged argmax is
    source position L-1-t (reverse) or t (copy)."""
    argmax = cross.mean(dim=1).argmax(dim=-1)  # [B, T]
    hits = total = 0
    for b, length in enumerate(batch.lengths):
        for t in range(length):
            expected = length - 1 - t if reverse else t
            hits += int(argmax[b, t]) == expected
            total += 1
    return hits / total


def test_cross_attention_of_the_trained_model_is_anti_diagonal(
    trained: Transformer, held_out: Batch
) -> None:
    with torch.no_grad():
        trace = trained(held_out.src, held_out.dec_in, need_weights=True).trace
    assert trace is not None
    rates = [hit_rate(trace.cross[layer], held_out, reverse=True) for layer in range(2)]
    assert max(rates) >= 0.8, rates
    best = rates.index(max(rates))
    # Not a diagonal that happens to pass: the copy alignment scores poorly in that layer.
    assert hit_rate(trace.cross[best], held_out, reverse=False) < 0.4
    # The maps are still proper distributions over the real source tokens only.
    for b, length in enumerate(held_out.lengths):
        assert (trace.cross[:, b, :, :, length + 1 :] == 0).all()
