"""End-to-end tests of the explorer page: Playwright drives Debian's Chromium against the real app
(`create_app` with the tiny random bundle) served by uvicorn on a free 127.0.0.1 port.

Each test also checks, on teardown, that the page logged no console error, threw no exception,
opened no dialog and sent no request to any host but 127.0.0.1 (the app must work offline).
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import numpy as np
import pytest

from tests.browser_server import BackgroundServer

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
SENTENCE = "The cat is sleeping on the sofa."
XSS_PAYLOADS = ["<img src=x onerror=alert(1)>", '"><script>window.__xss=1</script>']

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="Debian's Chromium (/usr/bin/chromium) is not installed; .ci/run installs it",
    ),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


# -- helpers --------------------------------------------------------------------------------------
def decode_maps(entry: dict[str, Any]) -> np.ndarray:
    """One kind of a compact response -> float32 [L, H, q, k]."""
    assert entry["encoding"] == "compact" and entry["dtype"] == "uint8"
    raw = np.frombuffer(base64.b64decode(entry["data"]), dtype=np.uint8)
    return (raw.astype(np.float32) / entry["scale"]).reshape(entry["shape"])


def unescape_plotly(labels: list[str]) -> list[str]:
    """The page escapes &, < and > in Plotly text as entities; undo that to compare with tokens."""
    return [html.unescape(t) for t in labels]


@dataclass
class Watch:
    """What the page did that a test must not allow: console errors, exceptions, dialogs, and
    requests leaving 127.0.0.1."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    allowed_console: list[re.Pattern[str]] = field(default_factory=list)

    @classmethod
    def attach(cls, page: Any) -> Watch:
        """A Watch that records `page`'s console errors, exceptions, requests and dialogs
        (dialogs are dismissed so a test fails on its assertions instead of hanging)."""
        watch = cls()
        page.on("console", lambda m: m.type == "error" and watch.console_errors.append(m.text))
        page.on("pageerror", lambda e: watch.page_errors.append(str(e)))
        page.on("request", lambda r: watch.requests.append(r.url))

        def on_dialog(dialog: Any) -> None:
            watch.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)
        return watch

    def foreign_requests(self) -> list[str]:
        out = []
        for url in self.requests:
            parts = urlsplit(url)
            if parts.scheme in ("data", "blob", "about"):
                continue  # in-page resources (Plotly's PNG export), not network requests
            if parts.hostname != "127.0.0.1":
                out.append(url)
        return out

    def assert_clean(self) -> None:
        errors = [
            e for e in self.console_errors if not any(p.search(e) for p in self.allowed_console)
        ]
        assert not self.dialogs, f"dialogs opened: {self.dialogs}"
        assert not self.page_errors, f"uncaught exceptions: {self.page_errors}"
        assert not errors, f"console errors: {errors}"
        assert not self.foreign_requests(), f"requests off the machine: {self.foreign_requests()}"


class ExplorerSession:
    """One browser page on the app, with helpers that wait for complete renders."""

    def __init__(self, page: Any, base_url: str, watch: Watch) -> None:
        self.page = page
        self.base_url = base_url
        self.watch = watch

    def renders(self) -> int:
        return int(self.page.get_attribute("#explorer", "data-renders") or 0)

    def wait_render(self, after: int) -> None:
        """Wait until the explorer finished a render newer than count `after`."""
        self.page.wait_for_function(
            "n => Number(document.getElementById('explorer').dataset.renders || 0) > n", arg=after
        )

    def open(self, query: dict[str, str] | None = None) -> dict[str, Any] | None:
        """Load the page; with `text` in the query it translates at once: return that response."""
        url = self.base_url + "/" + (f"?{urlencode(query)}" if query else "")
        if not query or "text" not in query:
            self.page.goto(url)
            self.page.wait_for_selector("#translate-form")
            return None
        with self.page.expect_response(lambda r: r.url.endswith("/api/translate")) as info:
            self.page.goto(url)
        assert info.value.status == 200, info.value.text()
        self.wait_render(0)
        return info.value.json()

    def translate(self, text: str) -> dict[str, Any]:
        """Type `text`, press Enter, wait for every view; return the API response."""
        before = self.renders()
        self.page.fill("#text", text)
        with self.page.expect_response(lambda r: r.url.endswith("/api/translate")) as info:
            self.page.press("#text", "Enter")
        assert info.value.status == 200, info.value.text()
        self.wait_render(before)
        return info.value.json()

    def act(self, action: Any) -> None:
        """Run `action()` (a click, a key press, ...) and wait for the re-render it causes."""
        before = self.renders()
        action()
        self.wait_render(before)

    def figure(self) -> dict[str, Any]:
        """The large heatmap as Plotly holds it, and the tick labels as the SVG shows them."""
        return self.page.evaluate(
            """() => {
              const gd = document.getElementById('heatmap');
              const texts = (sel) => [...gd.querySelectorAll(sel)].map((t) => t.textContent);
              return {
                x: gd.layout.xaxis.ticktext, y: gd.layout.yaxis.ticktext,
                xvals: gd.layout.xaxis.tickvals, yrange: gd.layout.yaxis.range,
                z: gd.data[0].z, zmin: gd.data[0].zmin, zmax: gd.data[0].zmax,
                title: gd.layout.title.text,
                xticks: texts('.xtick text'), yticks: texts('.ytick text'),
              };
            }"""
        )

    def url_state(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.page.url).query).items()}


