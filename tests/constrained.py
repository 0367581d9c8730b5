"""A loopback relay in front of llama.cpp's server that gives the product's forced-tool calls
(grader, comparator, proposer, analyzer) grammar-constrained answers: such a request goes to
llama.cpp's /v1/chat/completions with the tool's input schema as its grammar (bounded so a 135M
model finishes it), and the JSON it returns comes back as the tool_use block of a Messages
answer, which the product's own client then parses and validates. Every other request passes
through unchanged. Not a test module."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TEXT_MAX = 60  # characters of any free string: a small model's strings otherwise never end
NOTE_PATH = "notes.md"  # the proposer's one edit writes this new file into the skill


class Constrained(ThreadingHTTPServer):
    """Serves from a thread of its own once made; `expectations` are the evals' judged texts, of
    which the grader's schema requires, verbatim and once, those its request names. Call
    shutdown() and server_close()."""

    daemon_threads = True

    def __init__(self, upstream: str, expectations: Sequence[str]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream = upstream
        self.expectations = list(expectations)
        self.answers: list[tuple[str, dict[str, Any]]] = []  # (role, parsed input) per forced call
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def _resolve(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, dict) and "$ref" in schema:
        return _resolve(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    if isinstance(schema, dict) and "anyOf" in schema:  # X | None: the X
        return _resolve(next(s for s in schema["anyOf"] if s.get("type") != "null"), defs)
    return schema


def bounded(schema: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The schema with its required parts only, every string and list short."""
    schema = _resolve(schema, defs)
    kind = schema.get("type")
    if "enum" in schema or "const" in schema:
        return {k: schema[k] for k in ("type", "enum", "const") if k in schema}
    if kind == "object":
        required = list(schema.get("required", []))
        props = schema.get("properties", {})
        return {
            "type": "object",
            "additionalProperties": False,
            "required": required,
            "properties": {k: bounded(props[k], defs) for k in required},
        }
    if kind == "array":
        low = int(schema.get("minItems", 0))
        return {
            "type": "array",
            "items": bounded(schema.get("items", {}), defs),
            "minItems": low,
            "maxItems": max(1, low),
        }
    if kind == "string":
        return {"type": "string", "maxLength": TEXT_MAX}
    if kind in ("number", "integer"):  # whole numbers in a small range: no endless digits
        return {
            "type": "integer",
            "minimum": max(0, schema.get("minimum", 0)),
            "maximum": min(10, schema.get("maximum", 10)),
        }
    return {k: v for k, v in schema.items() if k in ("type",)}


def constrain(
    role: str, schema: dict[str, Any], request_text: str, expectations: Sequence[str]
) -> dict[str, Any]:
    """The response format for one forced-tool request of `role`."""
    defs = schema.get("$defs", {})
    out = bounded(schema, defs)
    if role == "grader":
        named = [t for t in expectations if t in request_text]
        out["properties"]["expectations"] = {
            "type": "array",
            "minItems": len(named),
            "maxItems": len(named),
            "prefixItems": [
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["text", "passed", "evidence"],
                    "properties": {
                        "text": {"const": t},
                        "passed": {"type": "boolean"},
                        "evidence": {"type": "string", "maxLength": TEXT_MAX},
                    },
                }
                for t in named
            ],
        }
    if role == "proposer":  # one edit the product can apply: a short new file in the skill
        out["properties"]["edits"] = {
            "type": "array",
            "minItems": 1,
            "maxItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["path", "action", "content"],
                "properties": {
                    "path": {"const": NOTE_PATH},
                    "action": {"const": "write"},
                    "content": {"type": "string", "minLength": 1, "maxLength": TEXT_MAX},
                },
            },
        }
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append(block["text"])
        elif block.get("type") in ("tool_use", "tool_result"):
            parts.append(json.dumps(block.get("input", block.get("content")), sort_keys=True))
    return "\n".join(parts)


def chat_request(body: dict[str, Any], response_format: dict[str, Any]) -> dict[str, Any]:
    messages = [{"role": "system", "content": _text(body["system"])}] if body.get("system") else []
    messages += [{"role": m["role"], "content": _text(m["content"])} for m in body["messages"]]
    import xllamacpp

    # llama.cpp's own converter (llguidance here), told to write JSON without whitespace: a small
    # model otherwise spends half its tokens on indentation.
    compact = {
        **response_format,
        "x-guidance": {"whitespace_flexible": False, "key_separator": ":", "item_separator": ","},
    }
    return {
        "model": body["model"],
        "messages": messages,
        "max_tokens": body["max_tokens"],
        "temperature": 0,
        "grammar": xllamacpp.json_schema_to_grammar(json.dumps(compact)),
    }


def message_reply(body: dict[str, Any], tool: str, chat: dict[str, Any]) -> dict[str, Any]:
    choice = chat["choices"][0]
    text = choice["message"].get("content") or ""
    usage = {
        "input_tokens": chat["usage"]["prompt_tokens"],
        "output_tokens": chat["usage"]["completion_tokens"],
    }
    if choice.get("finish_reason") == "length":  # cut: the product sees a cut answer
        content, stop = [{"type": "text", "text": text}], "max_tokens"
    else:
        content, stop = (
            [
                {
                    "type": "tool_use",
                    "id": "toolu_constrained",
                    "name": tool,
                    "input": json.loads(text),
                }
            ],
            "tool_use",
        )
    return {
        "id": "msg_constrained",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


class _Handler(BaseHTTPRequestHandler):
    server: Constrained

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.loads(raw)
        choice = body.get("tool_choice") or {}
        if self.path.startswith("/v1/messages") and choice.get("type") == "tool":
            self._constrained(body, choice["name"])
            return
        headers = {
            k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
        }
        status, answer = self._post(self.path.split("?", 1)[0], raw, headers)
        self._send(status, answer)

    def _constrained(self, body: dict[str, Any], tool: str) -> None:
        role = self.headers.get("x-optimizer-role", "")
        schema = next(t["input_schema"] for t in body["tools"] if t["name"] == tool)
        asked = json.dumps(body.get("system")) + json.dumps(body["messages"])
        fmt = constrain(role, schema, asked, self.server.expectations)
        status, answer = self._post(
            "/v1/chat/completions",
            json.dumps(chat_request(body, fmt)).encode(),
            {"content-type": "application/json"},
        )
        if status != 200:
            self._send(status, answer)
            return
        reply = message_reply(body, tool, json.loads(answer))
        if reply["stop_reason"] == "tool_use":
            with self.server.lock:
                self.server.answers.append((role, reply["content"][0]["input"]))
        self._send(200, json.dumps(reply).encode())

    def _post(self, path: str, raw: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.server.upstream + path, data=raw, method="POST", headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=300) as reply:
                return reply.status, reply.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass
