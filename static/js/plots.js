// Plots of the experiment pages that are not attention maps: line charts, grouped bars, and
// general matrices (positional encodings, masks) with their own axis labels and hover text.
// Attention maps and their differences use heatmap.js's drawHeatmap (tokens on both axes).
// Every label that can hold model text goes through plotlyText (Plotly parses a markup subset).

import { DIVERGING, SEQUENTIAL } from "./colors.js";
import { plotlyText } from "./dom.js";
import { FONT_FAMILY, axisTicks, tickIndices } from "./heatmap.js";

/** Series colours: the accent blue, the diverging scale's red, then neutrals. */
export const PALETTE = ["#2563eb", "#d6604d", "#0f766e", "#9333ea", "#b45309", "#475569", "#db2777", "#65a30d"];

/** White (0) to the experiment pages' "allowed" green-blue (1): for boolean masks. */
export const MASK_SCALE = [
  [0.0, "#f3f4f6"],
  [1.0, "#1d4ed8"],
];

const CONFIG = {
  responsive: true,
  displaylogo: false,
  // The toolbar (PNG download, zoom) appears on hover, so it never covers a plot's title.
  displayModeBar: "hover",
  modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "zoomIn2d", "zoomOut2d"],
};

function axisTitle(text) {
  return { text: plotlyText(text ?? ""), standoff: 8, font: { size: 12, color: "#5b6478" } };
}

function baseLayout(opts) {
  return {
    title: opts.title
      ? { text: plotlyText(opts.title), x: 0, xanchor: "left", font: { size: 14, color: "#1f2430" } }
      : undefined,
    height: opts.height ?? 320,
    margin: { l: 10, r: 10, t: opts.title ? 38 : 12, b: 10 },
    font: { family: FONT_FAMILY, size: 12, color: "#1f2430" },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "#ffffff",
    hoverlabel: { font: { family: FONT_FAMILY, size: 13 }, bgcolor: "#1f2430", bordercolor: "#1f2430" },
    legend: { orientation: "h", y: -0.22, x: 0, font: { size: 12 } },
  };
}

function config(filename) {
  return { ...CONFIG, toImageButtonOptions: { format: "png", filename: filename ?? "attnscope-plot", scale: 2 } };
}

/**
 * Line chart. series: [{x, y, name, dash?, color?, mode?}]; opts: title, xTitle, yTitle,
 * logX, logY, height, filename, yRange, hoverDigits, showLegend.
 */
export function drawLines(div, series, opts = {}) {
  const digits = opts.hoverDigits ?? 4;
  const traces = series.map((s, i) => ({
    type: "scatter",
    mode: s.mode ?? "lines+markers",
    x: s.x,
    y: s.y,
    name: plotlyText(s.name ?? ""),
    line: { color: s.color ?? PALETTE[i % PALETTE.length], width: 2, dash: s.dash ?? "solid" },
    marker: { size: 5 },
    hovertemplate: `${plotlyText(s.name ?? "")}<br>%{x}: %{y:.${digits}f}<extra></extra>`,
  }));
  const layout = {
    ...baseLayout(opts),
    xaxis: { title: axisTitle(opts.xTitle), type: opts.logX ? "log" : "linear", zeroline: false, automargin: true, gridcolor: "#eef1f6", exponentformat: "power" },
    yaxis: { title: axisTitle(opts.yTitle), type: opts.logY ? "log" : "linear", zeroline: false, automargin: true, gridcolor: "#eef1f6", range: opts.yRange, exponentformat: "power" },
    showlegend: opts.showLegend ?? series.length > 1,
  };
  return window.Plotly.react(div, traces, layout, config(opts.filename));
}

/**
 * Grouped bars over labelled categories. labels: category names (untrusted text is escaped);
 * series: [{name, values, color?}]; opts as drawLines (plus yRange).
 */
export function drawBars(div, labels, series, opts = {}) {
  const digits = opts.hoverDigits ?? 4;
  const text = labels.map(plotlyText);
  const x = [...labels.keys()];
  const traces = series.map((s, i) => ({
    type: "bar",
    x,
    y: s.values,
    name: plotlyText(s.name ?? ""),
    marker: { color: s.color ?? PALETTE[i % PALETTE.length] },
    customdata: text,
    hovertemplate: `%{customdata}<br>${plotlyText(s.name ?? "")}: %{y:.${digits}f}<extra></extra>`,
  }));
  const layout = {
    ...baseLayout(opts),
    barmode: "group",
    bargap: 0.25,
    xaxis: {
      tickmode: "array",
      tickvals: x,
      ticktext: text,
      title: axisTitle(opts.xTitle),
      automargin: true,
      tickangle: labels.length > 12 ? -55 : 0,
    },
    yaxis: {
      title: axisTitle(opts.yTitle),
      type: opts.logY ? "log" : "linear",
      automargin: true,
      gridcolor: "#eef1f6",
      range: opts.yRange,
      zeroline: true,
      exponentformat: "power", // 10⁻⁶ rather than SI's "1µ"
    },
    showlegend: series.length > 1,
  };
  return window.Plotly.react(div, traces, layout, config(opts.filename));
}

