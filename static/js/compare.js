// Baseline vs experiment, as every experiment page shows it: the two translations with changed
// tokens marked, the maps side by side with their difference (a diverging scale centred on 0),
// and per-head entropy before/after. Input: a POST /api/experiment response.

import { KINDS, KIND_NAMES, decodeAttention, maxOf } from "./attention.js";
import { clear, el, fmt } from "./dom.js";
import { drawHeatmap } from "./heatmap.js";
import { drawBars } from "./plots.js";

/**
 * Decode the maps of an experiment response. `aligned` is what the difference uses: the
 * experiment reading the baseline's own tokens (same shapes), or the forced experiment itself.
 */
export function decodeExperiment(body) {
  return {
    baseline: decodeAttention(body.baseline.attention),
    experiment: decodeAttention(body.experiment.attention),
    aligned: decodeAttention((body.aligned ?? body.experiment).attention),
  };
}

function tokenChips(tokens, changed = new Set(), baseTokens = null) {
  return tokens.map((t, i) => {
    const isChanged = changed.has(i);
    const was = baseTokens && i < baseTokens.length ? baseTokens[i] : null;
    return el("span", {
      class: isChanged ? "tok tok-chip tok-changed" : "tok tok-chip",
      text: t,
      title: isChanged ? (was === null ? "new token (the paper's output is shorter)" : `changed: the paper has ${was}`) : null,
      dataset: isChanged ? { changed: "true" } : undefined,
    });
  });
}

/** The two translations, changed tokens marked, and the log-probability change. */
export function renderTranslations(container, body) {
  // A translation of special tokens only decodes to "": say so rather than show nothing.
  const words = (t) => t || "(no words: only special tokens)";
  const d = body.diff;
  const changed = new Set(d.changed_positions);
  const forced = body.mode === "force";
  const rows = [
    el("div", { class: "cmp-row" }, [
      el("span", { class: "cmp-label", text: "Paper" }),
      el("div", { class: "cmp-body" }, [
        el("p", { class: "cmp-translation", lang: "de", text: words(body.baseline.translation), id: "baseline-translation" }),
        el("div", { class: "tokens", id: "baseline-tokens" }, tokenChips(body.baseline.target_tokens)),
      ]),
    ]),
    el("div", { class: "cmp-row is-experiment" }, [
      el("span", { class: "cmp-label", text: "Experiment" }),
      el("div", { class: "cmp-body" }, [
        el("p", { class: "cmp-translation", lang: "de", text: words(body.experiment.translation), id: "experiment-translation" }),
        el(
          "div",
          { class: "tokens", id: "experiment-tokens" },
          tokenChips(body.experiment.target_tokens, changed, body.baseline.target_tokens),
        ),
      ]),
    ]),
  ];
  const verdict = forced
    ? "Both runs read the same target (teacher forcing)."
    : d.translation_changed
      ? `The translation changed (${changed.size} token${changed.size === 1 ? "" : "s"} marked).`
      : "The translation did not change.";
  const delta = d.logprob_change;
  const summary = el("p", { class: "cmp-summary", id: "logprob-summary" }, [
    el("span", { class: d.translation_changed ? "badge badge-warn" : "badge", text: verdict }),
    ` log p(paper's output): ${fmt(d.baseline_logprob, 2)} → ${fmt(d.baseline_logprob_under_experiment, 2)} under the experiment `,
    el("strong", { class: delta < 0 ? "neg" : "pos", text: `(Δ ${delta >= 0 ? "+" : ""}${fmt(delta, 2)})` }),
  ]);
  clear(container).append(...rows, summary);
}

/**
 * Kind / layer / head controls for the compared maps. onChange({kind, layer, head}) after a change.
 * `root` holds a fieldset of kind radios (name = `${name}-kind`) and two selects.
 */
export class MapPicker {
  constructor(root, { name, onChange, kinds = KIND_NAMES }) {
    this.root = root;
    this.name = name;
    this.onChange = onChange;
    this.sel = { kind: kinds[0], layer: 0, head: 0 };
    this.counts = null;
    const radios = kinds.map((k) =>
      el("label", {}, [
        el("input", { type: "radio", name: `${name}-kind`, value: k }),
        el("span", { text: KINDS[k].short }),
      ]),
    );
    this.layer = el("select", { id: `${name}-layer`, "aria-label": "Layer" });
    this.head = el("select", { id: `${name}-head`, "aria-label": "Head" });
    clear(root).append(
      el("fieldset", { class: "segmented" }, [el("legend", { class: "sr-only", text: "Attention kind" }), ...radios]),
      el("label", { class: "inline-field" }, [el("span", { text: "Layer" }), this.layer]),
      el("label", { class: "inline-field" }, [el("span", { text: "Head" }), this.head]),
    );
    for (const input of root.querySelectorAll("input[type=radio]")) {
      input.addEventListener("change", () => input.checked && this.set({ kind: input.value }, true));
    }
    this.layer.addEventListener("change", () => this.set({ layer: Number(this.layer.value) }, true));
    this.head.addEventListener("change", () => this.set({ head: Number(this.head.value) }, true));
  }

