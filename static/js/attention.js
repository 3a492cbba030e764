import { nextTask } from "./dom.js";

// Attention maps as the API sends them, decoded into flat Float32Arrays, with the averages the
// explorer offers. A map is row-major [query][key]; `data` holds [layer][head][query][key].

/** The three attention kinds, with what their rows (queries) and columns (keys) are. */
export const KINDS = {
  encoder_self: {
    label: "Encoder self-attention",
    short: "Encoder self",
    query: "source token (query)",
    key: "source token (key)",
  },
  decoder_self: {
    label: "Decoder self-attention",
    short: "Decoder self",
    query: "decoder input (query)",
    key: "decoder input (key)",
  },
  cross: {
    label: "Cross-attention",
    short: "Cross",
    query: "output token (query)",
    key: "source token (key)",
  },
};
export const KIND_NAMES = Object.keys(KINDS);

/** Decode standard base64 into bytes. */
export function base64ToBytes(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** IEEE half-precision bits -> float (for a float16 compact payload). */
function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}

/** Compact payload -> Float32Array of weights. uint8 is round(w*scale); floats are little-endian. */
function decodeCompact(entry, count) {
  const bytes = base64ToBytes(entry.data);
  const dtype = entry.dtype || "uint8";
  const out = new Float32Array(count);
  if (dtype === "uint8") {
    if (bytes.length !== count) throw new Error(`${entry.kind}: ${bytes.length} bytes for ${count} weights`);
    const scale = entry.scale || 255;
    for (let i = 0; i < count; i++) out[i] = bytes[i] / scale;
  } else if (dtype === "float16") {
    const view = new DataView(bytes.buffer);
    for (let i = 0; i < count; i++) out[i] = halfToFloat(view.getUint16(2 * i, true));
  } else if (dtype === "float32") {
    const view = new DataView(bytes.buffer);
    for (let i = 0; i < count; i++) out[i] = view.getFloat32(4 * i, true);
  } else {
    throw new Error(`${entry.kind}: unsupported compact dtype ${dtype}`);
  }
  return out;
}

/** Nested [l][h][q][k] lists -> Float32Array. */
function flattenNested(weights, count) {
  const out = new Float32Array(count);
  let i = 0;
  for (const layer of weights) for (const head of layer) for (const row of head) for (const w of row) out[i++] = w;
  if (i !== count) throw new Error(`nested weights hold ${i} values, expected ${count}`);
  return out;
}

/** Every map of one attention kind: `layers` x `heads` maps of nQ x nK weights. */
export class AttentionMaps {
  constructor({ kind, layers, heads, queryTokens, keyTokens, data }) {
    this.kind = kind;
    this.layers = layers; // model layer indices, in payload order
    this.heads = heads; // model head indices
    this.queryTokens = queryTokens;
    this.keyTokens = keyTokens;
    this.nQ = queryTokens.length;
    this.nK = keyTokens.length;
    this.data = data;
    this._cache = new Map();
    if (data.length !== layers.length * heads.length * this.nQ * this.nK) {
      throw new Error(`${kind}: ${data.length} weights do not match the shape`);
    }
  }

  /** Build from one entry of the response's `attention` object (compact or nested). */
  static fromPayload(entry, kind = entry.kind) {
    const weights = entry.weights ?? entry;
    const shape = entry.shape ?? [weights.length, weights[0].length, weights[0][0].length, weights[0][0][0].length];
    const [L, H, q, k] = shape;
    const queryTokens = entry.query_tokens;
    const keyTokens = entry.key_tokens;
    if (!queryTokens || !keyTokens || queryTokens.length !== q || keyTokens.length !== k) {
      throw new Error(`${kind}: shape ${shape} does not match ${queryTokens?.length} x ${keyTokens?.length} tokens`);
    }
    const count = L * H * q * k;
    const data = entry.data !== undefined ? decodeCompact(entry, count) : flattenNested(weights, count);
    return new AttentionMaps({
      kind,
      layers: entry.layers ?? [...Array(L).keys()],
      heads: entry.heads ?? [...Array(H).keys()],
      queryTokens,
      keyTokens,
      data,
    });
  }

  get size() {
    return this.nQ * this.nK;
  }

  /** The map of layer position `li` and head position `hi` (a view, not a copy). */
  map(li, hi) {
    const start = (li * this.heads.length + hi) * this.size;
    return this.data.subarray(start, start + this.size);
  }

  /** Mean over the heads of layer position `li`. */
  meanOverHeads(li) {
    return this._cached(`h${li}`, () => {
      const out = new Float32Array(this.size);
      for (let hi = 0; hi < this.heads.length; hi++) {
        const m = this.map(li, hi);
        for (let i = 0; i < out.length; i++) out[i] += m[i];
      }
      for (let i = 0; i < out.length; i++) out[i] /= this.heads.length;
      return out;
    });
  }

  /** Mean over every layer and head. */
  meanOverAll() {
    return this._cached("all", () => {
      const out = new Float32Array(this.size);
      for (let li = 0; li < this.layers.length; li++) {
        const m = this.meanOverHeads(li);
        for (let i = 0; i < out.length; i++) out[i] += m[i];
      }
      for (let i = 0; i < out.length; i++) out[i] /= this.layers.length;
      return out;
    });
  }

  /**
   * The map for a selection {layer, head}: layer is a model layer index or "all", head a model
   * head index or "mean". Returns {values, label}, or null when the selection is not in the payload.
   */
  select({ layer, head }) {
    if (layer === "all") return { values: this.meanOverAll(), label: "mean over all layers and heads" };
    const li = this.layers.indexOf(layer);
    if (li < 0) return null;
    if (head === "mean") return { values: this.meanOverHeads(li), label: `layer ${layer} · mean over heads` };
    const hi = this.heads.indexOf(head);
    if (hi < 0) return null;
    return { values: this.map(li, hi), label: `layer ${layer} · head ${head}` };
  }

  _cached(key, compute) {
    if (!this._cache.has(key)) this._cache.set(key, compute());
    return this._cache.get(key);
  }
}

/** The attention kinds a response holds, in canonical order. */
function kindsIn(attention) {
  return KIND_NAMES.filter((kind) => attention?.[kind]);
}

/** Decode every kind in a translate response: {kind: AttentionMaps}. */
export function decodeAttention(attention) {
  return Object.fromEntries(kindsIn(attention).map((kind) => [kind, AttentionMaps.fromPayload(attention[kind], kind)]));
}

/** decodeAttention, one kind per task (a 256-token response holds megabytes of maps). */
export async function decodeAttentionSliced(attention) {
  const out = {};
  for (const kind of kindsIn(attention)) {
    await nextTask();
    out[kind] = AttentionMaps.fromPayload(attention[kind], kind);
  }
  return out;
}

/** Largest value of a map (for per-map colour scales); at least a tiny positive number. */
export function maxOf(values) {
  let m = 0;
  for (let i = 0; i < values.length; i++) if (values[i] > m) m = values[i];
  return m > 0 ? m : 1e-6;
}
