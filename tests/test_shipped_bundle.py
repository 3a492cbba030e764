"""The English->German bundle shipped in model/bundles/en-de translates a simple sentence."""

from __future__ import annotations

import pytest

from model.checkpoint import DEFAULT_BUNDLE_DIR, load_bundle
from model.translator import Translator

pytestmark = pytest.mark.slow

SENTENCE = "The cat is sleeping on the sofa."


@pytest.fixture(scope="module")
def translator() -> Translator:
    if not DEFAULT_BUNDLE_DIR.is_dir():
        pytest.skip("shipped bundle model/bundles/en-de is absent: train it with `attnscope train`")
    return Translator(load_bundle(DEFAULT_BUNDLE_DIR, "cpu"))


def test_shipped_bundle_translates_the_cat_sentence_into_german(translator: Translator) -> None:
    result = translator.translate(SENTENCE, beam_size=4)[0]
    assert result.translation.strip()
    assert "Katze" in result.translation
    assert result.target_tokens[-1] == "</s>"


def test_shipped_bundle_returns_a_trace_with_eight_heads_that_fits_the_tokens(
    translator: Translator,
) -> None:
    result = translator.translate(SENTENCE, beam_size=1)[0]
    trace = result.trace
    assert trace is not None
    config = translator.bundle.config
    s, t = len(result.source_tokens), len(result.target_tokens)
    assert trace.encoder_self.shape == (config.n_encoder_layers, 1, 8, s, s)
    assert trace.decoder_self.shape == (config.n_decoder_layers, 1, 8, t, t)
    assert trace.cross.shape == (config.n_decoder_layers, 1, 8, t, s)
    row_sums = trace.cross.sum(-1)
    assert float((row_sums - 1).abs().max()) < 1e-4


def test_shipped_bundle_carries_its_training_record(translator: Translator) -> None:
    metadata = translator.bundle.metadata
    assert metadata["source_language"] == "en"
    assert metadata["target_language"] == "de"
    assert metadata["training"]["steps"] > 0
    assert (DEFAULT_BUNDLE_DIR / "train_log.jsonl").is_file()
