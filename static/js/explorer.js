// Page controller of the translate + attention explorer page: wires the form, the API call and
// the views (overview grid, large heatmap, token links, decoder steps) to one state object that
// also lives in the URL. The views are reusable modules; this file only decides what goes where.

import * as api from "./api.js";
import { KINDS, KIND_NAMES, decodeAttentionSliced, maxOf } from "./attention.js";
import { afterPaint, clear, el, nextTask } from "./dom.js";
import { OverviewGrid, describeSelection } from "./grid.js";
import { drawHeatmap, heatmapHeight } from "./heatmap.js";
import { DEFAULT_STATE, readState, writeState } from "./state.js";
import { renderSteps } from "./steps.js";
import { renderTokenLinks } from "./tokenlinks.js";

const $ = (id) => document.getElementById(id);

function slug(text) {
  return (
    text
      .toLowerCase()
      .normalize("NFKD")
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 40) || "translation"
  );
}

function kb(bytes) {
  return bytes >= 1024 ? `${(bytes / 1024).toFixed(0)} KB` : `${bytes} B`;
}

class ExplorerPage {
  constructor(pageData) {
    this.pageData = pageData;
    const models = pageData.models ?? [];
    this.defaults = { ...DEFAULT_STATE, model: models[0]?.name ?? "" };
    this.state = readState(window.location.search, this.defaults);
    this.response = null; // last successful response body
    this.rawResponse = ""; // its exact text, for the JSON download
    this.maps = null; // {kind: AttentionMaps}
    this.inflight = null; // AbortController of the running request
    // Counters of the latest render and the latest drawn selection: a long render yields to the
    // browser between its parts, and stops when a newer one has started meanwhile.
    this.renderJob = 0;
    this.selectionJob = 0;

    this.form = $("translate-form");
    this.textInput = $("text");
    this.beamSelect = $("beam");
    this.topKSelect = $("top-k");
    this.modelSelect = $("model");
    this.button = $("translate-button");
    this.errorBox = $("error");
    this.statusLine = $("status");
    this.explorer = $("explorer");
    this.layerSelect = $("layer");
    this.headSelect = $("head");
    this.sharedBox = $("shared-scale");
    this.heatmapDiv = $("heatmap");
    this.linksBox = $("token-links");

    this.grid = new OverviewGrid($("overview"), { onSelect: (sel) => this.select(sel, { fromGrid: true }) });
    this.bind();
    this.applyStateToForm();
  }

