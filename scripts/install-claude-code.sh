#!/usr/bin/env bash
# Install the Claude Code CLI into the project-local .tools/ folder (no global install), pinned so
# the claude-code executor and its tests see the same stream-json format on every machine.
# The executor looks for .tools/node_modules/.bin/claude when execute.claude_binary is not a path.
set -euo pipefail

VERSION="2.1.330"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/.tools/node_modules/.bin/claude"

if ! command -v npm >/dev/null 2>&1; then
  echo "install-claude-code: npm is missing; install Node.js 18+ (apt-get install -y nodejs npm)." >&2
  exit 1
fi

if [ -x "$BIN" ] && [ "$("$BIN" --version 2>/dev/null | awk '{print $1}')" = "$VERSION" ]; then
  echo "install-claude-code: @anthropic-ai/claude-code@$VERSION already in $ROOT/.tools"
  exit 0
fi

npm install --prefix "$ROOT/.tools" --no-audit --no-fund --loglevel=error \
  "@anthropic-ai/claude-code@$VERSION"
"$BIN" --version
