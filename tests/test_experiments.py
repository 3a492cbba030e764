"""Each what-if experiment does what it says, checked on a real forward pass of a tiny model."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from model.config import ModelConfig
from model.experiment import PAPER, Experiment, HeadRef
from model.trace import AttentionTrace
from model.transformer import ExperimentError, Transformer
from model.translator import Translator
from tests.helpers import assert_close

PAD, BOS, EOS = 0, 1, 2
CONFIG = ModelConfig(
    vocab_size=40,
    d_model=32,
    n_heads=4,
    n_encoder_layers=2,
    n_decoder_layers=2,
    d_ff=64,
    dropout=0.0,
    max_len=64,
)
D_K = CONFIG.d_model // CONFIG.n_heads
SRC = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS, PAD, PAD]])
TGT = torch.tensor([[BOS, 13, 14, 15, 16], [BOS, 17, 18, PAD, PAD]])
SRC_LEN, TGT_LEN = [6, 4], [5, 3]
KINDS = ("encoder_self", "decoder_self", "cross")


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(CONFIG).eval()


def run(model: Transformer, experiment: Experiment = PAPER) -> tuple[torch.Tensor, AttentionTrace]:
    """Teacher-forced forward with weights: logits [B, T, V] and the trace."""
    with torch.no_grad():
        out = model(SRC, TGT, experiment, need_weights=True)
    assert out.trace is not None
    return out.logits, out.trace


def assert_same_maps(a: AttentionTrace, b: AttentionTrace, atol: float = 1e-6) -> None:
    for kind in KINDS:
        assert_close(a.kind(kind), b.kind(kind), atol=atol, rtol=1e-5)


def future() -> torch.Tensor:
    t = TGT.size(1)
    return torch.ones(t, t, dtype=torch.bool).triu(diagonal=1)


# -- masking ------------------------------------------------------------------------------------
def test_a_tiny_mask_fill_lets_padded_and_future_positions_get_weight(model: Transformer) -> None:
    _, paper = run(model)
    _, tiny = run(model, Experiment(mask_fill=-1e-12))
    # With the paper's -inf these are exactly 0; -1e-12 changes the scores by nothing.
    assert (paper.encoder_self[:, 1, :, :, 4:] == 0).all()
    assert (tiny.encoder_self[:, 1, :, :, 4:] > 0).all()
    assert (tiny.cross[:, 1, :, :, 4:] > 0).all()
    assert (tiny.decoder_self[..., future()] > 0).all()
    assert (tiny.decoder_self[:, 1, :, :, 3:] > 0).all()
    # Every masked score was replaced by the same value: within a row, the masked keys tie.
    assert_close(tiny.encoder_self[:, 1, :, :, 4], tiny.encoder_self[:, 1, :, :, 5])
    assert_close(tiny.cross[:, 1, :, :, 4], tiny.cross[:, 1, :, :, 5])


def test_minus_1e9_fill_gives_the_same_maps_and_logits_as_minus_infinity(
    model: Transformer,
) -> None:
    logits_inf, paper = run(model)
    logits_1e9, big = run(model, Experiment(mask_fill=-1e9))
    assert_same_maps(big, paper)
    assert_close(logits_1e9, logits_inf, atol=1e-5, rtol=1e-5)
    assert (big.decoder_self[..., future()] == 0).all()  # exp underflows to exactly 0


def test_renormalizing_after_the_softmax_equals_filling_with_minus_infinity(
    model: Transformer,
) -> None:
    logits_fill, fill = run(model)
    logits_renorm, renorm = run(model, Experiment(mask_mode="renormalize"))
    assert_same_maps(renorm, fill)
    assert_close(logits_renorm, logits_fill, atol=1e-5, rtol=1e-5)
    assert (renorm.cross[:, 1, :, :, 4:] == 0).all()


def test_without_the_causal_mask_decoder_self_attention_sees_the_future(
    model: Transformer,
) -> None:
    _, trace = run(model, Experiment(causal_mask=False))
    assert (trace.decoder_self[:, 0][..., future()] > 0).all()
    # The padding mask still applies.
    assert (trace.decoder_self[:, 1, :, :, 3:] == 0).all()


def test_without_the_padding_mask_padded_keys_get_weight_but_the_causal_mask_stays(
    model: Transformer,
) -> None:
    _, trace = run(model, Experiment(padding_mask=False))
    assert (trace.encoder_self[:, 1, :, :, 4:] > 0).all()
    assert (trace.cross[:, 1, :, :, 4:] > 0).all()
    assert (trace.decoder_self[..., future()] == 0).all()
    assert (trace.decoder_self[:, 1, :, 3:, 3:].tril() > 0).sum() > 0


def test_hidden_source_tokens_get_exactly_zero_weight_in_encoder_and_cross_attention(
    model: Transformer,
) -> None:
    hidden = (1, 3)
    _, trace = run(model, Experiment(hide_source=hidden))
    for pos in hidden:
        assert (trace.encoder_self[..., pos] == 0).all()
        assert (trace.cross[..., pos] == 0).all()
    assert (trace.encoder_self[:, 0, :, :, [0, 2, 4, 5]] > 0).all()
    for kind in KINDS:
        w = trace.kind(kind)
        assert_close(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5, rtol=0)


# -- scaling ------------------------------------------------------------------------------------
def test_unscaled_scores_equal_a_temperature_of_one_over_sqrt_dk(model: Transformer) -> None:
    logits_a, unscaled = run(model, Experiment(scale_scores=False))
    logits_b, tempered = run(model, Experiment(temperature=1 / math.sqrt(D_K)))
    assert_same_maps(unscaled, tempered)
    assert_close(logits_a, logits_b, atol=1e-5, rtol=1e-5)
    # ...and it really changes something compared with the paper.
    _, paper = run(model)
    assert not torch.allclose(unscaled.encoder_self, paper.encoder_self, atol=1e-3)


def test_temperature_sharpens_or_flattens_the_first_layer_as_softmax_of_scores_over_t(
    model: Transformer,
) -> None:
    # softmax(s / T) = w^(1/T) / sum(w^(1/T)) where w = softmax(s). The first encoder layer sees
    # the same scores s in both runs, so this must hold there exactly.
    _, paper = run(model)
    for t in (0.5, 2.0):
        _, tempered = run(model, Experiment(temperature=t))
        w = paper.encoder_self[0, 0]  # [H, S, S], no padding in item 0
        expected = w ** (1 / t) / (w ** (1 / t)).sum(-1, keepdim=True)
        assert_close(tempered.encoder_self[0, 0], expected, atol=1e-5, rtol=1e-4)


# -- positional encoding -----------------------------------------------------------------------
def test_without_positional_encoding_the_encoder_is_permutation_equivariant(
    model: Transformer,
) -> None:
    src = SRC[:1]  # no padding
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    off = Experiment(positional_encoding=False)
    with torch.no_grad():
        memory = model.encode(src, off).memory
        permuted = model.encode(src[:, perm], off).memory
        assert_close(permuted, memory[:, perm], atol=1e-5, rtol=1e-5)
        # With positions encoded, word order matters.
        on = model.encode(src).memory
        on_permuted = model.encode(src[:, perm]).memory
    assert not torch.allclose(on_permuted, on[:, perm], atol=1e-3)


# -- silencing heads ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "layer", "head"), [("encoder_self", 0, 1), ("decoder_self", 1, 3), ("cross", 0, 2)]
)
def test_silencing_a_head_equals_zeroing_its_columns_of_the_output_projection(
    model: Transformer, kind: str, layer: int, head: int
) -> None:
    logits_silenced, _ = run(model, Experiment(silence=(HeadRef(kind, layer, head),)))  # type: ignore[arg-type]
    surgery = copy.deepcopy(model)
    stack = surgery.encoder_layers if kind == "encoder_self" else surgery.decoder_layers
    attention = {"encoder_self": "self_attn", "decoder_self": "self_attn", "cross": "cross_attn"}
    w_o = getattr(stack[layer], attention[kind]).w_o
    with torch.no_grad():
        w_o.weight[:, head * D_K : (head + 1) * D_K] = 0
    logits_surgery, _ = run(surgery)
    assert_close(logits_silenced, logits_surgery, atol=1e-5, rtol=1e-5)
    logits_paper, _ = run(model)
    assert not torch.allclose(logits_silenced, logits_paper, atol=1e-4)


def test_silencing_leaves_the_silenced_heads_own_map_intact(model: Transformer) -> None:
    # Silencing removes a head's output, not its attention: the map of layer 0 is unchanged.
    _, paper = run(model)
    _, silenced = run(model, Experiment(silence=(HeadRef("encoder_self", 0, 1),)))
    assert_close(silenced.encoder_self[0], paper.encoder_self[0])


def test_silencing_every_head_of_a_layer_makes_its_attention_output_just_the_bias(
    model: Transformer,
) -> None:
    every = tuple(HeadRef("encoder_self", 0, h) for h in range(CONFIG.n_heads))
    experiment = Experiment(silence=every)
    layer = model.encoder_layers[0]
    x = torch.randn(2, 6, CONFIG.d_model)
    options = experiment.attention_options("encoder_self", 0)
    assert options.silenced == (0, 1, 2, 3)
    with torch.no_grad():
        out, _ = layer.self_attn(x, options=options)
    assert_close(out, layer.self_attn.w_o.bias.expand_as(out))


# -- validation --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("experiment", "message"),
    [
        (Experiment(silence=(HeadRef("encoder_self", 2, 0),)), "layer 2 does not exist"),
        (Experiment(silence=(HeadRef("decoder_self", 5, 0),)), "layer 5 does not exist"),
        (Experiment(silence=(HeadRef("cross", 0, 4),)), "head 4 does not exist"),
        (Experiment(hide_source=(6,)), "outside the source"),
        (Experiment(hide_source=(0, 1, 2, 3, 4, 5)), "cannot hide every source token"),
    ],
)
def test_check_experiment_rejects_what_the_model_or_input_lacks(
    model: Transformer, experiment: Experiment, message: str
) -> None:
    with pytest.raises(ExperimentError, match=message):
        model.check_experiment(experiment, source_len=6)


def test_check_experiment_accepts_the_largest_valid_indices(model: Transformer) -> None:
    model.check_experiment(
        Experiment(silence=(HeadRef("cross", 1, 3),), hide_source=(0, 1, 2, 3, 4)), source_len=6
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"temperature": 0.0}, "temperature"),
        ({"temperature": -1.0}, "temperature"),
        ({"temperature": math.inf}, "temperature"),
        ({"temperature": math.nan}, "temperature"),
        ({"mask_fill": 1.0}, "mask_fill"),
        ({"mask_fill": math.nan}, "mask_fill"),
        ({"mask_mode": "zero"}, "mask_mode"),
        ({"hide_source": (-1,)}, "hide_source"),
        ({"silence": (HeadRef("encoder_self", -1, 0),)}, "invalid head"),
        ({"silence": (HeadRef("self", 0, 0),)}, "invalid head"),  # type: ignore[arg-type]
    ],
)
def test_invalid_experiments_are_rejected_when_built(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Experiment(**changes)


def test_only_the_default_experiment_is_the_paper_and_takes_the_fused_path() -> None:
    assert PAPER.is_paper
    assert Experiment().is_paper
    assert not Experiment(mask_fill=-1e9).is_paper
    assert PAPER.attention_options("cross", 0).fusable
    assert not Experiment(mask_fill=-1e9).attention_options("cross", 0).fusable
    assert not Experiment(mask_mode="renormalize").attention_options("cross", 0).fusable


def test_translator_applies_the_experiment_to_the_returned_trace(tiny_bundle) -> None:
    translator = Translator(tiny_bundle)
    result = translator.translate(
        "The cat is sleeping on the sofa.", experiment=Experiment(hide_source=(0, 2)), max_len=6
    )[0]
    assert result.trace is not None
    for pos in (0, 2):
        assert (result.trace.encoder_self[..., pos] == 0).all()
        assert (result.trace.cross[..., pos] == 0).all()
    with pytest.raises(ExperimentError):
        translator.translate("I go home.", experiment=Experiment(hide_source=(40,)))
