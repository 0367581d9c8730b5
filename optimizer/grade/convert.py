"""Binary outputs turned into what a judging model can read: office files and PDFs as Markdown
text with a marker per sheet, slide and page (so evidence can cite "Sheet1" or "slide 3"), images
as API-sized bytes. Pure functions of a file's bytes; any failure is a ConvertError, which the
renderer shows as "could not be converted", never a crash and never a changed score.

The libraries are used directly rather than through markitdown: markitdown 0.1.9 requires a
certifi newer than the registry has, and its extras pull in magika (onnxruntime), pandas and
pdfplumber, where python-docx, openpyxl, python-pptx, pypdf and Pillow install in about 9 s
(50 MB) and give the same Markdown with the markers we want."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
OFFICE_KINDS = {".docx": "docx", ".xlsx": "xlsx", ".pptx": "pptx", ".pdf": "pdf"}
MAX_IMAGE_SIDE = 1568  # px: the Messages API downscales anything longer itself, at our cost
# The API refuses an image block whose base64 is larger (5 MB on some platforms, 10 MB on
# Anthropic's own; the stricter is kept): the raw bytes may be at most three quarters of it.
MAX_IMAGE_BYTES = 5 * 1024 * 1024 * 3 // 4
MAX_SHEET_ROWS = 500  # rows per sheet: the character budget cuts the rest anyway
# A zip bomb disguised as a docx must not fill the memory of the grading process.
MAX_UNZIPPED = 100 * 1024 * 1024
# Text past this is cut by the renderer's per-file cap anyway: a 900-page PDF stops here.
MAX_TEXT = 200_000


class ConvertError(Exception):
    """A file that could not be converted; its message is shown to the judge."""


def kind_of(name: str) -> str | None:
    """docx, xlsx, pptx, pdf, image, or None for a file we show by name, type and size."""
    suffix = Path(name).suffix.lower()
    return "image" if suffix in IMAGE_TYPES else OFFICE_KINDS.get(suffix)


def to_text(path: Path, kind: str) -> str:
    """The file as Markdown with its markers, or ConvertError."""
    try:
        raw = io.BytesIO(path.read_bytes())  # by content, so no library error names a host path
        if kind != "pdf":
            _check_zip(raw)
        return {"docx": _docx, "xlsx": _xlsx, "pptx": _pptx, "pdf": _pdf}[kind](raw).strip()
    except ConvertError:
        raise
    except Exception as exc:  # any library error on a corrupt file is data about the run
        raise ConvertError(_reason(exc)) from None


def _reason(exc: Exception) -> str:
    """The error as the judge reads it: no object address, which would differ from one process to
    the next and make the same run ask a different question."""
    return f"{type(exc).__name__}: {_ADDRESS.sub('', str(exc))[:200]}"


_ADDRESS = re.compile(r" (?:object )?at 0x[0-9a-fA-F]+")


def _check_zip(raw: io.BytesIO) -> None:
    with zipfile.ZipFile(raw) as archive:
        if sum(i.file_size for i in archive.infolist()) > MAX_UNZIPPED:
            raise ConvertError(f"it unpacks to more than {MAX_UNZIPPED:,} bytes")
    raw.seek(0)


def _cells(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def _table(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    return "\n".join([_cells(rows[0]), _cells(["---"] * width), *(_cells(r) for r in rows[1:])])


def _docx(raw: io.BytesIO) -> str:
    import docx  # imported here: grading a text-only run never pays for it
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = docx.Document(raw)
    parts: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            text = block.text.strip()
            style = (block.style.name if block.style is not None else "") or ""
            if not text:
                continue
            if style.startswith("Heading") and style[7:].strip().isdigit():
                text = "#" * min(6, int(style[7:])) + " " + text
            elif style == "Title":
                text = "# " + text
            elif "List" in style:
                text = "- " + text
            parts.append(text)
        elif isinstance(block, Table):
            parts.append(_table([[c.text.strip() for c in row.cells] for row in block.rows]))
    return "\n\n".join(parts)


def _xlsx(raw: io.BytesIO) -> str:
    import openpyxl

    # read_only streams rows; data_only shows the values a formula last computed (when saved).
    book = openpyxl.load_workbook(raw, read_only=True, data_only=True)
    parts = []
    for sheet in book.worksheets:
        rows = []
        for i, row in enumerate(sheet.iter_rows(values_only=True)):
            if i >= MAX_SHEET_ROWS:
                rows.append([f"[… rows after {MAX_SHEET_ROWS} not shown …]"])
                break
            rows.append(["" if v is None else str(v) for v in row])
        while rows and not any(rows[-1]):
            rows.pop()
        parts.append(f"## Sheet: {sheet.title}\n\n{_table(rows) or '(empty)'}")
    book.close()
    return "\n\n".join(parts)


def _pptx(raw: io.BytesIO) -> str:
    import pptx

    deck = pptx.Presentation(raw)
    parts = []
    for number, slide in enumerate(deck.slides, 1):
        lines = [f"<!-- Slide number: {number} -->"]
        for shape in slide.shapes:
            if getattr(shape, "has_table", False):
                lines.append(
                    _table([[c.text.strip() for c in row.cells] for row in shape.table.rows])
                )
            elif getattr(shape, "has_text_frame", False) and shape.text_frame.text.strip():
                text = shape.text_frame.text.strip()
                is_title = (
                    slide.shapes.title is not None and shape.shape_id == slide.shapes.title.shape_id
                )
                lines.append(f"# {text}" if is_title else text)
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                lines.append(f"### Notes:\n{notes}")
        parts.append("\n\n".join(lines))
    return "\n\n".join(parts)


def _pdf(raw: io.BytesIO) -> str:
    import pypdf

    reader = pypdf.PdfReader(raw)
    pages, size = [], 0
    for n, page in enumerate(reader.pages, 1):
        if size > MAX_TEXT:
            pages.append(f"[… pages {n}–{len(reader.pages)} not converted …]")
            break
        pages.append(
            f"<!-- Page number: {n} -->\n\n{(page.extract_text() or '').strip() or '(no text)'}"
        )
        size += len(pages[-1]) + 2  # with its separator
    return "\n\n".join(pages)


def pdf_pages(path: Path) -> int:
    """Pages of a PDF whose text was read; a count that fails is taken as too many to attach."""
    import pypdf

    try:
        return len(pypdf.PdfReader(io.BytesIO(path.read_bytes())).pages)
    except Exception:  # noqa: BLE001 - a damaged page tree only costs the document block
        return 10**9


def image_bytes(path: Path) -> tuple[str, bytes]:
    """(media type, bytes) within the API's limits: the file itself when it fits (so a small image
    reaches the judge byte for byte), else downscaled to MAX_IMAGE_SIDE and re-encoded."""
    raw = path.read_bytes()
    media = IMAGE_TYPES[path.suffix.lower()]
    try:
        from PIL import Image

        with Image.open(io.BytesIO(raw)) as image:
            image.load()
            fmt = (image.format or "").lower()
            if fmt == "mpo":  # some cameras' jpeg variant
                fmt = "jpeg"
            if f"image/{fmt}" not in IMAGE_TYPES.values():
                raise ConvertError(f"its content is {image.format or 'not an image'}, not {media}")
            media = f"image/{fmt}"  # what the bytes are, whatever the name says
            if max(image.size) <= MAX_IMAGE_SIDE and len(raw) <= MAX_IMAGE_BYTES:
                return media, raw
            image.thumbnail((MAX_IMAGE_SIDE, MAX_IMAGE_SIDE))
            for quality in (90, 75, 60, 45):
                out = io.BytesIO()
                if fmt == "png":
                    image.save(out, "PNG", optimize=True)
                else:
                    image.convert("RGB").save(out, "JPEG", quality=quality)
                    media = "image/jpeg"
                if out.tell() <= MAX_IMAGE_BYTES:
                    return media, out.getvalue()
                fmt = "jpeg"  # a png that stays too big goes lossy
            raise ConvertError(f"it stays over {MAX_IMAGE_BYTES:,} bytes when downscaled")
    except ConvertError:
        raise
    except Exception as exc:
        raise ConvertError(_reason(exc)) from None