  bind() {
    this.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.translate();
    });
    this.textInput.addEventListener("keydown", (e) => {
      // Enter submits; Shift+Enter keeps the newline; never interrupt an IME composition.
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.form.requestSubmit();
      }
    });
    for (const chip of document.querySelectorAll("[data-example]")) {
      chip.addEventListener("click", () => {
        this.textInput.value = chip.dataset.example;
        this.translate();
      });
    }
    for (const radio of document.querySelectorAll('input[name="kind"]')) {
      radio.addEventListener("change", () => radio.checked && this.select({ ...this.selection(), kind: radio.value }));
    }
    this.layerSelect.addEventListener("change", () => {
      const layer = this.layerSelect.value === "all" ? "all" : Number(this.layerSelect.value);
      const head = layer === "all" ? "mean" : this.state.layer === "all" ? "mean" : this.state.head;
      this.select({ kind: this.state.kind, layer, head });
    });
    this.headSelect.addEventListener("change", () => {
      const head = this.headSelect.value === "mean" ? "mean" : Number(this.headSelect.value);
      this.select({ kind: this.state.kind, layer: this.state.layer, head });
    });
    this.sharedBox.addEventListener("change", () => {
      this.state.shared = this.sharedBox.checked;
      writeState(this.state, this.defaults);
      if (this.maps) {
        this.drawGrid();
        this.drawSelection().then(() => this.rendered());
      }
    });
    $("download-json").addEventListener("click", () => this.download());
    // Token links are laid out for the panel's width; redraw when it changes.
    let lastWidth = 0;
    new ResizeObserver(([entry]) => {
      const w = Math.round(entry.contentRect.width);
      if (this.maps && Math.abs(w - lastWidth) > 24) this.drawLinks();
      lastWidth = w;
    }).observe(this.linksBox);
  }

  applyStateToForm() {
    const s = this.state;
    this.textInput.value = s.text;
    if ([...this.beamSelect.options].some((o) => o.value === String(s.beam))) this.beamSelect.value = String(s.beam);
    if ([...this.topKSelect.options].some((o) => o.value === String(s.topK))) this.topKSelect.value = String(s.topK);
    if (s.model && [...this.modelSelect.options].some((o) => o.value === s.model)) this.modelSelect.value = s.model;
    this.sharedBox.checked = s.shared;
    this.setKindRadio(s.kind);
  }

  selection() {
    return { kind: this.state.kind, layer: this.state.layer, head: this.state.head };
  }

  // -- translate -------------------------------------------------------------------------------
  async translate() {
    const text = this.textInput.value;
    this.inflight?.abort();
    const controller = new AbortController();
    this.inflight = controller;
    this.setBusy(true);
    this.showError(null);
    const params = {
      text,
      model: this.modelSelect.value || undefined,
      beam_size: Number(this.beamSelect.value),
      top_k: Number(this.topKSelect.value),
    };
    const t0 = performance.now();
    try {
      const { body, text: raw } = await api.translate(params, { signal: controller.signal });
      if (this.inflight !== controller) return; // a newer request replaced this one
      performance.clearMarks();
      performance.clearMeasures();
      performance.mark("attnscope:response");
      const fetchMs = performance.now() - t0;
      const maps = await decodeAttentionSliced(body.attention);
      if (this.inflight !== controller) return;
      if (!Object.keys(maps).length) throw new Error("the response holds no attention maps");
      this.response = body;
      this.rawResponse = raw;
      this.maps = maps;
      Object.assign(this.state, { text, beam: params.beam_size, topK: params.top_k, model: params.model ?? "" });
      await this.renderAll(fetchMs, raw.length);
    } catch (err) {
      if (err.name === "AbortError") return;
      if (err instanceof api.ApiError) this.showError(err.message);
      else {
        console.warn("translate failed:", err); // a bug, not bad input: keep the stack
        this.showError(`Something went wrong while showing the result: ${err.message}`);
      }
      this.explorer.setAttribute("aria-busy", "false");
    } finally {
      if (this.inflight === controller) {
        this.inflight = null;
        this.setBusy(false);
      }
    }
  }

  /** Draw every view of a new response, in parts with yields between them (and inside the grid
   * and the steps table), so that even a 256-token response never freezes the page. */
  async renderAll(fetchMs, bytes) {
    const job = ++this.renderJob;
    const stale = () => job !== this.renderJob;
    const t0 = performance.now();
    this.explorer.setAttribute("aria-busy", "true");
    this.renderResult(this.response, fetchMs, bytes);
    this.explorer.hidden = false;
    this.clampSelection();
    this.syncControls();
    await this.drawGrid();
    await afterPaint();
    if (stale()) return; // the newer render finishes the job
    performance.mark("attnscope:grid-drawn");
    const gridMs = performance.measure("attnscope:grid", "attnscope:response", "attnscope:grid-drawn").duration;
    await this.drawSelection();
    if (stale() || !(await renderSteps($("steps"), this.response.steps ?? [], stale))) return;
    performance.mark("attnscope:heatmap-drawn");
    performance.measure("attnscope:views", "attnscope:response", "attnscope:heatmap-drawn");
    const totalMs = performance.now() - t0;
    $("draw-meta").textContent = `grid drawn ${gridMs.toFixed(0)} ms after the response · all views ${totalMs.toFixed(0)} ms`;
    this.statusLine.textContent = `Translated: ${this.response.translation}`;
    writeState(this.state, this.defaults);
    this.rendered();
  }

  /** Every view shows the current state: clear the busy flag and count the render (the count
   * lets scripts and tests wait for "the next complete render" without guessing at timing). */
  rendered() {
    this.explorer.setAttribute("aria-busy", "false");
    this.explorer.dataset.renders = String(Number(this.explorer.dataset.renders || 0) + 1);
  }

  renderResult(r, fetchMs, bytes) {
    $("result-empty").hidden = true;
    $("result-body").hidden = false;
    $("translation").textContent = r.translation;
    const chips = (tokens) => tokens.map((t) => el("span", { class: "tok tok-chip", text: t }));
    clear($("source-tokens")).append(...chips(r.source_tokens ?? []));
    clear($("target-tokens")).append(...chips(r.target_tokens ?? []));
    const server = r.timings_ms?.total;
    const parts = [
      `${r.model} on ${r.device}`,
      `beam ${this.state.beam}`,
      Number.isFinite(r.score) ? `log-prob ${r.score.toFixed(2)}` : null,
      Number.isFinite(server) ? `model ${server.toFixed(0)} ms` : null,
      `round trip ${fetchMs.toFixed(0)} ms`,
      kb(bytes),
    ];
    $("result-meta").textContent = parts.filter(Boolean).join(" · ");
    $("download-json").disabled = false;
  }

  // -- selection -------------------------------------------------------------------------------
  /** Keep the state's kind/layer/head inside what the response holds (e.g. after a shared URL). */
  clampSelection() {
    const s = this.state;
    if (!this.maps[s.kind]) s.kind = KIND_NAMES.find((k) => this.maps[k]);
    const maps = this.maps[s.kind];
    if (s.layer !== "all" && !maps.layers.includes(s.layer)) s.layer = maps.layers[0];
    if (s.layer === "all") s.head = "mean";
    else if (s.head !== "mean" && !maps.heads.includes(s.head)) s.head = maps.heads[0];
  }

  setKindRadio(kind) {
    for (const radio of document.querySelectorAll('input[name="kind"]')) {
      radio.checked = radio.value === kind;
      radio.disabled = Boolean(this.maps) && !this.maps[radio.value];
    }
  }

  /** Fill the layer/head selects for the current kind and show the state in every control. */
  syncControls() {
    const s = this.state;
    const maps = this.maps[s.kind];
    this.setKindRadio(s.kind);
    const layerOptions = maps.layers.map((l) => el("option", { value: String(l), text: `Layer ${l}` }));
    layerOptions.push(el("option", { value: "all", text: "All layers (mean)" }));
    clear(this.layerSelect).append(...layerOptions);
    this.layerSelect.value = String(s.layer);
    const headOptions = maps.heads.map((h) => el("option", { value: String(h), text: `Head ${h}` }));
    headOptions.push(el("option", { value: "mean", text: "Mean over heads" }));
    clear(this.headSelect).append(...headOptions);
    this.headSelect.value = String(s.head);
    this.headSelect.disabled = s.layer === "all";
    this.grid.setSelected(this.selection());
  }

  async select(sel, { fromGrid = false } = {}) {
    if (!this.maps) return;
    Object.assign(this.state, sel);
    this.clampSelection();
    this.syncControls();
    writeState(this.state, this.defaults);
    if (fromGrid) $("heatmap").closest(".view-panel").scrollIntoView({ block: "nearest" });
    await this.drawSelection();
    this.rendered();
  }

  /** Resolves once every thumbnail is painted (or a newer grid replaced this one). */
  drawGrid() {
    const sections = KIND_NAMES.filter((k) => this.maps[k]).map((kind) => ({ kind, maps: this.maps[kind] }));
    return this.grid.render(sections, { selected: this.selection(), shared: this.state.shared });
  }

  current() {
    const maps = this.maps[this.state.kind];
    return { maps, picked: maps.select(this.state) };
  }

  /** Token links, then (in a new task) the large heatmap of the current selection. */
  async drawSelection() {
    const job = ++this.selectionJob;
    const { maps, picked } = this.current();
    if (!picked) return;
    const kind = KINDS[maps.kind];
    const label = describeSelection(this.selection());
    $("view-label").textContent = label;
    this.explorer.dataset.view = `${this.state.kind}:${this.state.layer}:${this.state.head}`;
    this.drawLinks();
    await nextTask();
    if (job !== this.selectionJob) return; // a newer selection draws the heatmap
    const name = `attnscope-${this.state.kind}-L${this.state.layer}-H${this.state.head}`;
    await drawHeatmap(this.heatmapDiv, {
      values: picked.values,
      yTokens: maps.queryTokens,
      xTokens: maps.keyTokens,
      title: `${kind.label} · ${picked.label}`,
      yTitle: kind.query,
      xTitle: kind.key,
      zmin: 0,
      zmax: this.state.shared ? 1 : maxOf(picked.values),
      filename: name,
      // As tall as the overview grid beside it (no hole under a short sentence's map), within
      // what a laptop screen shows at once.
      height: Math.min(760, Math.max(heatmapHeight(maps.nQ), $("overview").closest(".panel").offsetHeight)),
    });
  }

  drawLinks() {
    const { maps, picked } = this.current();
    if (!picked) return;
    renderTokenLinks(this.linksBox, {
      queryTokens: maps.queryTokens,
      keyTokens: maps.keyTokens,
      values: picked.values,
      queryLabel: KINDS[maps.kind].query,
      keyLabel: KINDS[maps.kind].key,
    });
  }

  // -- misc ------------------------------------------------------------------------------------
  download() {
    if (!this.rawResponse) return;
    api.downloadText(this.rawResponse, `attnscope-${slug(this.state.text)}.json`);
  }

  setBusy(busy) {
    this.button.disabled = busy;
    this.button.classList.toggle("is-busy", busy);
    this.button.querySelector(".btn-label").textContent = busy ? "Translating…" : "Translate";
    this.form.setAttribute("aria-busy", String(busy));
    if (busy) this.statusLine.textContent = "Translating…";
  }

  showError(message) {
    this.errorBox.hidden = !message;
    this.errorBox.textContent = message ?? "";
  }

  start() {
    if (!window.Plotly) {
      this.showError("The plotting library could not be loaded from /vendor/plotly.min.js.");
      return;
    }
    if (this.state.text) this.translate();
    else this.textInput.focus();
  }
}

function main() {
  const node = $("page-data");
  const pageData = node ? JSON.parse(node.textContent) : {};
  const page = new ExplorerPage(pageData);
  page.start();
}

main();
