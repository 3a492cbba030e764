// Small DOM helpers. Every string the model produces (tokens, translations) reaches the page
// through text nodes or attributes set one by one, never through innerHTML.

/**
 * Create an element. `props`: `class`, `text`, `dataset` ({k: v}), `on` ({event: handler}),
 * anything else becomes an attribute (null/false values are skipped, true gives an empty one).
 * `children`: nodes or strings (strings become text nodes).
 */
export function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  applyProps(node, props);
  for (const child of [].concat(children)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** Create an SVG element with attributes (same `props` rules as `el`). */
export function svg(tag, props = {}, children = []) {
  const node = document.createElementNS(SVG_NS, tag);
  applyProps(node, props);
  for (const child of [].concat(children)) {
    if (child) node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function applyProps(node, props) {
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.setAttribute("class", value);
    else if (key === "text") node.textContent = String(value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else node.setAttribute(key, value === true ? "" : String(value));
  }
}

/** Remove every child of `node`. */
export function clear(node) {
  node.replaceChildren();
  return node;
}

const PLOTLY_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;" };

/**
 * Escape a string for Plotly text (tick labels, hover text, titles). Plotly parses a small
 * HTML-like markup (<b>, <br>, <a href>…) in those strings; escaping `&`, `<` and `>` as entities
 * makes it show the characters literally (it decodes the entities into text nodes).
 */
export function plotlyText(s) {
  return String(s).replace(/[&<>]/g, (c) => PLOTLY_ESCAPES[c]);
}

/** Format a probability or weight with a fixed number of decimals. */
export function fmt(x, digits = 4) {
  return Number.isFinite(x) ? x.toFixed(digits) : "–";
}

/** A probability for a small label: two decimals, "<0.01" rather than a misleading "0.00". */
export function fmtProb(p) {
  if (!Number.isFinite(p)) return "–";
  return p > 0 && p < 0.005 ? "<0.01" : p.toFixed(2);
}

/** Resolve on the next animation frame after the current one: the DOM has been painted. */
export function afterPaint() {
  return new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
}

/**
 * Resolve in a new task, after the browser has had a chance to handle input (and to paint, if a
 * frame is due). Long renders await this between slices so that the page never freezes.
 */
export function nextTask() {
  if (globalThis.scheduler?.yield) return globalThis.scheduler.yield();
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

/** How long one slice of main-thread work may run before yielding (well under a 50 ms long task). */
export const SLICE_MS = 30;

/**
 * Call `fn(item, i)` for each item, yielding to the browser whenever a slice has run for
 * SLICE_MS. Stops early, returning false, once `isStale()` says a newer render took over; returns
 * true when every item was handled. A small input finishes in the first slice, synchronously up
 * to the returned promise.
 */
export async function forEachSliced(items, fn, isStale = () => false) {
  let start = performance.now();
  for (let i = 0; i < items.length; i++) {
    if (performance.now() - start > SLICE_MS) {
      await nextTask();
      if (isStale()) return false;
      start = performance.now();
    }
    fn(items[i], i);
  }
  return true;
}
