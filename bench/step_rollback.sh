#!/usr/bin/env bash
# The per-step cost of keeping the committed state (trainer/worker/step_rollback.h): the median
# time of one StepRollback::Save (the model's buffers and the random generators' states, copied
# as every step begins) against the median time of the training step it protects (forward,
# backward, SGD) on the same model, image size and batch, one thread, CPU, both measured in the
# same process. share = save / step.
#   bench/step_rollback.sh [BUILD_DIR]      env: IMAGE (32), BATCH (32), STEPS (5)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
cmake --build "$BUILD" -j2 --target step_rollback_bench >/dev/null
for arch in resnet18 resnet50; do
  "$BUILD/bin/step_rollback_bench" --arch "$arch" --image "${IMAGE:-32}" --batch "${BATCH:-32}" \
    --steps "${STEPS:-5}"
done