# -- fixtures -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tiny_bundle_dir: Path) -> Iterator[str]:
    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(model_dir=tiny_bundle_dir, device="cpu"))
    with BackgroundServer(app) as srv:
        yield srv.url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def context(browser: Any) -> Iterator[Any]:
    # One context for the module: its HTTP and code caches keep plotly.js (4.8 MB) from being
    # fetched and compiled anew for every test. Each test still gets a fresh page.
    ctx = browser.new_context(viewport={"width": 1366, "height": 900}, accept_downloads=True)
    yield ctx
    ctx.close()


@pytest.fixture
def session(context: Any, server: str) -> Iterator[ExplorerSession]:
    page = context.new_page()
    # Generous: on a loaded 2-core machine plotly.js alone (4.8 MB) can take seconds to load.
    page.set_default_timeout(60_000)
    watch = Watch.attach(page)
    try:
        yield ExplorerSession(page, server, watch)
        watch.assert_clean()
    finally:
        page.close()


# -- tests ----------------------------------------------------------------------------------------
def test_translating_draws_every_view_with_the_returned_tokens(session: ExplorerSession) -> None:
    page = session.page
    session.open()
    assert page.is_hidden("#explorer"), "the explorer appears only once there is a translation"
    body = session.translate(SENTENCE)

    # The translation and its tokens, as text.
    assert page.text_content("#translation") == body["translation"]
    assert page.locator("#source-tokens .tok").all_text_contents() == body["source_tokens"]
    assert page.locator("#target-tokens .tok").all_text_contents() == body["target_tokens"]

    # The large heatmap shows the default kind (cross): output tokens down, source tokens across,
    # in Plotly's layout and in the rendered SVG, with the first token on top.
    cross = body["attention"]["cross"]
    fig = session.figure()
    assert unescape_plotly(fig["x"]) == cross["key_tokens"] == body["source_tokens"]
    assert unescape_plotly(fig["y"]) == cross["query_tokens"] == body["target_tokens"]
    assert fig["xticks"] == body["source_tokens"]
    assert fig["yticks"] == body["target_tokens"]
    # Numeric axes with tick labels, not categorical ones that would merge equal tokens: the tiny
    # model splits this sentence into pieces that repeat (e.g. "▁s" in "sleeping" and "sofa").
    assert len(set(body["source_tokens"])) < len(body["source_tokens"])
    assert fig["xvals"] == list(range(len(body["source_tokens"])))
    assert fig["yrange"][0] > fig["yrange"][1], "y axis reversed: first query on top"
    np.testing.assert_allclose(fig["z"], decode_maps(cross)[0, 0], atol=1e-6)
    assert "layer 0" in fig["title"] and "head 0" in fig["title"]

    # Overview grid: every layer x head (+ mean column + all-layers cell) of every kind.
    for kind, entry in body["attention"].items():
        n_layers, n_heads, n_q, n_k = entry["shape"]
        cells = page.locator(f'.ov-cell[data-kind="{kind}"]')
        assert cells.count() == n_layers * (n_heads + 1) + 1
        size = cells.first.locator("canvas").evaluate("c => [c.height, c.width]")
        assert size == [n_q, n_k]
    assert page.locator(".ov-cell.is-selected").count() == 1

    # Token links: one token per query and per key; decoder steps: one row per output token.
    assert page.locator("#token-links .tok-q text").all_text_contents() == body["target_tokens"]
    assert page.locator("#token-links .tok-k text").all_text_contents() == body["source_tokens"]
    rows = page.locator("#steps tbody tr")
    assert rows.count() == len(body["steps"]) == len(body["target_tokens"])
    first = body["steps"][0]
    assert rows.nth(0).locator("th .tok").text_content() == first["token"]
    alts = rows.nth(0).locator(".alt .tok").all_text_contents()
    assert alts == [a["token"] for a in first["alternatives"]] and len(alts) == 5

    # The footer says which model, device and version.
    footer = page.text_content("footer")
    assert body["model"] in footer and "cpu" in footer and re.search(r"\d+\.\d+\.\d+", footer)
    # The state is in the URL, ready to be shared.
    assert session.url_state() == {"text": SENTENCE, "kind": "cross", "layer": "0", "head": "0"}

    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#explorer").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "explorer.png"), full_page=True)


