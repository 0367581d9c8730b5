"""What the simulated judges see of an image: the text chunks of a PNG (tEXt, zTXt, iTXt), which a
test writes to say what its image shows. Nothing else: a JPEG, a GIF, a WebP or a PNG without text
is unverifiable to the simulator, so an expectation about its content fails, as it should for a
judge that cannot see. A PDF needs nothing here: its text is in the text part of the request."""

from __future__ import annotations

import base64
import binascii
import struct
import zipfile
import zlib
from typing import Any

from optimizer.tags import parse_tags

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def seen_images(body: dict) -> dict[str, str]:
    """Attachment key ("1", "A2") -> the text the image carries, for every image block of the
    first user message that follows its `<attachment>` label."""
    seen: dict[str, str] = {}
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        key = None
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                found = parse_tags(str(block.get("text", "")), "attachment")
                key = found[-1][1].strip().removeprefix("image ").strip() if found else None
            elif block.get("type") == "image" and key is not None:
                seen[key] = png_text(_decoded(block.get("source") or {}))
                key = None
        break
    return seen


def _decoded(source: dict[str, Any]) -> bytes:
    try:
        return base64.b64decode(str(source.get("data", "")), validate=True)
    except (binascii.Error, ValueError):
        return b""


def png_text(raw: bytes) -> str:
    """The values of a PNG's text chunks, one a line; "" for anything else."""
    if not raw.startswith(PNG_SIGNATURE):
        return ""
    texts, pos = [], len(PNG_SIGNATURE)
    while pos + 8 <= len(raw):
        length, kind = struct.unpack(">I4s", raw[pos : pos + 8])
        chunk = raw[pos + 8 : pos + 8 + length]
        pos += 12 + length
        try:
            if kind == b"tEXt":
                texts.append(chunk.split(b"\0", 1)[1].decode("latin-1"))
            elif kind == b"zTXt":
                texts.append(zlib.decompress(chunk.split(b"\0", 1)[1][1:]).decode("latin-1"))
            elif kind == b"iTXt":
                _, rest = chunk.split(b"\0", 1)
                compressed, rest = rest[0], rest[2:]
                text = rest.split(b"\0", 2)[2]
                texts.append((zlib.decompress(text) if compressed else text).decode("utf-8"))
        except (IndexError, ValueError, zlib.error):
            continue  # a damaged chunk is no text, not a crash of the simulator
        if kind == b"IEND":
            break
    return "\n".join(texts)


# --- binary outputs the simulated executor writes -------------------------------------------------


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_with_text(text: str, side: int = 16) -> bytes:
    """A small white PNG whose iTXt chunk holds `text`: what the simulated judges will see in it."""
    rows = b"".join(b"\x00" + b"\xff\xff\xff" * side for _ in range(side))
    return (
        PNG_SIGNATURE
        + _chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
        + _chunk(b"iTXt", b"Description\0\0\0\0\0" + text.encode("utf-8"))
        + _chunk(b"IDAT", zlib.compress(rows))
        + _chunk(b"IEND", b"")
    )


def pdf_with_text(text: str, lines_per_page: int = 40) -> bytes:
    """A plain PDF of `text`, one Helvetica line per line (Latin-1; other characters become ?)."""
    lines = [ln.encode("latin-1", "replace").decode("latin-1") for ln in text.splitlines()] or [""]
    pages = [lines[i : i + lines_per_page] for i in range(0, len(lines), lines_per_page)]
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    kids = []
    for page in pages:
        shown = " ".join(
            "(" + ln.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ") Tj T*"
            for ln in page
        )
        stream = f"BT /F1 11 Tf 14 TL 56 760 Td {shown} ET"
        objects.append(
            f"<< /Length {len(stream.encode('latin-1'))} >>\nstream\n{stream}\nendstream"
        )
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
            f"<< /Font << /F1 3 0 R >> >> /Contents {len(objects)} 0 R >>"
        )
        kids.append(len(objects))
    objects[1] = (
        f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>"
    )
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)


_DOCX_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/'
    'package/2006/content-types"><Default Extension="rels" ContentType="application/'
    'vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType='
    '"application/xml"/><Override PartName="/word/document.xml" ContentType="application/'
    'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
_DOCX_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.'
    'org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.'
    'openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/'
    'document.xml"/></Relationships>'
)


def docx_with_text(text: str) -> bytes:
    """The smallest Word document of `text`, one paragraph a line (stdlib only: the simulator
    depends on nothing the grader uses to read it)."""
    import html
    import io

    paragraphs = "".join(
        f'<w:p><w:r><w:t xml:space="preserve">{html.escape(ln, quote=False)}</w:t></w:r></w:p>'
        for ln in text.splitlines()
    )
    document = (
        '<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.'
        'openxmlformats.org/wordprocessingml/2006/main"><w:body>'
        f"{paragraphs}</w:body></w:document>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, body in (
            ("[Content_Types].xml", _DOCX_TYPES),
            ("_rels/.rels", _DOCX_RELS),
            ("word/document.xml", document),
        ):
            # A fixed time: the same output is the same bytes, so a rerun asks the same question.
            archive.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), body)
    return buffer.getvalue()


BINARY_WRITERS = {".png": png_with_text, ".pdf": pdf_with_text, ".docx": docx_with_text}
