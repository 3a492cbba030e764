// Page controller of /heads: silence heads by clicking the layer x head grid, switch off the
// 1/sqrt(d_k) scaling, move the temperature (POST /api/experiment), and the q·k variance and
// softmax saturation plots (GET /api/scaling). State lives in the query string, the explorer's
// text/kind/layer/head (state.js) plus:  &silence=c1.2,e0.3&noscale=1&temp=2
// (silence: e = encoder self, d = decoder self, c = cross; then layer.head).

import * as api from "./api.js";
import { KINDS, KIND_NAMES } from "./attention.js";
import {
  MapPicker,
  decodeExperiment,
  drawComparison,
  drawEntropy,
  experimentBody,
  kindSummary,
  markRendered,
  renderTranslations,
} from "./compare.js";
import { fmt } from "./dom.js";
import { OverviewGrid, describeSelection } from "./grid.js";
import { drawLines } from "./plots.js";
import { DEFAULT_STATE, readState, stateToSearch } from "./state.js";

const $ = (id) => document.getElementById(id);
const LETTER = { encoder_self: "e", decoder_self: "d", cross: "c" };
const KIND_OF = { e: "encoder_self", d: "decoder_self", c: "cross" };
const DEFAULT_TEXT = "The cat is sleeping on the sofa.";

function key(ref) {
  return `${LETTER[ref.kind]}${ref.layer}.${ref.head}`;
}

function parseSilence(text) {
  const out = new Map();
  for (const part of (text ?? "").split(",")) {
    const m = /^([edc])(\d{1,2})\.(\d{1,2})$/.exec(part.trim());
    if (m) {
      const ref = { kind: KIND_OF[m[1]], layer: Number(m[2]), head: Number(m[3]) };
      out.set(key(ref), ref);
    }
  }
  return out;
}

/** The slider holds log2(T) in quarter steps, so 1/8..8 spreads evenly around the paper's 1. */
function temperatureOf(sliderValue) {
  return 2 ** Number(sliderValue);
}

class HeadsPage {
  constructor(pageData) {
    const model = (pageData.models ?? [])[0];
    this.model = model;
    this.defaults = { ...DEFAULT_STATE, model: model?.name ?? "" };
    const p = new URLSearchParams(window.location.search);
    this.view = readState(window.location.search, this.defaults); // text, kind, layer, head
    this.silenced = parseSilence(p.get("silence"));
    this.scale = p.get("noscale") !== "1";
    const t = Number(p.get("temp"));
    this.tempSlider = Number.isFinite(t) && t > 0 ? Math.max(-3, Math.min(3, Math.round(Math.log2(t) * 4) / 4)) : 0;
    this.request = new api.LatestRequest();
    this.out = null;
    this.maps = null;
    this.timer = 0;

    this.grid = new OverviewGrid($("head-grid"), { onSelect: (sel) => this.toggle(sel), averages: false });
    this.picker = new MapPicker($("picker"), { name: "view", onChange: () => this.onPick() });
    const layer = Number.isInteger(this.view.layer) ? this.view.layer : 0;
    const head = Number.isInteger(this.view.head) ? this.view.head : 0;
    this.picker.sel = { kind: this.view.kind, layer, head };
    $("text").value = this.view.text || DEFAULT_TEXT;
    $("scale").checked = this.scale;
    $("temperature").value = String(this.tempSlider);
    this.showTemperature();
    if (model) {
      const dk = model.d_model / model.n_heads;
      $("heads-meta").textContent = `model ${model.name}: ${model.n_encoder_layers}+${model.n_decoder_layers} layers, ${model.n_heads} heads, d_k = ${dk}`;
    }
    this.bind();
  }

