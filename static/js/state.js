// Shareable state: what is translated and which map is shown, kept in the URL query string
// (history.replaceState, so the back button is not flooded) and restored from it on load.
//
//   ?text=The+cat…&kind=cross&layer=1&head=2&beam=4&k=5&scale=shared&model=en-de
// layer is a layer index or "all" (mean over all layers and heads); head a head index or "mean".

import { KIND_NAMES } from "./attention.js";

export const DEFAULT_STATE = Object.freeze({
  text: "",
  kind: "cross",
  layer: 0,
  head: 0,
  beam: 1,
  topK: 5,
  model: "",
  shared: false,
});

function parseIndex(value, word) {
  if (value === null) return undefined;
  if (value === word) return word;
  return /^\d{1,3}$/.test(value) ? Number(value) : undefined;
}

/** Read the state from a query string; unknown or malformed values fall back to the defaults. */
export function readState(search = window.location.search, defaults = DEFAULT_STATE) {
  const p = new URLSearchParams(search);
  const state = { ...defaults };
  if (p.has("text")) state.text = p.get("text");
  if (KIND_NAMES.includes(p.get("kind"))) state.kind = p.get("kind");
  const layer = parseIndex(p.get("layer"), "all");
  if (layer !== undefined) state.layer = layer;
  const head = parseIndex(p.get("head"), "mean");
  if (head !== undefined) state.head = head;
  if (state.layer === "all") state.head = "mean";
  const beam = Number(p.get("beam"));
  if (Number.isInteger(beam) && beam >= 1) state.beam = beam;
  const k = Number(p.get("k"));
  if (Number.isInteger(k) && k >= 1) state.topK = k;
  if (p.get("model")) state.model = p.get("model");
  state.shared = p.get("scale") === "shared";
  return state;
}

/** The query string for a state (defaults left out, except the view's kind/layer/head). */
export function stateToSearch(state, defaults = DEFAULT_STATE) {
  const p = new URLSearchParams();
  if (state.text) p.set("text", state.text);
  p.set("kind", state.kind);
  p.set("layer", String(state.layer));
  p.set("head", String(state.head));
  if (state.beam !== defaults.beam) p.set("beam", String(state.beam));
  if (state.topK !== defaults.topK) p.set("k", String(state.topK));
  if (state.model && state.model !== defaults.model) p.set("model", state.model);
  if (state.shared) p.set("scale", "shared");
  return `?${p.toString()}`;
}

/** Put the state in the address bar without adding a history entry. */
export function writeState(state, defaults = DEFAULT_STATE) {
  const search = stateToSearch(state, defaults);
  if (search !== window.location.search) {
    window.history.replaceState(null, "", `${window.location.pathname}${search}${window.location.hash}`);
  }
}
