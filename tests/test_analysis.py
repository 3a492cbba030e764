"""model/analysis.py: the numbers behind the experiment pages, on a tiny random model."""

from __future__ import annotations

import math

import pytest
import torch

from model.analysis import (
    attention_entropy,
    batch_masks,
    check_permutation,
    dimension_curves,
    leaked_mass,
    max_abs_diff,
    order_difference,
    position_similarity,
    qk_variance,
    sentence_vectors,
    softmax_saturation,
    token_logprobs,
    wavelengths,
)
from model.config import ModelConfig
from model.decode import decoder_inputs
from model.experiment import PAPER, Experiment
from model.positional import sinusoidal_encoding
from model.transformer import Transformer

PAD, BOS, EOS = 0, 1, 2
CONFIG = ModelConfig(
    vocab_size=40, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64,
    dropout=0.0, max_len=64,
)  # fmt: skip
# A padded batch of three: sources of real lengths 6, 4, 3; outputs of lengths 4, 2, 3.
SOURCES = [[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS], [13, 14, EOS]]
OUTPUTS = [[15, 16, 17, EOS], [18, EOS], [19, 20, EOS]]
KINDS = ("encoder_self", "decoder_self", "cross")


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(CONFIG).eval()


def padded(seqs: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(seqs), max(map(len, seqs))), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s)
    return out


def forward(model: Transformer, experiment: Experiment = PAPER):
    src, tgt = padded(SOURCES), decoder_inputs(model, OUTPUTS)
    with torch.no_grad():
        out = model(src, tgt, experiment, need_weights=True)
    assert out.trace is not None
    return src, tgt, out.trace


# -- positional encoding --------------------------------------------------------------------------
def test_position_similarity_depends_only_on_the_offset() -> None:
    sim = position_similarity(sinusoidal_encoding(40, 64))
    assert sim.shape == (40, 40)
    for offset in (0, 1, 3, 10):
        diagonal = torch.diagonal(sim, offset=offset)
        assert float(diagonal.max() - diagonal.min()) < 1e-5, offset
        # symmetric: p - q and q - p give the same similarity
        torch.testing.assert_close(diagonal, torch.diagonal(sim, offset=-offset))
    assert torch.allclose(torch.diagonal(sim), torch.full((40,), 32.0))  # d_model / 2
    # ... and it falls off with the distance at first: neighbours are more alike than far ones.
    assert sim[0, 0] > sim[0, 1] > sim[0, 2] > sim[0, 5]


def test_dimension_curves_are_columns_of_the_matrix_with_their_wavelength() -> None:
    pe = sinusoidal_encoding(100, 16)
    curves = dimension_curves(pe, [0, 1, 6])
    assert curves.shape == (3, 100)
    torch.testing.assert_close(curves[2], pe[:, 6])
    wl = wavelengths(16)
    assert wl[0] == pytest.approx(2 * math.pi) and wl[1] == wl[0]
    # dimension 6 is pair i=3: sin(p / 10000^(6/16)) repeats after its wavelength
    assert wl[6] == pytest.approx(2 * math.pi * 10000 ** (6 / 16), rel=1e-5)
    assert bool((wl[2:] >= wl[:-2]).all())
    with pytest.raises(ValueError, match=r"outside 0\.\.15"):
        dimension_curves(pe, [16])


def test_sentence_vectors_are_scaled_embedding_plus_the_models_encoding(model: Transformer) -> None:
    ids = SOURCES[0]
    v = sentence_vectors(model, ids)
    assert v.embedding.shape == v.positional.shape == v.total.shape == (6, 32)
    torch.testing.assert_close(v.embedding, model.embed.weight[ids].detach() * math.sqrt(32))
    torch.testing.assert_close(v.positional, sinusoidal_encoding(6, 32))
    torch.testing.assert_close(v.total, v.embedding + v.positional)
    # the same vectors the model feeds its first layer (dropout is 0)
    with torch.no_grad():
        fed = model.embed_tokens(torch.tensor([ids]), PAPER)[0]
    torch.testing.assert_close(v.total, fed)
    norms = v.norms()
    torch.testing.assert_close(norms["positional"], torch.full((6,), 4.0))  # sqrt(32 / 2)
    torch.testing.assert_close(norms["total"], v.total.norm(dim=-1))


