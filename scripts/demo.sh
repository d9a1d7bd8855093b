#!/usr/bin/env bash
# Set up (idempotently) and run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="$(bash scripts/setup.sh | tail -n 1)"
exec "$VENV/bin/python" -m aoti_debug.demo "$@"
