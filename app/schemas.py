"""Request (`*In`) and response (`*Out`) models of the JSON API.

Static checks (types, lower bounds, allowed words) live here; limits that come from the settings
(max_chars, max_beam, ...) or from the chosen model (layer and head counts) are checked by the
service, which raises `InputError` naming the field and the limit.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from model.experiment import ATTENTION_KINDS, AttentionKind

Encoding = Literal["nested", "compact"]

#: Model names as the API accepts them: no "/", no leading "." (so never "..").
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$"


class ErrorOut(BaseModel):
    """Every 4xx/5xx answer: `detail` is one readable sentence naming the field and the limit."""

    detail: str = Field(examples=["beam_size: must be at most 8 (max_beam)"])
    errors: list[dict[str, Any]] | None = Field(
        default=None, description="For 422 from request validation: pydantic's error list."
    )


class ModelConfigOut(BaseModel):
    d_model: int
    n_heads: int
    n_encoder_layers: int
    n_decoder_layers: int
    d_ff: int
    vocab_size: int
    max_len: int
    norm_first: bool


class ModelOut(BaseModel):
    name: str
    source_language: str
    target_language: str
    parameters: int = Field(description="Number of trainable parameters.")
    config: ModelConfigOut
    metrics: dict[str, Any] = Field(
        default_factory=dict, description="The bundle's metrics.json (BLEU, chrF, ...) or {}."
    )
    description: str = ""


class HealthOut(BaseModel):
    status: Literal["ok", "no_models"]
    version: str
    device: str
    models: list[str]


def clean_text(v: str, field: str = "text") -> str:
    """Strip; refuse empty text and text that is not valid Unicode (lone surrogates)."""
    v = v.strip()
    if not v:
        raise PydanticCustomError("empty_text", "{field} must not be empty", {"field": field})
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:  # JSON "\ud800": a lone surrogate, not a character
        raise PydanticCustomError(
            "invalid_text",
            "{field} must be valid Unicode; it has a lone surrogate at {pos}",
            {"field": field, "pos": e.start},
        ) from None
    return v


#: One sentence of a list: stripped, not empty (errors name the index, e.g. `texts.1`).
ItemText = Annotated[str, AfterValidator(clean_text)]


class DecodingIn(BaseModel):
    """What every translate request shares: the model and how to decode."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(
        default=None,
        pattern=MODEL_NAME_PATTERN,
        description="A name from GET /api/models; default: the first model.",
    )
    beam_size: int = Field(default=1, ge=1, description="1 = greedy; at most max_beam (8).")
    max_length: int | None = Field(
        default=None, ge=1, description="Most target tokens; at most max_tokens (256)."
    )
    alpha: float = Field(
        default=0.6, ge=0.0, le=2.0, allow_inf_nan=False, description="Beam length penalty."
    )