# -- order ----------------------------------------------------------------------------------------
def test_without_positional_encoding_a_permutation_only_permutes_the_encoder_outputs(
    model: Transformer,
) -> None:
    ids, perm = SOURCES[0], [2, 0, 4, 1, 3, 5]
    off = order_difference(model, ids, perm, Experiment(positional_encoding=False))
    on = order_difference(model, ids, perm, PAPER)
    assert off.max_diff < 1e-5
    assert on.max_diff > 1e-2
    assert off.position_diff.shape == (6,)
    # the identity changes nothing either way
    assert order_difference(model, ids, list(range(6)), PAPER).max_diff == 0.0


@pytest.mark.parametrize("perm", [[0, 1, 2], [0, 0, 1, 2], [1, 2, 3, 4], [-1, 0, 1, 2]])
def test_a_permutation_must_order_every_position_once(perm: list[int]) -> None:
    with pytest.raises(ValueError, match=r"permutation of 0\.\.3"):
        check_permutation(perm, 4)


# -- masks ----------------------------------------------------------------------------------------
def test_batch_masks_have_the_shapes_the_model_broadcasts(model: Transformer) -> None:
    src, tgt, _ = forward(model)
    m = batch_masks(model, src, tgt)
    assert m.source_padding.shape == (3, 1, 1, 6)
    assert m.target_padding.shape == (3, 1, 1, 4)
    assert m.causal.shape == (1, 1, 4, 4)
    assert m.encoder_self.shape == m.cross.shape == (3, 1, 1, 6)
    assert m.decoder_self.shape == (3, 1, 4, 4)
    assert m.source_padding[1, 0, 0].tolist() == [True] * 4 + [False] * 2
    # item 1 has decoder inputs "<s> 18": query 1 sees keys 0..1, never the padding
    assert m.decoder_self[1, 0, 3].tolist() == [True, True, False, False]
    assert m.expanded("cross", 4).shape == (3, 4, 4, 6)
    assert m.expanded("decoder_self", 4).shape == (3, 4, 4, 4)
    # with hidden source positions the model's source_key_mask hides them too
    hidden = batch_masks(model, src, tgt, Experiment(hide_source=(0,)))
    assert not hidden.encoder_self[:, 0, 0, 0].any()
    # with the causal mask off only the target padding remains
    no_causal = batch_masks(model, src, tgt, Experiment(causal_mask=False))
    torch.testing.assert_close(no_causal.decoder_self, m.target_padding)


def test_leaked_mass_is_zero_with_minus_inf_and_positive_with_a_tiny_fill(
    model: Transformer,
) -> None:
    src, tgt, paper = forward(model)
    _, _, tiny = forward(model, Experiment(mask_fill=-1e-12))
    masks = batch_masks(model, src, tgt)
    for kind in KINDS:
        allowed = masks.kind(kind)[None]  # + the layer axis: [1, B, 1, q|1, k]
        assert float(leaked_mass(paper.kind(kind), allowed).max()) == 0.0, kind
        assert float(leaked_mass(tiny.kind(kind), allowed).max()) > 0.05, kind
    # -1e-12 masks nothing: a row of decoder self-attention spreads over every key
    first_row = tiny.decoder_self[0, 0, 0, 0]
    assert float(first_row.min()) > 0
    assert leaked_mass(paper.cross, None).abs().max() == 0


def test_renormalising_after_the_softmax_equals_masking_before_it(model: Transformer) -> None:
    _, _, fill = forward(model)
    _, _, renorm = forward(model, Experiment(mask_mode="renormalize"))
    _, _, big = forward(model, Experiment(mask_fill=-1e9))
    for kind in KINDS:
        assert max_abs_diff(fill.kind(kind), renorm.kind(kind)) < 1e-6, kind
        assert max_abs_diff(fill.kind(kind), big.kind(kind)) == 0.0, kind
    with pytest.raises(ValueError, match="shapes differ"):
        max_abs_diff(fill.cross, fill.encoder_self)


def test_attention_entropy_in_bits() -> None:
    one_hot = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    uniform = torch.full((1, 4), 0.25)
    assert float(attention_entropy(one_hot)) == 0.0
    assert float(attention_entropy(uniform)) == pytest.approx(2.0)
    both = torch.cat([one_hot, uniform])  # [2 rows, 4 keys]: mean 1 bit, or 2 bits for row 1 only
    assert float(attention_entropy(both)) == pytest.approx(1.0)
    assert float(attention_entropy(both, torch.tensor([False, True]))) == pytest.approx(2.0)


