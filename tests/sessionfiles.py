"""Hand-made Claude Code session files, in the shape the CLI writes them (docs/design.md §17, checked against
the files of CLI 2.1.330): one JSON record a line. Not a test module."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any


class Session:
    """Records appended in order; `write()` puts them where the CLI would, under projects/."""

    def __init__(self, cwd: Path, *, start: str = "2026-11-20T09:00:00.000Z") -> None:
        self.cwd = cwd
        self.id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{cwd}{start}"))
        self.start = start
        self.lines: list[dict[str, Any]] = [
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": start,
                "sessionId": self.id,
            }
        ]
        self.tick = 0

    def _base(self, kind: str) -> dict[str, Any]:
        self.tick += 1
        stamp = self.start[:17] + f"{self.tick:02d}" + self.start[19:]
        return {
            "type": kind,
            "uuid": str(uuid.uuid4()),
            "sessionId": self.id,
            "timestamp": stamp,
            "cwd": str(self.cwd),
            "isSidechain": False,
            "userType": "external",
            "version": "2.1.330",
        }

    def user(self, text: str) -> Session:
        self.lines.append({**self._base("user"), "message": {"role": "user", "content": text}})
        return self

    def meta(self, text: str) -> Session:
        self.lines.append(
            {
                **self._base("user"),
                "isMeta": True,
                "message": {"role": "user", "content": [{"type": "text", "text": text}]},
            }
        )
        return self

    def tool(
        self, name: str, tool_input: dict[str, Any], result: str = "ok", *, error: bool = False
    ) -> Session:
        tid = f"toolu_{len(self.lines)}"
        self.lines.append(
            {
                **self._base("assistant"),
                "message": {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": tid, "name": name, "input": tool_input}],
                },
            }
        )
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tid, "content": result}
        if error:
            block["is_error"] = True
        self.lines.append({**self._base("user"), "message": {"role": "user", "content": [block]}})
        return self

    def skill(self, name: str, skill_dir: Path) -> Session:
        self.tool("Skill", {"skill": name}, f"Launching skill: {name}")
        return self.meta(
            f"Base directory for this skill: {skill_dir}\n\n# {name}\n\nDo the work well."
        )

    def say(self, text: str) -> Session:
        self.lines.append(
            {
                **self._base("assistant"),
                "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            }
        )
        return self

    def write(self, projects: Path) -> Path:
        folder = projects / str(self.cwd).replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.id}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in self.lines), encoding="utf-8")
        return path
