"""The judge sees what the skill made: office files as text with sheet, slide and page markers,
images and PDFs as content blocks within a per-run budget, a file that cannot be converted by
name, the view recorded beside the grading, and the agent's notes in user_notes_summary. Every
file is made in the test with the library that writes it."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest

from optimizer.config import Settings
from optimizer.execute import TrialRecord
from optimizer.grade import compare, judge, render
from optimizer.grade import outcome as outcomes
from optimizer.grade.structural import check_run
from optimizer.inputs.evals import Eval
from optimizer.model import make_client
from optimizer.sim import Knobs, Simulator, media, world
from optimizer.tags import parse_tags, section


async def no_wait(_seconds: float) -> None:
    pass


# --- files made by their own libraries -----------------------------------------------------------


def make_docx(path: Path, words: str) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Quarterly report", 1)
    document.add_paragraph(words)
    document.save(str(path))


def make_xlsx(path: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Revenue"
    sheet.append(["quarter", "gnu units"])
    sheet.append(["Q1", 42])
    book.save(str(path))


def make_pptx(path: Path) -> None:
    import pptx

    deck = pptx.Presentation()
    for title in ("Opening", "Capybara findings", "Close"):
        deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = title
    deck.save(str(path))


def make_png(path: Path, text: str | None = None, size: tuple[int, int] = (8, 6)) -> None:
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    if text:
        info.add_text("Description", text)  # what the simulator reads of an image
    Image.new("RGB", size, (30, 90, 200)).save(path, "PNG", pnginfo=info)


def make_pdf(path: Path, pages: list[str]) -> None:
    """A minimal PDF written by hand (the simulator's writer): one line per page."""
    path.write_bytes(media.pdf_with_text("\n".join(pages), lines_per_page=1))


# --- a run, graded through the simulator, with the request kept ----------------------------------


def make_eval(expectations: list[str]) -> Eval:
    return Eval(
        id=1,
        name="Files",
        prompt="Make the files in outputs/",
        expected_output="The files.",
        expectations=expectations,
    )


def make_run(tmp_path: Path, name: str = "run-1") -> tuple[Path, TrialRecord]:
    run_dir = tmp_path / "eval-1" / "with_skill" / name
    (run_dir / "outputs").mkdir(parents=True)
    (run_dir / "transcript.md").write_text("# Transcript\n\nI made the files.\n")
    record = TrialRecord(
        trial_dir=run_dir,
        eval_id=1,
        configuration="with_skill",
        run_number=1,
        status="ok",
        error=None,
        skill_invoked=True,
        tokens=10,
        duration_s=1.0,
        tool_calls={},
        transcript_chars=10,
        output_chars=0,
        files_created=[],
        cost_usd=0.0,
    )
    return run_dir, record


@pytest.fixture
async def graded(settings: Settings, store):
    """grade(ev, run_dir, record) -> (outcome, the grader's request body as sent)."""
    sim = Simulator(seed=0, knobs=Knobs(judge_noise=0.0))
    bodies: list[dict] = []
    original = sim.handle

    def handle(method, target, headers, raw):
        bodies.append(json.loads(raw))
        return original(method, target, headers, raw)

    sim.handle = handle  # type: ignore[method-assign]
    client = make_client(settings, store, simulator=sim, sleep=no_wait)

    async def grade(ev: Eval, run_dir: Path, record: TrialRecord):
        structural = check_run(ev, run_dir, None, configuration="with_skill", run_error=None)
        out = await judge.grade_run(
            client, ev, run_dir, record, settings=settings, structural=structural, sample=0
        )
        return out, (bodies[-1] if bodies else None)

    yield grade
    await client.aclose()


def text_of(body: dict) -> str:
    content = body["messages"][0]["content"]
    return (
        content
        if isinstance(content, str)
        else "\n".join(b["text"] for b in content if b["type"] == "text")
    )


def blocks(body: dict, kind: str) -> list[dict]:
    content = body["messages"][0]["content"]
    return [] if isinstance(content, str) else [b for b in content if b["type"] == kind]


# --- office files ---------------------------------------------------------------------------------


async def test_office_files_reach_the_judge_as_text_with_their_markers(tmp_path, graded):
    run_dir, record = make_run(tmp_path)
    make_docx(run_dir / "outputs" / "report.docx", "The okapi margin rose by nine points.")
    make_xlsx(run_dir / "outputs" / "numbers.xlsx")
    make_pptx(run_dir / "outputs" / "deck.pptx")
    ev = make_eval(
        ['The report says the "okapi margin rose"', 'The report names the "pangolin budget"']
    )
    out, body = await graded(ev, run_dir, record)
    text = text_of(body)
    assert isinstance(body["messages"][0]["content"], str)  # text only: nothing to attach
    files = {a["path"]: (a, c) for a, c in parse_tags(section(text, "outputs"), "file")}
    attrs, docx_text = files["outputs/report.docx"]
    assert (
        attrs["converted_from"] == "docx" and "The okapi margin rose by nine points." in docx_text
    )
    assert "## Sheet: Revenue" in files["outputs/numbers.xlsx"][1]
    assert "| Q1 | 42 |" in files["outputs/numbers.xlsx"][1]
    deck = files["outputs/deck.pptx"][1]
    assert "<!-- Slide number: 2 -->\n\n# Capybara findings" in deck
    assert [e.passed for e in out.grading.expectations] == [True, False]  # found only in the docx
    assert "report.docx" in out.grading.expectations[0].evidence


async def test_a_corrupt_file_is_listed_as_not_converted_and_grading_goes_on(tmp_path, graded):
    run_dir, record = make_run(tmp_path)
    (run_dir / "outputs" / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (run_dir / "outputs" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(40))
    (run_dir / "outputs" / "note.md").write_text("# Note\nThe heron count is seven.\n")
    out, body = await graded(make_eval(['The note gives the "heron count"']), run_dir, record)
    text = text_of(body)
    assert out.status == "ok" and out.grading.expectations[0].passed
    assert "(docx file, 21 bytes, could not be converted: BadZipFile" in text
    assert "(image, 48 bytes, could not be converted:" in text
    assert isinstance(body["messages"][0]["content"], str)


# --- images and PDFs ------------------------------------------------------------------------------


async def test_a_png_becomes_an_image_block_the_simulator_reads_by_its_text(tmp_path, graded):
    run_dir, record = make_run(tmp_path)
    make_png(run_dir / "outputs" / "chart.png", "A bar chart of walrus sales by month")
    make_png(run_dir / "outputs" / "plain.png")  # no text: unverifiable to the simulator
    ev = make_eval(['The chart shows "walrus sales by month"', 'The picture shows a "lighthouse"'])
    out, body = await graded(ev, run_dir, record)
    images = blocks(body, "image")
    assert len(images) == 2 and images[0]["source"]["media_type"] == "image/png"
    assert (
        base64.b64decode(images[0]["source"]["data"])
        == (run_dir / "outputs" / "chart.png").read_bytes()
    )
    assert body["messages"][0]["content"][0]["type"] == "text"
    assert '<attachment path="outputs/chart.png">\nimage 1\n</attachment>' in text_of(body)
    assert 'attachment="1"' in text_of(body) and "attached as image 1" in text_of(body)
    assert [e.passed for e in out.grading.expectations] == [True, False]
    view = (run_dir / judge.JUDGE_VIEW).read_text()  # what the judge saw, for a reviewer
    assert "[image: image/png," in view and "sha256" in view and "base64" not in view
    assert not (run_dir / "outputs" / judge.JUDGE_VIEW).exists()


def test_a_large_image_is_downscaled_to_the_api_limits(tmp_path):
    from PIL import Image

    run_dir, _ = make_run(tmp_path)
    make_png(run_dir / "outputs" / "wide.png", size=(3000, 1200))
    view = render.render_view(run_dir, budget=10_000)
    (image,) = view.attachments
    with Image.open(io.BytesIO(image.raw)) as shown:
        assert max(shown.size) == 1568 and shown.size[1] == 627


async def test_a_pdf_is_a_document_block_and_its_text_with_page_markers(tmp_path, graded):
    run_dir, record = make_run(tmp_path)
    make_pdf(
        run_dir / "outputs" / "brief.pdf", ["Summary of the platypus study", "The narwhal appendix"]
    )
    out, body = await graded(make_eval(['The brief has a "narwhal appendix"']), run_dir, record)
    (document,) = blocks(body, "document")
    assert document["source"]["media_type"] == "application/pdf"
    assert document["title"] == "outputs/brief.pdf"
    assert (
        base64.b64decode(document["source"]["data"])
        == (run_dir / "outputs" / "brief.pdf").read_bytes()
    )
    text = text_of(body)
    assert "<!-- Page number: 2 -->\n\nThe narwhal appendix" in text
    assert 'converted_from="pdf"' in text and 'attachment="document 1"' in text
    assert out.grading.expectations[0].passed


def test_the_budget_cuts_with_a_note(tmp_path):
    run_dir, _ = make_run(tmp_path)
    for i in range(render.MAX_IMAGES + 2):
        make_png(run_dir / "outputs" / f"img-{i:02}.png", f"image {i}")
    make_docx(run_dir / "outputs" / "long.docx", "ibis " * 10_000)
    make_pdf(run_dir / "outputs" / "a.pdf", ["one"])
    view = render.render_view(run_dir, budget=5_000, document_bytes=10)
    assert sum(a.kind == "image" for a in view.attachments) == render.MAX_IMAGES
    assert not [a for a in view.attachments if a.kind == "document"]
    note = section(view.text, "render_note")
    assert note is not None and note.startswith("Not everything in the outputs is shown:")
    assert "the image outputs/img-08.png (past 8 images)" in note
    assert "part of the text of outputs/long.docx" in note
    assert "the PDF outputs/a.pdf as a document (its text is shown)" in note


def test_a_text_run_renders_as_before_and_the_request_is_a_pure_function(tmp_path):
    run_dir, _ = make_run(tmp_path)
    (run_dir / "outputs" / "a.md").write_text("# A\nalpha\n")
    (run_dir / "outputs" / "data.bin").write_bytes(bytes(range(256)))
    ev = make_eval(["alpha"])
    request = judge.build_request(ev, run_dir)
    assert isinstance(request, str)
    assert "(binary file, 256 bytes, not shown)" in request and "render_note" not in request
    make_png(run_dir / "outputs" / "b.png", "beta")
    (run_dir / "outputs" / "c.docx").write_bytes(b"PK\x03\x04 damaged")
    (run_dir / "outputs" / "d.png").write_bytes(b"not an image")  # its error names no address
    first = judge.build_request(ev, run_dir)
    other, _ = make_run(tmp_path / "elsewhere")
    for f in (run_dir / "outputs").iterdir():
        (other / "outputs" / f.name).write_bytes(f.read_bytes())
    assert judge.build_request(ev, other) == first  # no host path, no time, no random name
    assert str(tmp_path) not in json.dumps(first)


def test_the_comparator_sees_both_sides_images_blinded_and_no_pdf_bytes(tmp_path):
    a_dir, _ = make_run(tmp_path, "run-1")
    b_dir, _ = make_run(tmp_path / "b", "run-1")
    make_png(a_dir / "outputs" / "v2-chart.png", "left")
    make_png(b_dir / "outputs" / "chart.png", "right")
    make_pdf(b_dir / "outputs" / "brief.pdf", ["tapir notes"])
    request = compare.build_request(make_eval(["x"]), a_dir, b_dir)
    assert isinstance(request, list)
    labels = [b["text"] for b in request if b["type"] == "text"][1:]
    assert labels == [
        '<attachment path="[version]-chart.png">\nimage A1\n</attachment>',
        '<attachment path="chart.png">\nimage B1\n</attachment>',
    ]
    assert not [b for b in request if b["type"] == "document"]
    assert "tapir notes" in request[0]["text"] and "render_note" not in request[0]["text"]


# --- the agent's notes ----------------------------------------------------------------------------


async def test_user_notes_fill_user_notes_summary(tmp_path, graded):
    run_dir, record = make_run(tmp_path)
    (run_dir / "outputs" / "out.md").write_text("# Out\nThe heron count is seven.\n")
    (run_dir / "outputs" / "user_notes.md").write_text(
        "## Uncertainties\n- Whether herons in flight count\n## Workarounds\n(none)\n"
        "## Needs review\n- The count of juveniles\n"
    )
    out, body = await graded(make_eval(["The output gives the heron count"]), run_dir, record)
    assert "Whether herons in flight count" in section(text_of(body), "user_notes")
    assert out.grading.user_notes_summary.model_dump() == {
        "uncertainties": ["Whether herons in flight count"],
        "needs_review": ["The count of juveniles"],
        "workarounds": [],
    }
    assert "user_notes.md" not in section(text_of(body), "outputs")  # a harness file, not an output


def test_free_form_notes_are_left_to_the_judge():
    assert outcomes.notes_summary("I was not sure about the units.") is None
    assert outcomes.notes_summary("") is None
    numbered = outcomes.notes_summary(
        "# Workarounds\n1. Used CSV\n2) Skipped charts\n## Needs review\nN/A\n"
    )
    assert numbered is not None and numbered.workarounds == ["Used CSV", "Skipped charts"]
    assert numbered.needs_review == []


@pytest.mark.slow
def test_a_long_pdf_stops_converting_past_the_text_cap(tmp_path):
    from optimizer.grade import convert

    make_pdf(tmp_path / "long.pdf", ["y" * 150] * 1500)
    text = convert.to_text(tmp_path / "long.pdf", "pdf")
    assert text.endswith("not converted …]") and "<!-- Page number: 1000 -->" in text
    assert len(text) < convert.MAX_TEXT + 1_000


def test_the_simulated_executor_sometimes_leaves_notes_when_asked():
    system = render.read_text(Path(__file__).parents[2] / "prompts" / "executor.md")
    assert "outputs/user_notes.md" in system and "## Needs review" in system
    tools = [{"name": "str_replace_based_edit_tool", "type": "text_editor_20250728"}]
    wrote = []
    for n in range(20):
        body = {
            "system": system,
            "tools": tools,
            "messages": [
                {
                    "role": "user",
                    "content": f"Write a summary of topic {n} to outputs/summary-{n}.md",
                }
            ],
        }
        replies = [
            world.reply(
                body, "executor", __import__("random").Random(n), f"u{n:016}", world.Knobs()
            )
            for _ in range(2)
        ]
        assert replies[0] == replies[1]  # a function of the request and its seed
        paths = [b["input"]["path"] for b in replies[0][0] if b["type"] == "tool_use"]
        assert paths[0] == f"/workspace/outputs/summary-{n}.md"
        wrote.append("/workspace/outputs/user_notes.md" in paths)
    assert 0 < sum(wrote) < 20


@pytest.mark.parametrize("suffix", [".docx", ".pdf", ".png"])
async def test_the_simulated_executor_writes_binary_outputs_the_judge_reads(
    tmp_path, graded, suffix
):
    tools = [{"name": "bash", "type": "bash_20250124"}]
    task = f"Write a report on the wombat census to outputs/census{suffix}"
    body = {
        "system": "You are an agent.",
        "tools": tools,
        "messages": [{"role": "user", "content": task}],
    }
    blocks_, stop = world.reply(
        body, "executor", __import__("random").Random(3), "u" * 16, world.Knobs()
    )
    (call,) = [b for b in blocks_ if b["type"] == "tool_use"]
    command = call["input"]["command"]
    assert stop == "tool_use" and f"base64 -d > '/workspace/outputs/census{suffix}'" in command
    payload = command.split("<<'SIM_EOF'\n", 1)[1].rsplit("SIM_EOF", 1)[0]
    run_dir, record = make_run(tmp_path)
    (run_dir / "outputs" / f"census{suffix}").write_bytes(base64.b64decode(payload))
    out, request = await graded(
        make_eval(['The report is titled "Write a report on the wombat"']), run_dir, record
    )
    assert "could not be converted" not in text_of(request)
    assert out.grading.expectations[0].passed, out.grading.expectations[0].evidence


def test_an_attachment_is_priced_by_what_it_shows_not_by_its_base64():
    from optimizer.model.request import (
        ATTACHMENT_TOKENS,
        billed_chars,
        build_request,
        canonical_json,
    )

    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "A" * 4_000_000},
    }
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "A" * 400_000},
    }
    request = build_request(
        model="m",
        max_tokens=10,
        system=None,
        tools=None,
        tool_choice=None,
        temperature=None,
        messages=[{"role": "user", "content": [{"type": "text", "text": "hello"}, image, pdf]}],
    )
    canonical = canonical_json(request)
    assert (
        billed_chars(request, canonical)
        == len(canonical) - 4_400_000 + 4 * ATTACHMENT_TOKENS + 4 * 10_000
    )
    usage = Simulator(seed=0)._usage(request, [{"type": "text", "text": "ok"}])
    assert usage["input_tokens"] < 2 * ATTACHMENT_TOKENS + 200


