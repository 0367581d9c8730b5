"""Reading helpers of the simulated world: content words, snippets, skill bullets, front matter,
the text of a Messages API request, and fitting a tool input to its JSON schema. Never random."""

from __future__ import annotations

import json
import re
from typing import Any

# Meta-words of expectations ("the output includes…") carry no substance: a judge that counted
# them would pass or fail an expectation on phrasing rather than on content.
STOPWORDS = frozenset(
    """
    about above after again also always been before being both does doing done each even every
    from have having here into just make more most must need only other over same should some
    such sure than that their them then there these they this those through under until very
    were what when where which while will with would could your yours whose within without
    output outputs include includes including contain contains mention mentions file files use
    uses using answer response please
    """.split()
)

_WORD = re.compile(r"[a-z0-9]+")
_SNIPPET = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_BULLET = re.compile(r"^\s*(?:[-*]|\d+\.)\s+(.+?)\s*$")
# Harness-injected context (Claude Code puts the date and the skill list there), not the task.
REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)


def stem(word: str) -> str:
    # A crude plural strip, so "reports" meets "report"; good enough for a bag-of-words world.
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Content words in order of first appearance: lowercase tokens of 4+ chars, no stopwords."""
    seen: dict[str, None] = {}
    for token in _WORD.findall(text.lower()):
        if len(token) >= 4 and token not in STOPWORDS and stem(token) not in STOPWORDS:
            seen.setdefault(token, None)
    return list(seen)


def stems(text: str) -> set[str]:
    return {stem(w) for w in words(text)}


def all_stems(text: str) -> set[str]:
    """Every 4+ char token of a text, stemmed: what a reader could find in it."""
    return {stem(t) for t in _WORD.findall(text.lower()) if len(t) >= 4}


def snippets(text: str) -> list[str]:
    return list(dict.fromkeys(_SNIPPET.findall(text)))


def strip_snippets(text: str) -> str:
    return re.sub(r"\s+", " ", _SNIPPET.sub("", text)).strip()


# Values an expectation names that a judge must see as written: quoted strings, colours, numbers.
_FACT = re.compile(
    r'"([^"\n]{1,80})"|\u201c([^\u201d\n]{1,80})\u201d|(?<![\w])\'([^\'\n]{2,80})\'(?![\w])'
    r"|(?<![\w#])(#[0-9a-fA-F]{3,8})(?![\w])"
    r"|(?<![\w.#/-])([$€£]?\d+(?:[.,]\d+)*(?:%|[kKmMbB]n?)?)(?![\w])"
)


def facts(text: str) -> list[str]:
    """The specific values a sentence names, in order: what separates "the CSS declares #faf9f5"
    (one task's answer) from "the CSS declares the brand colours" (any task's)."""
    found = (next(g for g in m.groups() if g is not None) for m in _FACT.finditer(text))
    return list(dict.fromkeys(f.strip() for f in found if f.strip()))


def strip_facts(text: str) -> str:
    return re.sub(r"\s+", " ", _FACT.sub("", text)).strip()


def strip_reminders(text: str) -> str:
    return REMINDER.sub("", text).strip()


def split_front_matter(text: str) -> tuple[str | None, str]:
    """(front matter without its fences, body); (None, text) when there is none."""
    m = re.match(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", text, re.S)
    if not m:
        return None, text
    return m.group(1), text[m.end() :]


def bullet_indexes(lines: list[str]) -> list[int]:
    """Indexes of the instruction lines (`- `, `* `, `N. `) of a skill body, outside code fences."""
    found, fenced = [], False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and _BULLET.match(line):
            found.append(i)
    return found


def bullets(body: str) -> list[str]:
    lines = body.splitlines()
    return [lines[i] for i in bullet_indexes(lines)]


def bullet_text(line: str) -> str:
    m = _BULLET.match(line)
    return m.group(1) if m else line.strip()


# --- the request -------------------------------------------------------------------------------


def block_text(content: Any) -> str:
    """All text in a message content: a string, or blocks (text, tool_result with nested text)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            parts.append(block_text(block.get("content") or ""))
    return "\n".join(parts)


def system_text(body: dict) -> str:
    """The system prompt plus any mid-conversation system messages (Claude Code sends those)."""
    system = body.get("system") or ""
    parts = [block_text(system)]
    parts += [block_text(m.get("content")) for m in body["messages"] if m.get("role") == "system"]
    return "\n".join(parts)


def first_user_text(body: dict) -> str:
    for message in body["messages"]:
        if message.get("role") == "user":
            return block_text(message.get("content"))
    return ""


def tool_uses(body: dict) -> list[tuple[int, dict]]:
    """(message index, tool_use block) for every tool call the assistant made so far."""
    found = []
    for i, message in enumerate(body["messages"]):
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            found += [(i, b) for b in message["content"] if b.get("type") == "tool_use"]
    return found


def tool_names(body: dict) -> list[str]:
    return [str(t.get("name", "")) for t in body.get("tools") or []]


def forced_tool(body: dict) -> str | None:
    choice = body.get("tool_choice") or {}
    return choice.get("name") if choice.get("type") == "tool" else None


def asked_tool(body: dict) -> str | None:
    """The tool the request asks for: forced, or the only one offered (a model that takes no
    forced tool is offered one with tool_choice auto and told to call it)."""
    offered = tool_names(body)
    return forced_tool(body) or (offered[0] if len(offered) == 1 else None)


def tool_schema(body: dict, name: str) -> dict | None:
    for tool in body.get("tools") or []:
        if tool.get("name") == name:
            return tool.get("input_schema")
    return None


# --- fitting a reply to the caller's schema ----------------------------------------------------


def _resolve(schema: dict, root: dict) -> dict:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part, {})
        return _resolve(node, root)
    return schema


def _blank(schema: dict, root: dict) -> Any:
    schema = _resolve(schema, root)
    if "default" in schema:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_resolve(o, root) for o in schema[key]]
            real = [o for o in options if o.get("type") != "null"]
            return _blank(real[0], root) if real else None
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    blanks: dict[str | None, Any] = {
        "string": "",
        "integer": 0,
        "number": 0.0,
        "boolean": False,
        "array": [],
        "null": None,
    }
    return blanks.get(kind, fit({}, schema, root) if kind in (None, "object") else None)


def fit(value: Any, schema: dict | None, root: dict | None = None) -> Any:
    """The reply the world meant, completed so it validates: every required field filled (with a
    neutral blank), unknown fields dropped where the schema forbids extras. Never alters a value
    the world gave, so a judge's verdict is never rewritten by the schema."""
    if not schema:
        return value
    root = root or schema
    schema = _resolve(schema, root)
    if isinstance(value, dict) and ("properties" in schema or schema.get("type") == "object"):
        props = schema.get("properties", {})
        out = dict(value)
        if schema.get("additionalProperties") is False:
            out = {k: v for k, v in out.items() if k in props}
        for key in schema.get("required", []):
            if key not in out:
                out[key] = _blank(props.get(key, {}), root)
        for key, sub in props.items():
            if key in out:
                out[key] = fit(out[key], sub, root)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in out.keys() - props.keys():
                out[key] = fit(out[key], extra, root)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [fit(v, schema["items"], root) for v in value]
    for key in ("anyOf", "oneOf"):
        if key in schema and isinstance(value, dict | list):
            for option in schema[key]:
                option = _resolve(option, root)
                if option.get("type") in ("object", "array") or "properties" in option:
                    return fit(value, option, root)
    return value


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
