#!/usr/bin/env bash
# JPEG ImageFolder loading throughput: ddp_data's Loader vs torchvision's ImageFolder + DataLoader,
# same transforms (RandomResizedCrop(224) + flip + normalize), same worker count, same batch size,
# on generated JPEGs.
#
#   bench/data.sh [BUILD_DIR]     env: IMAGES=2000 CLASSES=10 WIDTH=400 HEIGHT=350 WORKERS=2 BATCH=64
#
# Needs the project venv with torchvision and Pillow (scripts/setup-deps.sh installs them) and a
# built ddp_bench_imagefolder (cmake --build BUILD_DIR --target ddp_bench_imagefolder).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
bin=$build/bin/ddp_bench_imagefolder
py=${DDP_TORCH_PYTHON:-$("$here/../scripts/setup-deps.sh" --print-venv)/bin/python}
images=${IMAGES:-2000} classes=${CLASSES:-10} width=${WIDTH:-400} height=${HEIGHT:-350}
workers=${WORKERS:-2} batch=${BATCH:-64}

[[ -x $bin ]] || { echo "bench/data.sh: $bin not built (cmake --build $build --target ddp_bench_imagefolder)" >&2; exit 1; }
"$py" -c "import torchvision, PIL" 2>/dev/null || { echo "bench/data.sh: $py lacks torchvision/Pillow (run scripts/setup-deps.sh)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "generating $images JPEGs of ~${width}x${height}, $classes classes in $tmp" >&2
"$py" "$here/data/make_jpegs.py" "$tmp" "$images" "$classes" "$width" "$height"
sync

echo "workers=$workers batch=$batch; warm-up pass (page cache)" >&2
"$bin" "$tmp" "$workers" "$batch" >/dev/null
ours=$("$bin" "$tmp" "$workers" "$batch")
theirs=$("$py" "$here/data/torchvision_throughput.py" "$tmp" "$workers" "$batch")
echo "$ours"
echo "$theirs"
rate() { sed -E 's/.*= ([0-9.]+) images\/s/\1/' <<<"$1"; }
awk -v a="$(rate "$ours")" -v b="$(rate "$theirs")" 'BEGIN { printf "ratio ours/torchvision: %.2f\n", a / b }'
