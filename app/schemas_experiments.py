"""Request (`*In`) and response (`*Out`) models of the experiments API (positional encoding,
order, masks, heads and scaling).

As in `app.schemas`: static checks (types, bounds, allowed words) live here; limits that come from
the settings or from the chosen model (layer and head counts, the sentence's length) are checked by
`app.experiments`, which raises `InputError` naming the field, e.g. `experiment.silence[0].head`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator
from pydantic_core import PydanticCustomError

from app.schemas import MODEL_NAME_PATTERN, ItemText, TranslateIn, TranslateOut, clean_text
from model.experiment import AttentionKind, Experiment, HeadRef

MaskFill = Literal["-inf", "-1e9", "-1e-12"]
#: The fill values offered, as the API spells them, and the float each one means.
MASK_FILLS: dict[str, float] = {"-inf": -math.inf, "-1e9": -1e9, "-1e-12": -1e-12}

Matrix = list[list[float]]


# -- the experiment -------------------------------------------------------------------------------
class HeadRefIn(BaseModel):
    """One attention head (all indices 0-based)."""

    model_config = ConfigDict(extra="forbid")

    kind: AttentionKind
    layer: int = Field(ge=0, description="Layer index; < the kind's layer count.")
    head: int = Field(ge=0, description="Head index; < the model's head count.")


class ExperimentSpec(BaseModel):
    """What to change in the paper's computation. The defaults are the paper (no change)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"hide_source": [1]},
                {"silence": [{"kind": "cross", "layer": 0, "head": 2}]},
                {"scale_scores": False, "temperature": 2.0},
            ]
        },
    )

    positional_encoding: StrictBool = Field(
        default=True, description="Add the sinusoidal positional encoding to the embeddings."
    )
    scale_scores: StrictBool = Field(default=True, description="Divide q·k by sqrt(d_k).")
    temperature: float = Field(
        default=1.0,
        ge=0.05,
        le=20.0,
        allow_inf_nan=False,
        description="Divide every score by this (after the scaling): > 1 flattens, < 1 sharpens.",
    )
    mask_fill: MaskFill = Field(
        default="-inf",
        description='Value written into masked scores before the softmax: "-inf" (the paper), '
        '"-1e9" (the same maps) or "-1e-12" (masks nothing: weight leaks onto masked keys).',
    )
    mask_mode: Literal["fill", "renormalize"] = Field(
        default="fill",
        description='"fill": mask before the softmax; "renormalize": zero masked weights after '
        "it and renormalise each row (the same maps).",
    )
    causal_mask: StrictBool = Field(default=True, description="Apply the look-ahead mask.")
    padding_mask: StrictBool = Field(default=True, description="Apply the padding mask.")
    hide_source: list[int] = Field(
        default_factory=list,
        max_length=256,
        description="Source positions (0-based) no query may attend to, in encoder "
        "self-attention and cross-attention; at least one must stay visible.",
    )
    silence: list[HeadRefIn] = Field(
        default_factory=list,
        max_length=256,
        description="Heads whose output is replaced by zeros before the output projection.",
    )

    @field_validator("mask_fill", mode="before")
    @classmethod
    def _fill_as_number(cls, v: Any) -> Any:
        # JSON has no -inf, but -1e9 and -1e-12 are also accepted as numbers.
        if isinstance(v, int | float) and not isinstance(v, bool):
            for name, value in MASK_FILLS.items():
                if v == value:
                    return name
        return v

    @field_validator("hide_source")
    @classmethod
    def _positions(cls, v: list[int]) -> list[int]:
        if v and min(v) < 0:
            raise PydanticCustomError("negative_index", "positions must be >= 0")
        return sorted(set(v))

    def to_experiment(self) -> Experiment:
        return Experiment(
            positional_encoding=self.positional_encoding,
            scale_scores=self.scale_scores,
            temperature=self.temperature,
            mask_fill=MASK_FILLS[self.mask_fill],
            mask_mode=self.mask_mode,
            causal_mask=self.causal_mask,
            padding_mask=self.padding_mask,
            hide_source=tuple(self.hide_source),
            silence=tuple(HeadRef(r.kind, r.layer, r.head) for r in self.silence),
        )


