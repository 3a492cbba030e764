"""End-to-end tests of the experiment pages (/positional, /masks, /heads): Playwright drives
Debian's Chromium against the real app with the tiny random bundle, served by uvicorn on a free
127.0.0.1 port (tests/browser_server.py), exactly as tests/test_browser.py does for the explorer.

Each test runs one experiment on its page, waits for the diff plot to draw, and checks its labels
against the API's answer. On teardown every page must have logged no console error, thrown no
exception, opened no dialog and sent no request off 127.0.0.1.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import numpy as np
import pytest

from tests.browser_server import BackgroundServer
from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, Watch, decode_maps, unescape_plotly

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
SENTENCE = "The cat is sleeping on the sofa."

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="Debian's Chromium (/usr/bin/chromium) is not installed; .ci/run installs it",
    ),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


class ExperimentPage:
    """One browser page on an experiment page; waits on the page's render counter."""

    def __init__(self, page: Any, base_url: str, watch: Watch) -> None:
        self.page = page
        self.base_url = base_url
        self.watch = watch

    def renders(self, what: str) -> int:
        """How many renders of one part of the page have finished (data-renders-<what>)."""
        return int(self.page.get_attribute("#main", f"data-renders-{what}") or 0)

    def wait_render(self, what: str, after: int = 0) -> None:
        """Wait until part `what` has finished a render newer than count `after`."""
        self.page.wait_for_function(
            "([what, n]) => Number(document.getElementById('main')"
            ".getAttribute('data-renders-' + what) || 0) > n",
            arg=[what, after],
        )

    def open(self, path: str, query: dict[str, Any] | None = None) -> None:
        url = self.base_url + path + (f"?{urlencode(query, doseq=True)}" if query else "")
        self.page.goto(url)

    def act(self, action: Any, what: str) -> None:
        """Run `action()` (a click, a key press) and wait for the render of `what` it causes."""
        before = self.renders(what)
        action()
        self.wait_render(what, before)

    def figure(self, div_id: str) -> dict[str, Any]:
        """A Plotly figure as Plotly holds it, plus the tick labels the SVG shows."""
        return self.page.evaluate(
            """(id) => {
              const gd = document.getElementById(id);
              const texts = (sel) => [...gd.querySelectorAll(sel)].map((t) => t.textContent);
              return {
                x: gd.layout.xaxis.ticktext, y: gd.layout.yaxis.ticktext,
                z: gd.data[0].z, zmin: gd.data[0].zmin, zmax: gd.data[0].zmax,
                colorscale: gd.data[0].colorscale, type: gd.data[0].type,
                title: gd.layout.title && gd.layout.title.text, n: gd.data.length,
                names: gd.data.map((t) => t.name),
                xticks: texts('.xtick text'), yticks: texts('.ytick text'),
              };
            }""",
            div_id,
        )

    def url_state(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.page.url).query)


@pytest.fixture(scope="module")
def server(tiny_bundle_dir: Path) -> Iterator[str]:
    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(model_dir=tiny_bundle_dir, device="cpu"))
    with BackgroundServer(app) as srv:
        yield srv.url


@pytest.fixture(scope="module")
def context(server: str) -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        # One context: its caches keep plotly.js from being fetched and compiled for every test.
        ctx = browser.new_context(viewport={"width": 1366, "height": 900})
        yield ctx
        ctx.close()
        browser.close()


@pytest.fixture
def session(context: Any, server: str) -> Iterator[ExperimentPage]:
    page = context.new_page()
    page.set_default_timeout(60_000)
    watch = Watch.attach(page)
    try:
        yield ExperimentPage(page, server, watch)
        watch.assert_clean()
    finally:
        page.close()


