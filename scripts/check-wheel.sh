#!/usr/bin/env bash
# Prove that a normal install works: build the wheel from a copy of the sources (the build backend,
# scripts/build_outside.py, keeps build/ and *.egg-info out of it: checked below), install it into
# a fresh venv, and run the demo, lineage and report from an empty folder elsewhere: no repository,
# no config.toml, only what the wheel ships. Needs the package registry for the dependencies.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="${WHEEL_VENV:-/tmp/wheel-venv}"
unset PYTHONPATH  # the installed package must be the one imported, never this tree
started=$(date +%s)
had_build=$([ -e "$ROOT/build" ] && echo yes || echo no)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/src" "$work/dist" "$work/elsewhere"
# Tracked and new files as they are now (uncommitted changes included), nothing ignored.
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$ROOT" && while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done) |
    (cd "$ROOT" && xargs -0 cp --parents -t "$work/src")
else
  tar -C "$ROOT" --exclude=./.venv --exclude=./.tools --exclude=./runs --exclude=./build \
    --exclude='*.egg-info' -cf - . | tar -C "$work/src" -xf -
fi
"$PYTHON" -m venv --clear "$VENV"  # its own pip builds the wheel too: no system pip needed
"$VENV/bin/pip" wheel -q --disable-pip-version-check --no-deps -w "$work/dist" "$work/src"
if compgen -G "$work/src/build" >/dev/null || compgen -G "$work/src/*.egg-info" >/dev/null; then
  echo "check-wheel: building left build/ or *.egg-info next to the sources" >&2; exit 1
fi
wheel=("$work"/dist/skill_optimizer-*.whl)
# --no-compile: byte-compiling every dependency up front costs more than compiling what is used.
"$VENV/bin/pip" install -q --disable-pip-version-check --no-compile "${wheel[0]}"

cd "$work/elsewhere"  # not the repository: python would import this tree from the cwd
"$VENV/bin/python" - "$VENV" <<'EOF'
import sys
from pathlib import Path
import optimizer
from optimizer.model import prompts as prompting

venv = Path(sys.argv[1]).resolve()
assert Path(optimizer.__file__).resolve().is_relative_to(venv), f"imported {optimizer.__file__}, not the wheel"
assert prompting.PROMPTS_DIR.is_relative_to(venv), f"prompts read from {prompting.PROMPTS_DIR}"
package = Path(optimizer.__file__).parent
for pattern in ("prompts/*.md", "report/*.j2", "data/*.json"):
    assert list(package.glob(pattern)), f"the wheel lacks optimizer/{pattern}"
EOF

"$VENV/bin/optimizer" run "$ROOT/examples/csv-report" --provider sim --max-iterations 3 \
  --out runs/demo --fresh >demo.out 2>&1 || { cat demo.out; echo "check-wheel: the demo failed" >&2; exit 1; }
"$VENV/bin/optimizer" lineage runs/demo >/dev/null
"$VENV/bin/optimizer" report runs/demo >/dev/null
[ -s runs/demo/report.html ] || { echo "check-wheel: no report.html" >&2; exit 1; }
if [ "$had_build" = no ] && [ -e "$ROOT/build" ]; then
  echo "check-wheel: building left build/ in $ROOT" >&2; exit 1
fi
echo "check-wheel: the wheel installs and runs the demo from another folder ($(( $(date +%s) - started )) s)"
