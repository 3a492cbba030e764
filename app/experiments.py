"""The experiments service: requests of the experiment pages in, model calls, packed answers out.

Every function takes the read-only `InferenceService` and a request, builds its own tensors and
`Experiment`s, and shares nothing between calls, so concurrent requests never affect each other.
The numbers come from `model.analysis`; this module validates against the settings and the chosen
model (raising `InputError` naming the field), runs the model and packs arrays. No HTTP here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import torch
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.packing import to_nested
from app.schemas import TranslateOut
from app.schemas_experiments import (
    MASK_FILLS,
    CausalOut,
    DiffOut,
    ExperimentIn,
    ExperimentOut,
    ExperimentSpec,
    FillKindOut,
    FillOut,
    KindDiffOut,
    MaskShapeOut,
    MasksIn,
    MasksOut,
    MaskViewsOut,
    OrderIn,
    OrderOut,
    OrderRunOut,
    OrderTranslationOut,
    PositionalOut,
    SaturationOut,
    ScalingOut,
    SentenceIn,
    SentenceVectorsOut,
    TokenScoreOut,
)
from app.service import (
    InferenceService,
    InputError,
    LoadedModel,
    NoModelsError,
    check_filters,
    layer_counts,
    pack_result,
    requested_kinds,
)
from model import analysis
from model.config import ModelConfig
from model.decode import decoder_inputs
from model.experiment import ATTENTION_KINDS, PAPER, Experiment
from model.positional import sinusoidal_encoding
from model.tokenizer import TokenizationError
from model.transformer import ExperimentError
from model.translator import TranslationResult, Translator


class ExperimentSettings(BaseSettings):
    """Limits of the experiment endpoints (env prefix `ATTNSCOPE_`, like `app.settings`)."""

    model_config = SettingsConfigDict(env_prefix="ATTNSCOPE_", extra="ignore", frozen=True)

    max_pe_positions: int = Field(default=200, ge=1, description="Most positions of /positional.")
    max_pe_d_model: int = Field(default=512, ge=2, description="Largest d_model of /positional.")
    max_pe_dims: int = Field(default=8, ge=1, description="Most dimensions drawn as curves.")
    max_dk: int = Field(default=1024, ge=1, description="Largest d_k of /scaling.")
    max_dk_points: int = Field(default=16, ge=1, description="Most d_k values of /scaling.")
    max_samples: int = Field(default=4000, ge=2, description="Most (q, k) samples per d_k.")
    max_spreads: int = Field(default=24, ge=1, description="Most spreads of the softmax plot.")
    max_scores: int = Field(default=64, ge=2, description="Longest score vector of that plot.")


@lru_cache
def get_experiment_settings() -> ExperimentSettings:
    """The process-wide limits from the environment (cached; tests may override the dependency)."""
    return ExperimentSettings()


def _r(x: float, digits: int = 6) -> float:
    return round(float(x), digits)


def _encode(tr: Translator, text: str, field: str) -> list[int]:
    try:
        return tr.tokenizer.encode(text, max_tokens=tr.max_tokens)
    except TokenizationError as e:
        raise InputError(field, str(e)) from e


def _check_chars(service: InferenceService, text: str, field: str) -> None:
    limit = service.settings.max_chars
    if len(text) > limit:
        raise InputError(
            field, f"{field} has {len(text)} characters; the limit is {limit} (max_chars)"
        )


def check_experiment_fits(config: ModelConfig, spec: ExperimentSpec, source_len: int) -> None:
    """Raise InputError (naming e.g. `experiment.silence[1].head`) when the experiment names
    heads, layers or source positions that this model or this sentence does not have."""
    counts = layer_counts(config)
    for i, ref in enumerate(spec.silence):
        n = counts[ref.kind]
        if ref.layer >= n:
            raise InputError(
                f"experiment.silence[{i}].layer",
                f"{ref.kind} layer {ref.layer} does not exist: the model has {n} layers "
                f"(0..{n - 1})",
            )
        if ref.head >= config.n_heads:
            raise InputError(
                f"experiment.silence[{i}].head",
                f"head {ref.head} does not exist: the model has {config.n_heads} heads "
                f"(0..{config.n_heads - 1})",
            )
    bad = [p for p in spec.hide_source if p >= source_len]
    if bad:
        raise InputError(
            "experiment.hide_source",
            f"positions {bad} are outside the source, which has {source_len} tokens "
            f"(0..{source_len - 1}, </s> included)",
        )
    if len(spec.hide_source) >= source_len:
        raise InputError(
            "experiment.hide_source",
            f"cannot hide every source token (all {source_len}): a query with no visible key "
            "has no softmax (its weights would be 0/0); leave at least one token visible",
        )


def _pack(
    result: TranslationResult, req: ExperimentIn, loaded: LoadedModel, device: str
) -> TranslateOut:
    if not requested_kinds(req):
        # As /api/translate with kinds=[]: no maps and no shapes (the trace is only for the diff).
        result = dataclasses.replace(result, trace=None)
    packed = pack_result(
        result, req, model_name=loaded.name, device=device, tokenizer=loaded.translator.tokenizer
    )
    return TranslateOut.model_validate(packed)


def _diff(
    model: Any,
    baseline: TranslationResult,
    experiment_run: TranslationResult,
    aligned: TranslationResult,
    experiment: Experiment,
) -> DiffOut:
    """Compare the baseline with the experiment: decoded tokens, the log-probability of the
    baseline's output under both, and per kind the maps, leaked mass and entropy (baseline vs
    `aligned`, the experiment reading the baseline's own tokens, so the shapes agree)."""
    src = torch.tensor([baseline.source_ids], dtype=torch.long, device=model.device)
    out_ids = baseline.target_ids
    (lp_base,) = analysis.token_logprobs(model, src, [out_ids], PAPER)
    (lp_exp,) = analysis.token_logprobs(model, src, [out_ids], experiment)
    # The masks a row should respect: the paper's, plus the source positions the user hid.
    reference = PAPER.with_changes(hide_source=experiment.hide_source)
    masks = analysis.batch_masks(model, src, decoder_inputs(model, [out_ids]), reference)
    kinds = {}
    assert baseline.trace is not None and aligned.trace is not None
    for kind in ATTENTION_KINDS:
        base_maps = baseline.trace.kind(kind)  # [L, 1, H, q, k]
        exp_maps = aligned.trace.kind(kind)
        allowed = masks.kind(kind)
        leaked = analysis.leaked_mass(exp_maps, None if allowed is None else allowed[None])
        kinds[kind] = KindDiffOut(
            max_abs_diff=_r(analysis.max_abs_diff(base_maps, exp_maps)),
            leaked_mass_max=_r(leaked.max()) if leaked.numel() else 0.0,
            leaked_mass=to_nested(leaked[:, 0], 5),
            entropy_baseline=to_nested(analysis.attention_entropy(base_maps[:, 0])),
            entropy_experiment=to_nested(analysis.attention_entropy(exp_maps[:, 0])),
        )
    base_tokens, exp_tokens = baseline.target_tokens, experiment_run.target_tokens
    changed = [i for i, t in enumerate(exp_tokens) if i >= len(base_tokens) or t != base_tokens[i]]
    total_base, total_exp = float(lp_base.sum()), float(lp_exp.sum())
    return DiffOut(
        translation_changed=experiment_run.target_ids != baseline.target_ids,
        changed_positions=changed,
        baseline_logprob=_r(total_base),
        baseline_logprob_under_experiment=_r(total_exp),
        logprob_change=_r(total_exp - total_base),
        tokens=[
            TokenScoreOut(position=i, token=tok, baseline=_r(b), experiment=_r(e))
            for i, (tok, b, e) in enumerate(
                zip(baseline.target_tokens, lp_base.tolist(), lp_exp.tolist(), strict=True)
            )
        ],
        kinds=kinds,
    )


