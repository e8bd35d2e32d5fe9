#!/usr/bin/env bash
# Install footprint and time to first serve: an empty venv -> the README's first command ->
# `grposcope serve` answering /api/v1/health. Prints the seconds and the venv's site-packages size.
#
#   bash bench/install_footprint.sh [REV] [INSTALL-ARGS...]
#
# REV (default HEAD) is exported with `git archive` into a temporary folder, so the measured tree
# has no build leftovers. INSTALL-ARGS default to the current README's `./trainer_plugin .`; for
# a revision before the light install, pass its README's `torch==2.13.0 -e .`. pip uses this
# machine's configuration and cache (run it twice and take the second figure for a warm cache).
set -euo pipefail
rev=${1:-HEAD}
shift || true
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(./trainer_plugin .)
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/grposcope-footprint.XXXXXX)
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
git -C "$repo" archive "$rev" | tar -x -C "$work" && mkdir "$work/run"
port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start=$(date +%s.%N)
python -m venv "$work/venv"
(cd "$work" && env -u PYTHONPATH "$work/venv/bin/pip" install -q "${args[@]}" 2>/dev/null)
installed=$(date +%s.%N)
(cd "$work/run" && env -u PYTHONPATH "$work/venv/bin/grposcope" serve --port "$port" \
  --db "sqlite:///$work/run/g.db" > "$work/run/serve.log" 2>&1) &
pid=$!
until curl -sf "http://127.0.0.1:$port/api/v1/health" > /dev/null; do sleep 0.2; done
serving=$(date +%s.%N)
site=$(du -sm "$work"/venv/lib/python3*/site-packages | cut -f1)
heavy=$("$work/venv/bin/pip" list 2>/dev/null | grep -ciE '^(torch|transformers|trl|nvidia-)' || true)
printf 'rev=%s install_s=%.0f to_serving_s=%.0f site_packages_MB=%s torch_transformers_trl_pkgs=%s\n' \
  "$(git -C "$repo" rev-parse --short "$rev")" "$(echo "$installed - $start" | bc)" \
  "$(echo "$serving - $start" | bc)" "$site" "$heavy"
