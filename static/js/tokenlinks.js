// Token-link view (after BertViz's head view): queries in the left column, keys in the right,
// joined by lines whose opacity is the attention weight. Hovering or focusing a token keeps only
// its links and shades the tokens on the other side by weight.

import { clear, fmt, svg } from "./dom.js";

const ROW = 20; // px per token row
const TOP = 26; // room for the column headings
const MIN_WEIGHT = 0.01; // lines fainter than this are invisible anyway; skip them

/**
 * container: element to fill. opts: queryTokens (nQ), keyTokens (nK), values (Float32Array
 * [nQ*nK] row-major), queryLabel, keyLabel, width (defaults to the container's width).
 */
export function renderTokenLinks(container, opts) {
  const { queryTokens, keyTokens, values } = opts;
  const nQ = queryTokens.length;
  const nK = keyTokens.length;
  const width = Math.max(320, Math.round(opts.width ?? container.clientWidth ?? 420));
  const height = TOP + Math.max(nQ, nK) * ROW + 6;
  const colW = Math.min(170, Math.round(width * 0.32)); // text column width
  const xQ = colW; // right edge of query labels
  const xK = width - colW; // left edge of key labels
  const yOf = (i) => TOP + i * ROW + ROW / 2;

  const root = svg("svg", {
    class: "links-svg",
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    role: "group",
    "aria-label": `Links from ${nQ} query tokens to ${nK} key tokens`,
  });
  root.append(
    svg("text", { x: xQ, y: 14, class: "links-head", "text-anchor": "end" }, [opts.queryLabel ?? "queries"]),
    svg("text", { x: xK, y: 14, class: "links-head", "text-anchor": "start" }, [opts.keyLabel ?? "keys"]),
  );

  // Lines, grouped by query row so isolating one query is a class switch on one group.
  const lineLayer = svg("g", { class: "links" });
  const byQuery = [];
  const byKey = Array.from({ length: nK }, () => []);
  for (let q = 0; q < nQ; q++) {
    const group = svg("g", { class: "links-row" });
    for (let k = 0; k < nK; k++) {
      const w = values[q * nK + k];
      if (!(w >= MIN_WEIGHT)) continue;
      const line = svg("line", {
        x1: xQ + 6,
        y1: yOf(q),
        x2: xK - 6,
        y2: yOf(k),
        "stroke-opacity": Math.min(1, w).toFixed(3),
      });
      group.append(line);
      byKey[k].push(line);
    }
    byQuery.push(group);
    lineLayer.append(group);
  }
  root.append(lineLayer);

  const makeToken = (text, i, side) => {
    const isQuery = side === "q";
    const rect = svg("rect", {
      class: "tok-bg",
      x: isQuery ? 2 : xK - 2,
      y: yOf(i) - ROW / 2 + 1,
      width: colW - 4,
      height: ROW - 2,
      rx: 4,
    });
    const label = svg(
      "text",
      { x: isQuery ? xQ - 2 : xK + 2, y: yOf(i) + 4, "text-anchor": isQuery ? "end" : "start" },
      [text],
    );
    const g = svg(
      "g",
      {
        class: `tok tok-${side}`,
        tabindex: "0",
        "aria-label": `${isQuery ? "query" : "key"} ${i}: ${text}`,
      },
      [svg("title", {}, [`${isQuery ? "query" : "key"} ${i}: ${text}`]), rect, label],
    );
    return { g, rect };
  };
  const qTokens = queryTokens.map((t, i) => makeToken(t, i, "q"));
  const kTokens = keyTokens.map((t, i) => makeToken(t, i, "k"));
  root.append(svg("g", { class: "tokens" }, [...qTokens.map((t) => t.g), ...kTokens.map((t) => t.g)]));

  // Isolation: show one token's links; shade the other column by weight (relative to the row max).
  const reset = () => {
    root.classList.remove("is-isolating");
    for (const line of root.querySelectorAll("line.is-on")) line.classList.remove("is-on");
    for (const t of [...qTokens, ...kTokens]) {
      t.rect.style.removeProperty("fill-opacity");
      t.g.classList.remove("is-active");
      t.g.querySelector("title").textContent = t.g.getAttribute("aria-label");
    }
  };
  const isolate = (side, i) => {
    reset();
    root.classList.add("is-isolating");
    const own = side === "q" ? qTokens[i] : kTokens[i];
    own.g.classList.add("is-active");
    const lines = side === "q" ? byQuery[i].children : byKey[i];
    for (const line of lines) line.classList.add("is-on");
    const others = side === "q" ? kTokens : qTokens;
    const weights = others.map((_, j) => (side === "q" ? values[i * nK + j] : values[j * nK + i]));
    const top = Math.max(...weights, 1e-6);
    others.forEach((t, j) => {
      t.rect.style.fillOpacity = (0.85 * (weights[j] / top)).toFixed(3);
      const title = t.g.querySelector("title");
      title.textContent = `${t.g.getAttribute("aria-label")} · weight ${fmt(weights[j])}`;
    });
  };
  qTokens.forEach((t, i) => bindHover(t.g, () => isolate("q", i), reset));
  kTokens.forEach((t, i) => bindHover(t.g, () => isolate("k", i), reset));

  clear(container).append(root);
  return root;
}

function bindHover(node, enter, leave) {
  node.addEventListener("mouseenter", enter);
  node.addEventListener("focus", enter);
  node.addEventListener("mouseleave", leave);
  node.addEventListener("blur", leave);
}
