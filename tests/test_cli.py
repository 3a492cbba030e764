"""`attnscope translate | train | evaluate | serve` through app.cli.main, in process."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch

from app.cli import build_parser, main
from model.checkpoint import Bundle, load_bundle
from model.train import config_from_args
from model.translator import Translator

SENTENCE = "The cat is sleeping on the sofa."


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_translate_json_prints_tokens_and_attention_shapes_that_fit_them(
    tiny_bundle_dir: Path, tiny_bundle: Bundle, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["translate", "--json", "--model", str(tiny_bundle_dir), "--device", "cpu", SENTENCE]
    code, out, _ = run_cli(argv, capsys)
    assert code == 0
    payload = json.loads(out.strip().splitlines()[-1])
    assert {"translation", "source_tokens", "target_tokens", "attention_shapes"} <= set(payload)
    assert isinstance(payload["translation"], str)
    c = tiny_bundle.config
    s, t = len(payload["source_tokens"]), len(payload["target_tokens"])
    assert payload["source_tokens"][-1] == "</s>"
    assert payload["source_tokens"] == tiny_bundle.tokenizer.tokens(
        tiny_bundle.tokenizer.encode(SENTENCE)
    )
    assert payload["attention_shapes"] == {
        "encoder_self": [c.n_encoder_layers, 1, c.n_heads, s, s],
        "decoder_self": [c.n_decoder_layers, 1, c.n_heads, t, t],
        "cross": [c.n_decoder_layers, 1, c.n_heads, t, s],
    }
    assert payload["device"] == "cpu"
    assert payload["model"] == "tiny"


def test_translate_prints_the_same_translation_as_the_translator(
    tiny_bundle_dir: Path, tiny_bundle: Bundle, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["translate", "--beam", "1", "--model", str(tiny_bundle_dir), "--device", "cpu"]
    code, out, _ = run_cli([*argv, "I go home."], capsys)
    assert code == 0
    expected = Translator(tiny_bundle).translate("I go home.", beam_size=1)[0].translation
    assert out.rstrip("\n") == expected


def test_translate_with_a_missing_bundle_exits_2_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-bundle"
    code, out, err = run_cli(["translate", "--model", str(missing), SENTENCE], capsys)
    assert code == 2
    assert out == ""
    assert f"error: model bundle directory {missing} does not exist" in err


@pytest.mark.parametrize(
    ("text", "words"),
    [("", "empty"), ("   \n", "empty"), ("The cat 😺.", "does not know: '😺'")],
)
def test_translate_of_bad_text_exits_2_with_the_tokenizer_message(
    tiny_bundle_dir: Path, capsys: pytest.CaptureFixture[str], text: str, words: str
) -> None:
    code, out, err = run_cli(["translate", "--model", str(tiny_bundle_dir), text], capsys)
    assert code == 2
    assert out == ""
    assert err.startswith("error: ")
    assert words in err


def test_evaluate_with_a_missing_tsv_file_exits_2(
    tiny_bundle_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.tsv"
    code, _, err = run_cli(
        ["evaluate", "--tsv", str(missing), "--model", str(tiny_bundle_dir)], capsys
    )
    assert code == 2
    assert "missing.tsv" in err


def test_serve_passes_only_the_given_options_to_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import app.server

    seen: list[argparse.Namespace] = []
    monkeypatch.setattr(app.server, "run_server", lambda args: seen.append(args) or 0)
    assert main(["serve", "--port", "8123", "--device", "cpu"]) == 0
    (args,) = seen
    assert (args.host, args.port, args.device, args.model, args.workers) == (
        None,
        8123,
        "cpu",
        None,
        None,
    )


def test_train_flags_and_model_config_json_override_the_defaults(tmp_path: Path) -> None:
    config_file = tmp_path / "train.json"
    config_file.write_text(json.dumps({"vocab_size": 500, "model": {"d_model": 64}}))
    args = build_parser().parse_args(
        [
            "train",
            "--config",
            str(config_file),
            "--max-steps",
            "7",
            "--amp",
            "none",
            "--max-minutes",
            "1.5",
            "--model-config",
            '{"n_heads": 2}',
        ]
    )
    cfg = config_from_args(args)
    assert cfg.vocab_size == 500  # from the file
    assert cfg.max_steps == 7  # from a flag
    assert cfg.amp == "none"
    assert cfg.max_minutes == 1.5
    assert cfg.model == {"d_model": 64, "n_heads": 2}  # merged
    assert cfg.batch_tokens == 4096  # untouched default


def test_train_command_runs_and_prints_the_bundle_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    pairs = ["I go home.\tIch gehe nach Hause.", "We read books.\tWir lesen Bücher."] * 4
    (corpus / "train_sentences.tsv").write_text("\n".join(pairs) + "\n", encoding="utf-8")
    (corpus / "valid.tsv").write_text(pairs[0] + "\n", encoding="utf-8")
    model = {"d_model": 16, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1}
    threads = torch.get_num_threads()
    try:
        code, out, _ = run_cli(
            [
                "train",
                "--corpus-dir", str(corpus),
                "--out-dir", str(tmp_path / "run"),
                "--bundle-dir", str(tmp_path / "bundle"),
                "--vocab-size", "60",
                "--model-config", json.dumps({**model, "d_ff": 32, "max_len": 32}),
                "--max-steps", "2",
                "--max-minutes", "0",
                "--amp", "none",
                "--device", "cpu",
                "--threads", "1",
                "--valid-bleu-sentences", "1",
                "--bundle-dtype", "float32",
            ],
            capsys,
        )  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    assert out.strip().splitlines()[-1] == str(tmp_path / "bundle")
    bundle = load_bundle(tmp_path / "bundle", "cpu")
    assert bundle.config.d_model == 16
    assert bundle.metadata["training"]["steps"] == 2


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("serve", "translate", "data", "train", "evaluate"):
        assert command in out
