#!/usr/bin/env bash
# Install grposcope with its test extras and run the whole test suite (the README's command).
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests train a tiny GRPOTrainer (the `demo` extra): torch first, pinned, because on this
# machine's pip set-up 2.13.0 is a CPU wheel on disk (an unpinned torch would pull a CUDA build);
# the `demo` extra's range then installs nothing more.
python -m pip install -q torch==2.13.0
# The plugin is its own distribution (not on PyPI), installed in the same command as the server
# that depends on it.
python -m pip install -q -e ./trainer_plugin -e '.[test,demo]'
ruff check .
ruff format --check .
# Types of the numerical core and the plugin (both ship py.typed), and the import contracts
# (dashboard and plugin apart from the backend, a core without I/O, the layers): pyproject.toml.
mypy
lint-imports
# The whole suite, including tests/deploy/test_wheel_install.py: the built wheels in a fresh venv
# serve (migrations as package data) and demo without torch.
python -m pytest -q -p no:cacheprovider "$@"