# -- POST /api/experiment -------------------------------------------------------------------------
class ExperimentIn(TranslateIn):
    """A translate request plus an experiment, and optionally a target to force."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "text": "The cat is sleeping on the sofa.",
                    "experiment": {"silence": [{"kind": "cross", "layer": 0, "head": 1}]},
                },
                {
                    "text": "I go home.",
                    "target": "Ich gehe nach Hause.",
                    "experiment": {"causal_mask": False},
                },
            ]
        },
    )

    target: str | None = Field(
        default=None,
        description="German text to force (teacher forcing) instead of decoding; at most "
        "max_chars characters and max_tokens tokens.",
    )
    experiment: ExperimentSpec = Field(
        default_factory=ExperimentSpec,
        description="What to change; every field defaults to the paper. Indices are checked "
        "against the model (layers, heads) and the sentence (hide_source).",
    )

    @field_validator("target")
    @classmethod
    def _strip_target(cls, v: str | None) -> str | None:
        return None if v is None else clean_text(v, "target")


class TokenScoreOut(BaseModel):
    position: int
    token: str
    baseline: float = Field(description="log p(token) under the paper's computation.")
    experiment: float = Field(description="log p(token) under the experiment.")


class KindDiffOut(BaseModel):
    """One attention kind: baseline vs the experiment on the same tokens (`aligned`)."""

    max_abs_diff: float = Field(description="max |experiment - baseline| over every map.")
    leaked_mass_max: float = Field(
        description="Largest attention mass a row puts on masked keys (the paper's masks plus "
        "the hidden source positions): 0 when masking works."
    )
    leaked_mass: list[list[list[float]]] = Field(description="[layer][head][query] of it.")
    entropy_baseline: Matrix = Field(description="[layer][head] mean row entropy in bits.")
    entropy_experiment: Matrix


class DiffOut(BaseModel):
    translation_changed: bool
    changed_positions: list[int] = Field(
        description="Positions of experiment.target_tokens that differ from the baseline's."
    )
    baseline_logprob: float = Field(description="log p(baseline output) under the paper.")
    baseline_logprob_under_experiment: float = Field(
        description="log p(baseline output) under the experiment (teacher forcing)."
    )
    logprob_change: float = Field(description="The second minus the first.")
    tokens: list[TokenScoreOut] = Field(description="Per token of the baseline output.")
    kinds: dict[AttentionKind, KindDiffOut]


class ExperimentOut(BaseModel):
    mode: Literal["decode", "force"] = Field(
        description='"decode": both runs decode; "force": both read the given target.'
    )
    applied: ExperimentSpec = Field(description="The experiment as it was run (normalised).")
    baseline: TranslateOut = Field(description="The paper's computation: as POST /api/translate.")
    experiment: TranslateOut = Field(description="The same request under the experiment.")
    aligned: TranslateOut | None = Field(
        default=None,
        description='mode "decode": the baseline\'s output tokens teacher-forced under the '
        "experiment, so its maps have the baseline's shapes and diff cell by cell; its steps "
        'give each baseline token\'s probability under the experiment. null in mode "force" '
        "(there `experiment` already reads the baseline's tokens).",
    )
    diff: DiffOut


# -- positional encoding --------------------------------------------------------------------------
class PositionalOut(BaseModel):
    positions: int
    d_model: int
    model_d_model: int | None = Field(description="d_model of the chosen model, if one is loaded.")
    matrix: Matrix = Field(description="[position][dimension] PE values, 4 decimals.")
    dims: list[int]
    curves: Matrix = Field(description="[chosen dimension][position].")
    wavelengths: list[float] = Field(description="Wavelength in positions of each chosen dim.")
    similarity: Matrix = Field(description="[p][q] = PE(p)·PE(q); depends only on p - q.")


class SentenceIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"text": "I go home."}]}
    )

    text: str = Field(description="English input, 1..max_chars characters.")
    model: str | None = Field(default=None, pattern=MODEL_NAME_PATTERN)

    @field_validator("text")
    @classmethod
    def _strip(cls, v: str) -> str:
        return clean_text(v, "text")


class SentenceVectorsOut(BaseModel):
    model: str
    tokens: list[str]
    d_model: int
    embedding: Matrix = Field(description="[token][dim] embedding * sqrt(d_model).")
    positional: Matrix = Field(description="[token][dim] PE(position).")
    total: Matrix = Field(description="[token][dim] their sum: the first layer's input.")
    norms: dict[Literal["embedding", "positional", "total"], list[float]] = Field(
        description="L2 norm per token of each."
    )


# -- order ----------------------------------------------------------------------------------------
class OrderIn(SentenceIn):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"text": "I go home.", "permutation": [0, 2, 1, 3, 4]}]},
    )

    permutation: list[int] | None = Field(
        default=None,
        max_length=256,
        description="New order of the source tokens: position j gets token permutation[j]. "
        "Default: every token before </s> reversed.",
    )
    beam_size: int = Field(default=1, ge=1, description="At most max_beam.")


class OrderTranslationOut(BaseModel):
    translation: str
    target_tokens: list[str]


class OrderRunOut(BaseModel):
    positional_encoding: bool
    original: OrderTranslationOut
    permuted: OrderTranslationOut
    same_translation: bool
    encoder_max_diff: float = Field(
        description="max |enc(permuted)[j] - enc(original)[permutation[j]]|: ~1e-6 without "
        "positional encoding (the same vectors, permuted)."
    )
    encoder_position_diff: list[float] = Field(description="That maximum per position j.")


class OrderOut(BaseModel):
    model: str
    source_tokens: list[str]
    permutation: list[int]
    permuted_tokens: list[str]
    runs: list[OrderRunOut] = Field(description="With positional encoding, then without.")


# -- masks ----------------------------------------------------------------------------------------
class MasksIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"texts": ["The cat is sleeping on the sofa.", "I go home."]}]
        },
    )

    texts: list[ItemText] = Field(
        min_length=2, max_length=4, description="2..4 English sentences, padded into one batch."
    )
    targets: list[ItemText] | None = Field(
        default=None,
        description="One German reference per text, forced through the decoder; default: "
        "each text's greedy translation.",
    )
    model: str | None = Field(default=None, pattern=MODEL_NAME_PATTERN)
    layer: int = Field(default=0, ge=0, description="Decoder/encoder layer of the maps shown.")
    head: int = Field(default=0, ge=0, description="Head of the maps shown.")
    item: int = Field(default=0, ge=0, description="Batch item of the causal-mask experiment.")


class MaskShapeOut(BaseModel):
    name: str
    shape: list[int]
    broadcasts_to: list[int] = Field(description="The scores it is applied to [B, H, q, k].")
    note: str


class MaskViewsOut(BaseModel):
    source_padding: list[list[bool]] = Field(description="[item][source position]")
    target_padding: list[list[bool]] = Field(description="[item][decoder position]")
    causal: list[list[bool]] = Field(description="[query][key]")
    combined: dict[AttentionKind, list[list[list[bool]]]] = Field(
        description="Per kind, [item][query][key]: what each query may see (broadcast)."
    )
    shapes: list[MaskShapeOut]


class FillKindOut(BaseModel):
    maps: list[Matrix] = Field(description="[item][query][key] at the chosen layer and head.")
    leaked: Matrix = Field(description="[item][query] mass on masked keys, chosen layer/head.")
    leaked_max: float = Field(description="Largest leaked mass over every layer, head and row.")
    max_abs_diff_vs_inf: float = Field(description='max |maps - maps with "-inf"|, all maps.')


class FillOut(BaseModel):
    mask_fill: MaskFill
    kinds: dict[AttentionKind, FillKindOut]


class CausalOut(BaseModel):
    item: int
    decoder_input_tokens: list[str]
    target_tokens: list[str]
    masked: Matrix = Field(description="Decoder self-attention [query][key], causal mask on.")
    unmasked: Matrix = Field(description="The same with the causal mask off.")
    future_mass: list[float] = Field(description="Per query, weight on later positions (off).")
    future_mass_max: float = Field(description="Largest of it over every layer and head.")
    prob_masked: list[float] = Field(description="p(reference token) per position, mask on.")
    prob_unmasked: list[float] = Field(description="The same with the causal mask off.")


class MasksOut(BaseModel):
    model: str
    layer: int
    head: int
    n_heads: int
    source_tokens: list[list[str]] = Field(description="[item][position], padded with <pad>.")
    decoder_input_tokens: list[list[str]] = Field(description="[item][position], padded.")
    target_tokens: list[list[str]] = Field(description="[item][position] y1..yT, padded.")
    source_lengths: list[int]
    target_lengths: list[int]
    masks: MaskViewsOut
    fills: list[FillOut]
    renormalize_max_abs_diff: dict[AttentionKind, float] = Field(
        description="max |fill(-inf) - renormalize| per kind over every map: ~1e-7."
    )
    causal: CausalOut


# -- scaling --------------------------------------------------------------------------------------
class SaturationOut(BaseModel):
    scores: list[float] = Field(description="The score vector (zero mean, unit spread).")
    spreads: list[float]
    probs: Matrix = Field(description="[spread][score] softmax(spread * scores).")
    max_weight: list[float]
    entropy: list[float] = Field(description="Bits, per spread.")


class ScalingOut(BaseModel):
    d_k: list[int]
    samples: int
    seed: int
    variance_raw: list[float] = Field(description="Var(q·k) for q, k ~ N(0, I): about d_k.")
    variance_scaled: list[float] = Field(description="Var(q·k / sqrt(d_k)): about 1.")
    saturation: SaturationOut