def test_clicking_a_grid_cell_opens_it_large_and_links_follow(session: ExplorerSession) -> None:
    page = session.page
    session.open()
    body = session.translate(SENTENCE)
    enc = decode_maps(body["attention"]["encoder_self"])
    before = session.figure()

    cell = '.ov-cell[data-kind="encoder_self"][data-layer="1"][data-head="3"]'
    session.act(lambda: page.click(cell))
    fig = session.figure()
    assert fig["title"] != before["title"] and "layer 1 · head 3" in fig["title"]
    assert page.text_content("#view-label") == "Encoder self-attention, layer 1, head 3"
    assert unescape_plotly(fig["x"]) == unescape_plotly(fig["y"]) == body["source_tokens"]
    np.testing.assert_allclose(fig["z"], enc[1, 3], atol=1e-6)
    assert page.is_checked('input[name="kind"][value="encoder_self"]')
    assert page.input_value("#layer") == "1" and page.input_value("#head") == "3"
    assert session.url_state()["kind"] == "encoder_self"
    assert (session.url_state()["layer"], session.url_state()["head"]) == ("1", "3")

    # Keyboard: the selected cell is the grid's tab stop; arrows move, Enter opens.
    selected = page.locator(".ov-cell.is-selected")
    assert selected.get_attribute("tabindex") == "0"
    selected.focus()
    page.keyboard.press("ArrowRight")  # head 3 -> the mean-over-heads column
    session.act(lambda: page.keyboard.press("Enter"))
    fig = session.figure()
    assert page.input_value("#head") == "mean" and "mean over heads" in fig["title"]
    np.testing.assert_allclose(fig["z"], enc[1].mean(axis=0), atol=1e-5)

    # The last cell of a kind: the mean over every layer and head.
    session.act(lambda: page.click('.ov-cell[data-kind="encoder_self"][data-layer="all"]'))
    np.testing.assert_allclose(session.figure()["z"], enc.mean(axis=(0, 1)), atol=1e-5)
    assert page.input_value("#layer") == "all" and page.is_disabled("#head")

    # Token links follow the selection; hovering a token keeps only its links.
    n_src = len(body["source_tokens"])
    links = page.locator("#token-links svg")
    all_lines = page.locator("#token-links line").count()
    assert page.locator("#token-links .tok-q").count() == n_src
    assert 0 < all_lines <= n_src * n_src
    page.hover("#token-links .tok-q >> nth=1")
    assert "is-isolating" in links.get_attribute("class")
    on = page.locator("#token-links line.is-on")
    assert 0 < on.count() < all_lines
    assert on.count() == page.locator("#token-links .links-row >> nth=1").locator("line").count()
    # Keyboard focus does the same for a key token; leaving restores every line.
    page.focus("#token-links .tok-k >> nth=0")
    assert 0 < page.locator("#token-links line.is-on").count() <= n_src
    page.focus("#text")
    assert "is-isolating" not in links.get_attribute("class")


