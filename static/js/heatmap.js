// Heatmaps: the large interactive Plotly view, and tiny canvas thumbnails for overview grids.
//
// Axes are numeric (0..n-1) with tickvals/ticktext, never categorical: a sentence often holds the
// same token twice ("the ... the"), and a categorical axis would merge those rows.

import { DIVERGING, SEQUENTIAL, lut } from "./colors.js";
import { fmt, plotlyText } from "./dom.js";

export const FONT_FAMILY =
  'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif';

/**
 * Paint a map into a canvas at one pixel per weight (CSS scales it up, pixelated).
 * values: Float32Array [nQ * nK] row-major; zmin..zmax map onto the colour scale.
 */
export function drawThumbnail(canvas, values, nQ, nK, { zmin = 0, zmax = 1, scale = SEQUENTIAL } = {}) {
  if (canvas.width !== nK) canvas.width = nK;
  if (canvas.height !== nQ) canvas.height = nQ;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(nK, nQ);
  const px = img.data;
  const table = lut(scale);
  const span = zmax - zmin || 1;
  for (let i = 0, n = nQ * nK; i < n; i++) {
    let t = Math.round(((values[i] - zmin) / span) * 255);
    t = t < 0 ? 0 : t > 255 ? 255 : t;
    px[4 * i] = table[3 * t];
    px[4 * i + 1] = table[3 * t + 1];
    px[4 * i + 2] = table[3 * t + 2];
    px[4 * i + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

/** A sensible plot height for nQ rows: readable rows, bounded for laptop screens. */
export function heatmapHeight(nQ) {
  return Math.round(Math.max(420, Math.min(640, 24 * nQ + 190)));
}

const LABEL_PX = 14; // spacing a 12 px tick label needs across its line of text
const SMALL_LABEL_PX = 10; // down to this spacing, labels shrink (to 8 px) rather than thin out
const CHAR_PX = 7.5; // average width of a 12 px label character, for horizontal key labels

/**
 * Which token indices to label on an axis showing lo..hi over `px` pixels, so that labels are at
 * least `minPx` apart: every index when they fit, else every step-th (multiples of the step, so
 * labels stay put while panning); minPx 0 labels every index. Long sentences would otherwise
 * stack hundreds of labels on top of each other, and measuring them all blocks the page for
 * seconds.
 */
export function tickIndices(lo, hi, px, minPx = LABEL_PX) {
  const first = Math.max(0, Math.ceil(lo));
  const last = Math.floor(hi);
  const step = Math.max(1, Math.ceil((minPx * Math.max(1, hi - lo)) / Math.max(1, px)));
  const out = [];
  for (let i = Math.ceil(first / step) * step; i <= last; i += step) out.push(i);
  return out;
}

/** Plotly axis ticks labelling `indices` with their entries of `text` (already escaped). */
export function axisTicks(indices, text) {
  return { tickmode: "array", tickvals: indices, ticktext: indices.map((i) => text[i]) };
}

/**
 * Ticks for one token per line of text (the query axis, or rotated key labels) over lo..hi:
 * every token in a 12 px font when there is room, in a smaller font when a little is missing
 * (a 20-token sentence in a narrow plot keeps all its labels), else every k-th token.
 */
function lineTicks(text, lo, hi, px) {
  const spacing = px / Math.max(1, hi - lo);
  if (spacing >= LABEL_PX) return { ...axisTicks(tickIndices(lo, hi, px, 0), text), tickfont: { size: 12 } };
  if (spacing >= SMALL_LABEL_PX) {
    return { ...axisTicks(tickIndices(lo, hi, px, 0), text), tickfont: { size: Math.floor(spacing - 2) } };
  }
  return { ...axisTicks(tickIndices(lo, hi, px), text), tickfont: { size: 12 } };
}

/** An axis title, saying so when only every k-th token is labelled (hover still names each). */
function axisTitleText(title, ticks) {
  const v = ticks.tickvals;
  const step = v.length > 1 ? v[1] - v[0] : 1;
  const text = plotlyText(title ?? "");
  return step > 1 ? `${text} · 1 in ${step} labelled, zoom in for all` : text;
}

/** Estimated size of the plotting area (inside the tick labels and colour bar) in pixels. */
function plotArea(div, height) {
  return { width: Math.max(200, (div.clientWidth || 700) - 180), height: Math.max(120, height - 120) };
}

/** Key (x) labels over lo..hi: horizontal when every label of the range fits side by side. */
function keyTicks(text, lo, hi, px) {
  const shown = text.slice(Math.max(0, Math.ceil(lo)), Math.floor(hi) + 1);
  const flatPx = Math.max(1, ...shown.map((t) => t.length)) * CHAR_PX + 6;
  if (flatPx * Math.max(1, hi - lo) <= px) {
    return { ...axisTicks(tickIndices(lo, hi, px, 0), text), tickfont: { size: 12 }, tickangle: 0 };
  }
  return { ...lineTicks(text, lo, hi, px), tickangle: -55 };
}

/**
 * Keep tick labels readable while zooming: after any change of the axes' ranges, label the
 * visible part again at the density that fits. Attached once per plot div.
 */
function relabelOnZoom(div) {
  if (div.dataset.relabels) return;
  div.dataset.relabels = "1";
  div.on("plotly_relayout", (event) => {
    const ticks = div._attnscopeTicks;
    if (!ticks || !Object.keys(event).some((key) => /^[xy]axis\.(range|autorange)/.test(key))) return;
    const [x0, x1] = div.layout.xaxis.range;
    const [y0, y1] = div.layout.yaxis.range;
    const area = plotArea(div, div.layout.height);
    const x = keyTicks(ticks.x, Math.min(x0, x1), Math.max(x0, x1), area.width);
    const y = lineTicks(ticks.y, Math.min(y0, y1), Math.max(y0, y1), area.height);
    const update = {
      "xaxis.title.text": axisTitleText(ticks.xTitle, x),
      "yaxis.title.text": axisTitleText(ticks.yTitle, y),
    };
    for (const [axis, t] of [["xaxis", x], ["yaxis", y]]) {
      for (const [key, value] of Object.entries(t)) update[`${axis}.${key}`] = value;
    }
    window.Plotly.relayout(div, update);
  });
}

/**
 * Draw (or update) a large heatmap with tokens on both axes: queries down (y, first token on top),
 * keys across (x). Hover shows "query → key: weight".
 *
 * opts: values (Float32Array [nQ*nK]), yTokens (nQ), xTokens (nK), title, yTitle, xTitle,
 * zmin/zmax (default 0..max), diverging (centre a blue-white-red scale on 0), colorbarTitle,
 * filename (PNG download name), digits (hover precision), height.
 * Returns Plotly's promise.
 */
export function drawHeatmap(div, opts) {
  const { values, yTokens, xTokens } = opts;
  const nQ = yTokens.length;
  const nK = xTokens.length;
  if (values.length !== nQ * nK) throw new Error(`heatmap: ${values.length} values for ${nQ} x ${nK} tokens`);
  const digits = opts.digits ?? 4;
  const yText = yTokens.map(plotlyText);
  const xText = xTokens.map(plotlyText);
  const z = new Array(nQ);
  const hover = new Array(nQ);
  for (let q = 0; q < nQ; q++) {
    const row = Array.from(values.subarray(q * nK, (q + 1) * nK));
    z[q] = row;
    hover[q] = row.map((w, k) => `${yText[q]} → ${xText[k]}: ${fmt(w, digits)}<br>query ${q}, key ${k}`);
  }
  let zmin = opts.zmin ?? 0;
  let zmax = opts.zmax;
  if (zmax === undefined) {
    zmax = 0;
    for (const v of values) if (v > zmax) zmax = v;
    zmax = zmax || 1;
  }
  if (opts.diverging) {
    const m = Math.max(Math.abs(zmin), Math.abs(zmax)) || 1;
    zmin = -m;
    zmax = m;
  }
  const height = opts.height ?? heatmapHeight(nQ);
  const area = plotArea(div, height);
  const axis = (n, ticks, title) => ({
    ...ticks,
    range: [-0.5, n - 0.5],
    showgrid: false,
    zeroline: false,
    ticks: "",
    automargin: true,
    fixedrange: false,
    title: { text: axisTitleText(title, ticks), standoff: 8, font: { size: 12, color: "#5b6478" } },
  });
  const trace = {
    type: "heatmap",
    z,
    x: [...Array(nK).keys()],
    y: [...Array(nQ).keys()],
    text: hover,
    hovertemplate: "%{text}<extra></extra>",
    colorscale: opts.diverging ? DIVERGING : SEQUENTIAL,
    zmin,
    zmax,
    colorbar: {
      thickness: 12,
      outlinewidth: 0,
      len: 0.9,
      title: { text: plotlyText(opts.colorbarTitle ?? "weight"), side: "right", font: { size: 12 } },
      tickfont: { size: 11 },
    },
  };
  const layout = {
    title: opts.title
      ? { text: plotlyText(opts.title), x: 0, xanchor: "left", font: { size: 14, color: "#1f2430" } }
      : undefined,
    height,
    margin: { l: 10, r: 10, t: opts.title ? 38 : 10, b: 10 },
    xaxis: { ...axis(nK, keyTicks(xText, -0.5, nK - 0.5, area.width), opts.xTitle), side: "bottom" },
    yaxis: {
      ...axis(nQ, lineTicks(yText, -0.5, nQ - 0.5, area.height), opts.yTitle),
      autorange: false,
      range: [nQ - 0.5, -0.5],
    },
    font: { family: FONT_FAMILY, size: 12, color: "#1f2430" },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "#ffffff",
    hoverlabel: { font: { family: FONT_FAMILY, size: 13 }, bgcolor: "#1f2430", bordercolor: "#1f2430" },
    dragmode: "zoom",
  };
  const config = {
    responsive: true,
    displaylogo: false,
    displayModeBar: "hover", // the toolbar (PNG download, zoom) shows while the pointer is over the plot
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "zoomIn2d", "zoomOut2d"],
    toImageButtonOptions: { format: "png", filename: opts.filename ?? "attnscope-heatmap", scale: 2 },
  };
  // Every token's label, for relabelling the visible range after a zoom.
  div._attnscopeTicks = { x: xText, y: yText, xTitle: opts.xTitle, yTitle: opts.yTitle };
  return window.Plotly.react(div, [trace], layout, config).then((gd) => {
    relabelOnZoom(gd);
    return gd;
  });
}
