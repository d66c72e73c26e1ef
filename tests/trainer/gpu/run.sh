#!/usr/bin/env bash
# GPU check of the worker's stages (tests/trainer/gpu/stages_check.cc) on a machine with one
# CUDA device and PyTorch in python3: builds the check standalone against that PyTorch, then runs
# it. Abseil and gloo headers (and abseil's shared libraries) come from this machine's system, or
# from DDP_DEPS (a folder holding include/absl, include/gloo and lib/libabsl_*), which
# `run.sh --pack DIR` fills on a machine that has them (Debian: libabsl-dev, libgloo-dev).
#   tests/trainer/gpu/run.sh                 build into BUILD_DIR (default build-gpu-stages), run
#   tests/trainer/gpu/run.sh --pack DIR      copy abseil and gloo for another machine into DIR
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
PY="${PYTHON:-python3}"
die() { echo "tests/trainer/gpu/run.sh: $*" >&2; exit 1; }

if [[ "${1:-}" == "--pack" ]]; then
  out="${2:?--pack DIR}"
  mkdir -p "$out/include" "$out/lib"
  cp -r /usr/include/absl /usr/include/gloo "$out/include/"
  # One real file per library, under the name the dynamic linker looks for (its SONAME).
  for so in /usr/lib/x86_64-linux-gnu/libabsl_*.so; do
    real="$(readlink -f "$so")"
    soname="$(objdump -p "$real" | awk '/SONAME/ {print $2}')"
    cp "$real" "$out/lib/${soname:-$(basename "$real")}"
  done
  du -sh "$out"
  exit 0
fi

DEPS="${DDP_DEPS:-}"
ABSL_INC=/usr/include; GLOO_INC=/usr/include; ABSL_LIB=/usr/lib/x86_64-linux-gnu
if [[ -n "$DEPS" ]]; then
  ABSL_INC="$DEPS/include"; GLOO_INC="$DEPS/include"; ABSL_LIB="$DEPS/lib"
  export LD_LIBRARY_PATH="$DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
[[ -d "$ABSL_INC/absl" ]] || die "abseil headers not found in $ABSL_INC (set DDP_DEPS)"
[[ -d "$GLOO_INC/gloo" ]] || die "gloo headers not found in $GLOO_INC (set DDP_DEPS)"
PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
NCCL_INC="$("$PY" - <<'PYEOF'
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
hits = glob.glob(os.path.join(site, "nvidia", "**", "nccl.h"), recursive=True)
hits += [p for p in ("/usr/include/nccl.h", "/usr/local/cuda/include/nccl.h") if os.path.exists(p)]
print(os.path.dirname(hits[0]) if hits else "")
PYEOF
)"
[[ -n "$NCCL_INC" ]] || die "nccl.h not found"
BUILD="${BUILD_DIR:-$ROOT/build-gpu-stages}"
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
echo "== build ($BUILD)"
cmake -S "$ROOT/tests/trainer/gpu" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DDDP_NCCL_INCLUDE_DIR="$NCCL_INC" \
  -DDDP_ABSL_INCLUDE_DIR="$ABSL_INC" -DDDP_GLOO_INCLUDE_DIR="$GLOO_INC" \
  -DDDP_ABSL_LIB_DIR="$ABSL_LIB" >"$BUILD.cmake.log" 2>&1 ||
  { tail -40 "$BUILD.cmake.log"; die "cmake configure failed"; }
cmake --build "$BUILD" -j "$(nproc)" || die "build failed"
echo "== run"
"$BUILD/gpu_stages_check"
