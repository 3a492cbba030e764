"""Training: the paper's recipe at small scale (section 5), on the CPU or a GPU.

Adam(0.9, 0.98, 1e-9) with lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5),
label smoothing, dropout, token-count batching and gradient clipping. Progress bar with loss,
tokens/s, learning rate and ETA; validation loss and BLEU each epoch; a JSON-lines log; resumable
checkpoints; a time budget that stops cleanly; averaging of the last checkpoints.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from model.checkpoint import save_bundle
from model.config import ModelConfig
from model.decode import greedy_decode
from model.device import resolve_device
from model.tokenizer import Tokenizer

log = logging.getLogger(__name__)


@dataclass
class TrainConfig:
    """Everything that defines a training run; a JSON file of these fields reproduces it."""

    corpus_dir: str = "data/corpus"  # output of `attnscope data`
    out_dir: str = "runs/en-de"  # checkpoints, log, tokenizer of this run
    bundle_dir: str = "model/bundles/en-de"  # where the finished bundle is written
    n_phrases: int = 0  # Ding phrase pairs mixed into training (0: sentences only)
    vocab_size: int = 8000
    model: dict[str, Any] = field(default_factory=dict)  # ModelConfig overrides
    max_tokens_per_side: int = 64  # longer training pairs are dropped (not truncated)
    batch_tokens: int = 4096  # padded target tokens per batch
    lr_factor: float = 0.7  # peak lr = 0.7 * 256^-0.5 * 800^-0.5 = 1.5e-3 at step 800
    warmup_steps: int = 800  # short: a 85-minute CPU run makes only ~3,500 steps
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    max_epochs: int = 100
    max_steps: int = 0  # 0: no limit
    max_minutes: float = (
        85.0  # stop cleanly after this long (0: no limit); fits the 90-min CPU budget
    )
    save_every: int = 250  # steps between resumable checkpoints / averaging snapshots
    average_last: int = 5  # average this many last snapshots if it lowers the valid loss
    valid_bleu_sentences: int = 300  # greedy BLEU on this many valid pairs each epoch
    amp: str = "bf16"  # "bf16" autocast or "none"
    device: str = "auto"
    threads: int = 0  # torch CPU threads (0: torch's default)
    seed: int = 1234
    bundle_dtype: str = "float16"
    log_every: int = 20

    @classmethod
    def from_json(cls, path: str | Path) -> TrainConfig:
        data = json.loads(Path(path).read_text())
        known = {f.name for f in fields(cls)}
        if set(data) - known:
            raise ValueError(f"unknown TrainConfig fields in {path}: {sorted(set(data) - known)}")
        if "adam_betas" in data:
            data["adam_betas"] = tuple(data["adam_betas"])
        return cls(**data)


# ---------------------------------------------------------------------------------------------
# Data
def read_pairs(path: Path) -> list[tuple[str, str]]:
    pairs = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 2 and parts[0] and parts[1]:
                pairs.append((parts[0], parts[1]))
    return pairs


def load_training_pairs(cfg: TrainConfig) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(train pairs, valid pairs) from the corpus directory; phrases mixed in per n_phrases."""
    corpus = Path(cfg.corpus_dir)
    sentences = corpus / "train_sentences.tsv"
    if not sentences.is_file():
        raise FileNotFoundError(
            f"{sentences} not found: build the corpus first with `attnscope data`"
        )
    train = read_pairs(sentences)
    if cfg.n_phrases:
        phrases = read_pairs(corpus / "train_phrases.tsv")
        random.Random(cfg.seed).shuffle(phrases)
        train += phrases[: cfg.n_phrases]
    valid = read_pairs(corpus / "valid.tsv")
    return train, valid


def encode_pairs(
    tok: Tokenizer, pairs: list[tuple[str, str]], limit: int
) -> list[tuple[list[int], list[int]]]:
    """Tokenize pairs; drop those over `limit` tokens a side (counted, never truncated)."""
    out = []
    english = tok.hf.encode_batch([en for en, _ in pairs])
    german = tok.hf.encode_batch([de for _, de in pairs])
    for e_enc, d_enc in zip(english, german, strict=True):
        src = [*e_enc.ids, tok.eos_id]
        tgt = [*d_enc.ids, tok.eos_id]
        if len(src) <= limit and len(tgt) <= limit:
            out.append((src, tgt))
    return out


