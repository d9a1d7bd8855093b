#!/usr/bin/env bash
# A fingerprint of the project's sources (16 hex digits), the same wherever
# the files are the same, with or without .git: the GPU check prints it, so a
# report from a machine that got the tree without its history still says what
# it checked (run this at a commit to compare).  Build outputs, caches and
# virtual environments are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
{ ls pyproject.toml setup.py README.md .ci/run 2>/dev/null
  find aoti_debug codegen_patches cpp_runtime tests scripts bench examples docs -type f \
    ! -path '*/__pycache__/*' ! -path '*/build/*' ! -path '*.egg-info/*' ! -name '*.pyc' ! -name '*.so' ! -name '*.o' 2>/dev/null
} | LC_ALL=C sort | tr '\n' '\0' | xargs -0 sha256sum | sha256sum | cut -c1-16
