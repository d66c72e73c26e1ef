#!/usr/bin/env bash
# The per-step cost of the straggler detection's section timing (docs/operations.md,
# "Stragglers"): the marks one training step makes on the worker's ProgressReporter, against
# the training step they time (forward, backward, SGD) on the same model, image size and batch,
# one thread, CPU, both measured in the same process (bench/ddp/section_timing_bench.cc).
# share = marks / step (target: under 1% of a ResNet-18 CPU step); ab = the median step with
# the marks over the median step without them, the steps alternating (1 within the noise).
#   bench/section_timing.sh [BUILD_DIR]      env: IMAGE (32), BATCH (32), STEPS (20)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-${BUILD_DIR:-$ROOT/build}}"
cmake --build "$BUILD" -j2 --target section_timing_bench >/dev/null
for arch in resnet18 mlp; do
  "$BUILD/bin/section_timing_bench" --arch "$arch" --image "${IMAGE:-32}" --batch "${BATCH:-32}" \
    --steps "${STEPS:-20}"
done
