#!/usr/bin/env bash
# make demo: the embedded default job, run as a user would without Slurm: ddp-trainer starts the
# job's coordinator and 4 CPU workers (Gloo) that train the small CNN on the real Fashion-MNIST
# for 2 epochs, then prints the test accuracy.
#   scripts/demo.sh [BUILD_DIR] [extra ddp-trainer flags]
set -euo pipefail
build="${1:-build}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
run_dir="$root/demo-run"
mkdir -p "$run_dir"
cd "$run_dir"
dist="$run_dir/dist_file.demo"
cat <<MSG
== slurm-ddp demo: 4 local workers, small CNN, Fashion-MNIST, 2 epochs
== watch it from another terminal:
     $root/$build/bin/ddpctl status --dist-file $dist
     $root/$build/bin/ddpctl watch  --dist-file $dist
     $root/$build/bin/ddpctl dashboard --dist-file $dist   # a URL for the browser
MSG
exec "$root/$build/bin/ddp-trainer" --nprocs-per-node 4 --backend gloo --data fashion-mnist \
  --arch cnn --epochs 2 --batch-size 64 --lr 0.05 --workers 1 --print-freq 100 \
  --job-id demo --dist-file "$dist" --checkpoint-dir "$run_dir/checkpoints" --resume none "$@"
