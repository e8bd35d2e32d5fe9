#!/usr/bin/env bash
# Install grposcope with its test extras and run the whole test suite (the README's command).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q torch==2.13.0
python -m pip install -q -e '.[test]'
ruff check .
ruff format --check .
python -m pytest -q -p no:cacheprovider "$@"