def run_experiment(service: InferenceService, req: ExperimentIn) -> ExperimentOut:
    """The baseline (paper) and the experiment for one sentence, decoded or teacher-forced,
    packed like /api/translate, with the diff."""
    loaded = service.get(req.model)
    service.check_limits(req)
    tr = loaded.translator
    config = tr.bundle.config
    check_filters(config, req, loaded.name)
    source_ids = _encode(tr, req.text, "text")
    target_ids = None
    if req.target is not None:
        _check_chars(service, req.target, "target")
        target_ids = _encode(tr, req.target, "target")
    check_experiment_fits(config, req.experiment, len(source_ids))
    experiment = req.experiment.to_experiment()
    need_maps = bool(requested_kinds(req))
    with torch.inference_mode():
        try:
            if target_ids is not None:
                baseline = tr.force(req.text, target_ids, PAPER, top_k=req.top_k)
                result = tr.force(req.text, target_ids, experiment, top_k=req.top_k)
                aligned = None
            else:
                args = dict(
                    beam_size=req.beam_size,
                    max_len=req.max_length,
                    top_k=req.top_k,
                    alpha=req.alpha,
                )
                (baseline,) = tr.translate(req.text, experiment=PAPER, need_trace=True, **args)
                (result,) = tr.translate(
                    req.text, experiment=experiment, need_trace=need_maps, **args
                )
                aligned = tr.force(req.text, baseline.target_ids, experiment, top_k=req.top_k)
        except TokenizationError as e:
            raise InputError("text", str(e)) from e
        except ExperimentError as e:  # check_experiment_fits should have caught it first
            raise InputError("experiment", str(e)) from e
        diff = _diff(tr.model, baseline, result, aligned or result, experiment)
        device = service.device
        return ExperimentOut(
            mode="force" if target_ids is not None else "decode",
            applied=req.experiment,
            baseline=_pack(baseline, req, loaded, device),
            experiment=_pack(result, req, loaded, device),
            aligned=None if aligned is None else _pack(aligned, req, loaded, device),
            diff=diff,
        )


