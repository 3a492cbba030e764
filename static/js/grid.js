// Overview grid: every layer x head of one or more attention kinds as small canvas heatmaps.
// Canvas rather than one Plotly figure per cell: ~80 thumbnails draw in milliseconds. The cells
// are laid out at once and painted in slices, so a grid of 256-token maps never freezes the page.
//
// Cells are buttons (focusable, Enter/Space activate); one cell is in the tab order at a time and
// the arrow keys move between cells (a "roving tabindex"), so the grid is one tab stop.

import { KINDS, maxOf } from "./attention.js";
import { clear, el, forEachSliced } from "./dom.js";
import { drawThumbnail } from "./heatmap.js";

/** Same selection? {kind, layer, head} with layer "all" / head "mean" for the averages. */
function sameSelection(a, b) {
  return a && b && a.kind === b.kind && String(a.layer) === String(b.layer) && String(a.head) === String(b.head);
}

export function describeSelection({ kind, layer, head }) {
  const label = KINDS[kind]?.label ?? kind;
  if (layer === "all") return `${label}, mean over all layers and heads`;
  if (head === "mean") return `${label}, layer ${layer}, mean over heads`;
  return `${label}, layer ${layer}, head ${head}`;
}

export class OverviewGrid {
  /**
   * container: element to fill. onSelect({kind, layer, head}) runs when a cell is activated.
   * averages: add the "μ" column (mean over heads) and the all-layers cell.
   */
  constructor(container, { onSelect, averages = true } = {}) {
    this.container = container;
    this.onSelect = onSelect;
    this.averages = averages;
    this.cells = []; // every cell button
    this.rows = []; // navigation rows: arrays of cells (null where a row has no cell)
    this.selected = null;
    this.job = 0; // the render whose thumbnails are being painted
    container.addEventListener("keydown", (e) => this._onKey(e));
  }

  /**
   * sections: [{kind, maps: AttentionMaps, title?}]; selected: {kind, layer, head};
   * shared: one 0..1 colour scale for every cell, else each cell spans 0..its own max.
   * Resolves true once every thumbnail is painted, false if a newer render took over first.
   */
  render(sections, { selected, shared = false } = {}) {
    const job = ++this.job;
    clear(this.container);
    this.cells = [];
    this.rows = [];
    const paints = [];
    for (const section of sections) this._renderSection(section, shared, paints);
    this.setSelected(selected);
    return forEachSliced(paints, (paint) => paint(), () => job !== this.job);
  }

  /** Lay out one kind's cells; push a function per cell that paints its thumbnail. */
  _renderSection({ kind, maps, title }, shared, paints) {
    const nCols = maps.heads.length + (this.averages ? 1 : 0);
    const grid = el("div", { class: "ov-grid", role: "presentation" });
    grid.style.setProperty("--cols", String(nCols));
    grid.append(el("span", { class: "ov-corner", "aria-hidden": "true" }));
    for (const h of maps.heads) grid.append(el("span", { class: "ov-col", "aria-hidden": "true", text: `H${h}` }));
    if (this.averages) grid.append(el("span", { class: "ov-col ov-mean", "aria-hidden": "true", title: "mean over heads", text: "μ" }));

    // values() rather than values: a mean is computed when its cell is painted, not up front.
    const addCell = (sel, values, row) => {
      const label = describeSelection(sel);
      const canvas = el("canvas", { "aria-hidden": "true", width: maps.nK, height: maps.nQ });
      paints.push(() => {
        const v = values();
        drawThumbnail(canvas, v, maps.nQ, maps.nK, { zmax: shared ? 1 : maxOf(v) });
      });
      const cell = el(
        "button",
        {
          type: "button",
          class: "ov-cell",
          tabindex: "-1",
          title: label,
          "aria-label": label,
          "aria-pressed": "false",
          dataset: { kind: sel.kind, layer: String(sel.layer), head: String(sel.head) },
          on: { click: () => this._activate(cell) },
        },
        [canvas],
      );
      cell._selection = sel;
      this.cells.push(cell);
      row.push(cell);
      return cell;
    };

    maps.layers.forEach((layer, li) => {
      const row = [];
      grid.append(el("span", { class: "ov-row", "aria-hidden": "true", text: `L${layer}` }));
      maps.heads.forEach((head, hi) => grid.append(addCell({ kind, layer, head }, () => maps.map(li, hi), row)));
      if (this.averages) grid.append(addCell({ kind, layer, head: "mean" }, () => maps.meanOverHeads(li), row));
      this.rows.push(row);
    });
    if (this.averages) {
      const row = new Array(maps.heads.length).fill(null);
      const label = el("span", { class: "ov-row ov-all-label", "aria-hidden": "true", text: "all layers & heads" });
      label.style.setProperty("--span", String(maps.heads.length + 1));
      grid.append(label);
      grid.append(addCell({ kind, layer: "all", head: "mean" }, () => maps.meanOverAll(), row));
      this.rows.push(row);
    }
    const heading = el("div", { class: "ov-title" }, [
      el("span", { class: "ov-kind", text: title ?? KINDS[kind]?.label ?? kind }),
      el("span", { class: "ov-dims", text: `${maps.nQ} × ${maps.nK} tokens` }),
    ]);
    this.container.append(el("div", { class: "ov-section", dataset: { kind } }, [heading, grid]));
  }

  /** Highlight the cell of `selected` (no redraw) and make it the grid's tab stop. */
  setSelected(selected) {
    this.selected = selected ? { ...selected } : null;
    let tabStop = null;
    for (const cell of this.cells) {
      const on = sameSelection(cell._selection, selected);
      cell.setAttribute("aria-pressed", on ? "true" : "false");
      cell.classList.toggle("is-selected", on);
      cell.tabIndex = -1;
      if (on) tabStop = cell;
    }
    (tabStop ?? this.cells[0])?.setAttribute("tabindex", "0");
    for (const section of this.container.querySelectorAll(".ov-section")) {
      section.classList.toggle("is-current", Boolean(selected) && section.dataset.kind === selected.kind);
    }
  }

  _activate(cell) {
    this.setSelected(cell._selection);
    this.onSelect?.({ ...cell._selection });
  }

  _onKey(e) {
    const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
    if (!(e.key in moves)) return;
    const cell = e.target.closest?.(".ov-cell");
    if (!cell) return;
    let r = this.rows.findIndex((row) => row.includes(cell));
    let c = this.rows[r].indexOf(cell);
    const [dr, dc] = moves[e.key];
    e.preventDefault();
    let target = null;
    if (dc) {
      for (let j = c + dc; j >= 0 && j < this.rows[r].length && !target; j += dc) target = this.rows[r][j];
    } else {
      r += dr;
      if (r < 0 || r >= this.rows.length) return;
      const row = this.rows[r];
      // Same column if that row has a cell there, else the nearest one (the "all" row has one).
      c = Math.min(c, row.length - 1);
      for (let d = 0; d < row.length && !target; d++) target = row[c - d] ?? row[c + d] ?? null;
    }
    if (target) {
      for (const x of this.cells) x.tabIndex = -1;
      target.tabIndex = 0;
      target.focus();
    }
  }
}
