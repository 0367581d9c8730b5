#!/usr/bin/env bash
# Debian packages the tests use for real: bubblewrap (the sandbox) and chromium (the report); the
# ones named as arguments only, when given (`make demo` asks for bubblewrap alone).
# Installs only what is missing, and only as root; otherwise says what the tests will skip.
set -euo pipefail
wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=(bubblewrap chromium)
missing=()
for package in "${wanted[@]}"; do
  case "$package" in
    bubblewrap) command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap) ;;
    *) command -v "$package" >/dev/null 2>&1 || missing+=("$package") ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "note: ${missing[*]} not installed (needs root and apt-get); the tests that need them will skip." >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