# -- positional encoding --------------------------------------------------------------------------
def default_dims(d_model: int) -> list[int]:
    """A sine and a cosine of the fastest pair, then sines of ever slower pairs."""
    dims = {0, 1, 2 * (d_model // 16), 2 * (d_model // 8), 2 * (d_model // 4)}
    return sorted(d for d in dims if d < d_model)


def _model_d(service: InferenceService, model: str | None) -> int | None:
    try:
        return service.get(model).translator.bundle.config.d_model
    except NoModelsError:
        if model is not None:
            raise
        return None


def positional(
    service: InferenceService,
    limits: ExperimentSettings,
    positions: int,
    d_model: int | None,
    dims: Sequence[int] | None,
    model: str | None,
) -> PositionalOut:
    """The encoding matrix, chosen dimensions as curves and the position similarity."""
    model_d = _model_d(service, model)
    d = d_model or model_d or 64
    if positions > limits.max_pe_positions:
        raise InputError(
            "positions",
            f"must be between 1 and {limits.max_pe_positions} (max_pe_positions), got {positions}",
        )
    if d > limits.max_pe_d_model:
        raise InputError(
            "d_model", f"must be between 2 and {limits.max_pe_d_model} (max_pe_d_model), got {d}"
        )
    chosen = default_dims(d) if not dims else sorted(set(dims))
    if len(chosen) > limits.max_pe_dims:
        raise InputError(
            "dims", f"at most {limits.max_pe_dims} dimensions (max_pe_dims), got {len(chosen)}"
        )
    bad = [i for i in chosen if not 0 <= i < d]
    if bad:
        raise InputError("dims", f"dimension {bad[0]} is outside 0..{d - 1} (d_model {d})")
    pe = sinusoidal_encoding(positions, d)  # [P, D]
    return PositionalOut(
        positions=positions,
        d_model=d,
        model_d_model=model_d,
        matrix=to_nested(pe),
        dims=chosen,
        curves=to_nested(analysis.dimension_curves(pe, chosen)),
        wavelengths=[_r(w, 3) for w in analysis.wavelengths(d)[chosen].tolist()],
        similarity=to_nested(analysis.position_similarity(pe)),
    )


def sentence_vectors(service: InferenceService, req: SentenceIn) -> SentenceVectorsOut:
    loaded = service.get(req.model)
    _check_chars(service, req.text, "text")
    tr = loaded.translator
    ids = _encode(tr, req.text, "text")
    with torch.inference_mode():
        v = analysis.sentence_vectors(tr.model, ids)
        norms = v.norms()
    return SentenceVectorsOut(
        model=loaded.name,
        tokens=tr.tokenizer.tokens(ids),
        d_model=tr.model.config.d_model,
        embedding=to_nested(v.embedding),
        positional=to_nested(v.positional),
        total=to_nested(v.total),
        norms={k: to_nested(n) for k, n in norms.items()},  # type: ignore[misc]
    )


# -- order ----------------------------------------------------------------------------------------
def default_permutation(n: int) -> list[int]:
    """Every token before </s> in reverse order; </s> stays last."""
    return [*range(n - 2, -1, -1), n - 1] if n > 1 else [0]


def order(service: InferenceService, req: OrderIn) -> OrderOut:
    """Translate a sentence and a reordering of its tokens with positional encoding on and off,
    and compare the encoder outputs (un-permuted)."""
    loaded = service.get(req.model)
    _check_chars(service, req.text, "text")
    if req.beam_size > service.settings.max_beam:
        raise InputError(
            "beam_size",
            f"must be between 1 and {service.settings.max_beam} (max_beam), got {req.beam_size}",
        )
    tr = loaded.translator
    ids = _encode(tr, req.text, "text")
    perm = req.permutation if req.permutation is not None else default_permutation(len(ids))
    try:
        analysis.check_permutation(perm, len(ids))
    except ValueError as e:
        raise InputError("permutation", f"{e} (the sentence has {len(ids)} tokens)") from e
    permuted = [ids[p] for p in perm]
    runs = []
    with torch.inference_mode():
        for pe in (True, False):
            exp = PAPER if pe else Experiment(positional_encoding=False)
            kw = dict(beam_size=req.beam_size, top_k=0, experiment=exp, need_trace=False)
            a = tr.translate_ids(ids, **kw)
            b = tr.translate_ids(permuted, **kw)
            cmp = analysis.order_difference(tr.model, ids, perm, exp)
            runs.append(
                OrderRunOut(
                    positional_encoding=pe,
                    original=OrderTranslationOut(
                        translation=a.translation, target_tokens=a.target_tokens
                    ),
                    permuted=OrderTranslationOut(
                        translation=b.translation, target_tokens=b.target_tokens
                    ),
                    same_translation=a.target_ids == b.target_ids,
                    encoder_max_diff=float(cmp.max_diff),
                    encoder_position_diff=[float(x) for x in cmp.position_diff.tolist()],
                )
            )
    tokens = tr.tokenizer.tokens(ids)
    return OrderOut(
        model=loaded.name,
        source_tokens=tokens,
        permutation=perm,
        permuted_tokens=[tokens[p] for p in perm],
        runs=runs,
    )


# -- masks ----------------------------------------------------------------------------------------
def _padded(ids: list[list[int]], pad: int, device: torch.device) -> torch.Tensor:
    out = torch.full((len(ids), max(map(len, ids))), pad, dtype=torch.long)
    for i, seq in enumerate(ids):
        out[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out.to(device)


def _tokens_grid(tr: Translator, grid: torch.Tensor) -> list[list[str]]:
    return [tr.tokenizer.tokens(row) for row in grid.tolist()]


def masks(service: InferenceService, req: MasksIn) -> MasksOut:
    """A padded batch: its masks and their shapes, the fill values compared, masking before vs
    after the softmax, and the causal mask off under teacher forcing."""
    loaded = service.get(req.model)
    tr, model = loaded.translator, loaded.translator.model
    c = model.config
    n = len(req.texts)
    for i, text in enumerate(req.texts):
        _check_chars(service, text, f"texts[{i}]")
    src_ids = [_encode(tr, t, f"texts[{i}]") for i, t in enumerate(req.texts)]
    if req.targets is not None:
        if len(req.targets) != n:
            raise InputError(
                "targets", f"must hold one target per text ({n}), got {len(req.targets)}"
            )
        for i, t in enumerate(req.targets):
            _check_chars(service, t, f"targets[{i}]")
        out_ids = [_encode(tr, t, f"targets[{i}]") for i, t in enumerate(req.targets)]
    n_layers = min(c.n_encoder_layers, c.n_decoder_layers)
    if req.layer >= n_layers:
        raise InputError("layer", f"layer {req.layer} is out of range: valid 0..{n_layers - 1}")
    if req.head >= c.n_heads:
        raise InputError("head", f"head {req.head} is out of range: valid 0..{c.n_heads - 1}")
    if req.item >= n:
        raise InputError("item", f"item {req.item} is out of range: valid 0..{n - 1}")

    with torch.inference_mode():
        if req.targets is None:
            results = tr.translate(req.texts, top_k=0, need_trace=False)
            out_ids = [r.target_ids for r in results]
        src = _padded(src_ids, c.pad_id, model.device)  # [B, S]
        tgt = decoder_inputs(model, out_ids)  # [B, T]
        views = analysis.batch_masks(model, src, tgt, PAPER)
        b, s, t, h = src.size(0), src.size(1), tgt.size(1), c.n_heads

        def trace(exp: Experiment):
            out = model(src, tgt, exp, need_weights=True)
            assert out.trace is not None
            return out.trace

        paper = trace(PAPER)
        fills = []
        for name, value in MASK_FILLS.items():
            tr_fill = paper if value == PAPER.mask_fill else trace(Experiment(mask_fill=value))
            kinds = {}
            for kind in ATTENTION_KINDS:
                maps = tr_fill.kind(kind)  # [L, B, H, q, k]
                leaked = analysis.leaked_mass(maps, views.kind(kind)[None])  # [L, B, H, q]
                kinds[kind] = FillKindOut(
                    maps=to_nested(maps[req.layer, :, req.head]),
                    leaked=to_nested(leaked[req.layer, :, req.head], 5),
                    leaked_max=_r(leaked.max()),
                    max_abs_diff_vs_inf=_r(analysis.max_abs_diff(maps, paper.kind(kind))),
                )
            fills.append(FillOut(mask_fill=name, kinds=kinds))
        renorm = trace(Experiment(mask_mode="renormalize"))
        renorm_diff = {
            k: float(analysis.max_abs_diff(renorm.kind(k), paper.kind(k))) for k in ATTENTION_KINDS
        }

        # The causal mask off, teacher forcing item `item`'s reference (inside the same batch).
        i, ti = req.item, len(out_ids[req.item])
        no_causal = Experiment(causal_mask=False)
        open_trace = trace(no_causal)
        masked = paper.decoder_self[:, i, :, :ti, :ti]  # [L, H, T_i, T_i]
        unmasked = open_trace.decoder_self[:, i, :, :ti, :ti]
        future = analysis.leaked_mass(unmasked, views.causal[0, 0, :ti, :ti])  # [L, H, T_i]
        lp_on = analysis.token_logprobs(model, src, out_ids, PAPER)[i]
        lp_off = analysis.token_logprobs(model, src, out_ids, no_causal)[i]
        dec_in = _tokens_grid(tr, tgt)
        causal = CausalOut(
            item=i,
            decoder_input_tokens=dec_in[i][:ti],
            target_tokens=tr.tokenizer.tokens(out_ids[i]),
            masked=to_nested(masked[req.layer, req.head]),
            unmasked=to_nested(unmasked[req.layer, req.head]),
            future_mass=to_nested(future[req.layer, req.head], 5),
            future_mass_max=_r(future.max()),
            prob_masked=to_nested(lp_on.exp(), 5),
            prob_unmasked=to_nested(lp_off.exp(), 5),
        )

        def expand(kind: Any) -> list[list[list[bool]]]:
            return views.expanded(kind, 1)[:, 0].tolist()  # [B, q, k]

        shapes = [
            MaskShapeOut(
                name="padding_mask(source)",
                shape=list(views.source_padding.shape),
                broadcasts_to=[b, h, s, s],
                note="one row of keys per sentence, repeated for every head and every query",
            ),
            MaskShapeOut(
                name="padding_mask(decoder input)",
                shape=list(views.target_padding.shape),
                broadcasts_to=[b, h, t, t],
                note="the decoder's padded inputs, repeated for every head and query",
            ),
            MaskShapeOut(
                name="causal_mask(T)",
                shape=list(views.causal.shape),
                broadcasts_to=[b, h, t, t],
                note="one lower triangle shared by every sentence and every head",
            ),
            MaskShapeOut(
                name="encoder self: source_key_mask",
                shape=list(views.encoder_self.shape),
                broadcasts_to=[b, h, s, s],
                note="the source padding mask (plus any hidden source positions)",
            ),
            MaskShapeOut(
                name="decoder self: causal AND padding",
                shape=list(views.decoder_self.shape),
                broadcasts_to=[b, h, t, t],
                note="[1,1,T,T] & [B,1,1,T] broadcast to [B,1,T,T]: a triangle per sentence",
            ),
            MaskShapeOut(
                name="cross: source_key_mask",
                shape=list(views.cross.shape),
                broadcasts_to=[b, h, t, s],
                note="the same source mask as the encoder, now for every decoder query",
            ),
        ]
        mask_views = MaskViewsOut(
            source_padding=views.source_padding[:, 0, 0].tolist(),
            target_padding=views.target_padding[:, 0, 0].tolist(),
            causal=views.causal[0, 0].tolist(),
            combined={k: expand(k) for k in ATTENTION_KINDS},
            shapes=shapes,
        )
        target_grid = _padded(out_ids, c.pad_id, model.device)
        return MasksOut(
            model=loaded.name,
            layer=req.layer,
            head=req.head,
            n_heads=h,
            source_tokens=_tokens_grid(tr, src),
            decoder_input_tokens=dec_in,
            target_tokens=_tokens_grid(tr, target_grid),
            source_lengths=[len(x) for x in src_ids],
            target_lengths=[len(x) for x in out_ids],
            masks=mask_views,
            fills=fills,
            renormalize_max_abs_diff=renorm_diff,
            causal=causal,
        )


# -- scaling --------------------------------------------------------------------------------------
DEFAULT_DK = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
DEFAULT_SPREADS = [0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]


def scaling(
    limits: ExperimentSettings,
    d_k: Sequence[int] | None,
    samples: int,
    seed: int,
    n_scores: int,
    spreads: Sequence[float] | None,
) -> ScalingOut:
    """Var(q·k) vs d_k (with and without 1/sqrt(d_k)), and softmax saturation vs spread."""
    dks = sorted(set(d_k)) if d_k else [d for d in DEFAULT_DK if d <= limits.max_dk]
    if len(dks) > limits.max_dk_points:
        raise InputError(
            "d_k", f"at most {limits.max_dk_points} values (max_dk_points), got {len(dks)}"
        )
    if dks[0] < 1 or dks[-1] > limits.max_dk:
        bad = dks[0] if dks[0] < 1 else dks[-1]
        raise InputError("d_k", f"each must be between 1 and {limits.max_dk} (max_dk), got {bad}")
    if samples > limits.max_samples:
        raise InputError(
            "samples", f"must be between 2 and {limits.max_samples} (max_samples), got {samples}"
        )
    if n_scores > limits.max_scores:
        raise InputError(
            "n_scores", f"must be between 2 and {limits.max_scores} (max_scores), got {n_scores}"
        )
    sp = list(spreads) if spreads else DEFAULT_SPREADS
    if len(sp) > limits.max_spreads:
        raise InputError(
            "spreads", f"at most {limits.max_spreads} values (max_spreads), got {len(sp)}"
        )
    bad_spreads = [x for x in sp if not 0.0 <= x <= 1000.0]
    if bad_spreads:
        raise InputError("spreads", f"each must be between 0 and 1000, got {bad_spreads[0]}")
    var = analysis.qk_variance(dks, samples, seed)
    sat = analysis.softmax_saturation(n_scores, sp, seed)
    return ScalingOut(
        d_k=dks,
        samples=samples,
        seed=seed,
        variance_raw=to_nested(var.raw),
        variance_scaled=to_nested(var.scaled),
        saturation=SaturationOut(
            scores=to_nested(sat.scores),
            spreads=sp,
            probs=to_nested(sat.probs, 5),
            max_weight=to_nested(sat.max_weight, 5),
            entropy=to_nested(sat.entropy),
        ),
    )
