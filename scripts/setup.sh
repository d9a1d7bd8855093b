#!/usr/bin/env bash
# Idempotent set-up: a local virtual environment (.venv) with torch, this
# package (editable) and the test tools.  A compatible torch (2.11-2.13) that is
# already importable is kept (the venv sees system packages); otherwise exactly
# torch==2.13.0 is installed, never an unpinned torch (that would pull CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${AOTI_DEBUG_VENV:-.venv}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $PYTHON"
  "$PYTHON" -m venv --system-site-packages "$VENV"
fi
PY="$VENV/bin/python"

if ! "$PY" - <<'PYCHECK' 2>/dev/null
import sys, torch
major, minor = (int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
sys.exit(0 if (2, 11) <= (major, minor) <= (2, 13) else 1)
PYCHECK
then
  echo "setup: installing torch==2.13.0 (CPU)"
  "$PY" -m pip install --quiet "torch==2.13.0"
fi

stamp="$VENV/.aoti-debug-installed"
want="$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing aoti-debug (editable) and test tools"
  "$PY" -m pip install --quiet -e ".[test]"
  echo "$want" > "$stamp"
fi
