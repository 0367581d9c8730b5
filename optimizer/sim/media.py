"""What the simulated judges see of an image: the text chunks of a PNG (tEXt, zTXt, iTXt), which a
test writes to say what its image shows. Nothing else: a JPEG, a GIF, a WebP or a PNG without text
is unverifiable to the simulator, so an expectation about its content fails, as it should for a
judge that cannot see. A PDF needs nothing here: its text is in the text part of the request."""

from __future__ import annotations

import base64
import binascii
import struct
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
        length, kind = struct.unpack(">I4s", raw[pos: pos + 8])
        chunk = raw[pos + 8: pos + 8 + length]
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
