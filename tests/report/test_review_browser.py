"""The report and the review page in a real headless Chromium (Debian's package, driven by
Playwright): it opens cleanly, draws its charts, routes to version pages and saves feedback."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import tiers
from fixtures.workspace_builder import build_workspace

from optimizer.report import html, server

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = tiers.needs(
    "chromium",
    None
    if CHROMIUM.exists()
    else "needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
)
playwright_api = pytest.importorskip(
    "playwright.sync_api",
    reason=tiers.reason("chromium", "playwright (dev extra) is not installed"),
)
expect = playwright_api.expect


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.problems = []  # console errors, uncaught exceptions and dialogs: none may happen
    tab.on(
        "console",
        lambda m: tab.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    tab.on("pageerror", lambda e: tab.problems.append(f"page error: {e}"))
    tab.on("dialog", lambda d: (tab.problems.append(f"dialog: {d.message}"), d.dismiss()))
    tab.set_default_timeout(15_000)
    yield tab
    context.close()


def shot(tab, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_report_opens_renders_and_routes(tmp_path, page):
    built = build_workspace(tmp_path / "run", versions=8, hostile=True)
    path = html.write_report(built.root, None)
    page.goto(path.as_uri())
    expect(page.locator("body[data-ready]")).to_have_count(1)
    expect(page.locator("#sim-banner")).to_be_visible()
    expect(page.locator("svg.lineage g.node")).to_have_count(len(built.labels))
    scored = sum(1 for d in built.decisions.values() if d)
    # every version is on the score chart, the pending one as a hollow point of its own
    expect(page.locator("svg.score-chart g.pt")).to_have_count(len(built.labels))
    expect(page.locator("svg.score-chart g.pt.pending")).to_have_count(len(built.labels) - scored)
    expect(page.locator("svg.score-chart g.pt line.ci").first).to_be_attached()
    expect(page.locator("svg.heatmap rect.cell")).to_have_count(scored * len(built.evals))
    expect(page.locator("svg.cost-chart polyline")).to_have_count(1)
    expect(page.locator(f'svg.lineage g.node[data-label="{built.best}"] circle')).to_have_attribute(
        "stroke-width", "2.5"
    )
    shot(page, "report-overview.png")

    page.locator('svg.lineage g.node[data-label="v1"]').click()
    expect(page.locator("#version-title")).to_contain_text("v1")
    assert page.url.endswith("#/v1")
    # v1's page is not in report.html: its script beside it is loaded now, from file://
    expect(page.locator("#page pre.diff .add")).to_contain_text("Rule 1")
    expect(page.locator("#page")).to_contain_text("rule 1 asks for it")
    assert "rule 1 asks for it" not in path.read_text()  # the rationale is on v1's page only
    run = page.locator("details.run").first
    run.locator("> summary").click()
    # the model's hostile output is on the page as text, and nothing ran
    expect(run.locator("pre").first).to_contain_text("</script><script>alert(1)</script>")
    expect(run.locator("img")).to_have_attribute("src", re.compile(r"^data:image/png;base64,"))
    shot(page, "report-version.png")

    page.go_back()
    expect(page.locator("#overview")).to_be_visible()
    page.fill("#version-filter", "won")
    won = sum(1 for d in built.decisions.values() if d == "won")
    expect(page.locator("#versions tbody tr")).to_have_count(won)
    assert page.problems == []


def test_the_overview_reads_on_a_wide_screen_and_on_a_phone(tmp_path, page):
    """The headline and the next command on top, money as words.dollars says it, the stop
    worded once; at a phone's width nothing but the wide tables and the lineage scrolls
    sideways, and the charts take the page's width."""
    from optimizer import words

    built = build_workspace(tmp_path / "run", versions=6, pending=True)
    path = html.write_report(built.root, None)
    page.goto(path.as_uri())
    expect(page.locator("body[data-ready]")).to_have_count(1)
    expect(page.locator("#headline .claim")).to_contain_text(f"{built.best} won against")
    expect(page.locator("#next code").first).to_contain_text("optimizer export")
    expect(page.locator("#headline")).to_contain_text("Run stopped: max iterations reached.")
    expect(page.locator(".card", has_text="stop reason")).to_have_count(0)
    for x in (4.79612, 0.5, 0.00421, 0.00004, 0.0, 20.0):
        assert page.evaluate(f"money({x})") == words.dollars(x), x
    chart = page.locator("svg.score-chart").bounding_box()
    assert chart and chart["width"] > 1100  # the page's width, not half of it
    ticks = page.locator("svg.cost-chart text.time-tick").all_text_contents()
    assert ticks and not any(re.search(r"\d{4}-\d\d-\d\dT", t) for t in ticks), ticks
    shot(page, "report-overview-1280.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.locator("body[data-ready]")).to_have_count(1)
    wide = page.evaluate(
        """() => [...document.querySelectorAll('#overview *')].filter(e =>
        e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.scroll, .table-wrap'))
        .map(e => e.tagName + '.' + e.className.baseVal ?? e.className)"""
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= 390 and wide == [], wide
    cell = page.locator("svg.heatmap rect.cell").first.bounding_box()
    assert cell and cell["width"] >= 20 and cell["height"] >= 20  # a cell one can read and tap
    shot(page, "report-overview-390.png")
    assert page.problems == []


def test_a_page_that_cannot_be_loaded_says_so(tmp_path, page):
    built = build_workspace(tmp_path / "run", versions=3)
    path = html.write_report(built.root, None)
    (html.details_dir(path) / "v2.js").unlink()
    page.goto(path.as_uri() + "#/v2")
    expect(page.locator("body[data-ready]")).to_have_count(1)
    expect(page.locator("#version-title")).to_contain_text("v2")  # the index's numbers still show
    expect(page.locator(".detail-error")).to_contain_text(
        "The details of v2 could not be loaded from report_files/v2.js"
    )
    expect(page.locator(".detail-error")).to_contain_text("missing or unreadable")
    page.goto(path.as_uri() + "#/v1")  # the other pages still open
    page.locator("details.run > summary").first.click()
    expect(page.locator("details.run[open] li").first).to_contain_text("The report")
    assert [p for p in page.problems if "v2.js" not in p and "ERR_FILE_NOT_FOUND" not in p] == []


def test_review_saves_feedback_and_submits(tmp_path, page):
    built = build_workspace(tmp_path / "run", versions=4)
    srv, port = server.serve_in_thread(built.root)
    feedback = built.root / "feedback.json"
    run_id = built.run_id("v1", built.evals[0])
    try:
        page.goto(f"http://127.0.0.1:{port}/#/v1")
        expect(page.locator("body[data-ready]")).to_have_count(1)
        page.locator(f'details.run[data-run-id="{run_id}"] > summary').click()
        box = page.locator(f'textarea[data-run-id="{run_id}"]')
        with page.expect_response(
            lambda r: r.url.endswith("/api/feedback") and r.request.method == "POST"
        ) as saved:
            box.fill("The summary is missing; the table is fine.")
        assert saved.value.ok
        expect(page.locator(f'details.run[data-run-id="{run_id}"] .saved')).to_have_text("saved")
        data = json.loads(feedback.read_text())
        assert data["status"] == "in_progress"
        assert [(r["run_id"], r["feedback"]) for r in data["reviews"]] == [
            (run_id, "The summary is missing; the table is fine.")
        ]
        shot(page, "review-feedback.png")

        page.reload()  # what was saved is shown again
        expect(page.locator("body[data-ready]")).to_have_count(1)
        page.locator(f'details.run[data-run-id="{run_id}"] > summary').click()
        expect(page.locator(f'textarea[data-run-id="{run_id}"]')).to_have_value(
            "The summary is missing; the table is fine."
        )

        page.goto(f"http://127.0.0.1:{port}/#/baseline")
        base_id = f"baseline-eval-{built.evals[0]}-without_skill-run-1"
        page.locator(f'details.run[data-run-id="{base_id}"] > summary').click()
        page.locator(f'textarea[data-run-id="{base_id}"]').fill("Baseline forgot the title.")
        with page.expect_response(lambda r: r.url.endswith("/api/feedback/submit")):
            page.click("#submit-all")
        expect(page.locator("#submit-state")).to_contain_text("complete")
        data = json.loads(feedback.read_text())
        assert data["status"] == "complete"
        assert {r["run_id"] for r in data["reviews"]} == {run_id, base_id}
        assert page.problems == []
    finally:
        srv.shutdown()
        srv.server_close()


def test_collapsed_runs_say_they_hold_a_feedback_box(tmp_path, page):
    built = build_workspace(tmp_path / "run", versions=3)
    srv, port = server.serve_in_thread(built.root)
    run_id = built.run_id("v1", built.evals[0])
    runs = 2 * len(built.evals)  # the builder's runs per eval
    try:
        page.goto(f"http://127.0.0.1:{port}/#/v1")
        expect(page.locator("body[data-ready]")).to_have_count(1)
        panel = page.locator(f'details.run[data-run-id="{run_id}"]')
        expect(panel).not_to_have_attribute("open", "")
        expect(panel.locator("> summary")).to_contain_text("✎ feedback box inside")
        expect(page.locator(".fb-count")).to_have_text(
            f"{runs} runs below take feedback: open one to write it (0 written so far)."
        )
        panel.locator("> summary").click()
        with page.expect_response(
            lambda r: r.url.endswith("/api/feedback") and r.request.method == "POST"
        ):
            page.locator(f'textarea[data-run-id="{run_id}"]').fill("Too long.")
        panel.locator("> summary").click()  # collapsed again: the summary says what it holds
        expect(panel.locator("> summary")).to_contain_text("✎ feedback written")
        expect(page.locator(".fb-count")).to_contain_text("(1 written so far)")
        page.goto(f"http://127.0.0.1:{port}/#/test")  # the sealed test takes no feedback
        expect(page.locator("details.run").first).to_be_attached()
        expect(page.locator(".fb-hint, .fb-count")).to_have_count(0)
        assert page.problems == []
    finally:
        srv.shutdown()
        srv.server_close()
    page.goto(html.write_report(built.root, None).as_uri() + "#/v1")  # the static report: no boxes
    expect(page.locator("details.run").first).to_be_attached()
    expect(page.locator(".fb-hint, .fb-count")).to_have_count(0)


@pytest.mark.parametrize("width", [360, 390, 1280, 1920])
def test_lineage_lines_end_inside_their_box_and_heatmap_cells_keep_their_numbers(
    tmp_path, page, width
):
    """Long lines (14 versions, a long summary each) were cut at the svg's fixed width, at every
    screen width; at 390 px a cell too narrow for its score dropped it."""
    import sqlite3

    built = build_workspace(tmp_path / "run", versions=14)
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute(
            "update versions set summary = 'Ask for a ## Summary section with the three largest "
            "revenue months named, the units stated and every missing value counted per column'"
        )
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(html.write_report(built.root, None).as_uri())
    expect(page.locator("body[data-ready]")).to_have_count(1)
    seen = page.evaluate(
        r"""() => {
        const box = document.querySelector('#lineage'), svg = box.querySelector('svg');
        const end = svg.getBoundingClientRect().right, left = box.getBoundingClientRect().left;
        const texts = [...svg.querySelectorAll('text')].map(t => t.getBoundingClientRect().right);
        const map = document.querySelector('svg.heatmap');
        return {cut: texts.filter(r => r > end + 0.5).length,
                reach: box.scrollWidth + left - Math.max(...texts),
                cells: map.querySelectorAll('rect.cell').length,
                scores: [...map.querySelectorAll('text')].filter(t => /^(\d\.\d\d|—)$/.test(t.textContent)).length,
                page: document.documentElement.scrollWidth};
    }"""
    )
    assert seen["cut"] == 0 and seen["reach"] >= 0, seen  # the box scrolls to every line's end
    assert seen["scores"] == seen["cells"] > 0, seen  # every cell writes its score
    assert seen["page"] <= width, seen  # the boxes scroll, not the page
    page.locator("#lineage").scroll_into_view_if_needed()
    shot(page, f"report-lineage-heatmap-{width}.png")
    assert page.problems == []


def test_two_hundred_versions_stay_usable(tmp_path, page):
    built = build_workspace(tmp_path / "big", versions=200, evals=(1, 2), test_evals=(3,), runs=1)
    page.goto(html.write_report(built.root, None).as_uri())
    expect(page.locator("body[data-ready]")).to_have_count(1)
    expect(page.locator("svg.lineage g.node")).to_have_count(200)
    expect(page.locator("#versions tbody tr")).to_have_count(50)  # paged
    page.fill("#version-filter", "v19")
    expect(page.locator("#versions tbody tr")).to_have_count(11)  # v19, v190..v199
    page.goto(page.url.split("#")[0] + "#/v150")
    expect(page.locator("#version-title")).to_contain_text("v150")
    expect(page.locator(".version-page")).to_have_count(1)  # one page rendered, not 200
    page.goto(page.url.split("#")[0] + "#/")
    expect(page.locator("#overview")).to_be_visible()
    shot(page, "report-200-versions.png")
    assert page.problems == []


def test_report_of_a_real_simulated_run(simulated, page):
    root = simulated
    best = json.loads((root / "history.json").read_text())["current_best"]
    labels = [n["label"] for n in html.build(root)["nodes"]]
    page.goto(html.write_report(root, None).as_uri())
    expect(page.locator("body[data-ready]")).to_have_count(1)
    expect(page.locator("svg.lineage g.node")).to_have_count(len(labels))
    page.locator(f'svg.lineage g.node[data-label="{best}"]').click()
    expect(page.locator("#version-title")).to_contain_text(best)
    page.locator("details.run > summary").first.click()
    shot(page, "real-run-version.png")
    assert page.problems == []


@pytest.mark.parametrize(("seed", "count"), [("002_history.json", 3), ("001_history.json", 1)])
def test_report_of_a_history_json_only_folder(tmp_path, page, seed, count):
    shutil.copy(Path(__file__).parents[1] / "fixtures" / "seeds" / seed, tmp_path / "history.json")
    page.goto(html.write_report(tmp_path, None).as_uri())
    expect(page.locator("body[data-ready]")).to_have_count(1)
    expect(page.locator("svg.lineage g.node")).to_have_count(count)
    expect(page.locator("#versions tbody tr")).to_have_count(count)
    assert page.problems == []


def test_review_page_follows_a_running_daemon_without_a_reload(tmp_path, page):
    import sqlite3

    from optimizer.store.files import Workspace
    from optimizer.store.lock import lock

    built = build_workspace(
        tmp_path / "run", versions=4, status="running", deadline="2099-01-01T07:00:00"
    )
    db = built.root / "state.db"

    def move(**fields) -> None:
        with sqlite3.connect(db) as conn:
            conn.execute(
                "update runs set " + ", ".join(f"{k} = ?" for k in fields), list(fields.values())
            )

    move(activity="iteration 3: proposal 1 from v2")
    srv, port = server.serve_in_thread(built.root, refresh_ms=150)
    held = lock(Workspace(built.root))  # this test is the daemon: it holds the run's lock
    held.__enter__()
    try:
        page.goto(f"http://127.0.0.1:{port}/")
        expect(page.locator("body[data-ready]")).to_have_count(1)
        line = page.locator("#progress-line")
        expect(line).to_contain_text("● running")
        expect(line).to_contain_text("now: iteration 3: proposal 1 from v2")
        expect(line).to_contain_text(
            re.compile(r"ETA (about|by) \d\d:\d\d")
        )  # at the pace of those done
        expect(line).to_contain_text("spent $")
        spent = line.inner_text().split("spent ")[1]
        page.evaluate("window.__same_page = 1")  # gone if the page were reloaded
        move(activity="sealed test: v3")
        with sqlite3.connect(db) as conn:  # a model call costs $2.50 meanwhile
            conn.execute(
                "insert into calls (hash, role, model, sample, outcome, response_json, cost_usd, "
                "attempts, created_at, scope) values ('x', 'grader', 'm', 0, 'ok', '{}', 2.5, 1, "
                "'2026-11-20T23:00:00Z', 'test')"
            )
        expect(line).to_contain_text("now: sealed test: v3")
        expect(line).not_to_contain_text("spent " + spent)
        pending = page.locator("#versions tbody tr", has_text="pending")
        expect(pending).to_have_count(1)  # v3, the builder's last version, waits for its decision
        with sqlite3.connect(db) as conn:  # the daemon decides it: the overview follows
            conn.execute(
                "update versions set decision = 'lost', status = 'decided' where label = 'v3'"
            )
        expect(pending).to_have_count(0)
        held.__exit__(None, None, None)  # the daemon ends
        move(status="stopped", stop_reason="reached 4 iterations", activity="stopped")
        expect(line).to_contain_text("stopped: reached 4 iterations")
        expect(page.locator(".card", has_text="status")).to_contain_text(
            "stopped"
        )  # the overview too
        assert page.evaluate("window.__same_page") == 1
        shot(page, "review-progress.png")
        assert page.problems == []
    finally:
        held.__exit__(None, None, None)
        srv.shutdown()
        srv.server_close()
