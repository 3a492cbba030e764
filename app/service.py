"""The inference service: loaded models by name; a request in, a packed translation out.

No HTTP here: errors are `ServiceError` subclasses that the routes map to status codes. The
only state shared between requests is the read-only models; each call builds its own tensors.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from app.packing import SCALE, encode_compact, to_nested
from app.schemas import (
    MODEL_NAME_PATTERN,
    Encoding,
    ModelConfigOut,
    ModelOut,
    TranslateBatchIn,
    TranslateBatchOut,
    TranslateIn,
    TranslateOut,
)
from app.settings import Settings
from model.checkpoint import CONFIG, WEIGHTS, BundleError, load_bundle
from model.config import ModelConfig
from model.device import resolve_device
from model.experiment import ATTENTION_KINDS, AttentionKind
from model.tokenizer import TokenizationError, Tokenizer
from model.transformer import ExperimentError
from model.translator import TranslationResult, Translator

log = logging.getLogger(__name__)

_NAME_RE = re.compile(MODEL_NAME_PATTERN)
METRICS = "metrics.json"


class ServiceError(Exception):
    """A request the service cannot serve; the message is user-facing."""


class InputError(ServiceError, ValueError):
    """Bad request content: `field` names the offending field, the message says the limit."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class UnknownModelError(ServiceError, LookupError):
    """A model name that is not among the loaded models."""


class NoModelsError(ServiceError):
    """No model is loaded at all; the message says how to get one."""


class PackOptions(Protocol):
    """What `pack_result` needs from a request: `TranslateIn` and sibling requests provide it."""

    encoding: Encoding
    kinds: list[AttentionKind] | None
    layers: list[int] | None
    heads: list[int] | None


@dataclass(frozen=True)
class LoadedModel:
    """One served model: its translator and the description shown by GET /api/models."""

    name: str
    translator: Translator
    info: ModelOut


# -- loading --------------------------------------------------------------------------------------
def _looks_like_bundle(path: Path) -> bool:
    return (path / CONFIG).is_file() or (path / WEIGHTS).is_file()


def find_bundle_dirs(model_dir: Path) -> list[Path]:
    """`model_dir` itself if it is a bundle, else its bundle subdirectories sorted by name."""
    if _looks_like_bundle(model_dir):
        return [model_dir]
    if not model_dir.is_dir():
        return []
    return sorted(p for p in model_dir.iterdir() if p.is_dir() and _looks_like_bundle(p))


def _read_metrics(bundle_dir: Path) -> dict[str, Any]:
    path = bundle_dir / METRICS
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        log.warning("ignoring unreadable %s: %s", path, e)
        return {}
    return data if isinstance(data, dict) else {}


def _model_info(name: str, translator: Translator, bundle_dir: Path) -> ModelOut:
    bundle, c = translator.bundle, translator.bundle.config
    meta = bundle.metadata
    return ModelOut(
        name=name,
        source_language=str(meta.get("source_language", "en")),
        target_language=str(meta.get("target_language", "de")),
        parameters=bundle.model.num_parameters(),
        config=ModelConfigOut(
            d_model=c.d_model,
            n_heads=c.n_heads,
            n_encoder_layers=c.n_encoder_layers,
            n_decoder_layers=c.n_decoder_layers,
            d_ff=c.d_ff,
            vocab_size=c.vocab_size,
            max_len=c.max_len,
            norm_first=c.norm_first,
        ),
        metrics=_read_metrics(bundle_dir),
        description=str(meta.get("description", "")),
    )


def _serving_name(bundle_name: str, bundle_dir: Path, taken: set[str]) -> str | None:
    """The bundle's own name if it is a safe, unused API name; else its directory's name."""
    for candidate in (bundle_name, bundle_dir.name):
        if _NAME_RE.fullmatch(candidate) and candidate not in taken:
            return candidate
    return None


