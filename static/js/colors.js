// Colour scales shared by the Plotly heatmaps and the canvas thumbnails, so both read the same.

/** Sequential scale for weights in [0, 1]: white at 0 (masked cells disappear), deep blue at max. */
export const SEQUENTIAL = [
  [0.0, "#f7fbff"],
  [0.125, "#deebf7"],
  [0.25, "#c6dbef"],
  [0.375, "#9ecae1"],
  [0.5, "#6baed6"],
  [0.625, "#4292c6"],
  [0.75, "#2171b5"],
  [0.875, "#08519c"],
  [1.0, "#08306b"],
];

/** Diverging scale for differences (experiment pages): blue < 0 < red, white at 0. */
export const DIVERGING = [
  [0.0, "#2166ac"],
  [0.15, "#4393c3"],
  [0.3, "#92c5de"],
  [0.45, "#e6eef5"],
  [0.5, "#f7f7f7"],
  [0.55, "#f8e7df"],
  [0.7, "#f4a582"],
  [0.85, "#d6604d"],
  [1.0, "#b2182b"],
];

function hexToRgb(hex) {
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

const lutCache = new Map();

/** A 256-entry RGB lookup table (Uint8Array of 768) interpolating a Plotly-style colour scale. */
export function lut(scale = SEQUENTIAL) {
  if (lutCache.has(scale)) return lutCache.get(scale);
  const stops = scale.map(([t, c]) => [t, hexToRgb(c)]);
  const out = new Uint8Array(256 * 3);
  for (let i = 0; i < 256; i++) {
    const t = i / 255;
    let j = 1;
    while (j < stops.length - 1 && stops[j][0] < t) j++;
    const [t0, c0] = stops[j - 1];
    const [t1, c1] = stops[j];
    const f = t1 > t0 ? Math.min(1, Math.max(0, (t - t0) / (t1 - t0))) : 0;
    for (let ch = 0; ch < 3; ch++) out[3 * i + ch] = Math.round(c0[ch] + f * (c1[ch] - c0[ch]));
  }
  lutCache.set(scale, out);
  return out;
}
