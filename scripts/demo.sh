#!/usr/bin/env bash
# `make demo`: the offline overnight run on examples/csv-report with the simulator. bubblewrap is
# installed first when it is missing and this is root with apt-get (as `make test` does). Where it
# cannot be had or does not work, the simulated demo runs unconfined (--unconfined, the opt-in
# docs/security.md describes), said in one line: the commands it runs are the simulator's own.
# Only the demo does this; `optimizer run` with a real provider still refuses without bubblewrap.
set -euo pipefail
bin=${1:-.venv/bin}
here=$(dirname "$0")
bash "$here/install-system.sh" bubblewrap 2>/dev/null || true  # no network, a broken apt: decided below
flags=()
works='from optimizer.sandbox.confinement import bwrap_available as ok; raise SystemExit(not ok())'
if ! "$bin/python" -c "$works"; then
  echo "note: no working bubblewrap here (make demo installs it only as root with apt-get), so this simulated demo runs unconfined (--unconfined); a real provider refuses to run without it." >&2
  flags=(--unconfined)
fi
"$bin/optimizer" run examples/csv-report --provider sim --max-iterations 3 --out runs/demo --fresh ${flags[@]+"${flags[@]}"}
