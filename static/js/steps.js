// Decoder steps: for each output token, its probability and the top-k alternatives, as a table
// with inline bars (plain DOM; tokens are text nodes).

import { clear, el, fmt, fmtProb, forEachSliced } from "./dom.js";

function bar(p, extraClass = "") {
  const fill = el("span", { class: "bar-fill" });
  fill.style.width = `${Math.max(0, Math.min(1, p)) * 100}%`;
  return el("span", { class: `bar ${extraClass}`, "aria-hidden": "true" }, [fill]);
}

/**
 * steps: [{position, token, token_id, prob, alternatives: [{token, prob}]}] from the API.
 * Rows are added in slices (hundreds of steps hold thousands of elements); resolves true when
 * every row is in, false if `isStale()` said a newer render took over first.
 */
export function renderSteps(container, steps, isStale = () => false) {
  const head = el("thead", {}, [
    el("tr", {}, [
      el("th", { scope: "col", class: "num", text: "#" }),
      el("th", { scope: "col", text: "Output token" }),
      el("th", { scope: "col", text: "Probability" }),
      el("th", { scope: "col", text: "Top alternatives" }),
    ]),
  ]);
  const body = el("tbody");
  const table = el("table", { class: "steps-table" }, [
    el("caption", { class: "sr-only", text: "Decoder steps with probabilities and alternatives" }),
    head,
    body,
  ]);
  clear(container).append(table);
  const addRow = (step, i) => {
    const alts = el("ol", { class: "alts" });
    for (const alt of step.alternatives ?? []) {
      const chosen = alt.token === step.token;
      alts.append(
        el("li", { class: chosen ? "alt is-chosen" : "alt", title: `${alt.token}: ${fmt(alt.prob)}` }, [
          el("span", { class: "tok", text: alt.token }),
          el("span", { class: "p", text: fmtProb(alt.prob) }),
          bar(alt.prob, "bar-mini"),
        ]),
      );
    }
    body.append(
      el("tr", {}, [
        el("td", { class: "num", text: String(step.position ?? i) }),
        el("th", { scope: "row" }, [el("span", { class: "tok tok-chip", text: step.token })]),
        el("td", { class: "prob" }, [el("span", { class: "p", text: fmt(step.prob, 3) }), bar(step.prob)]),
        el("td", {}, [alts]),
      ]),
    );
  };
  return forEachSliced(steps, addRow, isStale);
}
