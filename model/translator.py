"""Text in, translation and attention trace out: the tokenizer, the model and decoding together.

This is what the CLI and the web app call; it holds no state between calls besides the
read-only model, so one Translator can serve concurrent requests.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from model.checkpoint import Bundle
from model.decode import alternatives_of, decode, decoder_inputs
from model.experiment import PAPER, Experiment
from model.tokenizer import TokenizationError
from model.trace import AttentionTrace


@dataclass
class Step:
    """One output position: the token chosen, its probability and the top-k alternatives."""

    token: str
    token_id: int
    prob: float
    alternatives: list[tuple[str, float]]


@dataclass
class TranslationResult:
    """One translated sentence with its tokens and trace (maps of batch size 1, trimmed)."""

    text: str
    translation: str
    source_ids: list[int]
    source_tokens: list[str]
    target_ids: list[int]
    target_tokens: list[str]  # produced tokens y1..yT (with </s>)
    decoder_input_tokens: list[str]  # <s> y1..y_{T-1}: what the decoder's queries read
    steps: list[Step]
    score: float
    trace: AttentionTrace | None
    timings_ms: dict[str, float] = field(default_factory=dict)


class Translator:
    """Wraps a Bundle; `translate` decodes, `force` scores a given target (teacher forcing)."""

    def __init__(self, bundle: Bundle, max_tokens: int | None = None) -> None:
        self.bundle = bundle
        self.model = bundle.model
        self.tokenizer = bundle.tokenizer
        self.max_tokens = min(max_tokens or bundle.config.max_len, bundle.config.max_len)

    def encode_batch(self, texts: list[str]) -> tuple[torch.Tensor, list[list[int]]]:
        """Texts -> right-padded ids [B, S_max] on the model's device, and the id lists."""
        if not texts:
            raise TokenizationError("no text given")
        ids = [self.tokenizer.encode(t, max_tokens=self.max_tokens) for t in texts]
        src = torch.full((len(ids), max(map(len, ids))), self.model.config.pad_id, dtype=torch.long)
        for i, seq in enumerate(ids):
            src[i, : len(seq)] = torch.tensor(seq)
        return src.to(self.model.device), ids

    def _result(
        self,
        text: str,
        src_ids: list[int],
        out_ids: list[int],
        logprobs: list[float],
        alternatives: list[list[tuple[int, float]]],
        score: float,
        trace: AttentionTrace | None,
        b: int,
    ) -> TranslationResult:
        tok = self.tokenizer
        tokens = tok.tokens(out_ids)
        steps = [
            Step(t, i, math.exp(lp), [(tok.tokens([a])[0], p) for a, p in alts])
            for t, i, lp, alts in zip(tokens, out_ids, logprobs, alternatives, strict=True)
        ]
        dec_in = [tok.tokens([self.model.config.bos_id])[0], *tokens[:-1]]
        item = trace.item(b, len(src_ids), len(out_ids)) if trace is not None else None
        if item is not None:
            item.source_tokens = [tok.tokens(src_ids)]
            item.target_tokens = [tokens]
            item.decoder_input_tokens = [dec_in]
        return TranslationResult(
            text=text,
            translation=tok.decode(out_ids),
            source_ids=src_ids,
            source_tokens=tok.tokens(src_ids),
            target_ids=out_ids,
            target_tokens=tokens,
            decoder_input_tokens=dec_in,
            steps=steps,
            score=score,
            trace=item,
        )

    @torch.inference_mode()
    def translate(
        self,
        texts: str | list[str],
        beam_size: int = 1,
        max_len: int | None = None,
        top_k: int = 5,
        alpha: float = 0.6,
        experiment: Experiment = PAPER,
        need_trace: bool = True,
    ) -> list[TranslationResult]:
        """Translate one text or a batch; results in input order."""
        batch = [texts] if isinstance(texts, str) else list(texts)
        t0 = time.perf_counter()
        src, ids = self.encode_batch(batch)
        for seq in ids:
            self.model.check_experiment(experiment, len(seq))
        t1 = time.perf_counter()
        if max_len is not None:
            max_len = min(max_len, self.model.config.max_len)
        out = decode(self.model, src, beam_size, max_len, alpha, experiment, top_k, need_trace)
        t2 = time.perf_counter()
        results = [
            self._result(
                text, seq, h.tokens, h.token_logprobs, h.alternatives, h.score, out.trace, b
            )
            for b, (text, seq, h) in enumerate(zip(batch, ids, out.hypotheses, strict=True))
        ]
        for r in results:
            r.timings_ms = {
                "tokenize": (t1 - t0) * 1e3,
                "decode": (t2 - t1) * 1e3,
                "total": (time.perf_counter() - t0) * 1e3,
            }
        return results

    @torch.inference_mode()
    def translate_ids(
        self,
        source_ids: list[int],
        beam_size: int = 1,
        max_len: int | None = None,
        top_k: int = 5,
        alpha: float = 0.6,
        experiment: Experiment = PAPER,
        need_trace: bool = True,
    ) -> TranslationResult:
        """Translate a source given as token ids, used as they are (e.g. a reordering of a
        sentence's tokens, which tokenizing text again would not reproduce). The result's `text`
        is the decoded source."""
        if not source_ids or len(source_ids) > self.max_tokens:
            raise TokenizationError(f"source must have 1..{self.max_tokens} tokens")
        t0 = time.perf_counter()
        self.model.check_experiment(experiment, len(source_ids))
        src = torch.tensor([source_ids], dtype=torch.long, device=self.model.device)
        if max_len is not None:
            max_len = min(max_len, self.model.config.max_len)
        out = decode(self.model, src, beam_size, max_len, alpha, experiment, top_k, need_trace)
        h = out.hypotheses[0]
        text = self.tokenizer.decode(source_ids)
        res = self._result(
            text,
            list(source_ids),
            h.tokens,
            h.token_logprobs,
            h.alternatives,
            h.score,
            out.trace,
            0,
        )
        res.timings_ms = {"total": (time.perf_counter() - t0) * 1e3}
        return res

    @torch.inference_mode()
    def force(
        self, text: str, target: str | list[int], experiment: Experiment = PAPER, top_k: int = 5
    ) -> TranslationResult:
        """Teacher forcing: feed `target` to the decoder and report each of its tokens'
        probabilities and the trace, instead of decoding. `target` is text, or output ids
        y1..yT used as they are (e.g. another run's output, which re-tokenizing its decoded
        text might not reproduce)."""
        t0 = time.perf_counter()
        src, ids = self.encode_batch([text])
        self.model.check_experiment(experiment, len(ids[0]))
        if isinstance(target, str):
            out_ids = self.tokenizer.encode(target, max_tokens=self.max_tokens)
        else:
            out_ids = list(target)
        # One teacher-forced pass gives both the trace and the logits.
        forced = self.model(src, decoder_inputs(self.model, [out_ids]), experiment, True)
        trace = forced.trace
        logp = forced.logits[0].float().log_softmax(-1)  # [T, V]
        chosen = logp.gather(1, torch.tensor(out_ids, device=logp.device)[:, None]).squeeze(1)
        values, alt = logp.topk(min(top_k, logp.size(-1)), dim=-1)  # top_k 0: empty rows
        alternatives = alternatives_of(values, alt)
        res = self._result(
            text, ids[0], out_ids, chosen.tolist(), alternatives, float(chosen.sum()), trace, 0
        )
        res.timings_ms = {"total": (time.perf_counter() - t0) * 1e3}
        return res
