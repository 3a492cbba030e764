"""The Transformer's forward pass: shapes, tied weights, and independence from batch padding."""

from __future__ import annotations

import copy

import pytest
import torch

from model.config import ModelConfig
from model.decode import greedy_decode
from model.transformer import Transformer
from tests.helpers import assert_close

PAD, BOS, EOS = 0, 1, 2
CONFIG = ModelConfig(
    vocab_size=40,
    d_model=32,
    n_heads=4,
    n_encoder_layers=2,
    n_decoder_layers=3,
    d_ff=64,
    dropout=0.0,
    max_len=64,
)


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(CONFIG).eval()


def right_pad(rows: list[list[int]], length: int | None = None) -> torch.Tensor:
    """Rows of ids -> [B, length] right-padded with PAD."""
    length = length or max(map(len, rows))
    out = torch.full((len(rows), length), PAD, dtype=torch.long)
    for b, row in enumerate(rows):
        out[b, : len(row)] = torch.tensor(row)
    return out


SRC_A = [5, 6, 7, 8, EOS]
TGT_A = [BOS, 9, 10, 11]
# Longer neighbours: item A gets padded in the batch, in the source and in the target.
SRC_OTHERS = [[12, 13, 14, 15, 16, 17, 18, 19, EOS], [20, 21, 22, 23, 24, 25, EOS]]
TGT_OTHERS = [[BOS, 26, 27, 28, 29, 30, 31, 32], [BOS, 33, 34, 35, 36, 37]]


def test_logits_and_trace_have_the_documented_shapes(model: Transformer) -> None:
    src = right_pad([SRC_A, *SRC_OTHERS])  # [3, 9]
    tgt = right_pad([TGT_A, *TGT_OTHERS])  # [3, 8]
    with torch.no_grad():
        out = model(src, tgt, need_weights=True)
    assert out.logits.shape == (3, 8, CONFIG.vocab_size)
    assert out.trace is not None
    assert out.trace.shapes() == {
        "encoder_self": [2, 3, 4, 9, 9],
        "decoder_self": [3, 3, 4, 8, 8],
        "cross": [3, 3, 4, 8, 9],
    }


def test_output_projection_is_tied_to_the_embedding(model: Transformer) -> None:
    assert model.generator.weight is model.embed.weight
    untied = Transformer(ModelConfig(**{**CONFIG.to_dict(), "tie_embeddings": False}))
    assert untied.generator.weight is not untied.embed.weight


def test_padding_token_embeds_to_zero(model: Transformer) -> None:
    assert torch.equal(model.embed.weight[PAD], torch.zeros(CONFIG.d_model))


def test_adding_longer_padded_sentences_changes_no_logits_of_the_others(
    model: Transformer,
) -> None:
    with torch.no_grad():
        alone = model(right_pad([SRC_A]), right_pad([TGT_A]), need_weights=True)
        batch = model(
            right_pad([SRC_A, *SRC_OTHERS]), right_pad([TGT_A, *TGT_OTHERS]), need_weights=True
        )
    t = len(TGT_A)
    assert_close(batch.logits[0, :t], alone.logits[0], atol=1e-5, rtol=1e-5)


def test_adding_longer_padded_sentences_changes_no_attention_map_of_the_others(
    model: Transformer,
) -> None:
    with torch.no_grad():
        alone = model(right_pad([SRC_A]), right_pad([TGT_A]), need_weights=True).trace
        batch = model(
            right_pad([SRC_A, *SRC_OTHERS]), right_pad([TGT_A, *TGT_OTHERS]), need_weights=True
        ).trace
    assert alone is not None
    assert batch is not None
    trimmed = batch.item(0, len(SRC_A), len(TGT_A))
    for kind in ("encoder_self", "decoder_self", "cross"):
        assert trimmed.kind(kind).shape == alone.kind(kind).shape
        assert_close(trimmed.kind(kind), alone.kind(kind), atol=1e-6, rtol=1e-5)
    # Trimming dropped only padding: the columns cut off carried no weight at all.
    assert (batch.encoder_self[:, 0, :, :, len(SRC_A) :] == 0).all()
    assert (batch.cross[:, 0, :, : len(TGT_A), len(SRC_A) :] == 0).all()
    assert (batch.decoder_self[:, 0, :, :, len(TGT_A) :] == 0).all()


def test_adding_longer_padded_sentences_changes_no_greedy_translation_of_the_others(
    model: Transformer,
) -> None:
    alone = greedy_decode(model, right_pad([SRC_A]))
    batch = greedy_decode(model, right_pad([SRC_A, *SRC_OTHERS]))
    assert batch.hypotheses[0].tokens == alone.hypotheses[0].tokens
    assert_close(
        torch.tensor(batch.hypotheses[0].token_logprobs),
        torch.tensor(alone.hypotheses[0].token_logprobs),
        atol=1e-5,
        rtol=1e-5,
    )
    assert alone.trace is not None
    assert batch.trace is not None
    n_out = len(alone.hypotheses[0].tokens)
    trimmed = batch.trace.item(0, len(SRC_A), n_out)
    for kind in ("encoder_self", "decoder_self", "cross"):
        assert_close(trimmed.kind(kind), alone.trace.kind(kind), atol=1e-5, rtol=1e-5)


def test_encode_then_decode_equals_forward(model: Transformer) -> None:
    src, tgt = right_pad([SRC_A, *SRC_OTHERS]), right_pad([TGT_A, *TGT_OTHERS])
    with torch.no_grad():
        logits = model.decode(tgt, model.encode(src)).logits
        assert_close(logits, model(src, tgt).logits)


def test_sequences_longer_than_max_len_are_refused(model: Transformer) -> None:
    too_long = torch.full((1, CONFIG.max_len + 1), 5, dtype=torch.long)
    with pytest.raises(ValueError, match="max_len"):
        model.encode(too_long)


def test_config_rejects_heads_that_do_not_divide_d_model_and_unknown_fields() -> None:
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="unknown ModelConfig fields"):
        ModelConfig.from_dict({**CONFIG.to_dict(), "n_layers": 6})
    assert ModelConfig.from_dict(CONFIG.to_dict()) == CONFIG


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_model_on_a_gpu_computes_what_it_computes_on_the_cpu(model: Transformer) -> None:
    gpu = copy.deepcopy(model).to("cuda")
    src, tgt = right_pad([SRC_A, *SRC_OTHERS]), right_pad([TGT_A, *TGT_OTHERS])
    with torch.no_grad():
        cpu_out = model(src, tgt, need_weights=True)
        gpu_out = gpu(src.cuda(), tgt.cuda(), need_weights=True)
        gpu_fast = gpu(src.cuda(), tgt.cuda(), need_weights=False)  # fused SDPA kernels
    assert cpu_out.trace is not None
    assert gpu_out.trace is not None
    assert_close(gpu_out.logits.cpu(), cpu_out.logits, atol=1e-4, rtol=1e-4)
    assert_close(gpu_fast.logits.cpu(), cpu_out.logits, atol=1e-4, rtol=1e-4)
    for kind in ("encoder_self", "decoder_self", "cross"):
        assert_close(gpu_out.trace.kind(kind).cpu(), cpu_out.trace.kind(kind), atol=1e-5)