def test_a_higher_temperature_raises_every_heads_entropy(model: Transformer) -> None:
    _, _, paper = forward(model)
    _, _, hot = forward(model, Experiment(temperature=4.0))
    # first layer only: its scores see the same inputs, so only the softmax temperature differs
    assert bool(
        (attention_entropy(hot.encoder_self[0]) > attention_entropy(paper.encoder_self[0])).all()
    )


def test_token_logprobs_match_the_translators_forced_scores(model: Transformer) -> None:
    src = padded(SOURCES)
    batch = token_logprobs(model, src, OUTPUTS)
    assert [t.shape[0] for t in batch] == [4, 2, 3]
    assert all(bool((t <= 0).all()) for t in batch)
    # item by item, unpadded, gives the same numbers: padding never changes an item's scores
    for b, seq in enumerate(SOURCES):
        (alone,) = token_logprobs(model, torch.tensor([seq]), [OUTPUTS[b]])
        torch.testing.assert_close(alone, batch[b], atol=1e-5, rtol=1e-5)
    # the experiment changes them
    (no_pe,) = token_logprobs(
        model, torch.tensor([SOURCES[0]]), [OUTPUTS[0]], Experiment(positional_encoding=False)
    )
    assert max_abs_diff(no_pe, batch[0]) > 1e-3


# -- scaling --------------------------------------------------------------------------------------
def test_qk_variance_grows_linearly_with_dk_and_scaling_keeps_it_near_one() -> None:
    d_ks = [4, 16, 64, 256]
    v = qk_variance(d_ks, samples=4000, seed=0)
    for d, raw, scaled in zip(d_ks, v.raw.tolist(), v.scaled.tolist(), strict=True):
        assert raw / d == pytest.approx(1.0, abs=0.12), d
        assert scaled == pytest.approx(1.0, abs=0.12), d
    slope = torch.linalg.lstsq(torch.tensor(d_ks, dtype=torch.float)[:, None], v.raw[:, None])
    assert float(slope.solution) == pytest.approx(1.0, abs=0.08)
    # seeded: the same numbers twice
    torch.testing.assert_close(qk_variance(d_ks, 4000, seed=0).raw, v.raw)


def test_softmax_saturates_as_the_spread_grows() -> None:
    sat = softmax_saturation(10, [0.0, 0.5, 1, 2, 4, 8, 16, 64], seed=1)
    assert sat.probs.shape == (8, 10)
    torch.testing.assert_close(sat.probs.sum(-1), torch.ones(8))
    assert float(sat.entropy[0]) == pytest.approx(math.log2(10), abs=1e-5)  # spread 0: uniform
    assert bool((sat.entropy[1:] < sat.entropy[:-1]).all())
    assert bool((sat.max_weight[1:] > sat.max_weight[:-1]).all())
    assert float(sat.max_weight[-1]) > 0.95  # nearly one-hot: the gradient through it vanishes
    assert int(sat.probs[-1].argmax()) == int(sat.scores.argmax())


def test_translating_a_sentences_ids_equals_translating_its_text(tiny_bundle) -> None:
    from model.translator import Translator

    tr = Translator(tiny_bundle)
    text = "The cat is sleeping on the sofa."
    (by_text,) = tr.translate(text, top_k=2)
    by_ids = tr.translate_ids(by_text.source_ids, top_k=2)
    assert by_ids.target_ids == by_text.target_ids
    assert by_ids.source_tokens == by_text.source_tokens
    assert by_ids.text == tiny_bundle.tokenizer.decode(by_text.source_ids)
    torch.testing.assert_close(by_ids.trace.cross, by_text.trace.cross)


def test_forcing_output_ids_equals_forcing_the_text_they_came_from(tiny_bundle) -> None:
    from model.translator import Translator

    tr = Translator(tiny_bundle)
    src, ref = "I go home.", "Ich gehe nach Hause."
    by_text = tr.force(src, ref, top_k=0)
    by_ids = tr.force(src, by_text.target_ids, top_k=0)
    assert by_ids.target_ids == by_text.target_ids
    assert by_ids.score == pytest.approx(by_text.score)
    # ... and its per-token scores are token_logprobs under the same experiment
    (lp,) = token_logprobs(tr.model, torch.tensor([by_text.source_ids]), [by_text.target_ids])
    assert [s.prob for s in by_ids.steps] == pytest.approx(lp.exp().tolist(), rel=1e-5)
