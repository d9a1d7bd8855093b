#!/usr/bin/env bash
# Set up (idempotently) and run the test suite.  Extra arguments go to pytest.
#
#   ./scripts/test.sh                                  # .venv (torch 2.13.0 unless a tested one is there)
#   TORCH=2.15.0 ./scripts/test.sh -m torch_matrix     # .venv-2.15.0 with exactly torch==2.15.0
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="$(bash scripts/setup.sh | tail -n 1)"
# The HTML report is checked in a real headless browser (Debian's chromium).
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "test: installing chromium (apt-get) for the report's browser test"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
    || echo "test: could not install chromium; the browser test will be skipped"
fi
# One Inductor cache per torch and vector ISA: Inductor's own caches do not key
# their generated code on ATEN_CPU_CAPABILITY, so a run under a second ISA after
# one under this CPU's best (one default cache) reuses vectorised kernels and then
# fails to build them (at::vec is not declared without the ISA's define).
torch_version="$("$VENV/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo unknown)"
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-${TMPDIR:-/tmp}/aoti-debug-inductor/$torch_version-${ATEN_CPU_CAPABILITY:-best}}"
echo "test: torch $torch_version in $VENV"
exec "$VENV/bin/python" -m pytest "${@:--q}"
