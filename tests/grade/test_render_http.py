"""What the judge is sent, read on the wire: `optimizer benchmark` against the simulator's HTTP
server through a logging proxy, on an example whose outputs are a Word file, a PNG and a PDF.
The grader's request must carry the docx's own text, an image block and a document block."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from inprocess import ROOT, Recorder
from typer.testing import CliRunner

from optimizer.cli import app
from optimizer.sim import Simulator, serve
from optimizer.tags import section

MEMO = ROOT / "examples" / "memo-writer"


@pytest.fixture(scope="module")
def wire(tmp_path_factory) -> tuple[Path, list[dict]]:
    server, port = serve(Simulator(seed=0), "127.0.0.1", 0)
    proxy = Recorder(f"http://127.0.0.1:{port}")
    out = tmp_path_factory.mktemp("wire") / "bench"
    try:
        result = CliRunner().invoke(
            app,
            [
                "benchmark",
                str(MEMO),
                "--provider",
                "anthropic",
                "--runs",
                "1",
                "--out",
                str(out),
                "--set",
                f"llm.base_url={proxy.url}",
            ],
            env={"ANTHROPIC_API_KEY": "sk-test-not-a-key"},
        )
        assert result.exit_code == 0, result.output
    finally:
        proxy.shutdown()
        proxy.server_close()
        server.shutdown()
    return out, proxy.since(0)


def grader_request(log: list[dict], output: str) -> dict:
    """The grader's request for the with-skill run that wrote `output` (its transcript shows the
    skill being loaded)."""
    found = [
        body
        for body in log
        if any(t.get("name") == "submit_grading" for t in body.get("tools", []))
        and f'path="{output}"' in request_text(body)
        and "Tool call: Skill" in request_text(body)
    ]
    assert found, f"no grader request shows {output}"
    return found[0]


def request_text(body: dict) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)


def block_types(body: dict) -> list[str]:
    content = body["messages"][0]["content"]
    return [] if isinstance(content, str) else [b["type"] for b in content]


@pytest.mark.slow
def test_the_docx_text_reaches_the_grader_and_the_docx_bytes_do_not(wire):
    out, log = wire
    docx = next(out.glob("eval-1/with_skill/run-1/outputs/memo.docx"))
    import docx as python_docx

    inside = [p.text for p in python_docx.Document(str(docx)).paragraphs if p.text.strip()]
    assert inside, "the simulated agent wrote no guideline line into the docx"
    known = "\n".join(p.read_text() for p in MEMO.rglob("*") if p.is_file())
    only_in_docx = [line for line in inside if line not in known]
    text = request_text(grader_request(log, "outputs/memo.docx"))
    assert only_in_docx and [line for line in only_in_docx if line not in text] == []
    # The agent's own shell command (in the transcript) may carry the bytes; the outputs may not.
    outputs = section(text, "outputs") or ""
    assert 'converted_from="docx"' in outputs
    assert base64.b64encode(docx.read_bytes()[:30]).decode()[:20] not in outputs


@pytest.mark.slow
def test_a_png_is_sent_as_an_image_block_and_a_pdf_as_a_document_block(wire):
    _, log = wire
    assert "image" in block_types(grader_request(log, "outputs/card.png"))
    assert "document" in block_types(grader_request(log, "outputs/brief.pdf"))


@pytest.mark.slow
def test_gradings_cite_what_is_inside_the_files_and_the_skill_makes_a_difference(wire):
    out, _ = wire
    bench = json.loads((out / "benchmark.json").read_text())
    rates = {
        c: bench["run_summary"][c]["pass_rate"]["mean"] for c in ("with_skill", "without_skill")
    }
    assert rates["with_skill"] > rates["without_skill"] + 0.3
    judged = {
        t
        for e in json.loads((MEMO / "evals" / "evals.json").read_text())["evals"]
        for t in e["expectations"]
    }
    cited = [
        e["evidence"]
        for g in out.glob("eval-*/with_skill/run-*/grading.json")
        for e in json.loads(g.read_text())["expectations"]
        if e["passed"] and e["text"] in judged
    ]
    assert cited and all(e.startswith("Found in outputs/") for e in cited)
    assert any(".docx" in e for e in cited) and any(".pdf" in e for e in cited)
