#!/usr/bin/env bash
# Idempotent set-up of a local virtual environment with torch, this package
# (editable) and the test tools.  Never resolves an unpinned torch.
#
#   bash scripts/setup.sh                  # .venv: a tested torch (2.11-2.15) already
#                                          # importable is kept, else torch==2.13.0 (CPU)
#   TORCH=2.15.0 bash scripts/setup.sh     # .venv-2.15.0 with exactly torch==2.15.0
#                                          # (the registry's build: CUDA, runs on a CPU too)
#
# The venv sees the system's packages (numpy, ...); it prints its own path last.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH="${TORCH:-}"
if [ -n "$TORCH" ] && ! [[ "$TORCH" =~ ^[0-9]+\.[0-9]+\.[0-9]+([a-z0-9.+]*)$ ]]; then
  echo "setup: TORCH='$TORCH' is not a release number such as 2.15.0" >&2
  exit 2
fi
VENV="${AOTI_DEBUG_VENV:-.venv${TORCH:+-$TORCH}}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $PYTHON" >&2
  "$PYTHON" -m venv --system-site-packages "$VENV"
fi
PY="$VENV/bin/python"

if [ -n "$TORCH" ]; then
  # exactly the release asked for (2.15.0 and 2.15.0+cu132 are both 2.15.0)
  if ! "$PY" - "$TORCH" <<'PYCHECK' 2>/dev/null
import sys, torch
sys.exit(0 if torch.__version__.split("+")[0] == sys.argv[1].split("+")[0] else 1)
PYCHECK
  then
    echo "setup: installing torch==$TORCH into $VENV" >&2
    "$PY" -m pip install --quiet "torch==$TORCH"
  fi
elif ! "$PY" - <<'PYCHECK' 2>/dev/null
import sys, torch
major, minor = (int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
sys.exit(0 if (2, 11) <= (major, minor) <= (2, 15) else 1)
PYCHECK
then
  echo "setup: installing torch==2.13.0 (CPU) into $VENV" >&2
  "$PY" -m pip install --quiet "torch==2.13.0"
fi

stamp="$VENV/.aoti-debug-installed"
# the project's files (settings.py names the variables the start-up hook
# looks for) and its folder: a venv kept outside a clone (CI's cache)
# is re-pointed at each new clone
want="$( { cat pyproject.toml setup.py aoti_debug/settings.py; pwd; } | sha256sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing aoti-debug (editable) and test tools into $VENV" >&2
  # torch is already there and satisfies the requirement: pip keeps it
  "$PY" -m pip install --quiet -e ".[test]"
  echo "$want" > "$stamp"
fi
echo "$VENV"
