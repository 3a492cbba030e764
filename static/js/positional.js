// Page controller of /positional: the encoding matrix, chosen dimensions, position similarity
// (GET /api/positional), a sentence's embedding + encoding (POST /api/positional/sentence) and
// the order experiment (POST /api/order). State lives in the query string:
//   ?positions=50&d_model=32&dims=0,1,8&text=I+go+home.&perm=2,1,0,3

import * as api from "./api.js";
import { markRendered } from "./compare.js";
import { afterPaint, clear, el, fmt } from "./dom.js";
import { drawBars, drawLines, drawMatrix } from "./plots.js";

const $ = (id) => document.getElementById(id);

function parseList(text) {
  const parts = String(text ?? "")
    .split(/[\s,]+/)
    .filter(Boolean);
  if (!parts.every((p) => /^\d{1,4}$/.test(p))) return null;
  return parts.map(Number);
}

class PositionalPage {
  constructor(pageData) {
    const model = (pageData.models ?? [])[0];
    this.modelD = model?.d_model ?? 64;
    const p = new URLSearchParams(window.location.search);
    this.state = {
      positions: Number(p.get("positions")) || 50,
      dModel: Number(p.get("d_model")) || this.modelD,
      dims: p.get("dims") ?? "",
      text: p.get("text") ?? "",
      perm: parseList(p.get("perm")),
    };
    this.encodingRequest = new api.LatestRequest();
    this.sentenceRequest = new api.LatestRequest();
    this.orderRequest = new api.LatestRequest();
    this.tokens = null; // source tokens of the current sentence
    this.perm = null; // current permutation
    this.orderTimer = 0;
    this.bind();
    $("pe-positions").value = String(this.state.positions);
    $("pe-dmodel").value = String(this.state.dModel);
    $("pe-dims").value = this.state.dims;
    $("sent-text").value = this.state.text;
    $("pe-meta").textContent = model ? `model ${model.name}: d_model ${this.modelD}` : "no model loaded";
  }