  bind() {
    $("heads-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.run();
    });
    for (const chip of document.querySelectorAll("[data-example]")) {
      chip.addEventListener("click", () => {
        $("text").value = chip.dataset.example;
        this.run();
      });
    }
    $("scale").addEventListener("change", () => {
      this.scale = $("scale").checked;
      this.run();
    });
    const slider = $("temperature");
    slider.addEventListener("input", () => this.showTemperature());
    // Run when the value settles (mouse released, or each key press), not on every pixel.
    slider.addEventListener("change", () => {
      this.tempSlider = Number(slider.value);
      this.run();
    });
    $("reset").addEventListener("click", () => {
      this.silenced.clear();
      this.scale = true;
      this.tempSlider = 0;
      $("scale").checked = true;
      slider.value = "0";
      this.showTemperature();
      this.run();
    });
  }

  showTemperature() {
    $("temperature-value").textContent = temperatureOf($("temperature").value).toFixed(2);
  }

  experiment() {
    return {
      scale_scores: this.scale,
      temperature: temperatureOf(this.tempSlider),
      silence: [...this.silenced.values()],
    };
  }

  writeUrl() {
    const sel = this.picker.sel;
    const state = { ...this.view, text: $("text").value.trim(), kind: sel.kind, layer: sel.layer, head: sel.head };
    const p = new URLSearchParams(stateToSearch(state, this.defaults));
    if (this.silenced.size) p.set("silence", [...this.silenced.keys()].join(","));
    if (!this.scale) p.set("noscale", "1");
    if (this.tempSlider !== 0) p.set("temp", temperatureOf(this.tempSlider).toPrecision(4));
    const search = `?${p.toString()}`;
    if (search !== window.location.search) window.history.replaceState(null, "", `${window.location.pathname}${search}`);
  }


  // -- silence by clicking ---------------------------------------------------------------------
  toggle(sel) {
    const ref = { kind: sel.kind, layer: sel.layer, head: sel.head };
    const k = key(ref);
    if (this.silenced.has(k)) this.silenced.delete(k);
    else this.silenced.set(k, ref);
    this.markSilenced();
    // Several quick clicks become one request.
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), 300);
  }

  markSilenced() {
    for (const cell of this.grid.cells) {
      const s = cell._selection;
      const on = this.silenced.has(key(s));
      cell.classList.remove("is-selected"); // the grid's own "selected" look: not used here
      cell.classList.toggle("is-silenced", on);
      cell.setAttribute("aria-pressed", on ? "true" : "false");
      const label = `${describeSelection(s)}${on ? ", silenced" : ""}`;
      cell.setAttribute("aria-label", label);
      cell.title = `${label} (press to ${on ? "restore" : "silence"})`;
    }
  }

  // -- the experiment --------------------------------------------------------------------------
  async run() {
    clearTimeout(this.timer);
    const text = $("text").value;
    const where = { button: $("run"), errorBox: $("heads-error"), region: $("maps") };
    await this.request.run(async (signal, isCurrent) => {
      const body = experimentBody({ text, top_k: 0, experiment: this.experiment() });
      const { body: out } = await api.postJSON("/api/experiment", body, { signal });
      if (!isCurrent()) return;
      this.out = out;
      this.maps = decodeExperiment(out);
      $("experiment").hidden = false;
      this.renderGrid();
      renderTranslations($("translations"), out);
      const e = out.applied;
      const parts = [
        e.silence.length ? `${e.silence.length} head${e.silence.length === 1 ? "" : "s"} silenced` : "no head silenced",
        e.scale_scores ? "scores divided by √d_k" : "no 1/√d_k scaling",
        `temperature ${fmt(e.temperature, 2)}`,
      ];
      $("experiment-line").textContent = `Experiment: ${parts.join(" · ")}`;
      this.picker.setCounts(this.maps.baseline);
      this.writeUrl();
      await this.drawMaps();
      $("status").textContent = `${out.diff.translation_changed ? "The translation changed" : "Same translation"}; log-probability change ${fmt(out.diff.logprob_change, 2)}`;
      markRendered("experiment");
    }, where);
  }

  renderGrid() {
    // Keep keyboard focus on the same cell across the re-render.
    const focused = document.activeElement?.closest?.(".ov-cell")?._selection;
    const sections = KIND_NAMES.filter((k) => this.maps.baseline[k]).map((kind) => ({
      kind,
      maps: this.maps.baseline[kind],
      title: KINDS[kind].short,
    }));
    this.grid.render(sections, { selected: focused ?? null, shared: false });
    this.markSilenced();
    if (focused) {
      const cell = this.grid.cells.find((c) => describeSelection(c._selection) === describeSelection(focused));
      cell?.focus();
    }
  }

  async onPick() {
    this.writeUrl();
    if (!this.out) return;
    await this.drawMaps();
    markRendered("view");
  }

  async drawMaps() {
    const sel = this.picker.sel;
    $("kind-summary").textContent = kindSummary(this.out, sel.kind);
    await Promise.all([
      drawComparison({ baseline: $("map-baseline"), experiment: $("map-experiment"), diff: $("map-diff") }, this.maps, sel),
      drawEntropy($("entropy"), this.out, sel.kind),
    ]);
  }

  // -- scaling plots ---------------------------------------------------------------------------
  async drawScaling() {
    try {
      // Spreads on a log axis from 1/8 to 32 (the API's default includes 0, which a log axis
      // cannot show).
      const q = new URLSearchParams();
      for (const s of [0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32]) q.append("spreads", String(s));
      const out = await api.getJSON(`/api/scaling?${q.toString()}`);
      const dk = this.model ? this.model.d_model / this.model.n_heads : null;
      $("scaling-meta").textContent = `${out.samples} random (q, k) pairs per d_k, seed ${out.seed}` + (dk ? ` · this model: d_k = ${dk}` : "");
      const sat = out.saturation;
      // One curve per score, ranked by score: the largest climbs to 1, the others fall to 0.
      const order = [...sat.scores.keys()].sort((a, b) => sat.scores[b] - sat.scores[a]);
      const spreads = sat.spreads;
      await Promise.all([
        drawLines(
          $("variance"),
          [
            { name: "Var(q·k)", x: out.d_k, y: out.variance_raw, color: "#d6604d" },
            { name: "Var(q·k / √d_k)", x: out.d_k, y: out.variance_scaled, color: "#2563eb" },
            { name: "d_k", x: out.d_k, y: out.d_k, color: "#94a3b8", dash: "dot", mode: "lines" },
          ],
          { title: "Variance of q·k for random vectors", xTitle: "d_k (log scale)", yTitle: "variance (log scale)", logX: true, logY: true, height: 360, hoverDigits: 2, filename: "attnscope-qk-variance" },
        ),
        drawLines(
          $("saturation"),
          order.map((i, r) => ({
            name: `score ${sat.scores[i] >= 0 ? "+" : ""}${sat.scores[i].toFixed(2)}`,
            x: spreads,
            y: sat.probs.map((row) => row[i]),
            color: r === 0 ? "#d6604d" : r === 1 ? "#f4a582" : "#94a3b8",
            mode: "lines+markers",
          })),
          {
            title: "softmax(spread × scores) as the spread grows",
            xTitle: "spread, log scale (what √d_k does to unscaled scores)",
            logX: true,
            yTitle: "weight",
            yRange: [0, 1.02],
            height: 360,
            hoverDigits: 3,
            showLegend: false,
            filename: "attnscope-softmax-saturation",
          },
        ),
      ]);
      markRendered("scaling");
    } catch (err) {
      $("scaling-meta").textContent = api.errorText(err);
    }
  }

  start() {
    if (!window.Plotly) {
      api.showError($("heads-error"), "The plotting library could not be loaded from /vendor/plotly.min.js.");
      return;
    }
    this.drawScaling();
    this.run();
  }
}

function main() {
  const node = $("page-data");
  const page = new HeadsPage(node ? JSON.parse(node.textContent) : {});
  page.start();
}

main();
