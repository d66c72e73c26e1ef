#!/usr/bin/env bash
# Builds the GPU bundle: one folder (at most 60 MB) that runs every GPU check on a machine that
# has a GPU, Python and the matching pip `torch` (CUDA 13) but no gRPC, no Debian packages and no
# network. It holds:
#   libexec/   ddp-trainer, ddp-coordinator, ddpctl and the GPU benchmarks (stripped)
#   bin/       wrappers that put lib/ and the machine's own LibTorch/CUDA on the library path
#   lib/       every shared library those need except LibTorch, CUDA and the C/C++ runtime
#              (gRPC, protobuf, abseil, OpenSSL, libjpeg-turbo, ...), plus nvJPEG
#   bench/gpu/ run.sh (the checks), correctness.sh (sourced by it) and their Python halves
#
#   scripts/gpu-bundle.sh [OUT]        OUT defaults to ./gpu-bundle; env BUILD_DIR (default build)
# Then, on the GPU machine: OUT/bench/gpu/run.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
OUT="${1:-$ROOT/gpu-bundle}"
LIMIT_MB=60
NVJPEG_VERSION="13.0.2.28"  # the nvJPEG of CUDA 13.0, as the torch==2.11.0 wheel's CUDA
CACHE_DIR="${SLURM_DDP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-ddp}"
die() { echo "gpu-bundle: $*" >&2; exit 1; }

BINARIES=(ddp-trainer ddp-coordinator ddpctl ddp_gpu_bench ddp_gpu_jpeg_bench ddp_make_jpegs)
[[ -f "$BUILD/CMakeCache.txt" ]] || die "$BUILD is not configured (run make build first)"
grep -q "DDP_WITH_TORCH:BOOL=ON" "$BUILD/CMakeCache.txt" || die "$BUILD has no LibTorch build"
cmake --build "$BUILD" -j"$(nproc)" --target "${BINARIES[@]}" >/dev/null ||
  die "build failed (cmake --build $BUILD --target ${BINARIES[*]})"

rm -rf "$OUT"
mkdir -p "$OUT/libexec" "$OUT/bin" "$OUT/lib" "$OUT/bench/gpu"
for b in "${BINARIES[@]}"; do
  strip --strip-unneeded -o "$OUT/libexec/$b" "$BUILD/bin/$b"
done

# Libraries the GPU machine provides itself: LibTorch and CUDA (its torch wheel and the nvidia-*
# wheels beside it) and the C/C++ runtime (glibc, libstdc++, libgcc_s).
PROVIDED='^(libtorch|libc10|libcaffe2|libshm|libgomp|libcuda|libcudart|libcublas|libcudnn|libcufft|libcurand|libcusolver|libcusparse|libcupti|libnccl|libnvrtc|libnvJitLink|libnvToolsExt|libnvtx|libnvshmem|libcufile|linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libutil\.so|libresolv\.so|libgcc_s|libstdc\+\+)'
declare -A copied=()
for b in "${BINARIES[@]}"; do
  while read -r name path; do
    [[ "$name" =~ $PROVIDED || -n "${copied[$name]:-}" ]] && continue
    [[ -f "$path" ]] || die "$b needs $name, which is not found here"
    cp -L "$path" "$OUT/lib/$name"
    chmod u+w "$OUT/lib/$name"
    strip --strip-unneeded "$OUT/lib/$name" 2>/dev/null || true
    copied[$name]=1
  done < <(ldd "$BUILD/bin/$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
done

# nvJPEG from NVIDIA's wheel (downloaded once into the cache).
wheel_dir="$CACHE_DIR/wheels"
wheel="$(ls "$wheel_dir"/nvidia_nvjpeg-"$NVJPEG_VERSION"-*.whl 2>/dev/null | head -1 || true)"
if [[ -z "$wheel" ]]; then
  mkdir -p "$wheel_dir"
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheel_dir" \
    "nvidia-nvjpeg==$NVJPEG_VERSION" || die "cannot download nvidia-nvjpeg==$NVJPEG_VERSION"
  wheel="$(ls "$wheel_dir"/nvidia_nvjpeg-"$NVJPEG_VERSION"-*.whl | head -1)"
fi
python3 - "$wheel" "$OUT/lib" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith("/libnvjpeg.so.13"))
    open(sys.argv[2] + "/libnvjpeg.so.13", "wb").write(z.read(name))
EOF

# The environment: the bundle's libraries first, then the machine's LibTorch and CUDA libraries,
# found without importing torch (fast enough for every ddpctl call).
cat > "$OUT/env.sh" <<'EOF'
# Sourced by the wrappers in bin/: sets DDP_BUNDLE and the library path once per process tree.
if [[ -z "${DDP_BUNDLE_LD_PATH:-}" ]]; then
  DDP_BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  _ddp_torch_dirs="$("${PYTHON:-python3}" - <<'PYEOF'
import glob, importlib.util, os
spec = importlib.util.find_spec("torch")
if spec is None:
    raise SystemExit("python3 has no torch package")
torch_dir = spec.submodule_search_locations[0]
site = os.path.dirname(torch_dir)
print(":".join([os.path.join(torch_dir, "lib")] + sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))))
PYEOF
)" || return 1
  export DDP_BUNDLE DDP_BUNDLE_LD_PATH="$DDP_BUNDLE/lib:$_ddp_torch_dirs"
fi
export LD_LIBRARY_PATH="$DDP_BUNDLE_LD_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
EOF
for b in "${BINARIES[@]}"; do
  cat > "$OUT/bin/$b" <<EOF
#!/usr/bin/env bash
here="\$(cd "\$(dirname "\$(readlink -f "\${BASH_SOURCE[0]}")")/.." && pwd)"
source "\$here/env.sh" || exit 1
exec "\$here/libexec/$b" "\$@"
EOF
  chmod +x "$OUT/bin/$b"
done

cp "$ROOT"/bench/gpu/*.sh "$ROOT"/bench/gpu/*.py "$OUT/bench/gpu/"
git -C "$ROOT" rev-parse HEAD > "$OUT/COMMIT" 2>/dev/null || echo unknown > "$OUT/COMMIT"
git -C "$ROOT" diff --quiet 2>/dev/null || echo "(with uncommitted changes)" >> "$OUT/COMMIT"

mb=$(( $(du -sk "$OUT" | cut -f1) / 1024 ))
echo "gpu-bundle: $OUT, ${mb} MB (limit ${LIMIT_MB} MB), ${#copied[@]} libraries + nvJPEG"
(( mb <= LIMIT_MB )) || die "bundle is ${mb} MB, above ${LIMIT_MB} MB"
