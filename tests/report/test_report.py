"""The HTML report file and the review server, without a browser: what the file holds, that it
needs no network, that model-written text cannot become markup, and the server's guards."""

from __future__ import annotations

import fcntl
import http.client
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from fixtures.workspace_builder import HOSTILE, build_workspace

from optimizer import schemas
from optimizer.errors import BadInput
from optimizer.grade import preview
from optimizer.report import html, pages, server
from optimizer.report.read import load as read_run

SEEDS = Path(__file__).parents[1] / "fixtures" / "seeds"
BLOB = re.compile(r'<script type="application/json" id="report-data">(.*?)</script>', re.S)
DETAIL = re.compile(r'reportDetail\(("[^"]*"),("[^"]*"),(.*)\);\n', re.S)


def blob(page: str) -> dict:
    return json.loads(BLOB.search(page).group(1))


def detail(report: Path, key: str) -> dict:
    """The data of one page, from its script beside the report."""
    m = DETAIL.fullmatch((html.details_dir(report) / f"{key}.js").read_text())
    assert (
        json.loads(m.group(1)) == key
        and json.loads(m.group(2)) == blob(report.read_text())["meta"]["token"]
    )
    return json.loads(m.group(3))


@pytest.fixture
def built(tmp_path):
    return build_workspace(tmp_path / "run", versions=6, hostile=True)


def test_each_page_has_its_own_inline_budget_so_the_last_versions_show_their_outputs(
    built, monkeypatch
):
    # A cap shared by the whole report went to the first versions' outputs and left the latest
    # with file names only. A cap that fits one run's outputs: every page inlines its first run.
    path = html.write_report(built.root, None)
    first = next(o for o in detail(path, "v1")["runs"][0]["outputs"] if o["kind"] == "text")
    monkeypatch.setattr(pages, "PAGE_CAP", len(first["text"]) + 200)  # about one run
    path = html.write_report(built.root, None)
    for key in ("v1", "v4", "baseline", "test"):  # in the order the pages are written
        kinds = [o["kind"] for o in detail(path, key)["runs"][0]["outputs"]]
        assert "text" in kinds, (key, kinds)
    assert blob(path.read_text())["meta"]["inline_cap_reached"] is True


def test_report_is_written_next_to_the_run_by_default(built):
    path = html.write_report(built.root, None)
    assert path == built.root / "report.html" and path.stat().st_size > 0


def test_report_is_self_contained(built):
    page = html.write_report(built.root, None).read_text()
    refs = re.findall(r"""(?:src|href)\s*=\s*["']?\s*([^"'\s>]+)""", page, re.I)
    assert refs and not [r for r in refs if re.match(r"(?i)(https?:)?//", r)]
    assert not re.search(r"<script[^>]+src=|<link[^>]+stylesheet|@import|url\(", page, re.I)
    assert "default-src 'none'" in page  # and the browser is told to refuse any request


def test_model_written_output_cannot_become_markup(built):
    path = html.write_report(built.root, None)
    page = path.read_text()
    assert HOSTILE not in page and "</script><script>alert(1)" not in page
    assert len(re.findall(r"<script", page)) == 2  # the JSON blob and the page's own code
    script = (html.details_dir(path) / "v1.js").read_text()
    assert HOSTILE not in script and "<" not in script  # nothing that could open or close a tag
    texts = [o.get("text", "") for r in detail(path, "v1")["runs"] for o in r["outputs"]]
    assert any(HOSTILE in t for t in texts)  # the text itself survives, as data


