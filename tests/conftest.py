"""Shared fixtures: a tiny randomly initialised model bundle, built in seconds, no data needed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from model.checkpoint import Bundle, load_bundle, save_bundle
from model.config import ModelConfig
from model.tokenizer import Tokenizer
from model.transformer import Transformer

# The suite runs tiny models next to a uvicorn thread and Chromium: one intra-op thread avoids
# the oversubscription that makes 2-core machines crawl (measured: 186 s vs 8 s for the toy task).
torch.set_num_threads(1)

# A few sentences in both languages, enough for a BPE vocabulary that covers the test inputs.
TOY_SENTENCES = [
    "The cat is sleeping on the sofa.",
    "Die Katze schläft auf dem Sofa.",
    "I go home.",
    "Ich gehe nach Hause.",
    "Where is the station?",
    "Wo ist der Bahnhof?",
    "We like to read books.",
    "Wir lesen gern Bücher.",
    "The weather is nice today!",
    "Das Wetter ist heute schön!",
    "<img src=x onerror=alert(1)> \"'&;:()[]{}/\\-_=+*#@$%^~`|",
    "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ äöüß ÄÖÜ éèà",
]

TINY_CONFIG = dict(
    d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=128
)


def make_tiny_bundle(path: Path, seed: int = 0, **overrides: object) -> Path:
    """Write a tiny random bundle (2+2 layers, 4 heads, d_model 32) to `path`."""
    torch.manual_seed(seed)
    tok = Tokenizer.train(TOY_SENTENCES * 5, vocab_size=200, min_frequency=1)
    config = ModelConfig(vocab_size=tok.vocab_size, **{**TINY_CONFIG, **overrides})
    model = Transformer(config)
    meta = {
        "name": path.name,
        "source_language": "en",
        "target_language": "de",
        "description": "tiny random model for tests",
    }
    return save_bundle(path, model, tok, meta)


@pytest.fixture(scope="session")
def tiny_bundle_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("bundles") / "tiny")


@pytest.fixture(scope="session")
def tiny_bundle(tiny_bundle_dir: Path) -> Bundle:
    return load_bundle(tiny_bundle_dir, "cpu")
