"""The built-in agent's tools as the model is offered them: Anthropic's server-defined bash and
text editor for its own API, the same two as ordinary tools with input schemas for any other
Messages-API server, and Skill. execute/agent.py runs their calls."""

from __future__ import annotations

from typing import TYPE_CHECKING

from optimizer.config import Settings

if TYPE_CHECKING:  # the SDK's types only: importing it costs 2 s (model/port.py)
    from anthropic.types import (
        ToolBash20250124Param,
        ToolParam,
        ToolTextEditor20250728Param,
        ToolUnionParam,
    )

# Anthropic's server-defined tools: its API supplies their schemas, and Claude is trained on them.
BASH_TOOL: ToolBash20250124Param = {"type": "bash_20250124", "name": "bash"}
EDITOR_TOOL: ToolTextEditor20250728Param = {
    "type": "text_editor_20250728",
    "name": "str_replace_based_edit_tool",
}
# The same two tools as ordinary tools, for every other Messages-API server: llama.cpp, LiteLLM and
# the like pass a tool on as a function with the schema it carries, so a server-defined tool
# reaches their model with no parameters at all. Same names, so one handler serves both shapes.
BASH_SCHEMA_TOOL: ToolParam = {
    "name": "bash",
    "description": "Run one shell command with /workspace as the current folder; returns its "
    "output. Each call starts a fresh shell (variables and cd do not carry over; files do). No "
    "network access.",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The shell command to run."}},
        "required": ["command"],
    },
}
EDITOR_SCHEMA_TOOL: ToolParam = {
    "name": "str_replace_based_edit_tool",
    "description": "View, create and edit text files under /workspace (and view under /skill). "
    "view: a file with line numbers, or a folder's listing. create: write file_text to path. "
    "str_replace: replace old_str, which must occur exactly once, with new_str. insert: add "
    "insert_text after line insert_line (0 = at the top).",
    "input_schema": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
            "path": {"type": "string", "description": "Absolute, e.g. /workspace/outputs/a.md."},
            "file_text": {"type": "string", "description": "create: the file's whole content."},
            "old_str": {"type": "string", "description": "str_replace: the exact text to replace."},
            "new_str": {"type": "string", "description": "str_replace: the text to put instead."},
            "insert_line": {"type": "integer", "description": "insert: the line to insert after."},
            "insert_text": {"type": "string", "description": "insert: the text to insert."},
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "view: [first, last] line; last -1 = the end.",
            },
        },
        "required": ["command", "path"],
    },
}
SKILL_TOOL: ToolParam = {
    "name": "Skill",
    "description": "Load a skill's instructions by name. Call it before starting a task that a "
    "listed skill covers, then follow the instructions it returns.",
    "input_schema": {
        "type": "object",
        "properties": {"skill": {"type": "string", "description": "The skill's exact name."}},
        "required": ["skill"],
    },
}


def agent_tools(settings: Settings, *, with_skill: bool) -> list[ToolUnionParam]:
    """The agent's tool list: server-defined tools for Anthropic's own API, ordinary tools with
    input schemas for any other server (execute.tool_schemas forces either)."""
    shape = settings.execute.tool_schemas
    if shape == "auto":
        from optimizer.model.provider import is_anthropic_api

        shape = "server" if is_anthropic_api(settings) else "explicit"
    tools: list[ToolUnionParam] = (
        [BASH_TOOL, EDITOR_TOOL] if shape == "server" else [BASH_SCHEMA_TOOL, EDITOR_SCHEMA_TOOL]
    )
    return tools + ([SKILL_TOOL] if with_skill else [])
