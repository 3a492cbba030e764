// Page controller of /masks: a padded batch with its masks and shapes, the causal mask off under
// teacher forcing, the fill values, mask-then-softmax vs renormalise (POST /api/masks), and hiding
// source tokens by clicking them (POST /api/experiment). State lives in the query string:
//   ?t=The+cat…&t=I+go+home.&r=&r=&item=0&layer=0&head=0&ck=decoder_self&fk=encoder_self&hide=1
//    &view=cross.0.0

import * as api from "./api.js";
import { KINDS, KIND_NAMES } from "./attention.js";
import {
  MapPicker,
  decodeExperiment,
  drawComparison,
  experimentBody,
  kindSummary,
  markRendered,
  renderTranslations,
} from "./compare.js";
import { clear, el, fmt } from "./dom.js";
import { drawHeatmap } from "./heatmap.js";
import { drawBars, drawMatrix } from "./plots.js";

const $ = (id) => document.getElementById(id);
const DEFAULT_TEXTS = ["The cat is sleeping on the sofa.", "I go home.", "Where is the station?"];
// References for the default sentences: teacher forcing reads them (any sentence of your own
// may leave them empty: the model's own translations are used then).
const DEFAULT_REFS = ["Die Katze schläft auf dem Sofa.", "Ich gehe nach Hause.", "Wo ist der Bahnhof?"];
const FILL_NAMES = { "-inf": "−inf (the paper)", "-1e9": "−1e9", "-1e-12": "−1e-12" };

function flatten(rows) {
  const n = rows.length;
  const m = n ? rows[0].length : 0;
  const out = new Float32Array(n * m);
  rows.forEach((row, i) => out.set(row, i * m));
  return out;
}

function parseIndex(value, fallback) {
  return /^\d{1,3}$/.test(value ?? "") ? Number(value) : fallback;
}

class MasksPage {
  constructor(pageData) {
    const model = (pageData.models ?? [])[0];
    this.nLayers = model ? Math.min(model.n_encoder_layers, model.n_decoder_layers) : 1;
    this.nHeads = model?.n_heads ?? 1;
    const p = new URLSearchParams(window.location.search);
    const texts = p.getAll("t");
    const refs = p.getAll("r");
    this.state = {
      texts: texts.length ? texts : DEFAULT_TEXTS,
      refs: texts.length ? refs : DEFAULT_REFS,
      // The second sentence is padded: its maps show what padding masks (and what leaks).
      item: parseIndex(p.get("item"), 1),
      layer: parseIndex(p.get("layer"), 0),
      head: parseIndex(p.get("head"), 0),
      combinedKind: KIND_NAMES.includes(p.get("ck")) ? p.get("ck") : "decoder_self",
      fillKind: KIND_NAMES.includes(p.get("fk")) ? p.get("fk") : "decoder_self",
      // Hide the second token by default, so the section opens with an experiment to look at.
      hide: p.has("hide") ? (p.get("hide") || "").split(",").filter((x) => /^\d+$/.test(x)).map(Number) : [1],
      view: p.get("view") ?? "cross.0.0",
    };
    this.request = new api.LatestRequest(); // the batch's /api/masks
    this.hideRequest = new api.LatestRequest(); // the hidden-token experiment
    this.out = null; // last /api/masks response
    this.sentTexts = []; // the texts of that response
    this.hideOut = null;
    this.hideMaps = null;
    const [vk, vl, vh] = this.state.view.split(".");
    this.picker = new MapPicker($("hide-picker"), { name: "hide", onChange: (sel) => this.onPick(sel) });
    this.picker.sel = {
      kind: KIND_NAMES.includes(vk) ? vk : "cross",
      layer: parseIndex(vl, 0),
      head: parseIndex(vh, 0),
    };
    this.fillForm();
    this.bind();
  }

