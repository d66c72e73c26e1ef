#!/usr/bin/env bash
# GPU check for one NVIDIA GPU (written for an H200 with PyTorch 2.11 / CUDA 13 in python3):
# builds only the torch-side benchmark (bench/gpu/CMakeLists.txt: NCCL backend + reducer, no
# abseil/gRPC) against this machine's torch, checks NCCL construction + allreduce, then measures
# world-1 NCCL DDP training of ResNet-50 (bf16 autocast, channels-last, synthetic 224x224 batch)
# with ours and with PyTorch's Python DDP, and prints a table. About 3-5 minutes.
#   bench/gpu/run.sh [STEPS=40] [WARMUP=10] [BATCH=128]      env PYTHON (default python3)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
STEPS="${1:-40}"; WARMUP="${2:-10}"; BATCH="${3:-128}"
PY="${PYTHON:-python3}"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
die() { echo "bench/gpu/run.sh: $*" >&2; exit 1; }

echo "== tools"
for tool in cmake g++; do command -v "$tool" >/dev/null || die "$tool not found"; done
command -v nvcc >/dev/null && nvcc --version | tail -1 || echo "nvcc: not found (the CUDA toolkit may be needed by Torch's CMake config)"
cmake --version | head -1; g++ --version | head -1
command -v nvidia-smi >/dev/null && nvidia-smi -L || true
"$PY" - <<'PYEOF' || die "python3 cannot import torch with a CUDA device"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())
assert torch.cuda.is_available(), "no CUDA device visible"
print("device", torch.cuda.get_device_name(0))
PYEOF
"$PY" -c "import torchvision; print('torchvision', torchvision.__version__)" ||
  die "torchvision missing (the Python side uses torchvision.models.resnet50)"
PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
NCCL_INC="$("$PY" - <<'PYEOF'
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
hits = glob.glob(os.path.join(site, "nvidia", "**", "nccl.h"), recursive=True)
hits += [p for p in ("/usr/include/nccl.h", "/usr/local/cuda/include/nccl.h") if os.path.exists(p)]
print(os.path.dirname(hits[0]) if hits else "")
PYEOF
)"
[[ -n "$NCCL_INC" ]] || die "nccl.h not found (pip nvidia-nccl package or libnccl-dev)"
echo "nccl.h: $NCCL_INC"
# The bench needs no abseil; say so if someone adds an include by mistake.
if grep -q 'absl/' "$ROOT/trainer/dist/reducer.h" "$ROOT/trainer/dist/reducer.cc" \
    "$ROOT/trainer/dist/dist_errors.h" "$ROOT/trainer/dist/dist_errors.cc" \
    "$ROOT/trainer/dist/nccl_backend.cc" "$ROOT/trainer/dist/backend_factories.h"; then
  [[ -d /usr/include/absl ]] || die "abseil headers needed by the reducer but absent"
fi

echo "== build ($BUILD)"
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S "$ROOT/bench/gpu" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DDDP_NCCL_INCLUDE_DIR="$NCCL_INC" >"$BUILD.cmake.log" 2>&1 ||
  { tail -40 "$BUILD.cmake.log"; die "cmake configure failed (log: $BUILD.cmake.log)"; }
cmake --build "$BUILD" -j "$(nproc)" || die "build failed"

echo "== run: ResNet-50, batch $BATCH, $STEPS steps after $WARMUP warm-up, world 1, NCCL"
CPP_OUT="$("$BUILD/gpu_bench" "$STEPS" "$WARMUP" "$BATCH")" || die "C++ benchmark failed"
echo "$CPP_OUT"
PY_OUT="$("$PY" "$ROOT/bench/gpu/gpu_bench.py" "$STEPS" "$WARMUP" "$BATCH")" ||
  die "Python benchmark failed"
echo "$PY_OUT"
field() { sed -n "s/^RESULT.* $1=\([^ ]*\).*/\1/p"; }
CPP_IPS="$(echo "$CPP_OUT" | field images_per_s)"; PY_IPS="$(echo "$PY_OUT" | field images_per_s)"
[[ -n "$CPP_IPS" && -n "$PY_IPS" ]] || die "missing RESULT lines"
echo
printf "%-34s %12s %12s %8s\n" benchmark python_img/s cpp_img/s ratio
printf "%-34s %12s %12s %8.3f\n" "resnet50 bf16 CL b$BATCH world1 nccl" "$PY_IPS" "$CPP_IPS" \
  "$("$PY" -c "print($CPP_IPS / $PY_IPS)")"
echo "(ratio = cpp / python images/s; > 1 means ours is faster)"
