"""What a judging model sees of a task and of a run: the task's sections, and the run's output files
rendered within a budget (text inline, the rest by name, type and size). One place for the grader
and the comparator. Never puts a host path, a time or a random name into what it renders."""

from __future__ import annotations

import base64
import hashlib
import html
import mimetypes
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from optimizer.grade import convert
from optimizer.grade.outputs import output_files
from optimizer.tags import data, tag, tags

if TYPE_CHECKING:  # the SDK's types only: importing it costs 2 s (model/port.py)
    from anthropic.types import ContentBlockParam

    from optimizer.inputs.evals import Eval
    from optimizer.schemas import RubricDimension

MAX_FILE_CHARS = 20_000
MAX_IMAGES = 8  # per run: each image costs up to ~1,600 input tokens
MAX_DOCUMENT_BYTES = 8 * 1024 * 1024  # of PDF per run; base64 makes it a third larger
MAX_DOCUMENT_PAGES = 100  # the API's limit for one request


def truncate(text: str, limit: int, head: int | None = None) -> str:
    """text cut in the middle with a visible marker; the head keeps the start, the rest the end."""
    if len(text) <= limit:
        return text
    head = min(head if head is not None else limit // 3, limit)
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[… {cut:,} characters truncated …]\n{text[len(text) - tail :] if tail else ''}"


def task_sections(eval: Eval) -> list[str]:
    """The task, its expected output, its expectations (E1…) and its rubric, as tagged sections."""
    expectations = [({"id": f"E{i}"}, t) for i, t in enumerate(eval.expectations, 1)]
    parts = [
        tag("task", eval.prompt),
        tag("expected_output", eval.expected_output or "(not given)"),
        tag("expectations", tags("expectation", expectations) or "(none)"),
    ]
    if eval.rubric:
        parts.append(tag("rubric", "\n".join(_dimension(d) for d in eval.rubric)))
    return parts


def _dimension(dim: RubricDimension) -> str:
    # Written out because tags.tag() takes `name` itself as its first argument.
    anchors = [f"Score {k}: {v}" for k, v in sorted(dim.scoring.items())]
    body = "\n".join([dim.description, *anchors])
    name, weight = html.escape(dim.name, quote=True), html.escape(str(dim.weight), quote=True)
    return f'<dimension name="{name}" weight="{weight}">\n{body}\n</dimension>'


def text_of(path: Path, limit: int) -> str | None:
    """The file's text (at most 4·limit bytes read), or None when it is binary."""
    with open(path, "rb") as handle:
        data = handle.read(4 * limit)
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A cut through a multi-byte character at the read limit is still text.
        return data[: exc.start].decode("utf-8") if exc.start > len(data) - 4 else None


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


@dataclass(frozen=True)
class Attachment:
    """An image or a PDF shown to the judge as its own content block, after the text."""

    label: str  # "1", or "A1" for the comparator's side A: named in the text part
    path: str  # as shown to the judge (blinded for the comparator)
    kind: Literal["image", "document"]
    media_type: str
    raw: bytes

    def blocks(self) -> list[ContentBlockParam]:
        # media_type is one the API takes: attachments are made only of the types it reads.
        source: Any = {
            "type": "base64",
            "media_type": self.media_type,
            "data": base64.b64encode(self.raw).decode("ascii"),
        }
        if self.kind == "document":
            return [{"type": "document", "source": source, "title": self.path}]
        return [
            {"type": "text", "text": tag("attachment", f"image {self.label}", path=self.path)},
            {"type": "image", "source": source},
        ]


@dataclass
class Rendered:
    """What a judge sees of one run's outputs: the text part and the attachments after it."""

    text: str
    attachments: list[Attachment] = field(default_factory=list)


@dataclass
class _Budget:
    total: int
    chars: int
    images: int
    document_bytes: int
    documents: bool
    attach: bool  # False: the model takes no image or document blocks
    cut: list[str] = field(default_factory=list)  # what a binary file lost, said in one note


def content(text: str, attachments: list[Attachment]) -> str | list[ContentBlockParam]:
    """A user message's content: the text alone when nothing is attached (so a run of text files
    asks the question it asked before), else the text block and then each attachment's blocks."""
    if not attachments:
        return text
    return [{"type": "text", "text": text}, *(b for a in attachments for b in a.blocks())]


def render_outputs(
    trial_dir: Path,
    *,
    budget: int,
    shown: Callable[[str], str] = lambda s: s,
    prefix: str = "outputs/",
) -> str:
    """The text part of render_view: what a judge without attachments reads."""
    return render_view(trial_dir, budget=budget, shown=shown, prefix=prefix).text


def render_view(
    trial_dir: Path,
    *,
    budget: int,
    shown: Callable[[str], str] = lambda s: s,
    prefix: str = "outputs/",
    images: int = MAX_IMAGES,
    document_bytes: int = MAX_DOCUMENT_BYTES,
    label: str = "",
    attach: bool = True,
) -> Rendered:
    """Every output file as a `<file path=..>` entry, in path order: text inline (each capped at
    MAX_FILE_CHARS, all at `budget` characters), office files and PDFs as converted text in that
    budget, images and PDFs also as attachments (at most `images` images and `document_bytes` of
    PDF per run; -1 attaches none and says nothing; `attach` False attaches nothing, for a model
    that takes no image or document blocks), anything else by name, type and size.
    `shown` is applied to each path and text (the comparator blinds them); paths are given
    relative to the run, under `prefix`. A run of text files renders exactly as it did before
    attachments existed, so its ledger still hits."""
    left = _Budget(budget, budget, images, max(document_bytes, 0), document_bytes >= 0, attach)
    entries: list[str] = []
    attachments: list[Attachment] = []
    for rel in output_files(trial_dir):
        path = Path(trial_dir) / "outputs" / rel
        size = path.stat().st_size
        name = prefix + shown(rel)
        kind = convert.kind_of(rel)
        text = text_of(path, MAX_FILE_CHARS * 4) if kind is None else None
        if text is not None:
            entries.append(_text_entry(text, name, size, left, shown))
        elif kind == "image":
            entries.append(_image_entry(path, name, size, left, attachments, label))
        elif kind is not None:
            entries.append(
                _converted_entry(path, kind, name, size, left, attachments, label, shown)
            )
        else:
            entries.append(
                tag(
                    "file",
                    f"(binary file, {size:,} bytes, not shown)",
                    path=name,
                    binary="true",
                    size=size,
                    type=_type(rel),
                )
            )
    if left.cut:
        entries.append(
            tag(
                "render_note",
                "Not everything in the outputs is shown: " + "; ".join(left.cut) + ".",
            )
        )
    return Rendered("\n".join(entries) if entries else "(no output files)", attachments)


def _type(rel: str) -> str:
    return mimetypes.guess_type(rel)[0] or "application/octet-stream"


def _text_entry(
    text: str, name: str, size: int, left: _Budget, shown: Callable[[str], str], **attrs: object
) -> str:
    budget = left.total
    if left.chars <= 0:
        if attrs:
            left.cut.append(f"the text of {name} (the outputs passed {budget:,} characters)")
        return tag(
            "file",
            f"[… not shown: the outputs passed {budget:,} characters …]",
            path=name,
            size=size,
            **attrs,
        )
    cap = min(MAX_FILE_CHARS, left.chars)
    if attrs and len(text) > cap:
        left.cut.append(f"part of the text of {name}")
    text = truncate(text, cap, head=cap * 3 // 4)
    left.chars -= len(text)
    return data("file", shown(text), path=name, **attrs)


def _image_entry(
    path: Path, name: str, size: int, left: _Budget, attachments: list[Attachment], label: str
) -> str:
    attrs: dict[str, str | int] = {
        "path": name,
        "binary": "true",
        "size": size,
        "type": _type(name),
    }
    if not left.attach:
        return tag(
            "file", f"(image, {size:,} bytes, not shown: this model is sent no images)", **attrs
        )
    if left.images <= 0:
        shown_images = sum(a.kind == "image" for a in attachments)
        left.cut.append(f"the image {name} (past {shown_images} images)")
        return tag(
            "file", f"(image, {size:,} bytes, not shown: past the run's image budget)", **attrs
        )
    try:
        media, raw = convert.image_bytes(path)
    except convert.ConvertError as exc:
        return tag("file", f"(image, {size:,} bytes, could not be converted: {exc})", **attrs)
    left.images -= 1
    key = f"{label}{sum(a.kind == 'image' for a in attachments) + 1}"
    attachments.append(Attachment(key, name, "image", media, raw))
    return tag(
        "file",
        f"(image, {size:,} bytes: attached as image {key})",
        **{**attrs, "type": media, "attachment": key},
    )


def _converted_entry(
    path: Path,
    kind: str,
    name: str,
    size: int,
    left: _Budget,
    attachments: list[Attachment],
    label: str,
    shown: Callable[[str], str],
) -> str:
    try:
        text = convert.to_text(path, kind)
    except convert.ConvertError as exc:
        return tag(
            "file",
            f"({kind} file, {size:,} bytes, could not be converted: {exc})",
            path=name,
            binary="true",
            size=size,
            type=_type(name),
        )
    attrs: dict[str, str] = {"converted_from": kind}
    if kind == "pdf" and left.documents and left.attach:
        # The text always (every provider reads it, and the budget cuts it like any text); the
        # document block too, so a model that reads PDFs sees the layout, figures and scans.
        if size <= left.document_bytes and convert.pdf_pages(path) <= MAX_DOCUMENT_PAGES:
            left.document_bytes -= size
            key = f"{label}{sum(a.kind == 'document' for a in attachments) + 1}"
            attachments.append(
                Attachment(key, name, "document", "application/pdf", path.read_bytes())
            )
            attrs["attachment"] = f"document {key}"
        else:
            left.cut.append(f"the PDF {name} as a document (its text is shown)")
    return _text_entry(text or "(no text)", name, size, left, shown, **attrs)


def describe(content: str | Sequence[Mapping[str, Any]]) -> str:
    """A request's content as a reviewer reads it: the text as sent, each attachment by its type,
    size and sha256 (the bytes are the run's own file, or its downscaled copy)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block["type"] == "text":
            parts.append(block["text"])
            continue
        raw = base64.b64decode(block["source"]["data"])
        digest = hashlib.sha256(raw).hexdigest()
        title = f" {block['title']}" if block.get("title") else ""
        parts.append(
            f"[{block['type']}{title}: {block['source']['media_type']}, {len(raw):,} bytes, "
            f"sha256 {digest}]"
        )
    return "\n\n".join(parts)