  fillForm() {
    const s = this.state;
    for (let i = 0; i < 3; i++) {
      $(`text-${i}`).value = s.texts[i] ?? "";
      $(`ref-${i}`).value = s.refs[i] ?? "";
    }
    const options = (select, n, label) =>
      clear(select).append(...[...Array(n).keys()].map((i) => el("option", { value: String(i), text: label(i) })));
    options($("layer"), this.nLayers, String);
    options($("head"), this.nHeads, String);
    $("layer").value = String(Math.min(s.layer, this.nLayers - 1));
    $("head").value = String(Math.min(s.head, this.nHeads - 1));
    this.fillItems(s.texts.filter((t) => t.trim()).length || 2);
    for (const r of document.querySelectorAll('input[name="combined-kind"]')) r.checked = r.value === s.combinedKind;
    for (const r of document.querySelectorAll('input[name="fill-kind"]')) r.checked = r.value === s.fillKind;
  }

  fillItems(n) {
    const select = $("item");
    const current = Math.min(this.state.item, n - 1);
    clear(select).append(...[...Array(n).keys()].map((i) => el("option", { value: String(i), text: String(i + 1) })));
    select.value = String(current);
    this.state.item = current;
  }

  bind() {
    $("masks-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.run();
    });
    for (const id of ["item", "layer", "head"]) $(id).addEventListener("change", () => this.run());
    for (const r of document.querySelectorAll('input[name="combined-kind"]')) {
      r.addEventListener("change", () => {
        if (!r.checked) return;
        this.state.combinedKind = r.value;
        this.writeUrl();
        this.drawCombined().then(() => markRendered("combined"));
      });
    }
    for (const r of document.querySelectorAll('input[name="fill-kind"]')) {
      r.addEventListener("change", () => {
        if (!r.checked) return;
        this.state.fillKind = r.value;
        this.writeUrl();
        this.drawFills().then(() => markRendered("fills"));
      });
    }
  }

  writeUrl() {
    const s = this.state;
    const p = new URLSearchParams();
    for (const t of s.texts) p.append("t", t);
    if (s.refs.some(Boolean)) for (const r of s.refs) p.append("r", r);
    p.set("item", String(s.item));
    p.set("layer", String(s.layer));
    p.set("head", String(s.head));
    p.set("ck", s.combinedKind);
    p.set("fk", s.fillKind);
    p.set("hide", s.hide.join(","));
    const v = this.picker.sel;
    p.set("view", `${v.kind}.${v.layer}.${v.head}`);
    const search = `?${p.toString()}`;
    if (search !== window.location.search) window.history.replaceState(null, "", `${window.location.pathname}${search}`);
  }


  /** Token labels of one sentence for an attention kind: [query tokens, key tokens]. */
  labels(kind, item, trimmed = false) {
    const o = this.out;
    const s = trimmed ? o.source_lengths[item] : o.source_tokens[item].length;
    const t = trimmed ? o.target_lengths[item] : o.decoder_input_tokens[item].length;
    const src = o.source_tokens[item].slice(0, s);
    if (kind === "encoder_self") return [src, src];
    if (kind === "decoder_self") {
      const dec = o.decoder_input_tokens[item].slice(0, t);
      return [dec, dec];
    }
    return [o.target_tokens[item].slice(0, t), src];
  }

  // -- the batch ---------------------------------------------------------------------------------
  async run() {
    const box = $("masks-error");
    const inputs = [0, 1, 2].map((i) => ({ text: $(`text-${i}`).value.trim(), ref: $(`ref-${i}`).value.trim() }));
    const rows = inputs.filter((r) => r.text);
    if (rows.length < 2) {
      api.showError(box, "texts: give at least two sentences (a batch needs sentences of different lengths to pad).");
      return;
    }
    const refs = rows.map((r) => r.ref);
    if (refs.some(Boolean) && !refs.every(Boolean)) {
      api.showError(box, "targets: give a reference translation for every sentence, or for none.");
      return;
    }
    const prevTexts = this.sentTexts;
    Object.assign(this.state, {
      texts: rows.map((r) => r.text),
      refs: refs.every(Boolean) ? refs : [],
      item: Math.min(Number($("item").value), rows.length - 1),
      layer: Number($("layer").value),
      head: Number($("head").value),
    });
    const s = this.state;
    await this.request.run(async (signal, isCurrent) => {
      const body = { texts: s.texts, layer: s.layer, head: s.head, item: s.item };
      if (s.refs.length) body.targets = s.refs;
      const { body: out } = await api.postJSON("/api/masks", body, { signal });
      if (!isCurrent()) return;
      const itemText = (texts) => texts[s.item];
      if (prevTexts.length && itemText(prevTexts) !== itemText(s.texts)) s.hide = []; // another sentence
      this.out = out;
      this.sentTexts = [...s.texts];
      this.fillItems(s.texts.length);
      $("masks-body").hidden = false;
      $("masks-meta").textContent = `${out.source_tokens.length} sentences · model ${out.model} · layer ${out.layer}, head ${out.head}`;
      this.writeUrl();
      await this.drawBatch();
      await this.drawCombined();
      await this.drawCausal();
      await this.drawFills();
      this.renderRenorm();
      markRendered("masks");
      this.renderHideTokens();
      await this.runHide();
    }, { button: $("masks-run"), errorBox: box });
  }

  async drawBatch() {
    const o = this.out;
    const grid = (div, tokens, lengths, title) => {
      const z = tokens.map((row, b) => row.map((_, j) => (j < lengths[b] ? 1 : 0)));
      const names = tokens.map((_, b) => `sentence ${b + 1}`);
      return drawMatrix(div, z, names, [...tokens[0].keys()].map(String), {
        title,
        xTitle: "position",
        scale: "mask",
        zmin: 0,
        zmax: 1,
        gap: 2,
        cellText: tokens,
        cellTextColor: (b, j) => (j < lengths[b] ? "#ffffff" : "#6b7280"),
        cellFontSize: tokens[0].length > 14 ? 9 : 11,
        hover: (b, j) => `sentence ${b + 1}, position ${j}: ${tokens[b][j]}${j < lengths[b] ? "" : " (padding)"}`,
        height: 60 * tokens.length + 110,
        xTickAngle: 0,
        filename: "attnscope-batch",
      });
    };
    const s = o.source_tokens[0].length;
    const t = o.decoder_input_tokens[0].length;
    await Promise.all([
      grid($("grid-source"), o.source_tokens, o.source_lengths, `Source batch [B=${o.source_tokens.length}, S=${s}]`),
      grid($("grid-target"), o.decoder_input_tokens, o.target_lengths, `Decoder inputs [B=${o.source_tokens.length}, T=${t}]`),
    ]);
    const m = o.masks;
    const bool = (rows) => rows.map((r) => r.map((v) => (v ? 1 : 0)));
    const shape = (name) => m.shapes.find((x) => x.name === name).shape.join(", ");
    await Promise.all([
      drawMatrix($("mask-padding"), bool(m.source_padding), o.source_tokens.map((_, b) => `sentence ${b + 1}`), [...Array(s).keys()].map(String), {
        title: `padding_mask(source) [${shape("padding_mask(source)")}]`,
        xTitle: "key position",
        scale: "mask",
        zmin: 0,
        zmax: 1,
        gap: 1,
        hover: (b, j, v) => `sentence ${b + 1}, key ${j}: ${v ? "may attend" : "masked (padding)"}`,
        height: 60 * o.source_tokens.length + 110,
        filename: "attnscope-padding-mask",
      }),
      drawMatrix($("mask-causal"), bool(m.causal), [...Array(t).keys()].map(String), [...Array(t).keys()].map(String), {
        title: `causal_mask(T) [${shape("causal_mask(T)")}]`,
        yTitle: "query position",
        xTitle: "key position",
        scale: "mask",
        zmin: 0,
        zmax: 1,
        gap: 1,
        hover: (q, k, v) => `query ${q}, key ${k}: ${v ? "may attend" : "masked (future)"}`,
        height: 360,
        maxXTicks: 20,
        maxYTicks: 20,
        filename: "attnscope-causal-mask",
      }),
    ]);
    const rows = clear($("shape-rows"));
    for (const x of m.shapes) {
      rows.append(
        el("tr", {}, [
          el("th", { scope: "row", class: "mono", text: x.name }),
          el("td", { class: "mono", text: `[${x.shape.join(", ")}]` }),
          el("td", { class: "mono", text: `[${x.broadcasts_to.join(", ")}]` }),
          el("td", { text: x.note }),
        ]),
      );
    }
  }

  drawCombined() {
    const o = this.out;
    const kind = this.state.combinedKind;
    const item = this.state.item;
    const [qTok, kTok] = this.labels(kind, item);
    const z = o.masks.combined[kind][item].map((r) => r.map((v) => (v ? 1 : 0)));
    return drawMatrix($("mask-combined"), z, qTok, kTok, {
      title: `${KINDS[kind].short}, sentence ${item + 1}: what each query may see`,
      yTitle: KINDS[kind].query,
      xTitle: KINDS[kind].key,
      scale: "mask",
      zmin: 0,
      zmax: 1,
      gap: 1,
      hover: (q, k, v) => `${qTok[q]} → ${kTok[k]}: ${v ? "may attend" : "masked"}`,
      height: 360,
      maxXTicks: 20,
      maxYTicks: 20,
      xTickAngle: -55,
      filename: `attnscope-combined-${kind}`,
    });
  }

  // -- causal mask off ---------------------------------------------------------------------------
  async drawCausal() {
    const c = this.out.causal;
    const tokens = c.decoder_input_tokens;
    const on = flatten(c.masked);
    const off = flatten(c.unmasked);
    const diff = off.map((v, i) => v - on[i]);
    const zmax = Math.max(...on, ...off) || 1;
    const where = `L${this.out.layer} H${this.out.head}`;
    const common = { yTokens: tokens, xTokens: tokens, yTitle: KINDS.decoder_self.query, xTitle: KINDS.decoder_self.key, height: 400 };
    let lo = 0;
    let hi = 0;
    for (const v of diff) {
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
    $("causal-meta").textContent =
      `sentence ${c.item + 1} · decoder self-attention ${where} · largest weight on the future (any layer/head): ${fmt(c.future_mass_max, 3)}`;
    await Promise.all([
      drawHeatmap($("causal-on"), { ...common, values: on, zmin: 0, zmax, title: `Causal mask on (paper) · ${where}`, filename: "attnscope-causal-on" }),
      drawHeatmap($("causal-off"), { ...common, values: off, zmin: 0, zmax, title: `Causal mask off · ${where}`, filename: "attnscope-causal-off" }),
      drawHeatmap($("causal-diff"), {
        ...common,
        values: diff,
        zmin: lo,
        zmax: hi,
        diverging: true,
        colorbarTitle: "Δ weight",
        title: "Difference (off − on)",
        filename: "attnscope-causal-diff",
      }),
      drawBars(
        $("causal-probs"),
        c.target_tokens,
        [
          { name: "causal mask on (paper)", values: c.prob_masked, color: "#94a3b8" },
          { name: "causal mask off", values: c.prob_unmasked, color: "#d6604d" },
        ],
        { title: "Probability of each reference token", yTitle: "p(token)", height: 280, hoverDigits: 3, filename: "attnscope-causal-probs" },
      ),
    ]);
  }

  // -- fill values -------------------------------------------------------------------------------
  async drawFills() {
    const o = this.out;
    const kind = this.state.fillKind;
    const item = this.state.item;
    const [qTok, kTok] = this.labels(kind, item);
    const fills = o.fills;
    const values = fills.map((f) => flatten(f.kinds[kind].maps[item]));
    let zmax = 0;
    for (const v of values) for (const x of v) zmax = Math.max(zmax, x);
    const where = `L${o.layer} H${o.head}`;
    await Promise.all([
      ...fills.map((f, i) =>
        drawHeatmap($(`fill-${i}`), {
          values: values[i],
          yTokens: qTok,
          xTokens: kTok,
          yTitle: KINDS[kind].query,
          xTitle: KINDS[kind].key,
          zmin: 0,
          zmax: zmax || 1,
          title: `fill ${FILL_NAMES[f.mask_fill]} · ${where}`,
          height: 400,
          filename: `attnscope-fill-${f.mask_fill}`,
        }),
      ),
      drawBars(
        $("fill-leak"),
        qTok,
        fills.map((f, i) => ({
          name: `fill ${FILL_NAMES[f.mask_fill]}`,
          values: f.kinds[kind].leaked[item],
          color: ["#2563eb", "#0f766e", "#d6604d"][i],
        })),
        {
          title: `Leaked mass per query row (${KINDS[kind].short}, sentence ${item + 1}, ${where})`,
          yTitle: "weight on masked keys",
          yRange: [0, 1],
          height: 270,
          hoverDigits: 4,
          filename: "attnscope-leaked-mass",
        },
      ),
    ]);
    const by = Object.fromEntries(fills.map((f) => [f.mask_fill, f.kinds[kind]]));
    $("fill-meta").textContent =
      `max |(−1e9) − (−inf)| = ${fmt(by["-1e9"].max_abs_diff_vs_inf, 6)} · leaked mass at most ${fmt(by["-inf"].leaked_max, 4)} with −inf, ` +
      `${fmt(by["-1e-12"].leaked_max, 4)} with −1e-12 (over every layer, head and row)`;
  }

  renderRenorm() {
    const rows = clear($("renorm-rows"));
    for (const kind of KIND_NAMES) {
      const v = this.out.renormalize_max_abs_diff[kind];
      rows.append(
        el("tr", { dataset: { kind } }, [
          el("th", { scope: "row", text: KINDS[kind].label }),
          el("td", { class: "num mono", text: v.toExponential(2) }),
        ]),
      );
    }
  }

  // -- hide source tokens ------------------------------------------------------------------------
  renderHideTokens() {
    const o = this.out;
    const item = this.state.item;
    const n = o.source_lengths[item];
    this.state.hide = this.state.hide.filter((p) => p < n);
    const box = clear($("hide-tokens"));
    o.source_tokens[item].slice(0, n).forEach((token, p) => {
      const hidden = this.state.hide.includes(p);
      box.append(
        el("button", {
          type: "button",
          class: hidden ? "hide-token is-hidden-token" : "hide-token",
          "aria-pressed": hidden ? "true" : "false",
          title: hidden ? `${token}: hidden (press to show)` : `${token}: press to hide`,
          dataset: { position: String(p) },
          on: { click: () => this.toggleHidden(p) },
        }, [el("span", { class: "tok", text: token })]),
      );
    });
    $("hide-meta").textContent = `sentence ${item + 1}: ${this.sentTexts[item]}`;
  }

  toggleHidden(p) {
    const hide = new Set(this.state.hide);
    if (hide.has(p)) hide.delete(p);
    else hide.add(p);
    this.state.hide = [...hide].sort((a, b) => a - b);
    this.renderHideTokens();
    this.writeUrl();
    $("hide-tokens").querySelector(`[data-position="${p}"]`)?.focus();
    this.runHide();
  }

  async runHide() {
    await this.hideRequest.run(async (signal, isCurrent) => {
      const body = experimentBody({
        text: this.sentTexts[this.state.item],
        top_k: 0,
        experiment: { hide_source: this.state.hide },
      });
      const { body: out } = await api.postJSON("/api/experiment", body, { signal });
      if (!isCurrent()) return;
      this.hideOut = out;
      this.hideMaps = decodeExperiment(out);
      $("hide-result").hidden = false;
      renderTranslations($("hide-translations"), out);
      this.picker.setCounts(this.hideMaps.baseline);
      await this.drawHide();
      $("status").textContent = `Hidden tokens: ${this.state.hide.length}. ${out.diff.translation_changed ? "The translation changed." : "The translation did not change."}`;
      markRendered("hide");
    }, { errorBox: $("hide-error"), region: $("hide-result") });
  }

  async onPick() {
    this.writeUrl();
    if (!this.hideMaps) return;
    await this.drawHide();
    markRendered("hide-view");
  }

  async drawHide() {
    const sel = this.picker.sel;
    $("hide-summary").textContent = kindSummary(this.hideOut, sel.kind);
    await drawComparison(
      { baseline: $("hide-baseline"), experiment: $("hide-experiment"), diff: $("hide-diff") },
      this.hideMaps,
      sel,
    );
  }

  start() {
    if (!window.Plotly) {
      api.showError($("masks-error"), "The plotting library could not be loaded from /vendor/plotly.min.js.");
      return;
    }
    this.run();
  }
}

function main() {
  const node = $("page-data");
  const page = new MasksPage(node ? JSON.parse(node.textContent) : {});
  page.start();
}

main();
