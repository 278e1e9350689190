#!/usr/bin/env bash
# GPU check for eagle's cuda platform, on a machine with one NVIDIA GPU, its driver and the CUDA
# toolkit (for NVRTC), and no network (crates must already be in the cargo cache):
#   1. builds (release, offline),
#   2. runs the CUDA tests (snapshots, NVRTC, the GPU runs against sim, the emulation), the
#      #[ignore]d GPU and NVRTC tests included (`--include-ignored`),
#   3. runs steps 01-16 on `-p cuda` with one GPU serving every rank: -d 0, -d 0,0, -d 0,0,0,0,
#      and checks each step's output digest against `sim` at the same world size,
#   4. prints a bandwidth table: a streaming sample kernel next to a device-to-device copy.
# Fails if any step fails or differs, if a GPU test did not run, or if the check takes more than
# 8 minutes (every command runs under `timeout` with what is left of the budget).
#
# Needs the NVIDIA driver, NVRTC (CUDA toolkit or the nvidia-cuda-nvrtc-cu12 wheel), a C++
# compiler (for the emulation tests) and the crates in cargo's cache (`cargo fetch` while online).
#
#   bash scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
budget=480
export CARGO_TERM_COLOR=never
# Runs a command with what is left of the budget.
left() { echo $(( budget - ($(date +%s) - start) )); }
run() {
  local t; t=$(left)
  if [ "$t" -le 0 ]; then echo "over the ${budget} s budget before: $*"; exit 1; fi
  timeout "$t" "$@" || { rc=$?; [ "$rc" -eq 124 ] && echo "over the ${budget} s budget in: $*"; exit "$rc"; }
}

echo "== GPU"
nvidia-smi -L 2>/dev/null || echo "(nvidia-smi not found; the driver check below decides)"

# NVRTC from the toolkit, or from the pip wheel that .ci/run installs.
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu \
         "${HOME}/.cache/eagle-nvrtc/nvidia/cuda_nvrtc/lib"; do
  if ls "$d"/libnvrtc.so* >/dev/null 2>&1; then
    export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "NVRTC: $d"
    break
  fi
done

echo "== build (release, offline)"
run cargo build --release --offline --bin eagle
run cargo test --release --offline --test cuda --no-run

echo "== CUDA tests"
run cargo test --release --offline --test cuda -- --include-ignored --nocapture --test-threads 1 2>&1 | tee target/gpu-tests.log
grep -q "test result: ok" target/gpu-tests.log
if ! grep -q "test result: ok.* 0 ignored" target/gpu-tests.log; then
  echo "some CUDA tests were ignored (they must all run here)"; exit 1
fi
if grep -q "^skipped:" target/gpu-tests.log; then
  echo "some CUDA tests skipped (they must all run here):"
  grep "^skipped:" target/gpu-tests.log | sort | uniq -c
  exit 1
fi

echo "== steps 01-16 on -p cuda, one GPU serving every rank"
for d in 0 0,0 0,0,0,0; do
  p=$(echo "$d" | tr ',' '\n' | wc -l)
  sim=$(seq -s, 0 $((p - 1)))
  run ./target/release/eagle -p sim -d "$sim" --digest > target/gpu-sim.txt
  run ./target/release/eagle -p cuda -d "$d" --digest | tee target/gpu-cuda.txt
  if ! diff <(awk '{print $2, $3, $4, $NF}' target/gpu-sim.txt) <(awk '{print $2, $3, $4, $NF}' target/gpu-cuda.txt); then
    echo "-d $d: the lines above are steps whose outputs on cuda differ from sim's at P=$p (< sim, > cuda)"
    exit 1
  fi
  echo "-d $d: every step's output digest on cuda equals sim's at P=$p"
done

echo "== bandwidth"
run cargo bench --offline --bench gpu

elapsed=$(( $(date +%s) - start ))
echo "== GPU check OK in ${elapsed} s"
if [ "$elapsed" -gt "$budget" ]; then
  echo "over the ${budget} s budget"; exit 1
fi