  bind() {
    $("pe-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.drawEncoding();
    });
    $("sent-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.loadSentence();
    });
    for (const chip of document.querySelectorAll("[data-example]")) {
      chip.addEventListener("click", () => {
        $("sent-text").value = chip.dataset.example;
        this.state.perm = null;
        this.loadSentence();
      });
    }
    $("order-reverse").addEventListener("click", () => {
      const n = this.perm.length;
      // Reverse the tokens before </s>; </s> stays where the model always saw it.
      const body = this.perm.slice(0, n - 1).reverse();
      this.setPerm([...body, this.perm[n - 1]], true);
    });
    $("order-reset").addEventListener("click", () => this.setPerm([...this.perm.keys()], true));
    $("order-run").addEventListener("click", () => this.applyPermText(true));
    $("order-perm").addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        this.applyPermText(true);
      }
    });
  }

  writeUrl() {
    const p = new URLSearchParams();
    p.set("positions", String(this.state.positions));
    p.set("d_model", String(this.state.dModel));
    if (this.state.dims) p.set("dims", this.state.dims);
    if (this.state.text) p.set("text", this.state.text);
    if (this.perm) p.set("perm", this.perm.join(","));
    const search = `?${p.toString()}`;
    if (search !== window.location.search) window.history.replaceState(null, "", `${window.location.pathname}${search}`);
  }


  // -- the encoding matrix -------------------------------------------------------------------
  async drawEncoding() {
    const positions = Number($("pe-positions").value);
    const dModel = Number($("pe-dmodel").value);
    const dimsText = $("pe-dims").value.trim();
    const dims = dimsText ? parseList(dimsText) : [];
    const box = $("pe-error");
    if (dims === null) {
      api.showError(box, "Dimensions: give whole numbers separated by commas, e.g. 0, 1, 8.");
      return;
    }
    const q = new URLSearchParams({ positions: String(positions), d_model: String(dModel) });
    for (const d of dims) q.append("dims", String(d));
    await this.encodingRequest.run(async (signal, isCurrent) => {
      const out = await api.getJSON(`/api/positional?${q.toString()}`, { signal });
      if (!isCurrent()) return;
      Object.assign(this.state, { positions: out.positions, dModel: out.d_model, dims: dimsText });
      this.writeUrl();
      const posLabels = [...Array(out.positions).keys()].map(String);
      const dimLabels = [...Array(out.d_model).keys()].map(String);
      await Promise.all([
        drawMatrix($("pe-matrix"), out.matrix, posLabels, dimLabels, {
          title: `PE matrix (${out.positions} positions × ${out.d_model} dims)`,
          yTitle: "position",
          xTitle: "dimension (even = sin, odd = cos)",
          scale: "diverging",
          zmin: -1,
          zmax: 1,
          colorbarTitle: "value",
          hover: (i, j, v) => `position ${i}, dim ${j} (${j % 2 ? "cos" : "sin"}): ${fmt(v, 4)}`,
          maxXTicks: 12,
          maxYTicks: 25,
          height: 420,
          filename: "attnscope-pe-matrix",
        }),
        drawLines(
          $("pe-curves"),
          out.dims.map((d, i) => ({
            name: `dim ${d} (${d % 2 ? "cos" : "sin"}, λ≈${out.wavelengths[i] >= 100 ? out.wavelengths[i].toFixed(0) : out.wavelengths[i].toFixed(1)})`,
            x: posLabels.map(Number),
            y: out.curves[i],
            mode: "lines",
          })),
          { title: "Chosen dimensions over positions", xTitle: "position", yTitle: "PE value", height: 420, yRange: [-1.1, 1.1], filename: "attnscope-pe-curves" },
        ),
        drawMatrix($("pe-similarity"), out.similarity, posLabels, posLabels, {
          title: "Similarity PE(p)·PE(q)",
          yTitle: "position p",
          xTitle: "position q",
          scale: "diverging",
          colorbarTitle: "dot product",
          hover: (i, j, v) => `p ${i}, q ${j} (offset ${j - i}): ${fmt(v, 3)}`,
          maxXTicks: 12,
          maxYTicks: 25,
          height: 420,
          filename: "attnscope-pe-similarity",
        }),
      ]);
      markRendered("encoding");
    }, { button: $("pe-draw"), errorBox: box });
  }

  // -- the sentence ----------------------------------------------------------------------------
  async loadSentence() {
    const text = $("sent-text").value;
    await this.sentenceRequest.run(async (signal, isCurrent) => {
      const { body: out } = await api.postJSON("/api/positional/sentence", { text }, { signal });
      if (!isCurrent()) return;
      this.state.text = text.trim();
      this.tokens = out.tokens;
      $("sent-empty").hidden = true;
      $("sent-body").hidden = false;
      $("sent-meta").textContent = `${out.tokens.length} tokens × d_model ${out.d_model} · model ${out.model}`;
      const dims = [...Array(out.d_model).keys()].map(String);
      const matrix = (div, z, title, name) =>
        drawMatrix(div, z, out.tokens, dims, {
          title,
          yTitle: "token",
          xTitle: "dimension",
          scale: "diverging",
          colorbarTitle: "value",
          hover: (i, j, v) => `${out.tokens[i]} (position ${i}), dim ${j}: ${fmt(v, 4)}`,
          height: Math.max(260, Math.min(460, 24 * out.tokens.length + 130)),
          maxXTicks: 12,
          filename: `attnscope-${name}`,
        });
      await Promise.all([
        matrix($("sent-embedding"), out.embedding, "Embedding × √d_model", "embedding"),
        matrix($("sent-positional"), out.positional, "Positional encoding", "positional"),
        matrix($("sent-total"), out.total, "Sum: the first layer's input", "sum"),
        drawBars(
          $("sent-norms"),
          out.tokens,
          [
            { name: "embedding × √d", values: out.norms.embedding, color: "#2563eb" },
            { name: "positional encoding", values: out.norms.positional, color: "#d6604d" },
            { name: "sum", values: out.norms.total, color: "#0f766e" },
          ],
          { title: "Vector norms per token", yTitle: "L2 norm", height: 280, hoverDigits: 2, filename: "attnscope-norms" },
        ),
      ]);
      // A permutation from the URL only applies to the sentence it was made for.
      const n = out.tokens.length;
      const fromUrl = this.state.perm;
      this.state.perm = null;
      const valid = fromUrl && fromUrl.length === n && [...fromUrl].sort((a, b) => a - b).every((v, i) => v === i);
      $("order-card").hidden = false;
      this.setPerm(valid ? fromUrl : [...[...Array(n - 1).keys()].reverse(), n - 1], false);
      markRendered("sentence");
      await this.runOrder();
    }, { button: $("sent-run"), errorBox: $("sent-error") });
  }

  // -- the order experiment --------------------------------------------------------------------
  setPerm(perm, run) {
    this.perm = perm;
    $("order-perm").value = perm.join(", ");
    this.renderTokens();
    this.writeUrl();
    if (run) {
      clearTimeout(this.orderTimer);
      this.orderTimer = setTimeout(() => this.runOrder(), 250);
    }
  }

  applyPermText(run) {
    const perm = parseList($("order-perm").value);
    const n = this.tokens?.length ?? 0;
    const ok = perm && perm.length === n && [...perm].sort((a, b) => a - b).every((v, i) => v === i);
    if (!ok) {
      api.showError($("order-error"), `Permutation: give each of the numbers 0..${n - 1} once, separated by commas.`);
      return;
    }
    api.showError($("order-error"), null);
    this.setPerm(perm, false);
    if (run) this.runOrder();
  }

  move(j, delta) {
    const k = j + delta;
    if (k < 0 || k >= this.perm.length) return;
    const perm = [...this.perm];
    [perm[j], perm[k]] = [perm[k], perm[j]];
    this.setPerm(perm, true);
    // Keep the keyboard on the token that moved.
    const side = delta < 0 ? "left" : "right";
    const target = $("order-tokens").children[k]?.querySelector(`[data-move="${side}"]`) ??
      $("order-tokens").children[k]?.querySelector("button");
    target?.focus();
  }

  renderTokens() {
    const list = clear($("order-tokens"));
    const n = this.perm.length;
    this.perm.forEach((p, j) => {
      const token = this.tokens[p];
      list.append(
        el("li", { class: "order-token", dataset: { source: String(p) } }, [
          el("button", {
            type: "button",
            class: "order-move",
            text: "◀",
            "aria-label": `Move ${token} left`,
            disabled: j === 0,
            dataset: { move: "left" },
            on: { click: () => this.move(j, -1) },
          }),
          el("span", { class: "tok tok-chip", text: token, title: `source position ${p}` }),
          el("span", { class: "order-index", text: String(p), "aria-hidden": "true" }),
          el("button", {
            type: "button",
            class: "order-move",
            text: "▶",
            "aria-label": `Move ${token} right`,
            disabled: j === n - 1,
            dataset: { move: "right" },
            on: { click: () => this.move(j, 1) },
          }),
        ]),
      );
    });
  }

  async runOrder() {
    clearTimeout(this.orderTimer);
    if (!this.perm) return;
    await this.orderRequest.run(async (signal, isCurrent) => {
      const { body: out } = await api.postJSON(
        "/api/order",
        { text: this.state.text, permutation: this.perm },
        { signal },
      );
      if (!isCurrent()) return;
      const rows = clear($("order-rows"));
      for (const run of out.runs) {
        rows.append(
          el("tr", { dataset: { pe: String(run.positional_encoding) } }, [
            el("th", { scope: "row", text: run.positional_encoding ? "on (paper)" : "off" }),
            el("td", { lang: "de", class: "order-translation", text: run.original.translation || "(empty)" }),
            el("td", { lang: "de", class: "order-translation", text: run.permuted.translation || "(empty)" }),
            el("td", {}, [
              el("span", { class: run.same_translation ? "badge" : "badge badge-warn", text: run.same_translation ? "same" : "different" }),
            ]),
            el("td", { class: "num mono", text: run.encoder_max_diff.toExponential(2) }),
          ]),
        );
      }
      $("order-result").hidden = false;
      const on = out.runs.find((r) => r.positional_encoding);
      const off = out.runs.find((r) => !r.positional_encoding);
      $("order-meta").textContent = `new order: ${out.permuted_tokens.join(" ")}`;
      // Log scale: the difference without encoding (~1e-7) and with it (~1) are both visible.
      const floor = 1e-9;
      await drawBars(
        $("order-diff"),
        out.permuted_tokens.map((t, j) => `${j}: ${t}`),
        [
          { name: "with positional encoding", values: on.encoder_position_diff.map((v) => Math.max(v, floor)), color: "#d6604d" },
          { name: "without", values: off.encoder_position_diff.map((v) => Math.max(v, floor)), color: "#2563eb" },
        ],
        {
          title: "Encoder output of each token: reordered vs original (max |difference|)",
          yTitle: "max |Δ| (log scale)",
          height: 300,
          hoverDigits: 8,
          logY: true,
          filename: "attnscope-order",
        },
      );
      $("status").textContent = `Order experiment: without positional encoding the max difference is ${off.encoder_max_diff.toExponential(1)}`;
      await afterPaint();
      markRendered("order");
    }, { button: $("order-run"), errorBox: $("order-error") });
  }

  start() {
    if (!window.Plotly) {
      api.showError($("pe-error"), "The plotting library could not be loaded from /vendor/plotly.min.js.");
      return;
    }
    this.drawEncoding();
    if (this.state.text) this.loadSentence();
  }
}

function main() {
  const node = $("page-data");
  const page = new PositionalPage(node ? JSON.parse(node.textContent) : {});
  page.start();
}

main();