def make_batches(
    examples: list[tuple[list[int], list[int]]], batch_tokens: int, seed: int
) -> list[list[int]]:
    """Token-count batching: sort by length (with seeded noise), cut batches whose padded target
    size stays under batch_tokens, shuffle the batch order. Returns lists of example indices."""
    rng = random.Random(seed)
    order = sorted(
        range(len(examples)),
        key=lambda i: (len(examples[i][1]) + rng.random(), len(examples[i][0])),
    )
    batches, cur, cur_max = [], [], 0
    for i in order:
        n = max(len(examples[i][1]), len(examples[i][0]))
        if cur and max(cur_max, n) * (len(cur) + 1) > batch_tokens:
            batches.append(cur)
            cur, cur_max = [], 0
        cur.append(i)
        cur_max = max(cur_max, n)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(
    examples: list[tuple[list[int], list[int]]],
    idx: list[int],
    pad: int,
    bos: int,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> src [B, S], decoder input [B, T] (<s> y1..), labels [B, T] (y1.. </s>), right-padded."""
    srcs = [examples[i][0] for i in idx]
    tgts = [examples[i][1] for i in idx]
    s_len, t_len = max(map(len, srcs)), max(map(len, tgts))
    src = torch.full((len(idx), s_len), pad, dtype=torch.long)
    dec_in = torch.full((len(idx), t_len), pad, dtype=torch.long)
    labels = torch.full((len(idx), t_len), pad, dtype=torch.long)
    for b, (s, t) in enumerate(zip(srcs, tgts, strict=True)):
        src[b, : len(s)] = torch.tensor(s)
        dec_in[b, : len(t)] = torch.tensor([bos, *t[:-1]])
        labels[b, : len(t)] = torch.tensor(t)
    return src.to(device), dec_in.to(device), labels.to(device)


# ---------------------------------------------------------------------------------------------
# Schedule and loss
def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's schedule (eq. 3): linear warm-up, then decay with the inverse square root."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def loss_fn(
    logits: torch.Tensor, labels: torch.Tensor, pad: int, smoothing: float
) -> tuple[torch.Tensor, int]:
    """Label-smoothed cross-entropy summed over real tokens; returns (sum, number of tokens)."""
    loss = F.cross_entropy(
        logits.float().reshape(-1, logits.size(-1)),
        labels.reshape(-1),
        ignore_index=pad,
        label_smoothing=smoothing,
        reduction="sum",
    )
    return loss, int((labels != pad).sum())


def autocast(device: torch.device, amp: str) -> contextlib.AbstractContextManager:
    if amp == "bf16" and device.type in ("cpu", "cuda"):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


# ---------------------------------------------------------------------------------------------
# Evaluation during training
@torch.no_grad()
def valid_loss(model, examples, cfg: TrainConfig, device, pad, bos) -> float:
    model.eval()
    total, n = 0.0, 0
    for idx in make_batches(examples, cfg.batch_tokens, seed=0):
        src, dec_in, labels = collate(examples, idx, pad, bos, device)
        with autocast(device, cfg.amp):
            logits = model(src, dec_in).logits
        loss, k = loss_fn(logits, labels, pad, 0.0)  # plain cross-entropy, comparable across runs
        total += float(loss)
        n += k
    model.train()
    return total / max(n, 1)


@torch.no_grad()
def greedy_bleu(
    model, tok: Tokenizer, pairs: list[tuple[str, str]], device, batch: int = 64
) -> float:
    import sacrebleu

    model.eval()
    hyps = []
    for i in range(0, len(pairs), batch):
        chunk = [
            tok.encode(en, max_tokens=model.config.max_len, allow_unknown=True)
            for en, _ in pairs[i : i + batch]
        ]
        src = torch.full((len(chunk), max(map(len, chunk))), tok.pad_id, dtype=torch.long)
        for b, s in enumerate(chunk):
            src[b, : len(s)] = torch.tensor(s)
        out = greedy_decode(model, src.to(device), top_k=0, need_trace=False)
        hyps += [tok.decode(h.tokens) for h in out.hypotheses]
    model.train()
    return sacrebleu.corpus_bleu(hyps, [[de for _, de in pairs]]).score


# ---------------------------------------------------------------------------------------------
# Checkpoints
def _save_state(path: Path, model, opt, state: dict[str, Any]) -> None:
    """Resumable state. torch.save of tensors and plain data, loaded with weights_only=True
    (no arbitrary unpickling); the bundle itself uses safetensors only."""
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "state": state,
            "rng": torch.get_rng_state(),
        },
        tmp,
    )
    tmp.replace(path)


def _snapshot(out: Path, model, step: int, keep: int) -> None:
    snaps = out / "snapshots"
    snaps.mkdir(exist_ok=True)
    state = {
        k: v.detach().cpu().contiguous()
        for k, v in model.state_dict().items()
        if k != "generator.weight" or not model.config.tie_embeddings
    }
    save_file(state, str(snaps / f"step_{step:07d}.safetensors"))
    for old in sorted(snaps.glob("step_*.safetensors"))[:-keep]:
        old.unlink()


def _average_snapshots(out: Path) -> dict[str, torch.Tensor] | None:
    files = sorted((out / "snapshots").glob("step_*.safetensors"))
    if len(files) < 2:
        return None
    avg: dict[str, torch.Tensor] = {}
    for f in files:
        for k, v in load_file(str(f)).items():
            avg[k] = avg.get(k, 0) + v.float() / len(files)
    return avg


# ---------------------------------------------------------------------------------------------
def train(cfg: TrainConfig) -> Path:
    """Run (or resume) training; returns the bundle directory written at the end."""
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = resolve_device(cfg.device)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")

    train_pairs, valid_pairs = load_training_pairs(cfg)
    tok_path = out / "tokenizer.json"
    if tok_path.is_file():
        tok = Tokenizer.from_file(tok_path)
    else:
        log.info("training a %d-token BPE vocabulary on %d pairs", cfg.vocab_size, len(train_pairs))
        tok = Tokenizer.train((s for p in train_pairs for s in p), vocab_size=cfg.vocab_size)
        tok.save(tok_path)
    model_cfg = ModelConfig.from_dict({**cfg.model, "vocab_size": tok.vocab_size})
    examples = encode_pairs(tok, train_pairs, min(cfg.max_tokens_per_side, model_cfg.max_len))
    valid_examples = encode_pairs(tok, valid_pairs, model_cfg.max_len)
    log.info(
        "train examples: %d (of %d pairs); valid: %d",
        len(examples),
        len(train_pairs),
        len(valid_examples),
    )

    from model.transformer import Transformer

    model = Transformer(model_cfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.0, betas=cfg.adam_betas, eps=cfg.adam_eps)
    state = {
        "step": 0,
        "epoch": 0,
        "batch_in_epoch": 0,
        "elapsed_s": 0.0,
        "tokens": 0,
        "best_valid_loss": math.inf,
    }
    ckpt = out / "last.pt"
    if ckpt.is_file():
        saved = torch.load(ckpt, map_location=device, weights_only=True)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        state.update(saved["state"])
        torch.set_rng_state(saved["rng"])
        log.info("resumed from %s at step %d (epoch %d)", ckpt, state["step"], state["epoch"])

    log_file = (out / "train_log.jsonl").open("a")
    bleu_pairs = valid_pairs[: cfg.valid_bleu_sentences]
    pad, bos = model_cfg.pad_id, model_cfg.bos_id
    start = time.time() - state["elapsed_s"]
    budget_s = cfg.max_minutes * 60 if cfg.max_minutes else math.inf
    stop = False
    model.train()
    while state["epoch"] < cfg.max_epochs and not stop:
        batches = make_batches(examples, cfg.batch_tokens, seed=cfg.seed + state["epoch"])
        bar = tqdm(
            total=len(batches),
            initial=state["batch_in_epoch"],
            desc=f"epoch {state['epoch'] + 1}",
            unit="batch",
            dynamic_ncols=True,
        )
        win_tokens, win_loss, win_t = 0, 0.0, time.time()
        for bi in range(state["batch_in_epoch"], len(batches)):
            src, dec_in, labels = collate(examples, batches[bi], pad, bos, device)
            step = state["step"] + 1
            lr = noam_lr(step, model_cfg.d_model, cfg.warmup_steps, cfg.lr_factor)
            for g in opt.param_groups:
                g["lr"] = lr
            with autocast(device, cfg.amp):
                logits = model(src, dec_in).logits
            loss_sum, n_tok = loss_fn(logits, labels, pad, cfg.label_smoothing)
            opt.zero_grad(set_to_none=True)
            (loss_sum / n_tok).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
            opt.step()
            state.update(
                step=step,
                batch_in_epoch=bi + 1,
                tokens=state["tokens"] + n_tok,
                elapsed_s=time.time() - start,
            )
            win_tokens += n_tok
            win_loss += float(loss_sum.detach())
            bar.update(1)
            if step % cfg.log_every == 0:
                tps = win_tokens / max(time.time() - win_t, 1e-9)
                rec = {
                    "step": step,
                    "epoch": state["epoch"] + 1,
                    "loss": win_loss / win_tokens,
                    "lr": lr,
                    "tokens_per_s": tps,
                    "elapsed_s": state["elapsed_s"],
                }
                log_file.write(json.dumps(rec) + "\n")
                log_file.flush()
                bar.set_postfix(loss=f"{rec['loss']:.3f}", tok_s=f"{tps:.0f}", lr=f"{lr:.2e}")
                win_tokens, win_loss, win_t = 0, 0.0, time.time()
            if step % cfg.save_every == 0:
                _snapshot(out, model, step, cfg.average_last)
                _save_state(ckpt, model, opt, state)
            if (cfg.max_steps and step >= cfg.max_steps) or state["elapsed_s"] > budget_s:
                stop = True
                break
        bar.close()
        if not stop:
            state.update(epoch=state["epoch"] + 1, batch_in_epoch=0)
        vloss = valid_loss(model, valid_examples, cfg, device, pad, bos)
        bleu = greedy_bleu(model, tok, bleu_pairs, device) if bleu_pairs else float("nan")
        rec = {
            "step": state["step"],
            "epoch": state["epoch"],
            "valid_loss": vloss,
            "valid_bleu": bleu,
            "elapsed_s": time.time() - start,
        }
        log.info(
            "epoch %d step %d: valid loss %.3f, greedy BLEU %.2f",
            state["epoch"],
            state["step"],
            vloss,
            bleu,
        )
        log_file.write(json.dumps(rec) + "\n")
        log_file.flush()
        _save_state(ckpt, model, opt, state)
    log_file.close()
    _snapshot(out, model, state["step"], cfg.average_last)
    _save_state(ckpt, model, opt, state)
    return export_bundle(cfg, model, tok, state, valid_examples, device, train_count=len(examples))


def export_bundle(
    cfg: TrainConfig,
    model,
    tok: Tokenizer,
    state: dict[str, Any],
    valid_examples,
    device: torch.device,
    train_count: int,
) -> Path:
    """Choose last vs averaged weights by valid loss, write the bundle with log and metrics."""
    pad, bos = model.config.pad_id, model.config.bos_id
    out = Path(cfg.out_dir)
    last_loss = valid_loss(model, valid_examples, cfg, device, pad, bos)
    averaged = _average_snapshots(out)
    chosen = "last"
    avg_loss = None
    if averaged is not None:
        backup = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict({k: v.to(device) for k, v in averaged.items()}, strict=False)
        avg_loss = valid_loss(model, valid_examples, cfg, device, pad, bos)
        if avg_loss < last_loss:
            chosen = "average"
        else:
            model.load_state_dict(backup)
    log.info("valid loss: last %.4f, averaged %s -> using %s", last_loss, avg_loss, chosen)
    counts_path = Path(cfg.corpus_dir) / "counts.json"
    metadata = {
        "name": Path(cfg.bundle_dir).name,
        "source_language": "en",
        "target_language": "de",
        "description": "English->German Transformer trained by attnscope's own `attnscope train`.",
        "data": {
            "sources": [
                "Tatoeba English-German pairs (CC-BY 2.0 FR), via tatoeba.org and "
                "www.manythings.org/anki",
                "Ding German-English dictionary, Debian package trans-de-en (GPL-2+), https://dict.tu-chemnitz.de/",
            ],
            "train_examples": train_count,
            "n_phrases": cfg.n_phrases,
        },
        "training": {
            "steps": state["step"],
            "epochs_completed": state["epoch"],
            "target_tokens": state["tokens"],
            "elapsed_minutes": round(state["elapsed_s"] / 60, 2),
            "device": str(device),
            "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"),
            "threads": torch.get_num_threads(),
            "tokens_per_s": round(state["tokens"] / max(state["elapsed_s"], 1e-9), 1),
            "amp": cfg.amp,
            "weights": chosen,
            "valid_loss_last": last_loss,
            "valid_loss_average": avg_loss,
            "parameters": model.num_parameters(),
        },
    }
    bundle = save_bundle(cfg.bundle_dir, model, tok, metadata, dtype=cfg.bundle_dtype)
    (bundle / "train_config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")
    if (out / "train_log.jsonl").is_file():
        (bundle / "train_log.jsonl").write_text((out / "train_log.jsonl").read_text())
    if counts_path.is_file():
        (bundle / "data_counts.json").write_text(counts_path.read_text())
    metrics_path = bundle / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
    metrics["training"] = metadata["training"]
    metrics_path.write_text(json.dumps(metrics, indent=2) + "\n")
    log.info("wrote bundle %s", bundle)
    return bundle


# ---------------------------------------------------------------------------------------------
# CLI glue (wired into `attnscope train` by app/cli.py)
def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="JSON file of TrainConfig fields (flags override it)")
    for f in fields(TrainConfig):
        if f.name in ("model", "adam_betas"):
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = type(f.default) if f.default is not None else str
        parser.add_argument(flag, type=kind, default=None, help=f"(default {f.default})")
    parser.add_argument("--model-config", help="JSON object of ModelConfig overrides")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    cfg = TrainConfig.from_json(args.config) if args.config else TrainConfig()
    for f in fields(TrainConfig):
        value = getattr(args, f.name, None)
        if value is not None:
            setattr(cfg, f.name, value)
    if args.model_config:
        cfg.model = {**cfg.model, **json.loads(args.model_config)}
    return cfg
