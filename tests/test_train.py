"""The training loop (model/train.py) on a tiny corpus: schedule, batching, loss, one step that
learns, an end-to-end run that writes a loadable bundle, and a resumed run that continues the
very same run."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from model.checkpoint import load_bundle
from model.config import ModelConfig
from model.tokenizer import Tokenizer
from model.train import (
    TrainConfig,
    collate,
    encode_pairs,
    load_training_pairs,
    loss_fn,
    make_batches,
    noam_lr,
    read_pairs,
    train,
)
from model.transformer import Transformer
from tests.helpers import assert_close

SUBJECTS = [("I", "Ich"), ("We", "Wir"), ("They", "Sie"), ("You", "Ihr")]
VERBS = [("see", "sehen"), ("like", "mögen"), ("need", "brauchen")]
OBJECTS = [("the cat", "die Katze"), ("the house", "das Haus"), ("the book", "das Buch")]
TINY_MODEL = {
    "d_model": 32,
    "n_heads": 4,
    "n_encoder_layers": 1,
    "n_decoder_layers": 1,
    "d_ff": 64,
    "max_len": 32,
}


def toy_pairs() -> list[tuple[str, str]]:
    """36 English-German pairs from templates (German verb agreement is ignored on purpose)."""
    return [
        (f"{s_en} {v_en} {o_en}.", f"{s_de} {v_de} {o_de}.")
        for (s_en, s_de), (v_en, v_de), (o_en, o_de) in itertools.product(SUBJECTS, VERBS, OBJECTS)
    ]


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    pairs = toy_pairs()
    lines = ["\t".join(p) for p in pairs]
    (corpus / "train_sentences.tsv").write_text("\n".join(lines[:30]) + "\n", encoding="utf-8")
    (corpus / "valid.tsv").write_text("\n".join(lines[30:]) + "\n", encoding="utf-8")
    return corpus


@pytest.fixture
def restore_threads() -> Iterator[None]:
    # train(threads=1) sets the process-wide thread count; give the other tests theirs back.
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def tiny_config(corpus: Path, run: Path, **changes: object) -> TrainConfig:
    cfg = TrainConfig(
        corpus_dir=str(corpus),
        out_dir=str(run / "run"),
        bundle_dir=str(run / "bundle"),
        vocab_size=100,
        model={**TINY_MODEL, "dropout": 0.1},
        batch_tokens=60,
        warmup_steps=4,
        lr_factor=1.0,
        max_epochs=3,
        max_steps=0,
        max_minutes=0,
        save_every=1000,
        valid_bleu_sentences=2,
        amp="none",
        device="cpu",
        threads=1,
        bundle_dtype="float32",
        log_every=2,
    )
    for key, value in changes.items():
        setattr(cfg, key, value)
    return cfg


# -- schedule, batching, loss -------------------------------------------------------------------
def test_noam_schedule_follows_the_formula_and_peaks_at_the_warmup_step() -> None:
    d_model, warmup, factor = 256, 100, 2.0
    for step in (1, 10, 99, 100, 101, 1000, 12345):
        expected = factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert noam_lr(step, d_model, warmup, factor) == pytest.approx(expected)
    lrs = [noam_lr(s, d_model, warmup, factor) for s in range(1, 400)]
    assert max(range(len(lrs)), key=lrs.__getitem__) + 1 == warmup
    assert noam_lr(50, d_model, warmup) == pytest.approx(50 * noam_lr(1, d_model, warmup))
    assert noam_lr(400, d_model, warmup) == pytest.approx(noam_lr(100, d_model, warmup) / 2)
    assert noam_lr(0, d_model, warmup) == noam_lr(1, d_model, warmup)  # step 0 is clamped


def random_examples(n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 20, (n, 2), generator=gen).tolist()
    return [([5] * s, [6] * t) for s, t in lengths]


def test_batches_respect_the_token_budget_and_cover_every_example_once() -> None:
    examples = random_examples(200)
    budget = 64
    batches = make_batches(examples, budget, seed=3)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(examples)))
    for batch in batches:
        longest = max(max(len(examples[i][0]), len(examples[i][1])) for i in batch)
        assert longest * len(batch) <= budget
    assert len(batches) > 1


def test_batching_is_deterministic_for_a_seed_and_varies_between_seeds() -> None:
    examples = random_examples(200)
    assert make_batches(examples, 64, seed=3) == make_batches(examples, 64, seed=3)
    assert make_batches(examples, 64, seed=3) != make_batches(examples, 64, seed=4)


def test_an_example_longer_than_the_budget_gets_a_batch_of_its_own() -> None:
    examples = [([5] * 3, [6] * 3), ([5] * 50, [6] * 50), ([5] * 2, [6] * 2)]
    batches = make_batches(examples, 10, seed=0)
    assert [1] in batches


def test_collate_shifts_the_target_right_behind_bos_and_pads() -> None:
    examples = [([5, 6, 2], [7, 8, 9, 2]), ([10, 2], [11, 2])]
    src, dec_in, labels = collate(examples, [0, 1], pad=0, bos=1, device=torch.device("cpu"))
    assert src.tolist() == [[5, 6, 2], [10, 2, 0]]
    assert dec_in.tolist() == [[1, 7, 8, 9], [1, 11, 0, 0]]
    assert labels.tolist() == [[7, 8, 9, 2], [11, 2, 0, 0]]


def test_loss_is_label_smoothed_cross_entropy_summed_over_real_tokens() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 10)
    labels = torch.tensor([[3, 4, 5, 2], [6, 2, 0, 0]])
    loss, n = loss_fn(logits, labels, pad=0, smoothing=0.1)
    assert n == 6
    # By hand: (1 - eps) * NLL + eps * mean over the vocabulary of -log p, on the 6 real tokens.
    logp = logits.log_softmax(-1)[labels != 0]  # [6, V]
    target = labels[labels != 0]
    nll = -logp.gather(1, target[:, None]).squeeze(1)
    expected = ((1 - 0.1) * nll + 0.1 * -logp.mean(-1)).sum()
    assert_close(loss, expected)
    plain, _ = loss_fn(logits, labels, pad=0, smoothing=0.0)
    assert_close(
        plain,
        F.cross_entropy(
            logits.reshape(-1, 10), labels.reshape(-1), ignore_index=0, reduction="sum"
        ),
    )


def test_one_optimisation_step_lowers_the_loss_on_its_batch() -> None:
    tok = Tokenizer.train([s for p in toy_pairs() for s in p], vocab_size=100, min_frequency=1)
    examples = encode_pairs(tok, toy_pairs(), limit=32)
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=tok.vocab_size, dropout=0.0, **TINY_MODEL))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    src, dec_in, labels = collate(examples, list(range(8)), 0, 1, torch.device("cpu"))

    def batch_loss() -> torch.Tensor:
        loss, n = loss_fn(model(src, dec_in).logits, labels, pad=0, smoothing=0.1)
        return loss / n

    before = batch_loss()
    opt.zero_grad()
    before.backward()
    opt.step()
    with torch.no_grad():
        after = batch_loss()
    assert after.item() < before.item() - 1e-3


def test_pairs_longer_than_the_limit_are_dropped_not_truncated() -> None:
    tok = Tokenizer.train([s for p in toy_pairs() for s in p], vocab_size=100, min_frequency=1)
    pairs = [("I see the cat.", "Ich sehen die Katze."), ("I see " * 10 + "it.", "Ich.")]
    kept = encode_pairs(tok, pairs, limit=12)
    assert len(kept) == 1
    src, tgt = kept[0]
    assert tok.decode(src) == "I see the cat."
    assert src[-1] == tgt[-1] == tok.eos_id


def test_reading_a_corpus_without_training_pairs_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="attnscope data"):
        load_training_pairs(TrainConfig(corpus_dir=str(tmp_path)))


def test_read_pairs_skips_malformed_lines(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("a\tb\nno tab here\n\tempty source\nc\td\te\nf\tg\n", encoding="utf-8")
    assert read_pairs(path) == [("a", "b"), ("f", "g")]


def test_train_config_from_json_rejects_unknown_fields(tmp_path: Path) -> None:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"vocab_size": 100, "adam_betas": [0.9, 0.99]}))
    cfg = TrainConfig.from_json(path)
    assert cfg.vocab_size == 100
    assert cfg.adam_betas == (0.9, 0.99)
    path.write_text(json.dumps({"vocab": 100}))
    with pytest.raises(ValueError, match="unknown TrainConfig fields"):
        TrainConfig.from_json(path)


# -- whole runs ---------------------------------------------------------------------------------
def read_log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]


def test_a_short_run_writes_a_loadable_bundle_with_its_log_and_metrics(
    corpus_dir: Path, tmp_path: Path, restore_threads: None
) -> None:
    cfg = tiny_config(corpus_dir, tmp_path, max_steps=6)
    bundle_dir = train(cfg)
    assert bundle_dir == Path(cfg.bundle_dir)
    bundle = load_bundle(bundle_dir, "cpu")
    assert bundle.config.d_model == 32
    assert bundle.config.vocab_size == bundle.tokenizer.vocab_size <= 100
    assert bundle.metadata["training"]["steps"] == 6
    assert bundle.metadata["weights_dtype"] == "float32"
    log = read_log(Path(cfg.out_dir))
    steps = [r["step"] for r in log if "loss" in r]
    assert steps == [2, 4, 6]
    assert all(math.isfinite(r["loss"]) and r["lr"] > 0 for r in log if "loss" in r)
    assert any("valid_loss" in r for r in log)
    assert (bundle_dir / "train_log.jsonl").read_text() == (
        Path(cfg.out_dir) / "train_log.jsonl"
    ).read_text()
    metrics = json.loads((bundle_dir / "metrics.json").read_text())
    assert metrics["training"]["steps"] == 6


def test_training_for_several_epochs_lowers_the_validation_loss(
    corpus_dir: Path, tmp_path: Path, restore_threads: None
) -> None:
    cfg = tiny_config(corpus_dir, tmp_path, max_epochs=4, lr_factor=2.0)
    train(cfg)
    valid = [r["valid_loss"] for r in read_log(Path(cfg.out_dir)) if "valid_loss" in r]
    assert len(valid) == 4
    assert valid[-1] < valid[0]


def test_resuming_a_stopped_run_gives_exactly_the_weights_of_an_uninterrupted_run(
    corpus_dir: Path, tmp_path: Path, restore_threads: None
) -> None:
    # 30 pairs in batches of at most 60 tokens: several batches per epoch, so step 9 is
    # mid-epoch and step 18 lies in the next epoch. Dropout stays on: the RNG must resume too.
    total = 18
    one_go = tiny_config(corpus_dir, tmp_path / "one_go", max_steps=total, max_epochs=100)
    train(one_go)
    split = tiny_config(corpus_dir, tmp_path / "split", max_steps=total // 2, max_epochs=100)
    train(split)
    first_half = torch.load(Path(split.out_dir) / "last.pt", weights_only=True)
    assert first_half["state"]["step"] == total // 2
    assert first_half["state"]["batch_in_epoch"] > 0
    split.max_steps = total
    train(split)

    a = torch.load(Path(one_go.out_dir) / "last.pt", weights_only=True)
    b = torch.load(Path(split.out_dir) / "last.pt", weights_only=True)
    assert a["state"]["step"] == b["state"]["step"] == total
    assert a["state"]["epoch"] == b["state"]["epoch"] >= 1
    assert a["state"]["tokens"] == b["state"]["tokens"]
    for name, tensor in a["model"].items():
        assert torch.equal(b["model"][name], tensor), name
    log_steps = [r["step"] for r in read_log(Path(split.out_dir)) if "loss" in r]
    assert log_steps == sorted(log_steps)
    assert log_steps[-1] == total
    losses = {r["step"]: r["loss"] for r in read_log(Path(one_go.out_dir)) if "loss" in r}
    resumed = {r["step"]: r["loss"] for r in read_log(Path(split.out_dir)) if "loss" in r}
    for step in range(total // 2 + 2, total + 1, 2):
        if step in losses and step in resumed:
            assert resumed[step] == pytest.approx(losses[step], rel=1e-6)
