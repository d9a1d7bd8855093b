#!/usr/bin/env bash
# Set up (idempotently) and run the whole test suite.  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The HTML report is checked in a real headless browser (Debian's chromium).
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "test: installing chromium (apt-get) for the report's browser test"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
    || echo "test: could not install chromium; the browser test will be skipped"
fi
exec .venv/bin/python -m pytest "${@:--q}"