# -- packing (shared with sibling endpoints, e.g. experiments) ------------------------------------
def layer_counts(config: ModelConfig) -> dict[AttentionKind, int]:
    return {
        "encoder_self": config.n_encoder_layers,
        "decoder_self": config.n_decoder_layers,
        "cross": config.n_decoder_layers,
    }


def requested_kinds(opts: PackOptions) -> list[AttentionKind]:
    return list(ATTENTION_KINDS) if opts.kinds is None else list(opts.kinds)


def check_filters(config: ModelConfig, opts: PackOptions, model_name: str) -> None:
    """Raise InputError when a requested layer or head does not exist in the requested kinds."""
    counts = layer_counts(config)
    kinds = requested_kinds(opts)
    if opts.layers is not None and kinds:
        n = min(counts[k] for k in kinds)
        bad = [i for i in opts.layers if i >= n]
        if bad:
            ranges = ", ".join(f"{k} has layers 0..{counts[k] - 1}" for k in kinds)
            raise InputError(
                "layers",
                f"layer {bad[0]} is out of range for model {model_name!r} ({ranges}); "
                f"valid: 0..{n - 1}",
            )
    if opts.heads is not None:
        bad = [i for i in opts.heads if i >= config.n_heads]
        if bad:
            raise InputError(
                "heads",
                f"head {bad[0]} is out of range for model {model_name!r}, which has "
                f"{config.n_heads} heads; valid: 0..{config.n_heads - 1}",
            )


def _select(maps: torch.Tensor, layers: Sequence[int] | None, heads: Sequence[int] | None):
    """maps [L, 1, H, q, k] -> [L', H', q, k] float32 on the CPU, with the kept indices."""
    m = maps[:, 0]
    layer_idx = list(range(m.size(0))) if layers is None else list(layers)
    head_idx = list(range(m.size(1))) if heads is None else list(heads)
    if layers is not None:
        m = m.index_select(0, torch.tensor(layer_idx, device=m.device))
    if heads is not None:
        m = m.index_select(1, torch.tensor(head_idx, device=m.device))
    return m.to("cpu", torch.float32).numpy(), layer_idx, head_idx


def pack_steps(result: TranslationResult, tokenizer: Tokenizer | None) -> list[dict[str, Any]]:
    """The decoder steps of a result as `StepOut` fields (alternatives with their ids)."""
    return [
        {
            "position": i,
            "token": s.token,
            "token_id": s.token_id,
            "prob": s.prob,
            "alternatives": [
                {
                    "token": tok,
                    "token_id": None if tokenizer is None else tokenizer.hf.token_to_id(tok),
                    "prob": p,
                }
                for tok, p in s.alternatives
            ],
        }
        for i, s in enumerate(result.steps)
    ]