def test_a_long_sentence_labels_every_kth_token_until_zoomed_in(session: ExplorerSession) -> None:
    """Hundreds of labels would overlap (and take seconds to measure): a long sentence gets every
    k-th token labelled, each label at its own token, and zooming in labels every visible one."""
    page = session.page
    session.open()
    body = session.translate(" ".join([SENTENCE] * 8))
    tokens = body["source_tokens"]
    n = len(tokens)
    assert n >= 80
    fig = session.figure()  # cross-attention: source tokens across
    step = fig["xvals"][1] - fig["xvals"][0]
    assert step > 1 and fig["xvals"] == list(range(0, n, step))
    assert unescape_plotly(fig["x"]) == [tokens[i] for i in fig["xvals"]]
    assert fig["xticks"] == [tokens[i] for i in fig["xvals"]]
    x_title = "() => document.querySelector('#heatmap .g-xtitle').textContent"
    assert page.evaluate(x_title) == f"source token (key) · 1 in {step} labelled, zoom in for all"

    page.evaluate(
        "() => Plotly.relayout(document.getElementById('heatmap'), {'xaxis.range': [9.5, 20.5]})"
    )
    page.wait_for_function(
        "() => document.getElementById('heatmap').layout.xaxis.tickvals.length === 11"
    )
    fig = session.figure()
    assert fig["xvals"] == list(range(10, 21))
    assert unescape_plotly(fig["x"]) == tokens[10:21]
    assert page.evaluate(x_title) == "source token (key)"


def test_switching_kind_and_scale_redraws_with_the_right_tokens(session: ExplorerSession) -> None:
    page = session.page
    session.open()
    body = session.translate(SENTENCE)

    session.act(lambda: page.click("label:has(input[value='decoder_self'])"))
    fig = session.figure()
    assert unescape_plotly(fig["x"]) == body["decoder_input_tokens"]
    assert unescape_plotly(fig["y"]) == body["decoder_input_tokens"]
    assert fig["xticks"][0] == "<s>"
    z = np.array(fig["z"])
    assert np.all(np.triu(z, k=1) == 0), "decoder self-attention never looks ahead"
    np.testing.assert_allclose(z.sum(axis=1), 1, atol=0.02)  # uint8 rounding: <= k/510 per row

    session.act(lambda: page.click("label:has(input[value='encoder_self'])"))
    fig = session.figure()
    assert unescape_plotly(fig["x"]) == unescape_plotly(fig["y"]) == body["source_tokens"]

    session.act(lambda: page.select_option("#layer", "1"))
    session.act(lambda: page.select_option("#head", "2"))
    enc = decode_maps(body["attention"]["encoder_self"])
    np.testing.assert_allclose(session.figure()["z"], enc[1, 2], atol=1e-6)
    assert session.url_state() == {
        "text": SENTENCE,
        "kind": "encoder_self",
        "layer": "1",
        "head": "2",
    }

    # Colour scale: each map spans 0..its own max, or all share 0..1.
    fig = session.figure()
    assert fig["zmin"] == 0 and fig["zmax"] == pytest.approx(np.max(fig["z"]))
    session.act(lambda: page.check("#shared-scale"))
    assert session.figure()["zmax"] == 1
    assert session.url_state()["scale"] == "shared"


def test_a_shared_url_restores_the_view(session: ExplorerSession) -> None:
    page = session.page
    body = session.open({"text": SENTENCE, "kind": "cross", "layer": "1", "head": "2", "beam": "2"})
    assert body is not None
    assert page.input_value("#text") == SENTENCE
    assert page.input_value("#beam") == "2"
    assert page.is_checked('input[name="kind"][value="cross"]')
    assert page.input_value("#layer") == "1" and page.input_value("#head") == "2"
    fig = session.figure()
    assert html.unescape(fig["title"]) == "Cross-attention · layer 1 · head 2"
    assert unescape_plotly(fig["x"]) == body["source_tokens"]
    assert unescape_plotly(fig["y"]) == body["target_tokens"]
    np.testing.assert_allclose(fig["z"], decode_maps(body["attention"]["cross"])[1, 2], atol=1e-6)
    cell = page.locator(".ov-cell.is-selected")
    assert (cell.get_attribute("data-kind"), cell.get_attribute("data-layer")) == ("cross", "1")
    assert session.url_state()["beam"] == "2"

    # Averages travel too; an out-of-range head falls back to one that exists.
    body = session.open({"text": SENTENCE, "kind": "decoder_self", "layer": "all", "head": "7"})
    dec = decode_maps(body["attention"]["decoder_self"])
    np.testing.assert_allclose(session.figure()["z"], dec.mean(axis=(0, 1)), atol=1e-5)
    assert session.url_state()["head"] == "mean"


