#!/usr/bin/env bash
# Control-plane load benchmark: N simulated workers against ddp-coordinator's service versus the
# same rendezvous through PyTorch's TCPStore, same N, same machine, same run.
#   bench/loadgen.sh [N...]        (default: 1024 4096)
# Needs a build ($BUILD_DIR, default build; or DDP_BIN_DIR=its bin folder) and a Python with
# torch ($DDP_TORCH_PYTHON, or the venv of scripts/setup-deps.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${DDP_BIN_DIR:-$root/${BUILD_DIR:-build}/bin}"   # BUILD_DIR: relative to the source root
[[ -x "$bin/ddp-loadgen" ]] || { echo "loadgen.sh: build ddp-loadgen first" >&2; exit 1; }
py="${DDP_TORCH_PYTHON:-$("$root/scripts/setup-deps.sh" --print-venv)/bin/python}"
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(1024 4096)
printf "%-8s %-14s %-14s %-8s %-14s %-14s\n" workers grpc_rdzv_s tcpstore_s speedup status_p50_ms status_p99_ms
for n in "${sizes[@]}"; do
  ulimit -n 65536 2>/dev/null || true
  g="$("$bin/ddp-loadgen" --workers "$n" --status-seconds 5)"
  grpc_s="$(sed -n 's/.*rendezvous_s=\([0-9.]*\).*/\1/p' <<<"$g")"
  p50="$(sed -n 's/.*status_p50_ms=\([0-9.]*\).*/\1/p' <<<"$g")"
  p99="$(sed -n 's/.*status_p99_ms=\([0-9.]*\).*/\1/p' <<<"$g")"
  t="n/a"; ratio="n/a"
  if [[ -n "$py" ]]; then
    t="$("$py" "$root/bench/loadgen/tcpstore_rendezvous.py" "$n" 2>/dev/null | sed -n 's/.*tcpstore_s=\([0-9.]*\).*/\1/p')"
    ratio="$(awk -v a="$t" -v b="$grpc_s" 'BEGIN { printf "%.1fx", a / b }')"
  fi
  printf "%-8s %-14s %-14s %-8s %-14s %-14s\n" "$n" "$grpc_s" "$t" "$ratio" "$p50" "$p99"
done
