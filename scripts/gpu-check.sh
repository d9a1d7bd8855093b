#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, one command, offline, within
# one limit (docs/gpu.md).  It runs the GPU tests (tests/test_gpu.py, the most
# telling first) and the cost of device statistics (bench/bench_device_stats.py)
# on the interpreter whose torch is a CUDA build, and prints a report headed by
# the commit and the device.  Extra arguments go to pytest.
#
#   ./scripts/gpu-check.sh                  # PYTHON, else python3, else python: the first
#                                           # whose torch is a tested CUDA build (2.11-2.15)
#   TORCH=2.15.0 ./scripts/gpu-check.sh     # a venv with exactly that torch (downloads it)
#
# Nothing is downloaded without TORCH: aoti-debug is installed from this tree
# (no build isolation, no dependency resolution, no index) into .venv-gpu,
# a venv layered over the interpreter's own packages; whatever a test needs
# and the machine lacks is skipped with its reason.
#
# Variables: GPU_CHECK_LIMIT (seconds for everything, default 480),
# GPU_CHECK_TEST_TIMEOUT (seconds a test, default 300, with pytest-timeout),
# OUT (a folder: the whole log, report, JUnit XML, build logs and the bench's
# output are written there), GPU_CHECK_COMMIT (the commit, where .git is absent).
#
# Exit codes: 0 every GPU test passed on a GPU; 1 a test failed or errored;
# 2 bad usage; 3 no CUDA device (nothing was checked on a GPU); 4 set-up failed;
# 5 the limit was reached before the tests ended.
set -uo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
LIMIT="${GPU_CHECK_LIMIT:-480}"
TEST_TIMEOUT="${GPU_CHECK_TEST_TIMEOUT:-300}"
for v in LIMIT TEST_TIMEOUT; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-check: GPU_CHECK_$v='${!v}' is not a whole number of seconds" >&2; exit 2; }
done
OUT="${OUT:-}"
if [ -n "$OUT" ]; then
  mkdir -p "$OUT" || { echo "gpu-check: cannot create OUT=$OUT" >&2; exit 2; }
fi

main() {
WORK="$(mktemp -d "${TMPDIR:-/tmp}/aoti-debug-gpu-check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# -- the header: always, before anything that can fail ------------------------
commit="${GPU_CHECK_COMMIT:-}" dirty=""
if [ -z "$commit" ] && [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
  commit="$(git rev-parse --short=12 HEAD 2>/dev/null)"
  [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && dirty=" (with uncommitted changes)"
fi
echo "==== aoti-debug GPU check ===="
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), limit ${LIMIT} s, ${TEST_TIMEOUT} s a test"
echo "commit: ${commit:-unknown: no .git here and GPU_CHECK_COMMIT unset}${dirty}"
echo "sources: $(bash scripts/source-fingerprint.sh)  (scripts/source-fingerprint.sh at a commit gives the same)"

finish() {   # status, then a last line saying what it means
  local status=$1
  case "$status" in
    0) echo "gpu-check: every GPU test passed on this GPU (exit 0)" ;;
    1) echo "gpu-check: a test failed or errored (exit 1)" ;;
    3) echo "gpu-check: no CUDA device here: nothing was checked on a GPU (exit 3)" ;;
    4) echo "gpu-check: set-up failed: nothing was tested (exit 4)" ;;
    5) echo "gpu-check: the ${LIMIT}-s limit was reached before the tests ended (exit 5)" ;;
  esac
  exit "$status"
}

# -- the interpreter -----------------------------------------------------------
if [ -n "${TORCH:-}" ]; then
  echo "---- set-up: a venv with exactly torch==$TORCH (TORCH is set: this downloads) ----"
  VENV="$(TORCH="$TORCH" bash scripts/setup.sh | tail -n 1)" || finish 4
  BASE="$VENV/bin/python"
else
  BASE=""
  why=()
  for candidate in ${PYTHON:-} python3 python; do
    path="$(command -v "$candidate" 2>/dev/null)" || { why+=("$candidate: not found"); continue; }
    verdict="$("$path" scripts/gpu_check.py usable 2>&1)" && { BASE="$path"; break; }
    why+=("$path: $verdict")
  done
  if [ -z "$BASE" ]; then
    echo "gpu-check: no interpreter here has a tested CUDA build of torch (2.11-2.15):"
    printf '  %s\n' "${why[@]}"
    echo "  (PYTHON=/path/to/python names one; TORCH=2.15.0 downloads one into a venv)"
    finish 4
  fi