def test_report_data_covers_the_run(built):
    path = html.write_report(built.root, None)
    data = blob(path.read_text())
    assert [n["label"] for n in data["nodes"]] == built.labels
    assert data["meta"]["current_best"] == built.best and data["meta"]["simulated"] is True
    assert data["pages"] == [*built.labels, "baseline", "test"]
    assert data["evals"] == [str(e) for e in built.evals]
    v1 = detail(path, "v1")
    assert "+- Rule 1" in v1["diff"] and v1["selection"]["decision"] == built.decisions["v1"]
    assert v1["benchmark"]["per_eval"] and v1["failing"] and v1["analysis"]
    run = v1["runs"][0]
    assert run["id"] == built.run_id("v1", built.evals[0]) and run["expectations"]
    kinds = {o["name"]: o["kind"] for o in run["outputs"]}
    assert kinds == {
        "chart.png": "image",
        "data.bin": "file",
        "report.md": "text",
    }  # metrics.json is harness
    image = next(o for o in run["outputs"] if o["kind"] == "image")
    assert image["data"].startswith("data:image/png;base64,")
    costs = [c[1] for c in data["cost"]]
    assert costs == sorted(costs) and costs[-1] > 0
    assert data["test"]["best"] == built.best and data["suggestions"]["suggestions"]
    assert {r["id"] for r in detail(path, "baseline")["runs"]} >= {
        f"baseline-eval-{e}-without_skill-run-1" for e in built.evals
    }
    assert any(r["id"].startswith("test-v0-eval-") for r in detail(path, "test")["runs"])
    assert 'id="sim-banner"' in html.render(built.root)


def test_no_simulation_banner_for_a_real_run(tmp_path):
    built = build_workspace(tmp_path / "run", versions=2, simulated=False)
    page = html.render(built.root)
    assert 'id="sim-banner"' not in page and blob(page)["meta"]["simulated"] is False


def test_large_outputs_are_capped(built):
    out = built.root / "v1" / "eval-1" / "with_skill" / "run-1" / "outputs"
    (out / "huge.txt").write_text("x" * (html.TEXT_CAP * 3))
    (out / "big.png").write_bytes(b"\x89PNG" + b"\0" * (html.IMAGE_CAP + 1))
    built.regrade("v1/eval-1/with_skill/run-1")
    outputs = {
        o["name"]: o
        for o in detail(html.write_report(built.root, None), "v1")["runs"][0]["outputs"]
    }
    assert outputs["huge.txt"]["truncated"] and len(outputs["huge.txt"]["text"]) == html.TEXT_CAP
    assert outputs["big.png"]["kind"] == "file" and outputs["big.png"]["size"] > html.IMAGE_CAP


