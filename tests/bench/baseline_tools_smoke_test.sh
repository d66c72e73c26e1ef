#!/usr/bin/env bash
# Keeps two of the scale benchmark's helpers working (their figures: docs/bench-status.md):
#   - ddp-tlsbench: OpenSSL's CPU per TLS handshake with a job's identity, per side. Every
#     variant completes its handshakes (the client verifies the job's certificate) and prints a
#     positive cost for each side.
#   - bench/loadgen/torchrun_c10d_rendezvous.py: torchrun's own dynamic rendezvous handler at a
#     few agents. Every agent gets a distinct rank, and the run counts its compare-and-sets.
# Times are printed, never asserted. Without a Python that has torch the second part is skipped
# and says so.
set -euo pipefail
bin="${DDP_BIN_DIR:?DDP_BIN_DIR is unset (run through ctest)}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
positive() { awk -v v="$1" 'BEGIN { exit !(v != "" && v + 0 > 0) }'; }

out="$("$bin/ddp-tlsbench" --handshakes 20 --warmup 2)" || { echo "$out"; fail "ddp-tlsbench exited non-zero"; }
echo "$out"
for v in grpc151 shared_client_context no_tickets tls12 x25519; do
  line="$(grep "^ok variant=$v " <<<"$out" || true)"
  [[ -n "$line" ]] || fail "ddp-tlsbench printed no line for $v"
  [[ "$(field handshakes "$line")" == 20 ]] || fail "$v: handshakes $(field handshakes "$line"), want 20"
  for f in client_ms server_ms client_total_ms; do
    positive "$(field "$f" "$line")" || fail "$v: $f is '$(field "$f" "$line")'"
  done
done
# A client context per handshake costs something; a shared one does not show up per handshake.
positive "$(field client_context_ms "$(grep '^ok variant=grpc151 ' <<<"$out")")" ||
  fail "grpc151: no client context cost"

py="${DDP_TORCH_PYTHON:-}"
if [[ -z "$py" ]] || ! "$py" -c "import torch.distributed.elastic.rendezvous.dynamic_rendezvous" 2>/dev/null; then
  echo "SKIP: torchrun_c10d_rendezvous.py: no Python with torch (DDP_TORCH_PYTHON='$py')"
  exit 0
fi
out="$(timeout 120 "$py" "$src/bench/loadgen/torchrun_c10d_rendezvous.py" 6)" ||
  { echo "$out"; fail "torchrun_c10d_rendezvous.py exited non-zero"; }
echo "$out"
line="$(grep '^ok agents=6 ' <<<"$out" || true)"
[[ -n "$line" ]] || fail "no ok line for 6 agents"
[[ "$(field distinct_ranks "$line")" == 6 ]] || fail "distinct ranks $(field distinct_ranks "$line"), want 6"
(( $(field cas "$line") >= 6 )) || fail "fewer compare-and-sets than agents: $(field cas "$line")"
positive "$(field rendezvous_s "$line")" || fail "rendezvous_s '$(field rendezvous_s "$line")'"
echo "PASS"