async def test_a_model_without_attachments_gets_names_and_text(tmp_path, store):
    settings = Settings.model_validate({"llm": {"provider": "sim", "attachments": False}})
    sim = Simulator(seed=0, knobs=Knobs(judge_noise=0.0))
    client = make_client(settings, store, simulator=sim, sleep=no_wait)
    run_dir, record = make_run(tmp_path)
    make_png(run_dir / "outputs" / "chart.png", "walrus")
    make_pdf(run_dir / "outputs" / "brief.pdf", ["The narwhal appendix"])
    ev = make_eval(['The brief has a "narwhal appendix"'])
    structural = check_run(ev, run_dir, None, configuration="with_skill", run_error=None)
    out = await judge.grade_run(
        client, ev, run_dir, record, settings=settings, structural=structural, sample=0
    )
    await client.aclose()
    view = (run_dir / judge.JUDGE_VIEW).read_text()
    assert "(image, " in view and "not shown: this model is sent no images" in view
    assert "The narwhal appendix" in view and "[document" not in view and "[image" not in view
    assert out.grading.expectations[0].passed
    request = compare.build_request(ev, run_dir, run_dir, attachments=False)
    assert isinstance(request, str) and "sent no images" in request


def test_an_image_whose_base64_would_pass_the_limit_is_made_smaller(tmp_path) -> None:
    """The API measures an image block by its base64, four thirds of the raw bytes: a 4.3 MB
    PNG fits 5 MiB raw but not encoded, so it is re-encoded until its base64 fits."""
    import base64
    import random

    from PIL import Image

    from optimizer.grade.convert import image_bytes

    rng = random.Random(7)
    noise = bytes(rng.getrandbits(8) for _ in range(1200 * 1200 * 3))
    path = tmp_path / "noise.png"
    Image.frombytes("RGB", (1200, 1200), noise).save(path, "PNG")
    raw = path.read_bytes()
    assert 3.8 * 2**20 < len(raw) < 5 * 2**20  # passes a raw 5 MiB check, not an encoded one
    _media, sent = image_bytes(path)
    assert len(base64.b64encode(sent)) <= 5 * 2**20