  /** counts: {kind: {layers: [..], heads: [..]}} from the decoded maps. */
  setCounts(maps) {
    this.counts = Object.fromEntries(Object.entries(maps).map(([k, m]) => [k, { layers: m.layers, heads: m.heads }]));
    this.set({}, false);
  }

  set(change, notify) {
    Object.assign(this.sel, change);
    const c = this.counts?.[this.sel.kind];
    if (c) {
      if (!c.layers.includes(this.sel.layer)) this.sel.layer = c.layers[0];
      if (!c.heads.includes(this.sel.head)) this.sel.head = c.heads[0];
      clear(this.layer).append(...c.layers.map((l) => el("option", { value: String(l), text: String(l) })));
      clear(this.head).append(...c.heads.map((h) => el("option", { value: String(h), text: String(h) })));
      this.layer.value = String(this.sel.layer);
      this.head.value = String(this.sel.head);
    }
    for (const input of this.root.querySelectorAll("input[type=radio]")) input.checked = input.value === this.sel.kind;
    if (notify) this.onChange?.({ ...this.sel });
  }
}

/**
 * Draw the paper's map, the experiment's map (same colour scale) and their difference.
 * divs: {baseline, experiment, diff}; maps: decodeExperiment(...); sel: {kind, layer, head}.
 * Returns the largest |difference| drawn.
 */
export async function drawComparison(divs, maps, sel, { height } = {}) {
  const base = maps.baseline[sel.kind];
  const exp = maps.aligned[sel.kind];
  if (!base || !exp) return 0;
  const b = base.select(sel);
  const e = exp.select(sel);
  if (!b || !e) return 0;
  const kind = KINDS[sel.kind];
  const where = `L${sel.layer} H${sel.head}`;
  const zmax = Math.max(maxOf(b.values), maxOf(e.values));
  const diff = new Float32Array(b.values.length);
  let lo = 0;
  let hi = 0;
  for (let i = 0; i < diff.length; i++) {
    diff[i] = e.values[i] - b.values[i];
    if (diff[i] < lo) lo = diff[i];
    if (diff[i] > hi) hi = diff[i];
  }
  const common = {
    yTokens: base.queryTokens,
    xTokens: base.keyTokens,
    yTitle: kind.query,
    xTitle: kind.key,
    height: height ?? Math.round(Math.max(330, Math.min(520, 20 * base.nQ + 170))),
  };
  await Promise.all([
    drawHeatmap(divs.baseline, {
      ...common,
      values: b.values,
      title: `Paper · ${kind.short} ${where}`,
      zmin: 0,
      zmax,
      filename: `attnscope-paper-${sel.kind}-L${sel.layer}-H${sel.head}`,
    }),
    drawHeatmap(divs.experiment, {
      ...common,
      values: e.values,
      title: `Experiment · ${kind.short} ${where}`,
      zmin: 0,
      zmax,
      filename: `attnscope-experiment-${sel.kind}-L${sel.layer}-H${sel.head}`,
    }),
    drawHeatmap(divs.diff, {
      ...common,
      values: diff,
      title: "Difference (experiment − paper)",
      zmin: lo,
      zmax: hi,
      diverging: true,
      colorbarTitle: "Δ weight",
      filename: `attnscope-diff-${sel.kind}-L${sel.layer}-H${sel.head}`,
    }),
  ]);
  return Math.max(-lo, hi);
}

/** Per-head mean attention entropy of one kind, paper vs experiment, as grouped bars. */
export function drawEntropy(div, body, kind, { height = 260 } = {}) {
  const k = body.diff.kinds[kind];
  const labels = [];
  const before = [];
  const after = [];
  k.entropy_baseline.forEach((row, l) =>
    row.forEach((v, h) => {
      labels.push(`L${l} H${h}`);
      before.push(v);
      after.push(k.entropy_experiment[l][h]);
    }),
  );
  return drawBars(
    div,
    labels,
    [
      { name: "paper", values: before, color: "#94a3b8" },
      { name: "experiment", values: after, color: "#2563eb" },
    ],
    { title: `${KINDS[kind].label}: mean entropy per head`, yTitle: "bits", height, hoverDigits: 3, filename: `attnscope-entropy-${kind}` },
  );
}

/** A one-line account of the diff for a kind: max |Δ| over every map, leaked mass. */
export function kindSummary(body, kind) {
  const k = body.diff.kinds[kind];
  return `max |Δ| over all ${KINDS[kind].short.toLowerCase()} maps ${fmt(k.max_abs_diff, 4)} · largest mass on masked keys ${fmt(k.leaked_mass_max, 4)}`;
}

/** Request body of POST /api/experiment: the page always asks for compact maps. */
export function experimentBody(params) {
  const body = { encoding: "compact", ...params };
  for (const key of Object.keys(body)) if (body[key] == null) delete body[key];
  return body;
}

/**
 * Count a finished render on <main>: data-renders (all) and data-renders-<what> (one part), so
 * scripts and tests can wait for "the next render of this part" without guessing at timing.
 */
export function markRendered(what) {
  const main = document.getElementById("main");
  main.dataset.renders = String(Number(main.dataset.renders || 0) + 1);
  const attr = `data-renders-${what}`;
  main.setAttribute(attr, String(Number(main.getAttribute(attr) || 0) + 1));
}
