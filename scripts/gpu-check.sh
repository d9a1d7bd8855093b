#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: set up a CUDA build of torch (exactly
# TORCH, default the newest tested release, .ci/torch-releases.txt) and run
# the GPU tests (tests/test_gpu.py), the CUDA code-generation tests and the
# cost of device statistics (bench/bench_device_stats.py), then print a
# report headed by the device's name.  Extra arguments go to pytest.
#
#   ./scripts/gpu-check.sh                 # the registry's torch 2.15.0 (a CUDA build)
#   TORCH=2.14.1 ./scripts/gpu-check.sh
#
# Without a GPU every GPU test is skipped with its reason and the script
# exits 3: nothing was checked on a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH="${TORCH:-$(sed -n 's/^torch==//p' .ci/torch-releases.txt | tail -n 1)}"
VENV="$(TORCH="$TORCH" bash scripts/setup.sh | tail -n 1)"
PY="$VENV/bin/python"
report="$(mktemp)"
device="$("$PY" -c 'import torch
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"{p.name}, sm_{p.major}{p.minor}, {p.total_memory // 2**30} GiB, torch {torch.__version__}, CUDA {torch.version.cuda}")' 2>/dev/null || true)"
status=0
"$PY" -m pytest -v -rA tests/test_gpu.py tests/test_cuda_codegen.py "$@" >"$report" 2>&1 || status=$?
costs="$("$PY" bench/bench_device_stats.py 2>&1 || true)"
echo "==== aoti-debug GPU check: ${device:-no CUDA device} ===="
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
grep -E "^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) |^=+ .* in [0-9.]+s" "$report" || cat "$report"
echo "---- the cost of device statistics (bench/bench_device_stats.py) ----"
echo "$costs"
if [ "$status" != 0 ]; then
  echo "---- the failures ----"
  sed -n '/^=* FAILURES =*$/,/^=* short test summary/p' "$report"
fi
rm -f "$report"
[ -n "$device" ] || { echo "gpu-check: no CUDA device here: nothing was checked on a GPU" >&2; exit 3; }
exit "$status"