class TranslateIn(DecodingIn):
    """One sentence to translate, how to decode it and which attention maps to return."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"text": "The cat is sleeping on the sofa.", "beam_size": 4}]
        },
    )

    text: str = Field(
        description="English input; surrounding whitespace is stripped; 1..max_chars characters "
        "(default 1000) and at most max_tokens tokens.",
        examples=["The cat is sleeping on the sofa."],
    )
    top_k: int = Field(
        default=5, ge=0, description="Alternatives reported per step; at most max_top_k (20)."
    )
    encoding: Encoding = Field(
        default="nested",
        description='"nested": weights as lists [layer][head][query][key] rounded to 4 '
        'decimals; "compact": base64 of uint8 round(w*255) in C order.',
    )
    kinds: list[AttentionKind] | None = Field(
        default=None,
        description="Attention kinds to return; default all; [] returns no maps (faster).",
    )
    layers: list[int] | None = Field(
        default=None, min_length=1, description="Layer indices (0-based) to keep; default all."
    )
    heads: list[int] | None = Field(
        default=None, min_length=1, description="Head indices (0-based) to keep; default all."
    )

    @field_validator("text")
    @classmethod
    def _strip_text(cls, v: str) -> str:
        return clean_text(v)

    @field_validator("kinds")
    @classmethod
    def _unique_kinds(cls, v: list[AttentionKind] | None) -> list[AttentionKind] | None:
        # Canonical order, duplicates dropped, so responses do not depend on the request's order.
        return None if v is None else [k for k in ATTENTION_KINDS if k in v]

    @field_validator("layers", "heads")
    @classmethod
    def _sorted_unique(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return None
        if min(v) < 0:
            raise PydanticCustomError("negative_index", "indices must be >= 0")
        return sorted(set(v))


class AlternativeOut(BaseModel):
    token: str
    token_id: int | None = None
    prob: float


class StepOut(BaseModel):
    position: int = Field(description="0-based index into target_tokens.")
    token: str
    token_id: int
    prob: float = Field(description="Probability the model gave the chosen token.")
    alternatives: list[AlternativeOut] = Field(description="top_k most probable tokens.")


class AttentionMapOut(BaseModel):
    """The maps of one attention kind after the layer/head filters, shape [L, H, q, k]."""

    kind: AttentionKind
    encoding: Encoding
    shape: list[int] = Field(description="[layers, heads, queries, keys] after filtering.")
    layers: list[int] = Field(description="Layer index (0-based) of each entry along axis 0.")
    heads: list[int] = Field(description="Head index (0-based) of each entry along axis 1.")
    query_tokens: list[str]
    key_tokens: list[str]
    weights: list[list[list[list[float]]]] | None = Field(
        default=None, description='encoding "nested": [layer][head][query][key], 4 decimals.'
    )
    data: str | None = Field(
        default=None, description='encoding "compact": base64 uint8, C order; w = byte / scale.'
    )
    dtype: Literal["uint8"] | None = None
    scale: int | None = None


class TimingsOut(BaseModel):
    tokenize: float
    decode: float
    pack: float
    total: float


class TranslateOut(BaseModel):
    model: str
    device: str
    translation: str
    source_tokens: list[str]
    target_tokens: list[str] = Field(description="Produced tokens y1..yT, ending with </s>.")
    decoder_input_tokens: list[str] = Field(description="<s> y1..y(T-1): the decoder's inputs.")
    steps: list[StepOut]
    score: float
    timings_ms: TimingsOut
    attention: dict[AttentionKind, AttentionMapOut] = Field(
        description="Requested kinds. Rows/cols: encoder_self source/source; decoder_self "
        "decoder_input/decoder_input; cross target/source."
    )
    attention_shapes_full: dict[AttentionKind, list[int]] = Field(
        default_factory=dict, description="[L, H, q, k] of every kind before filtering."
    )


class TranslateBatchIn(DecodingIn):
    """Several sentences decoded together (one batched beam search): translations, tokens and
    steps, without attention maps (ask /api/translate for one sentence's maps)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"texts": ["Good morning!", "Where is the station?"], "beam_size": 4}]
        },
    )

    texts: list[ItemText] = Field(
        min_length=1,
        description="1..max_batch (default 16) English inputs, each like /api/translate's text.",
        examples=[["Good morning!", "Where is the station?"]],
    )
    top_k: int = Field(
        default=0, ge=0, description="Alternatives reported per step; at most max_top_k (20)."
    )


class BatchItemOut(BaseModel):
    text: str = Field(description="The input as translated (stripped).")
    translation: str
    source_tokens: list[str]
    target_tokens: list[str] = Field(description="Produced tokens y1..yT, ending with </s>.")
    steps: list[StepOut]
    score: float = Field(description="Sum of the output tokens' log-probabilities.")


class BatchTimingsOut(BaseModel):
    decode: float = Field(description="Tokenizing and decoding the whole batch.")
    total: float


class TranslateBatchOut(BaseModel):
    model: str
    device: str
    results: list[BatchItemOut] = Field(description="One per input text, in input order.")
    timings_ms: BatchTimingsOut