def test_an_output_linking_out_of_the_run_is_not_read(built, tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret")
    out = built.root / "v1" / "eval-1" / "with_skill" / "run-1" / "outputs"
    (out / "leak.txt").symlink_to(secret)
    built.regrade("v1/eval-1/with_skill/run-1")
    path = html.write_report(built.root, None)
    assert not [
        p for p in [path, *html.details_dir(path).iterdir()] if "host secret" in p.read_text()
    ]
    outputs = {o["name"]: o for o in detail(path, "v1")["runs"][0]["outputs"]}
    assert outputs["leak.txt"]["kind"] == "file"


def test_links_to_run_files_are_relative_to_the_report(built, tmp_path):
    path = html.write_report(built.root, tmp_path / "elsewhere" / "r.html")
    assert blob(path.read_text())["meta"]["files_base"] == "../run/"
    assert blob(html.write_report(built.root, None).read_text())["meta"]["files_base"] == ""


def test_report_of_a_history_json_only_folder(tmp_path):
    shutil.copy(SEEDS / "002_history.json", tmp_path / "history.json")
    data = blob(html.write_report(tmp_path, None).read_text())
    assert [n["label"] for n in data["nodes"]] == ["v0", "v1", "v2"] and data["status"] is None


def test_report_of_a_description_run_history(tmp_path):
    shutil.copy(SEEDS / "001_history.json", tmp_path / "history.json")
    data = blob(html.write_report(tmp_path, None).read_text())
    assert data["meta"]["form"] == "versions" and data["pages"] == []
    assert not (tmp_path / "report_files").exists()
    assert data["nodes"][0]["description"] == "Current description text"


@pytest.mark.slow
def test_two_hundred_versions_make_a_usable_file(tmp_path):
    built = build_workspace(tmp_path / "big", versions=200, evals=(1, 2), test_evals=(3,), runs=1)
    path = html.write_report(built.root, None)
    data = blob(path.read_text())
    assert len(data["nodes"]) == 200 and len(data["pages"]) == 202  # and the baseline and test runs
    # The index holds one row per version, never a version's runs: those are in its own script.
    details = {p.stem: p.stat().st_size for p in html.details_dir(path).iterdir()}
    assert set(details) == set(data["pages"])
    assert path.stat().st_size < 400_000 < sum(details.values()), (
        path.stat().st_size,
        sum(details.values()),
    )
    assert '"expectations"' not in path.read_text()


def test_the_index_does_not_grow_with_the_runs_of_a_version(tmp_path):
    """Three times the runs per version leave report.html the same size: they go to the pages."""
    sizes = []
    for runs in (1, 3):
        built = build_workspace(tmp_path / f"runs-{runs}", versions=4, evals=(1, 2, 3), runs=runs)
        path = html.write_report(built.root, None)
        v2 = detail(path, "v2")
        assert len(v2["runs"]) == 3 * runs and all(r["expectations"] for r in v2["runs"])
        sizes.append(path.stat().st_size)
    assert abs(sizes[1] - sizes[0]) < 2_000, sizes


def test_a_report_written_again_drops_the_pages_it_no_longer_has(built, tmp_path):
    path = html.write_report(built.root, tmp_path / "r.html")
    folder = html.details_dir(path)
    (folder / "v99.js").write_text("reportDetail('v99', 'old', {});\n")
    (folder / "notes.txt").write_text("mine")
    html.write_report(built.root, path)
    assert not (folder / "v99.js").exists() and (folder / "notes.txt").read_text() == "mine"
    assert detail(path, "v1")["runs"]  # and the pages are the new report's


def test_report_of_a_real_simulated_run(simulated):
    root = simulated
    history = json.loads((root / "history.json").read_text())
    path = html.write_report(root, None)
    data = blob(path.read_text())
    labels = [n["label"] for n in data["nodes"]]
    pages = {label: detail(path, label) for label in labels}
    assert {it["version"] for it in history["iterations"]} <= set(labels)
    assert data["meta"]["current_best"] == history["current_best"] and data["meta"]["simulated"]
    assert all(pages[label]["runs"] for label in labels)
    assert data["cost"] and data["evals"] and data["suggestions"] is not None
    comps = [c for label in labels[1:] for c in pages[label]["comparisons"]]
    assert comps and all(c["winner_version"] in (*labels, None) for c in comps)
    assert any(c["winner_version"] for c in comps)  # assignment.json unblinded them
    runs = [r for label in labels for r in pages[label]["runs"]]
    assert any(r["judge_view"].startswith("<task>") for r in runs)  # what the grader saw
    # The simulated agent leaves notes in some runs; the grading sums them up for the reviewer.
    assert any((r["user_notes_summary"] or {}).get("needs_review") for r in runs)


def test_pages_read_from_state_db_are_the_pages_read_from_the_run_folders(simulated):
    # The grading unit keeps each run's preview in state.db, so the report opens no run folder;
    # a run graded before previews were kept is read from its folder, and must look the same.
    with sqlite3.connect(simulated / "state.db") as conn:
        graded = {k for (k,) in conn.execute("select key from gradings")}
        kept = {k for (k,) in conn.execute("select key from previews")}
    assert graded and kept == graded
    path = html.write_report(simulated, None)
    keys = pages.keys(read_run(simulated))
    from_db = {key: detail(path, key) for key in keys}
    with sqlite3.connect(simulated / "state.db") as conn:
        conn.execute("delete from previews")
    path = html.write_report(simulated, None)
    assert {key: detail(path, key) for key in keys} == from_db
    assert any(
        o["kind"] == "text" for page in from_db.values() for r in page["runs"] for o in r["outputs"]
    )


def test_without_state_db_the_pages_are_read_from_the_run_folders(built):
    path = html.write_report(built.root, None)
    from_db = {key: detail(path, key) for key in ("v1", "baseline", "test")}
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (built.root / name).unlink(missing_ok=True)
    path = html.write_report(built.root, None)
    assert {key: detail(path, key)["runs"] for key in from_db} == {
        k: p["runs"] for k, p in from_db.items()
    }
    assert all(from_db[key]["runs"] for key in from_db)


def test_a_run_with_many_large_outputs_keeps_a_bounded_preview_and_shows_them_all(built):
    key = "v1/eval-1/with_skill/run-1"
    out = built.root / key / "outputs"
    for n in range(1, 13):  # 12 × 19,000 characters: past what one run keeps, and no multiple of it
        (out / f"part-{n}.txt").write_text(f"part {n} " + "x" * 19_000)
    built.regrade(key)
    with sqlite3.connect(built.root / "state.db") as conn:
        kept = json.loads(
            conn.execute("select preview_json from previews where key = ?", (key,)).fetchone()[0]
        )
    assert sum(len(o.get("text", "")) for o in kept["outputs"]) <= preview.KEPT_CAP
    assert any(o.get("read") for o in kept["outputs"])
    shown = {
        o["name"]: o
        for o in detail(html.write_report(built.root, None), "v1")["runs"][0]["outputs"]
    }
    assert all(shown[f"part-{n}.txt"]["text"].startswith(f"part {n} ") for n in range(1, 13))


def test_a_run_still_executing_is_on_its_page_while_the_daemon_works(built):
    # Its folder is there, its row in trials comes when it has executed.
    key = "v1/eval-2/with_skill/run-1"
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute("delete from trials where key = ?", (key,))
    pidfile = built.root / "optimizer.pid"
    pidfile.write_text(str(os.getpid()))
    with open(pidfile) as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as the daemon holds it
        runs = detail(html.write_report(built.root, built.root / "live.html"), "v1")["runs"]
    assert key in {r["path"] for r in runs}


def test_an_eval_folder_that_links_out_of_the_workspace_is_not_read(built, tmp_path):
    outside = tmp_path / "outside"
    shutil.move(built.root / "v1" / "eval-2", outside)
    (outside / "with_skill" / "run-1" / "outputs" / "notes.txt").write_text("HOST SECRET")
    (built.root / "v1" / "eval-2").symlink_to(outside)
    with sqlite3.connect(built.root / "state.db") as conn:  # as for runs graded before previews
        conn.execute("delete from previews where key like 'v1/eval-2/%'")
    path = html.write_report(built.root, None)
    assert not [
        p for p in [path, *html.details_dir(path).iterdir()] if "HOST SECRET" in p.read_text()
    ]


def test_an_output_whose_name_is_not_utf8_is_listed_and_the_run_still_shown(built):
    key = "v1/eval-1/with_skill/run-1"
    out = built.root / key / "outputs"
    with open(os.path.join(os.fsencode(out), b"\xffnotes.txt"), "wb") as handle:
        handle.write(b"text under a name that is not UTF-8")
    for keep in (True, False):  # the preview kept by the grading, and one made from the folder
        if keep:
            built.regrade(key)
        else:
            with sqlite3.connect(built.root / "state.db") as conn:
                conn.execute("delete from previews where key = ?", (key,))
        run = detail(html.write_report(built.root, None), "v1")["runs"][0]
        assert run["transcript"] and "\ufffdnotes.txt" in {o["name"] for o in run["outputs"]}
        assert any(o["kind"] == "text" for o in run["outputs"])  # report.md still shown


def test_a_number_past_64_bits_in_a_version_file_does_not_stop_the_report(built):
    selection = built.root / "v1" / "selection.json"
    selection.write_text('{"n": 123456789012345678901234567890}')
    assert detail(html.write_report(built.root, None), "v1")["selection"] == {
        "n": 123456789012345678901234567890
    }


# -- the review server, over real HTTP ------------------------------------------------------------


@pytest.fixture
def review(built):
    srv, port = server.serve_in_thread(built.root)
    yield built, port
    srv.shutdown()
    srv.server_close()


def request(port: int, method: str, path: str, body: object = None, headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    payload = None if body is None else json.dumps(body)
    conn.request(
        method, path, body=payload, headers={"Content-Type": "application/json", **(headers or {})}
    )
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


def test_server_listens_on_loopback_only(review):
    built, port = review
    srv, other = server.serve_in_thread(built.root)
    try:
        assert srv.server_address[0] == "127.0.0.1"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize(
    "path",
    [
        "/../state.db",
        "/../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/v1/%2E%2E/%2e%2e/etc/passwd",
        "/v1/..%2f..%2fetc/passwd",
        "/%252e%252e/etc/passwd",
        "/v1/eval-1/..\\..\\state.db",
    ],
)
def test_paths_outside_the_run_folder_are_refused(review, path):
    _, port = review
    status, _ = request(port, "GET", path)
    assert status == 403


def test_a_link_out_of_the_folder_is_refused(review, tmp_path):
    built, port = review
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (built.root / "v1" / "outside.txt").symlink_to(secret)
    status, body = request(port, "GET", "/v1/outside.txt")
    assert status == 403 and b"secret" not in body


def test_run_files_are_served_inert(review):
    _, port = review
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/v1/eval-1/with_skill/run-1/outputs/report.md")
    resp = conn.getresponse()
    body = resp.read()
    assert resp.status == 200 and b"Row count" in body
    assert resp.getheader("Content-Type").startswith("text/plain")
    assert "sandbox" in resp.getheader("Content-Security-Policy")


def test_foreign_hosts_and_origins_are_refused(review):
    _, port = review
    assert request(port, "GET", "/", headers={"Host": "attacker.example"})[0] == 403
    status, _ = request(
        port,
        "POST",
        "/api/feedback",
        {"run_id": "v1-eval-1-with_skill-run-1", "feedback": "x"},
        headers={"Origin": "http://attacker.example"},
    )
    assert status == 403


def test_feedback_is_saved_in_the_seed_form(review):
    built, port = review
    run_id = built.run_id("v1", built.evals[0])
    status, body = request(port, "GET", "/api/feedback")
    assert status == 200 and json.loads(body) == {"reviews": [], "status": "in_progress"}
    assert (
        request(port, "POST", "/api/feedback", {"run_id": run_id, "feedback": "too long"})[0] == 200
    )
    assert (
        request(
            port,
            "POST",
            "/api/feedback",
            {"run_id": run_id, "feedback": "too long, and no summary"},
        )[0]
        == 200
    )
    assert (
        request(
            port, "POST", "/api/feedback", {"run_id": "v1-eval-9-with_skill-run-1", "feedback": "?"}
        )[0]
        == 400
    )
    saved = schemas.Feedback.model_validate_json((built.root / "feedback.json").read_text())
    assert [(r.run_id, r.feedback) for r in saved.reviews] == [(run_id, "too long, and no summary")]
    assert saved.status == "in_progress"
    status, body = request(port, "POST", "/api/feedback/submit", {})
    assert status == 200 and json.loads(body)["status"] == "complete"
    assert json.loads((built.root / "feedback.json").read_text())["status"] == "complete"
    request(port, "POST", "/api/feedback", {"run_id": run_id, "feedback": ""})
    assert json.loads((built.root / "feedback.json").read_text())["reviews"] == []


def test_review_refuses_a_broken_feedback_file(built):
    (built.root / "feedback.json").write_text('{"reviews": "nope"}')
    with pytest.raises(BadInput, match="feedback.json"):
        server.serve_in_thread(built.root)


def test_review_page_is_the_report_in_review_mode(review):
    _, port = review
    status, body = request(port, "GET", "/")
    page = body.decode()
    assert status == 200 and blob(page)["meta"]["review"] is True and 'id="submit-all"' in page


def test_review_server_sends_a_page_when_it_is_opened(review):
    built, port = review
    _, body = request(port, "GET", "/")
    token = blob(body.decode())["meta"]["token"]
    status, body = request(port, "GET", "/api/details/v1.js")
    m = DETAIL.fullmatch(body.decode())
    assert status == 200 and json.loads(m.group(1)) == "v1" and json.loads(m.group(2)) == token
    assert json.loads(m.group(3))["runs"][0]["id"] == built.run_id("v1", built.evals[0])
    assert request(port, "GET", "/api/details/v99.js")[0] == 404
    assert request(port, "GET", "/api/details/state.db")[0] == 404
    # Another site's <script src=…> (a cross-site no-cors load) gets nothing to read.
    assert (
        request(port, "GET", "/api/details/v1.js", headers={"Sec-Fetch-Site": "cross-site"})[0]
        == 403
    )
    assert (
        request(port, "GET", "/api/details/v1.js", headers={"Sec-Fetch-Site": "same-origin"})[0]
        == 200
    )


def test_review_server_reads_the_run_again_only_when_it_changed(review, monkeypatch):
    built, port = review
    loads = []
    real = server.read.load
    monkeypatch.setattr(server.read, "load", lambda root: loads.append(root) or real(root))
    for key in ("v1", "v2", "v1"):
        assert request(port, "GET", f"/api/details/{key}.js")[0] == 200
    assert len(loads) <= 1  # at most the first page reads the run; the next ones reuse it
    before = len(loads)
    state = built.root / "state.db"
    os.utime(state, ns=(state.stat().st_atime_ns, state.stat().st_mtime_ns + 1_000_000_000))
    assert request(port, "GET", "/api/details/v2.js")[0] == 200
    assert len(loads) == before + 1  # a daemon wrote: the page shows what it wrote


def test_feedback_on_a_sealed_test_run_is_refused(review):
    """The proposer reads feedback.json, so a remark on a sealed test run would leak the test."""
    built, port = review
    run_id = f"test-{built.run_id('v0', built.test_evals[0])}"
    assert run_id in server.run_ids(built.root)  # a real run folder, not an unknown id
    status, body = request(port, "POST", "/api/feedback", {"run_id": run_id, "feedback": "peek"})
    assert status == 409 and b"sealed test" in body
    assert not (built.root / "feedback.json").exists()


def test_report_says_what_a_win_was_against_and_what_the_numbers_do_not_say(tmp_path):
    built = build_workspace(tmp_path / "run", versions=7)  # seed 0: v1, v2, v5 won; v5 best
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute("update versions set decision = 'won' where label = 'v4'")
        conn.execute("update decisions set decision = 'won' where version = 'v4'")
        conn.execute(
            "update runs set test_json = ?",
            [
                json.dumps(
                    {
                        "evals": [4],
                        "best": "v5",
                        "delta": -0.111,
                        "versions": {
                            "v0": {"score": 1.0, "per_eval": {"4": 1.0}},
                            "v5": {"score": 0.889, "per_eval": {"4": 0.889}},
                        },
                    }
                )
            ],
        )
    page = html.render(built.root)
    data = blob(page)
    nodes = {n["label"]: n for n in data["nodes"]}
    assert nodes["v4"]["verdict"].startswith(
        "won against its parent v2; not the best: v5 scores higher"
    )
    assert nodes["v5"]["verdict"] == "won against its parent v2"
    # One sealed eval lower gives no interval: no warning (the lineage says "cannot tell").
    assert not any(w.startswith("sealed test") for w in data["warnings"])
    assert data["warnings"][0].startswith("small suite: train has 3 evals and the sealed test 1")
    assert all(n["score_evals"] == 3 for n in data["nodes"] if n["score_ci"])
    assert all(n["delta_evals"] for n in data["nodes"] if n["ci"])
    # the page draws them: warnings on top, the verdict beside the badge, n beside intervals
    for hook in (
        'id: "warnings"',
        "n.verdict",
        "evalsNote(n.score_evals)",
        "evalsNote(oe.ci_evals)",
    ):
        assert hook in page


# -- the overview: what a user reads first ------------------------------------------------------


def test_the_overview_leads_with_the_summarys_headline_and_scores(tmp_path):
    """report.html and summary.md say the same sentence, from the same reading; it says what the
    decision showed and that nothing is adopted, never "better" (docs/design.md §16); beside
    it v0 and the best on the train evals and the sealed test, and the change that won."""
    from optimizer.report import summary

    built = build_workspace(tmp_path / "run", versions=8, pending=False)
    said = re.search(r"^\*\*(.*)\*\*$", summary.write(built.root).read_text(), re.M).group(1)
    page = html.write_report(built.root, None).read_text()
    top = blob(page)["overview"]
    assert top["headline"] == said
    assert said.startswith(f"{built.best} won against") and "not yet adopted" in said
    assert "better" not in said
    assert [r["split"] for r in top["scores"]] == ["train", "sealed test"]
    train = top["scores"][0]
    assert train["v0"] is not None and train["best"] > train["v0"] and train["interval"]
    assert top["diff"].startswith("diff --git") and "+- Rule" in top["diff"]
    assert top["ended"] == "stopped: max iterations reached"
    for hook in ('id: "headline"', 'id: "winning-diff"', 'id: "next"'):
        assert hook in page


def test_the_overview_names_the_next_command_and_it_works(tmp_path, cli, monkeypatch):
    """A run with a winner: export it (the command runs as given), or search on with as many
    iterations again; summary.md names the same commands."""
    import shlex

    from optimizer.report import summary

    built = build_workspace(tmp_path / "run", versions=6, pending=False)
    with sqlite3.connect(built.root / "state.db") as conn:  # 5 iterations of 5 done
        settings = json.loads(conn.execute("select settings_json from runs").fetchone()[0])
        settings["loop"]["max_iterations"] = 5
        conn.execute("update runs set settings_json = ?", [json.dumps(settings)])
    steps = blob(html.write_report(built.root, None).read_text())["overview"]["next"]
    export, more = steps[0]["command"], steps[-1]["command"]
    assert export == f"optimizer export {built.root} {built.best} --out csv-report-{built.best}"
    assert more == f"optimizer resume {built.root} --max-iterations 10"  # 5 done, 5 again
    text = summary.write(built.root).read_text()
    assert f"`{export}`" in text and f"`{more}`" in text
    monkeypatch.chdir(tmp_path)
    assert cli(*shlex.split(export)[1:]).exit_code == 0
    assert (tmp_path / f"csv-report-{built.best}" / "SKILL.md").is_file()


def test_next_never_offers_a_best_that_scored_below_v0_on_the_sealed_test(tmp_path):
    built = build_workspace(tmp_path / "run", versions=6, pending=False)
    with sqlite3.connect(built.root / "state.db") as conn:
        test = json.loads(conn.execute("select test_json from runs").fetchone()[0])
        test["versions"]["v0"]["score"] = 0.9
        test["versions"][built.best]["score"] = 0.4
        conn.execute("update runs set test_json = ?", [json.dumps(test)])
    steps = blob(html.write_report(built.root, None).read_text())["overview"]["next"]
    assert steps and not any("optimizer export" in s["command"] for s in steps)
    assert steps[-1]["command"].startswith(f"optimizer resume {built.root}")


def test_the_next_command_of_a_spent_budget_gives_more(tmp_path):
    built = build_workspace(tmp_path / "run", versions=3, pending=False, seed=4)
    with sqlite3.connect(built.root / "state.db") as conn:
        spent = conn.execute("select sum(cost_usd) from calls").fetchone()[0]
        settings = json.loads(conn.execute("select settings_json from runs").fetchone()[0])
        settings["budget"]["usd"] = round(spent, 2)
        settings["loop"]["max_iterations"] = 5
        conn.execute(
            "update runs set settings_json = ?, stop_reason = ?",
            [json.dumps(settings), f"spent ${spent:.2f} of the ${spent:.2f} budget"],
        )
    more = blob(html.render(built.root))["overview"]["next"][-1]["command"]
    assert f"optimizer resume {built.root} --budget-usd " in more
    assert int(more.rsplit(" ", 1)[1]) > spent


def test_the_score_chart_has_every_version_the_pending_ones_too(tmp_path):
    built = build_workspace(tmp_path / "run", versions=5, pending=True)
    points = blob(html.render(built.root))["chart"]
    assert [p["label"] for p in points] == built.labels
    pending = [p for p in points if p["pending"]]
    assert [p["label"] for p in pending] == [built.labels[-1]] and pending[0]["score"] is None


def test_suggestions_are_one_row_per_expectation_with_a_count_and_capped(tmp_path):
    """The same advice about one expectation in every eval was a row per eval (30 rows of
    repeats): one row, its count and its evals, the most frequent first, and "and N more"."""
    from optimizer.report import overview

    built = build_workspace(tmp_path / "run", versions=3, pending=False)
    rows = [
        {
            "frequency": 1,
            "assertion": f"S{k}: The report file was written",
            "reason": f"Eval {e}: expectation 'S{k}: The report file was written' passes in "
            "every run of both configurations - does not discriminate the skill's value",
            "action": "Replace or sharpen it: it passes with and without the skill.",
            "source": "analyst",
        }
        for k in range(1, 13)
        for e in range(1, 2 + (k == 5) * 3)
    ]
    built.root.joinpath("eval_feedback_aggregate.json").write_text(
        json.dumps(
            {"skill_name": "csv-report", "iteration": 2, "total_runs": 40, "suggestions": rows}
        )
    )
    shown = blob(html.render(built.root))["suggestions"]
    assert len(rows) == 15 and len(shown["suggestions"]) == overview.SUGGESTIONS_SHOWN == 10
    assert shown["more"] == 2 and shown["items"] == 15
    first = shown["suggestions"][0]
    assert first["assertion"] == "S5: The report file was written" and first["frequency"] == 4
    assert first["evals"] == ["1", "2", "3", "4"]
    assert first["reason"].startswith("passes in every run")  # not the expectation again
    assert len({s["assertion"] for s in shown["suggestions"]}) == 10


def test_the_review_server_reads_a_commit_that_left_the_files_time_and_size_alone(
    tmp_path, monkeypatch
):
    """Two commits within one tick of the file system's clock can leave state.db's and its WAL's
    time and size as they were; the page then showed the spend from before the second commit."""
    built = build_workspace(tmp_path / "run", versions=2)
    review = server.ReviewServer(built.root, 0)
    try:
        monkeypatch.setattr(server, "_stamp", lambda _path: (1, 1))  # the files look unchanged
        before = review.run_data().ledger["spent_usd"]
        with sqlite3.connect(built.root / "state.db") as conn:
            conn.execute(
                "insert into calls (hash, role, model, sample, outcome, response_json, cost_usd, "
                "attempts, created_at, scope) values ('x', 'grader', 'm', 0, 'ok', '{}', 2.5, 1, "
                "'2026-11-20T23:00:00Z', 'test')"
            )
        assert review.run_data().ledger["spent_usd"] == pytest.approx(before + 2.5)
    finally:
        review.server_close()