def pack_result(
    result: TranslationResult,
    opts: PackOptions,
    *,
    model_name: str,
    device: str,
    tokenizer: Tokenizer | None = None,
) -> dict[str, Any]:
    """A TranslationResult -> the fields of `TranslateOut` (attention filtered and encoded).

    `timings_ms` gets `pack` (this call) and `total` (the translator's total plus packing).
    Sibling endpoints build their own response from this dict.
    """
    t0 = time.perf_counter()
    tokens_for: dict[AttentionKind, tuple[list[str], list[str]]] = {
        "encoder_self": (result.source_tokens, result.source_tokens),
        "decoder_self": (result.decoder_input_tokens, result.decoder_input_tokens),
        "cross": (result.target_tokens, result.source_tokens),
    }
    attention: dict[str, dict[str, Any]] = {}
    shapes_full: dict[str, list[int]] = {}
    trace = result.trace
    kinds = requested_kinds(opts)
    if trace is not None:
        for kind in ATTENTION_KINDS:
            full = trace.kind(kind)  # [L, 1, H, q, k]
            shapes_full[kind] = [full.size(0), full.size(2), full.size(3), full.size(4)]
        for kind in kinds:
            maps, layer_idx, head_idx = _select(trace.kind(kind), opts.layers, opts.heads)
            query_tokens, key_tokens = tokens_for[kind]
            if maps.shape[2:] != (len(query_tokens), len(key_tokens)):
                raise RuntimeError(
                    f"{kind} maps {maps.shape} do not match {len(query_tokens)} query and "
                    f"{len(key_tokens)} key tokens"
                )
            entry: dict[str, Any] = {
                "kind": kind,
                "encoding": opts.encoding,
                "shape": list(maps.shape),
                "layers": layer_idx,
                "heads": head_idx,
                "query_tokens": query_tokens,
                "key_tokens": key_tokens,
            }
            if opts.encoding == "compact":
                entry["data"], _ = encode_compact(maps)
                entry["dtype"], entry["scale"] = "uint8", SCALE
            else:
                entry["weights"] = to_nested(maps)
            attention[kind] = entry
    steps = pack_steps(result, tokenizer)
    pack_ms = (time.perf_counter() - t0) * 1e3
    timings = result.timings_ms
    return {
        "model": model_name,
        "device": device,
        "translation": result.translation,
        "source_tokens": result.source_tokens,
        "target_tokens": result.target_tokens,
        "decoder_input_tokens": result.decoder_input_tokens,
        "steps": steps,
        "score": result.score,
        "timings_ms": {
            "tokenize": timings.get("tokenize", 0.0),
            "decode": timings.get("decode", 0.0),
            "pack": pack_ms,
            "total": timings.get("total", 0.0) + pack_ms,
        },
        "attention": attention,
        "attention_shapes_full": shapes_full,
    }


