#!/usr/bin/env bash
# Set up (idempotently) and run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m aoti_debug.demo "$@"