/**
 * A general matrix as a heatmap. z: rows of numbers; yLabels / xLabels: one label per row /
 * column (escaped here); opts: title, xTitle, yTitle, scale ("sequential" | "diverging" | "mask"),
 * zmin, zmax, maxXTicks / maxYTicks (labels shown per axis, default 40), cellText (rows of strings shown in the cells, escaped here), hover(row, col, value)
 * -> plain text (escaped here), colorbarTitle, height, filename, showScale.
 */
export function drawMatrix(div, z, yLabels, xLabels, opts = {}) {
  const nY = z.length;
  const nX = nY ? z[0].length : 0;
  const yText = yLabels.map(plotlyText);
  const xText = xLabels.map(plotlyText);
  const hover = z.map((row, i) =>
    row.map((v, j) => plotlyText(opts.hover ? opts.hover(i, j, v) : `${yLabels[i]}, ${xLabels[j]}: ${v}`)),
  );
  let zmin = opts.zmin;
  let zmax = opts.zmax;
  if (zmin === undefined || zmax === undefined) {
    let lo = Infinity;
    let hi = -Infinity;
    for (const row of z) for (const v of row) if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    zmin ??= lo;
    zmax ??= hi;
  }
  const scale = opts.scale ?? "sequential";
  if (scale === "diverging") {
    const m = Math.max(Math.abs(zmin), Math.abs(zmax)) || 1;
    zmin = -m;
    zmax = m;
  }
  const trace = {
    type: "heatmap",
    z,
    x: [...Array(nX).keys()],
    y: [...Array(nY).keys()],
    text: hover,
    hovertemplate: "%{text}<extra></extra>",
    colorscale: scale === "diverging" ? DIVERGING : scale === "mask" ? MASK_SCALE : SEQUENTIAL,
    zmin,
    zmax,
    xgap: opts.gap ?? 0,
    ygap: opts.gap ?? 0,
    showscale: opts.showScale ?? scale !== "mask",
    colorbar: {
      thickness: 12,
      outlinewidth: 0,
      len: 0.9,
      title: { text: plotlyText(opts.colorbarTitle ?? ""), side: "right", font: { size: 12 } },
      tickfont: { size: 11 },
    },
  };
  const traces = [trace];
  if (opts.cellText) {
    // Cell labels as a scatter of text markers: heatmap texttemplate would need the text escaped
    // the same way, and a separate trace keeps the hover of the heatmap.
    const xs = [];
    const ys = [];
    const texts = [];
    const colors = [];
    opts.cellText.forEach((row, i) =>
      row.forEach((t, j) => {
        xs.push(j);
        ys.push(i);
        texts.push(plotlyText(t));
        colors.push(opts.cellTextColor ? opts.cellTextColor(i, j) : "#1f2430");
      }),
    );
    traces.push({
      type: "scatter",
      mode: "text",
      x: xs,
      y: ys,
      text: texts,
      textfont: { family: FONT_FAMILY, size: opts.cellFontSize ?? 11, color: colors },
      hoverinfo: "skip",
      showlegend: false,
    });
  }
  // Label every cell when they fit, else every k-th (long PE axes would be unreadable): at most
  // `most` labels, as if the axis had `most` pixels and a label needed one.
  const ticks = (n, text, most) => axisTicks(tickIndices(-0.5, n - 0.5, most, 1), text);
  const layout = {
    ...baseLayout(opts),
    height: opts.height ?? Math.round(Math.max(220, Math.min(560, 22 * nY + 120))),
    xaxis: {
      ...ticks(nX, xText, opts.maxXTicks ?? 40),
      range: [-0.5, nX - 0.5],
      showgrid: false,
      zeroline: false,
      ticks: "",
      automargin: true,
      title: axisTitle(opts.xTitle),
      tickangle: opts.xTickAngle,
    },
    yaxis: {
      ...ticks(nY, yText, opts.maxYTicks ?? 40),
      range: [nY - 0.5, -0.5],
      autorange: false,
      showgrid: false,
      zeroline: false,
      ticks: "",
      automargin: true,
      title: axisTitle(opts.yTitle),
    },
    showlegend: false,
  };
  return window.Plotly.react(div, traces, layout, config(opts.filename));
}