fi

echo "---- preflight ----"
"$BASE" scripts/gpu_check.py preflight || finish 4

if [ -z "${TORCH:-}" ]; then
  echo "---- set-up: aoti-debug from this tree, offline ----"
  VENV="${AOTI_DEBUG_VENV:-.venv-gpu}"
  "$BASE" scripts/gpu_check.py layer "$VENV" >"$WORK/setup.log" 2>&1 \
    || { cat "$WORK/setup.log"; [ -n "$OUT" ] && cp "$WORK/setup.log" "$OUT/"; finish 4; }
  tail -n 1 "$WORK/setup.log"
fi
PY="$VENV/bin/python"

# -- the tests, bounded ----------------------------------------------------------
# Each child of a test has its own timeout below the test's; the whole process
# group is ended at the limit.
export AOTI_DEBUG_CACHE_DIR="$WORK/cache" TORCHINDUCTOR_CACHE_DIR="$WORK/inductor" PYTHONUNBUFFERED=1
left=$(( LIMIT - (SECONDS - START) - 60 ))          # a minute kept for the bench and the report
[ "$left" -gt 30 ] || { echo "gpu-check: set-up left no time for the tests"; finish 5; }
args=(-v -rA -p no:cacheprovider --junitxml="$WORK/junit.xml" tests/test_gpu.py)
if "$PY" -c "import pytest_timeout" 2>/dev/null; then
  args+=(--timeout="$TEST_TIMEOUT")
else
  echo "gpu-check: pytest-timeout is not installed: no per-test timeout, only the ${LIMIT}-s limit"
fi
echo "---- tests/test_gpu.py ($left s at most) ----"
setsid "$PY" -m pytest "${args[@]}" "$@" >"$WORK/pytest.log" 2>&1 &
tests=$!
timed_out=0
while kill -0 "$tests" 2>/dev/null; do
  if [ $(( SECONDS - START )) -ge $(( LIMIT - 60 )) ]; then
    timed_out=1
    kill -TERM -- "-$tests" 2>/dev/null; sleep 5; kill -KILL -- "-$tests" 2>/dev/null
    break
  fi
  sleep 1
done
wait "$tests"; status=$?
"$PY" scripts/gpu_check.py report "$WORK/pytest.log" "$WORK/junit.xml"
has_gpu="$("$PY" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)"

echo "---- the cost of device statistics (bench/bench_device_stats.py) ----"
if [ "$has_gpu" = 1 ] && [ $(( LIMIT - (SECONDS - START) )) -gt 20 ]; then
  timeout -k 5 $(( LIMIT - (SECONDS - START) - 10 )) "$PY" bench/bench_device_stats.py >"$WORK/bench.txt" 2>&1
  cat "$WORK/bench.txt"
else
  echo "not run: $([ "$has_gpu" = 1 ] && echo "no time left" || echo "no CUDA device")" | tee "$WORK/bench.txt"
fi

if [ -n "$OUT" ]; then
  cp "$WORK/pytest.log" "$WORK/bench.txt" "$OUT/" 2>/dev/null
  [ -f "$WORK/junit.xml" ] && cp "$WORK/junit.xml" "$OUT/"
  # the runner's CMake build and any other build log, one file
  find "$WORK/cache" "$WORK" -maxdepth 3 -name '*.log' ! -name pytest.log 2>/dev/null | sort -u \
    | tar -czf "$OUT/build-logs.tar.gz" -T - 2>/dev/null
fi
[ "$timed_out" = 1 ] && finish 5
case "$status" in 0|5) ;; *) finish 1 ;; esac    # pytest's 5: nothing collected
[ "$has_gpu" = 1 ] || finish 3
[ "$status" = 0 ] && finish 0
finish 1
}

if [ -n "$OUT" ]; then
  main "$@" 2>&1 | tee "$OUT/gpu-check.log"
  exit "${PIPESTATUS[0]}"
fi
main "$@"