# -- the service ----------------------------------------------------------------------------------
class InferenceService:
    """The loaded models by name (read-only after construction) and the request limits."""

    def __init__(self, models: Sequence[LoadedModel], device: str, settings: Settings) -> None:
        self.models: dict[str, LoadedModel] = {m.name: m for m in models}
        self.device = device
        self.settings = settings

    @classmethod
    def from_settings(cls, settings: Settings) -> InferenceService:
        """Load every bundle under `settings.model_dir` onto the resolved device.

        A bundle that fails to load is logged and skipped; an invalid or unavailable device
        raises ValueError (a configuration error: the server should not start).
        """
        device = resolve_device(settings.device)
        if settings.threads > 0:
            torch.set_num_threads(settings.threads)
        models: list[LoadedModel] = []
        for path in find_bundle_dirs(Path(settings.model_dir)):
            try:
                bundle = load_bundle(path, device)
            except BundleError as e:
                log.error("skipping model bundle %s: %s", path, e)
                continue
            name = _serving_name(bundle.name, path, {m.name for m in models})
            if name is None:
                log.error("skipping model bundle %s: its name %r is not usable", path, bundle.name)
                continue
            translator = Translator(bundle, max_tokens=settings.max_tokens)
            models.append(LoadedModel(name, translator, _model_info(name, translator, path)))
        if models:
            log.info(
                "serving %d model(s) on %s: %s",
                len(models),
                device,
                ", ".join(m.name for m in models),
            )
        else:
            log.warning("no model bundle found under %s; %s", settings.model_dir, _HOW_TO_GET)
        return cls(models, str(device), settings)

    @property
    def names(self) -> list[str]:
        return list(self.models)

    def model_infos(self) -> list[ModelOut]:
        return [m.info for m in self.models.values()]

    def get(self, name: str | None) -> LoadedModel:
        """The model called `name` (None = the first). Raises NoModelsError / UnknownModelError."""
        if not self.models:
            raise NoModelsError(
                f"no model is loaded: no model bundle was found under {self.settings.model_dir}. "
                + _HOW_TO_GET
            )
        if name is None:
            return next(iter(self.models.values()))
        # Only names of loaded models are ever looked up; nothing here touches the file system.
        if name not in self.models:
            raise UnknownModelError(f"unknown model {name!r}; available: {', '.join(self.models)}")
        return self.models[name]

    def check_limits(self, req: TranslateIn | TranslateBatchIn) -> None:
        """Raise InputError for a request over the configured limits."""
        s = self.settings
        if isinstance(req, TranslateBatchIn):
            if len(req.texts) > s.max_batch:
                raise InputError(
                    "texts",
                    f"{len(req.texts)} texts; the limit is {s.max_batch} per request (max_batch)",
                )
            texts = {f"texts.{i}": t for i, t in enumerate(req.texts)}
        else:
            texts = {"text": req.text}
        for field, text in texts.items():
            if len(text) > s.max_chars:
                raise InputError(
                    field,
                    f"text has {len(text)} characters; the limit is {s.max_chars} (max_chars)",
                )
        if req.beam_size > s.max_beam:
            raise InputError(
                "beam_size", f"must be between 1 and {s.max_beam} (max_beam), got {req.beam_size}"
            )
        if req.top_k > s.max_top_k:
            raise InputError(
                "top_k", f"must be between 0 and {s.max_top_k} (max_top_k), got {req.top_k}"
            )
        if req.max_length is not None and req.max_length > s.max_tokens:
            raise InputError(
                "max_length",
                f"must be between 1 and {s.max_tokens} (max_tokens), got {req.max_length}",
            )

    def translate(self, req: TranslateIn) -> TranslateOut:
        """Tokenize, decode with the trace, filter and pack one request."""
        t0 = time.perf_counter()
        loaded = self.get(req.model)
        self.check_limits(req)
        check_filters(loaded.translator.bundle.config, req, loaded.name)
        with torch.inference_mode():
            try:
                result = loaded.translator.translate(
                    req.text,
                    beam_size=req.beam_size,
                    max_len=req.max_length,
                    top_k=req.top_k,
                    alpha=req.alpha,
                    need_trace=bool(requested_kinds(req)),
                )[0]
            except TokenizationError as e:
                raise InputError("text", str(e)) from e
            except ExperimentError as e:
                raise InputError("experiment", str(e)) from e
            packed = pack_result(
                result,
                req,
                model_name=loaded.name,
                device=self.device,
                tokenizer=loaded.translator.tokenizer,
            )
        packed["timings_ms"]["total"] = (time.perf_counter() - t0) * 1e3
        return TranslateOut.model_validate(packed)

    def translate_batch(self, req: TranslateBatchIn) -> TranslateBatchOut:
        """Decode several texts in one batch, without traces; results in input order."""
        t0 = time.perf_counter()
        loaded = self.get(req.model)
        self.check_limits(req)
        translator = loaded.translator
        # Tokenize each text first, so that an error names the text it is about.
        for i, text in enumerate(req.texts):
            try:
                translator.tokenizer.encode(text, max_tokens=translator.max_tokens)
            except TokenizationError as e:
                raise InputError(f"texts.{i}", str(e)) from e
        with torch.inference_mode():
            results = translator.translate(
                req.texts,
                beam_size=req.beam_size,
                max_len=req.max_length,
                top_k=req.top_k,
                alpha=req.alpha,
                need_trace=False,
            )
        t1 = time.perf_counter()
        items = [
            {
                "text": r.text,
                "translation": r.translation,
                "source_tokens": r.source_tokens,
                "target_tokens": r.target_tokens,
                "steps": pack_steps(r, translator.tokenizer),
                "score": r.score,
            }
            for r in results
        ]
        return TranslateBatchOut.model_validate(
            {
                "model": loaded.name,
                "device": self.device,
                "results": items,
                "timings_ms": {
                    "decode": (t1 - t0) * 1e3,
                    "total": (time.perf_counter() - t0) * 1e3,
                },
            }
        )


_HOW_TO_GET = (
    "Train one with `attnscope train` (see the README), or point ATTNSCOPE_MODEL_DIR or "
    "`attnscope serve --model DIR` at a bundle directory (or a directory of bundles)."
)
