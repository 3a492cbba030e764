"""Model bundles: exact round trips, half-precision storage, and clear errors for broken bundles."""

from __future__ import annotations

import json
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from model.checkpoint import BundleError, load_bundle, save_bundle
from model.config import ModelConfig
from model.transformer import Transformer
from tests.conftest import make_tiny_bundle
from tests.helpers import assert_close

SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
TGT = torch.tensor([[1, 11, 12, 13], [1, 14, 0, 0]])


def outputs(model: Transformer) -> tuple[torch.Tensor, list[torch.Tensor]]:
    with torch.no_grad():
        out = model(SRC, TGT, need_weights=True)
    assert out.trace is not None
    return out.logits, [out.trace.encoder_self, out.trace.decoder_self, out.trace.cross]


@pytest.fixture
def bundle_copy(tiny_bundle_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the tiny bundle that a test may break."""
    return Path(shutil.copytree(tiny_bundle_dir, tmp_path / "bundle"))


def test_float32_round_trip_gives_identical_outputs(tiny_bundle_dir: Path, tmp_path: Path) -> None:
    first = load_bundle(tiny_bundle_dir, "cpu")
    save_bundle(tmp_path / "again", first.model, first.tokenizer, first.metadata, "float32")
    second = load_bundle(tmp_path / "again", "cpu")
    assert second.config == first.config
    assert second.tokenizer.to_str() == first.tokenizer.to_str()
    for name, tensor in first.model.state_dict().items():
        assert torch.equal(second.model.state_dict()[name], tensor), name
    logits_a, maps_a = outputs(first.model)
    logits_b, maps_b = outputs(second.model)
    assert torch.equal(logits_a, logits_b)
    for a, b in zip(maps_a, maps_b, strict=True):
        assert torch.equal(a, b)


def test_loaded_model_is_in_eval_mode_float32_with_tied_output_weights(tiny_bundle) -> None:
    model = tiny_bundle.model
    assert not model.training
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert model.generator.weight is model.embed.weight
    assert tiny_bundle.name == "tiny"
    assert tiny_bundle.metadata["weights_dtype"] == "float32"
    assert tiny_bundle.metadata["description"] == "tiny random model for tests"


def test_tied_output_weight_is_not_stored_twice(tiny_bundle_dir: Path) -> None:
    with safe_open(str(tiny_bundle_dir / "weights.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert "embed.weight" in keys
    assert "generator.weight" not in keys


@pytest.mark.parametrize(("dtype", "atol"), [("float16", 5e-3), ("bfloat16", 5e-2)])
def test_half_precision_bundle_loads_as_float32_and_is_close(
    tiny_bundle, tmp_path: Path, dtype: str, atol: float
) -> None:
    path = save_bundle(tmp_path / dtype, tiny_bundle.model, tiny_bundle.tokenizer, {}, dtype)
    with safe_open(str(path / "weights.safetensors"), "pt") as f:
        assert f.metadata() == {"dtype": dtype}
        assert f.get_tensor("embed.weight").dtype == getattr(torch, dtype)
    half = load_bundle(path, "cpu")
    assert half.metadata["weights_dtype"] == dtype
    assert all(p.dtype == torch.float32 for p in half.model.parameters())
    logits_a, maps_a = outputs(tiny_bundle.model)
    logits_b, maps_b = outputs(half.model)
    assert_close(logits_b, logits_a, atol=atol * 10, rtol=0)
    for a, b in zip(maps_a, maps_b, strict=True):
        assert_close(b, a, atol=atol, rtol=0)


def test_save_rejects_an_unknown_dtype_and_a_tokenizer_larger_than_the_model(
    tiny_bundle, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="dtype"):
        save_bundle(tmp_path / "x", tiny_bundle.model, tiny_bundle.tokenizer, {}, "int8")
    small = Transformer(ModelConfig(**{**tiny_bundle.config.to_dict(), "vocab_size": 10}))
    with pytest.raises(ValueError, match="tokenizer has"):
        save_bundle(tmp_path / "y", small, tiny_bundle.tokenizer)


def test_missing_directory_is_a_bundle_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="does not exist") as info:
        load_bundle(tmp_path / "nowhere", "cpu")
    assert "nowhere" in str(info.value)


@pytest.mark.parametrize(
    "name", ["weights.safetensors", "config.json", "tokenizer.json", "metadata.json"]
)
def test_each_missing_file_is_a_bundle_error_naming_the_file(bundle_copy: Path, name: str) -> None:
    (bundle_copy / name).unlink()
    with pytest.raises(BundleError, match=f"missing {name}"):
        load_bundle(bundle_copy, "cpu")


def _garbage_weights(p: Path) -> None:
    (p / "weights.safetensors").write_bytes(b"this is not a safetensors file at all" * 10)


def _truncated_weights(p: Path) -> None:
    data = (p / "weights.safetensors").read_bytes()
    (p / "weights.safetensors").write_bytes(data[: len(data) // 2])


def _invalid_config_json(p: Path) -> None:
    (p / "config.json").write_text('{"d_model": 32,')


def _config_not_an_object(p: Path) -> None:
    (p / "config.json").write_text("[1, 2, 3]")


def _edit_config(**changes: object) -> Callable[[Path], None]:
    def edit(p: Path) -> None:
        config = json.loads((p / "config.json").read_text())
        (p / "config.json").write_text(json.dumps({**config, **changes}))

    return edit


def _garbage_tokenizer(p: Path) -> None:
    (p / "tokenizer.json").write_text("not a tokenizer")


def _invalid_metadata(p: Path) -> None:
    (p / "metadata.json").write_bytes(b"\xff\xfe garbage")


@pytest.mark.parametrize(
    ("corrupt", "file", "words"),
    [
        (_garbage_weights, "weights.safetensors", "corrupt"),
        (_truncated_weights, "weights.safetensors", "corrupt"),
        (_invalid_config_json, "config.json", "not valid JSON"),
        (_config_not_an_object, "config.json", "JSON object"),
        (_edit_config(n_layers=6), "config.json", "unknown ModelConfig fields"),
        (_edit_config(n_heads=5), "config.json", "divisible"),
        (_edit_config(d_ff=128), "weights.safetensors", "wrong shapes"),
        (_edit_config(n_encoder_layers=3), "weights.safetensors", "does not match config.json"),
        (_edit_config(vocab_size=20), "tokenizer", "tokens"),
        (_garbage_tokenizer, "tokenizer.json", "cannot be read"),
        (_invalid_metadata, "metadata.json", "not valid JSON"),
    ],
    ids=[
        "garbage-weights",
        "truncated-weights",
        "invalid-config-json",
        "config-not-an-object",
        "config-unknown-field",
        "config-invalid-value",
        "weights-wrong-shapes",
        "weights-missing-layers",
        "vocab-smaller-than-tokenizer",
        "garbage-tokenizer",
        "invalid-metadata",
    ],
)
def test_corrupt_bundle_is_a_bundle_error_naming_the_file(
    bundle_copy: Path, corrupt: Callable[[Path], None], file: str, words: str
) -> None:
    corrupt(bundle_copy)
    with pytest.raises(BundleError) as info:
        load_bundle(bundle_copy, "cpu")
    message = str(info.value)
    assert file in message
    assert words in message
    assert str(bundle_copy) in message


def test_loading_never_unpickles(tiny_bundle_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("load_bundle must not unpickle anything")

    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    bundle = load_bundle(tiny_bundle_dir, "cpu")
    assert bundle.config.d_model == 32


def test_a_different_seed_gives_different_weights_so_round_trip_equality_means_something(
    tmp_path: Path, tiny_bundle
) -> None:
    other = load_bundle(make_tiny_bundle(tmp_path / "other", seed=1), "cpu")
    assert not torch.equal(other.model.embed.weight, tiny_bundle.model.embed.weight)
