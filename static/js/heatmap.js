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

/** Rotate key labels only when they would not fit side by side in the plot's width. */
function keyTickAngle(div, labels) {
  const longest = Math.max(1, ...labels.map((t) => t.length));
  const plotWidth = Math.max(200, (div.clientWidth || 700) - 180); // minus labels and colour bar
  return longest * 7.5 + 6 <= plotWidth / labels.length ? 0 : -55;
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
  const axis = (n, text, title) => ({
    tickmode: "array",
    tickvals: [...Array(n).keys()],
    ticktext: text,
    range: [-0.5, n - 0.5],
    showgrid: false,
    zeroline: false,
    ticks: "",
    automargin: true,
    fixedrange: false,
    title: { text: plotlyText(title ?? ""), standoff: 8, font: { size: 12, color: "#5b6478" } },
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
    height: opts.height ?? heatmapHeight(nQ),
    margin: { l: 10, r: 10, t: opts.title ? 38 : 10, b: 10 },
    xaxis: { ...axis(nK, xText, opts.xTitle), side: "bottom", tickangle: keyTickAngle(div, xTokens) },
    yaxis: { ...axis(nQ, yText, opts.yTitle), autorange: false, range: [nQ - 0.5, -0.5] },
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
  return window.Plotly.react(div, [trace], layout, config);
}