def screenshot(session: ExperimentPage, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    session.page.screenshot(path=str(ARTIFACTS / name), full_page=True)


# -- /positional ----------------------------------------------------------------------------------
def test_positional_page_draws_the_encoding_and_runs_the_order_experiment(
    session: ExperimentPage,
) -> None:
    page = session.page
    with page.expect_response(lambda r: "/api/order" in r.url) as info:
        session.open("/positional", {"text": "I go home.", "positions": 24, "dims": "0,1,6"})
    first = info.value.json()
    session.wait_render("order")

    # The encoding matrix and the similarity come from the server, with the model's d_model.
    pe = session.figure("pe-matrix")
    assert np.array(pe["z"]).shape == (24, 32)
    np.testing.assert_allclose(np.array(pe["z"])[:, 0], np.sin(np.arange(24)), atol=1e-4)
    curves = session.figure("pe-curves")
    assert curves["n"] == 3 and curves["names"][0].startswith("dim 0 (sin")
    sim = np.array(session.figure("pe-similarity")["z"])
    assert np.ptp(np.diagonal(sim, 3)) < 1e-3  # constant along a diagonal

    # The sentence's vectors, labelled by its tokens.
    tokens = first["source_tokens"]
    emb = session.figure("sent-embedding")
    assert unescape_plotly(emb["y"]) == tokens and emb["yticks"] == tokens

    # Move the first token right: a new permutation goes to the server and both runs redraw.
    n = len(tokens)
    first_button = page.locator("#order-tokens li").first.locator("[data-move='right']")
    with page.expect_response(lambda r: "/api/order" in r.url) as info:
        session.act(lambda: first_button.click(), "order")
    body = json.loads(info.value.request.post_data)
    expected = [*range(n - 2, -1, -1), n - 1]
    expected[0], expected[1] = expected[1], expected[0]
    assert body["permutation"] == expected
    out = info.value.json()
    rows = page.locator("#order-rows tr")
    assert rows.count() == 2
    off = rows.nth(1)
    assert off.get_attribute("data-pe") == "false"
    assert off.locator("td").nth(2).text_content() == "same"
    assert float(off.locator("td").nth(3).text_content()) < 1e-5
    assert page.locator("#order-tokens .tok").all_text_contents() == out["permuted_tokens"]
    # The difference plot: one bar per token of the new order, with and without encoding.
    diff = session.figure("order-diff")
    labels = [f"{j}: {t}" for j, t in enumerate(out["permuted_tokens"])]
    assert unescape_plotly(diff["x"]) == labels
    assert diff["names"] == ["with positional encoding", "without"]
    assert session.url_state()["perm"] == [",".join(map(str, expected))]
    screenshot(session, "positional.png")


# -- /masks ---------------------------------------------------------------------------------------
def test_masks_page_hides_a_clicked_source_token_and_draws_the_diff(
    session: ExperimentPage,
) -> None:
    page = session.page
    session.watch.allowed_console.append(re.compile(r"status of 422"))  # the refusal below
    with page.expect_response(lambda r: r.url.endswith("/api/masks")) as info:
        session.open("/masks", {"hide": ""})
    masks = info.value.json()
    session.wait_render("masks")
    item = 1  # the default: the padded sentence
    n = masks["source_lengths"][item]
    tokens = masks["source_tokens"][item][:n]

    # The batch, the masks and the fill comparison are labelled with the batch's tokens.
    fill = session.figure("fill-2")
    dec = masks["decoder_input_tokens"][item]
    assert unescape_plotly(fill["x"]) == dec and unescape_plotly(fill["y"]) == dec
    assert "−1e-12" in fill["title"]
    assert page.locator("#shape-rows tr").count() == 6
    assert page.locator("#hide-tokens button").all_text_contents() == tokens

    # Click a token: it is hidden, the experiment runs, and the three maps draw.
    session.wait_render("hide")  # the run with nothing hidden, started by the page
    with page.expect_response(lambda r: r.url.endswith("/api/experiment")) as info:
        session.act(lambda: page.click("#hide-tokens button[data-position='1']"), "hide")
    assert json.loads(info.value.request.post_data)["experiment"] == {"hide_source": [1]}
    out = info.value.json()
    button = page.locator("#hide-tokens button[data-position='1']")
    assert button.get_attribute("aria-pressed") == "true"
    diff = session.figure("hide-diff")
    assert unescape_plotly(diff["x"]) == out["baseline"]["source_tokens"] == tokens
    assert unescape_plotly(diff["y"]) == out["baseline"]["target_tokens"]
    assert diff["xticks"] == tokens
    assert diff["zmin"] == -diff["zmax"], "diverging scale centred on 0"
    exp = np.array(session.figure("hide-experiment")["z"])
    assert np.all(exp[:, 1] == 0), "the hidden token gets no cross-attention"
    expected = decode_maps(out["aligned"]["attention"]["cross"])[0, 0]
    np.testing.assert_allclose(exp, expected, atol=1e-6)
    assert (
        page.locator("#baseline-tokens .tok").all_text_contents()
        == out["baseline"]["target_tokens"]
    )
    assert "hide=1" in page.url

    # Hiding every token is refused with the server's reason.
    for p in range(n):
        if p != 1:
            with page.expect_response(lambda r: r.url.endswith("/api/experiment")) as info:
                page.click(f"#hide-tokens button[data-position='{p}']")
    assert info.value.status == 422
    alert = page.locator("#hide-error")
    alert.wait_for(state="visible")
    assert "no visible key has no softmax" in alert.text_content()
    screenshot(session, "masks.png")


# -- /heads ---------------------------------------------------------------------------------------
def test_heads_page_silences_a_clicked_head_and_changes_the_temperature(
    session: ExperimentPage,
) -> None:
    page = session.page
    with page.expect_response(lambda r: r.url.endswith("/api/experiment")) as info:
        session.open("/heads", {"text": SENTENCE})
    first = info.value.json()
    session.wait_render("experiment")
    assert first["applied"]["silence"] == []
    cells = page.locator(".ov-cell[data-kind='cross']")
    assert cells.count() == 2 * 4

    # Click cross-attention layer 0 head 1: silenced, the experiment runs again.
    cell = page.locator(".ov-cell[data-kind='cross'][data-layer='0'][data-head='1']")
    with page.expect_response(lambda r: r.url.endswith("/api/experiment")) as info:
        session.act(lambda: cell.click(), "experiment")
    sent = json.loads(info.value.request.post_data)["experiment"]
    assert sent["silence"] == [{"kind": "cross", "layer": 0, "head": 1}]
    out = info.value.json()
    cell = page.locator(".ov-cell[data-kind='cross'][data-layer='0'][data-head='1']")
    assert cell.get_attribute("aria-pressed") == "true"
    assert "silenced" in cell.get_attribute("aria-label")
    assert session.url_state()["silence"] == ["c0.1"]
    # The diff of the default view (cross L0 H0): labelled with the paper's tokens.
    diff = session.figure("map-diff")
    assert unescape_plotly(diff["x"]) == out["baseline"]["source_tokens"]
    assert unescape_plotly(diff["y"]) == out["baseline"]["target_tokens"]
    assert diff["zmin"] == -diff["zmax"]
    summary = page.text_content("#logprob-summary")
    assert f"{out['diff']['baseline_logprob']:.2f}" in summary
    # Entropy bars: one pair per head of the shown kind.
    entropy = session.figure("entropy")
    assert entropy["names"] == ["paper", "experiment"]
    assert unescape_plotly(entropy["x"]) == [
        f"L{layer} H{h}" for layer in range(2) for h in range(4)
    ]

    # Keyboard: the temperature slider moves by a quarter power of two per key press.
    page.focus("#temperature")
    with page.expect_response(lambda r: r.url.endswith("/api/experiment")) as info:
        session.act(lambda: page.keyboard.press("ArrowRight"), "experiment")
    sent = json.loads(info.value.request.post_data)["experiment"]
    assert sent["temperature"] == pytest.approx(2**0.25)
    assert sent["silence"] == [{"kind": "cross", "layer": 0, "head": 1}]
    assert page.text_content("#temperature-value") == "1.19"
    assert "temperature 1.19" in page.text_content("#experiment-line")
    assert session.url_state()["temp"] == ["1.189"]

    # The scaling plots: Var(q·k) grows like d_k.
    variance = session.figure("variance")
    assert variance["names"] == ["Var(q·k)", "Var(q·k / √d_k)", "d_k"]
    screenshot(session, "heads.png")


def test_a_shared_heads_link_restores_the_experiment_and_shows_markup_as_text(
    session: ExperimentPage,
) -> None:
    page = session.page
    text = "<img src=x onerror=alert(1)>"
    query = {"text": text, "kind": "encoder_self", "layer": "1", "head": "2"}
    with page.expect_response(lambda r: r.url.endswith("/api/experiment")) as info:
        session.open("/heads", {**query, "silence": "e0.3", "noscale": "1", "temp": "0.5"})
    session.wait_render("experiment")
    sent = json.loads(info.value.request.post_data)
    assert sent["text"] == text
    assert sent["experiment"] == {
        "scale_scores": False,
        "temperature": 0.5,
        "silence": [{"kind": "encoder_self", "layer": 0, "head": 3}],
    }
    assert not page.is_checked("#scale")
    assert page.is_checked("input[name='view-kind'][value='encoder_self']")
    assert page.input_value("#view-layer") == "1" and page.input_value("#view-head") == "2"
    cell = page.locator(".ov-cell[data-kind='encoder_self'][data-layer='0'][data-head='3']")
    assert cell.get_attribute("aria-pressed") == "true"
    fig = session.figure("map-diff")
    tokens = info.value.json()["baseline"]["source_tokens"]
    assert any("<" in t for t in tokens), tokens
    assert unescape_plotly(fig["x"]) == unescape_plotly(fig["y"]) == tokens
    assert fig["xticks"] == tokens, "tick labels show the raw characters"
    assert "Encoder self L1 H2" in session.figure("map-experiment")["title"]
    # The markup stayed text: nothing ran, no image was created.
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("img[src='x']").count() == 0
    assert not session.watch.dialogs