@pytest.mark.parametrize("payload", XSS_PAYLOADS)
def test_markup_in_tokens_is_shown_as_text(session: ExplorerSession, payload: str) -> None:
    page = session.page

    def assert_inert(body: dict[str, Any]) -> None:
        tokens = body["source_tokens"]
        assert any(c in t for t in tokens for c in "<>"), f"payload not in tokens: {tokens}"
        assert page.input_value("#text") == payload
        assert page.locator("#source-tokens .tok").all_text_contents() == tokens
        assert session.figure()["xticks"] == tokens, "tick labels show the raw characters"
        assert page.locator("#token-links .tok-k text").all_text_contents() == tokens
        # Hover text goes through Plotly's markup parser too.
        page.hover("#heatmap .nsewdrag", position={"x": 5, "y": 5})
        page.wait_for_selector("#heatmap .hoverlayer .hovertext")
        hover = page.text_content("#heatmap .hoverlayer .hovertext")
        assert "→" in hover and re.search(r"\d\.\d{4}", hover)
        assert page.evaluate("window.__xss") is None
        assert page.locator("img[src='x'], img[src=x]").count() == 0
        injected = "[...document.querySelectorAll('script')].filter(s => s.text.includes('__xss'))"
        assert page.evaluate(f"{injected}.length") == 0
        assert not session.watch.dialogs

    session.open()
    assert_inert(session.translate(payload))
    # The same text arriving through a shared link.
    assert_inert(session.open({"text": payload, "kind": "encoder_self"}))


def test_bad_input_shows_the_servers_message(session: ExplorerSession) -> None:
    page = session.page
    # fetch() failures with 4xx are logged by Chromium itself; they are the point of this test.
    session.watch.allowed_console.append(re.compile(r"status of 422"))
    session.open()
    assert page.is_hidden("#error")
    for text in ["   ", "日本語のテキスト"]:
        page.fill("#text", text)
        with page.expect_response(lambda r: r.url.endswith("/api/translate")) as info:
            page.press("#text", "Enter")
        assert info.value.status == 422
        alert = page.locator("#error[role='alert']")
        alert.wait_for(state="visible")
        assert alert.text_content() == info.value.json()["detail"]
        assert "text" in alert.text_content()
    # The page still works after an error, and the error goes away.
    session.translate(SENTENCE)
    assert page.is_hidden("#error")


def test_keyboard_enter_submits_and_shift_enter_adds_a_line(session: ExplorerSession) -> None:
    page = session.page
    session.open()
    page.focus("#text")
    page.keyboard.type("I go home.")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("Where is the station?")
    assert page.input_value("#text") == "I go home.\nWhere is the station?"
    assert not [u for u in session.watch.requests if u.endswith("/api/translate")]
    with page.expect_response(lambda r: r.url.endswith("/api/translate")) as info:
        page.keyboard.press("Enter")
    assert info.value.ok
    assert json.loads(info.value.request.post_data)["text"] == "I go home.\nWhere is the station?"

    # An example chip fills the box and translates it.
    chip = page.locator("[data-example]").first
    with page.expect_response(lambda r: r.url.endswith("/api/translate")) as info:
        chip.click()
    assert json.loads(info.value.request.post_data)["text"] == chip.get_attribute("data-example")
    assert page.input_value("#text") == chip.get_attribute("data-example")


def test_downloads_the_trace_as_json_and_the_plot_as_png(
    session: ExplorerSession, tmp_path: Path
) -> None:
    page = session.page
    session.open()
    body = session.translate(SENTENCE)
    with page.expect_download() as info:
        page.click("#download-json")
    assert info.value.suggested_filename.endswith(".json")
    saved = tmp_path / "trace.json"
    info.value.save_as(saved)
    assert json.loads(saved.read_text(encoding="utf-8")) == body

    page.hover("#heatmap")
    with page.expect_download() as info:
        page.click("#heatmap .modebar-btn[data-title^='Download plot']")
    png = tmp_path / "plot.png"
    info.value.save_as(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert info.value.suggested_filename.startswith("attnscope-cross-L0-H0")
