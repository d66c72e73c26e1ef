# The correctness checks of run.sh (sourced by it, which runs them side by side): each check_*
# function runs its ddp-trainer (and Python) jobs under $OUT and adds one row. They use run.sh's
# DEVICE, OUT, PY, HERE, TRAINER and its row, field and trainer helpers.

# Sizes (synthetic images of HW x HW, batch 32): on the CPU (DEVICE=cpu) smaller images and fewer
# steps. gloo_cuda_w2 trains SMALL_N images on 2 workers; stop_resume RESUME_N on one, stopped
# after RESUME_STOP steps; recover_cuda RECOVER_N on 2, one killed after step 10.
if [[ $DEVICE == cuda ]]; then
  HW=64 SMALL_N=1024 RESUME_N=1536 RESUME_STOP=20 RECOVER_N=8192
else
  HW=32 SMALL_N=256 RESUME_N=512 RESUME_STOP=8 RECOVER_N=1024
fi
synthetic() { echo "synthetic:${1}x3x${HW}x${HW}:10"; }

check_gloo_cuda_w2() {
  trainer gloo_cuda_w2 --nprocs-per-node 2 --backend gloo --device "$DEVICE" --arch resnet18 \
    --data "$(synthetic $SMALL_N)" --batch-size 32 --epochs 1 --workers 2 --print-freq 4 \
    --checkpoint-dir ck --no-eval
  local rc=$? log="$OUT/gloo_cuda_w2.log"
  if [[ $rc -eq 0 ]] && grep -q "gloo backend, $DEVICE" "$log" && [[ -f "$OUT/gloo_cuda_w2/ck/final.pt" ]]; then
    row gloo_cuda_w2 PASS "" "2 workers, Gloo on $DEVICE tensors, $(( SMALL_N / 64 )) steps, final.pt written"
  else
    row gloo_cuda_w2 FAIL "exit $rc" "$(grep -m1 -i 'error' "$log" | cut -c1-150)"
  fi
}

check_equiv() {  # name backend world
  local name=$1 backend=$2 world=$3 dir="$OUT/$1"
  mkdir -p "$dir"
  { "$PY" "$HERE/equivalence.py" data "$dir/data" 4096 &&
    "$PY" "$HERE/equivalence.py" export "$dir/model.pt"; } > "$dir/prep.log" 2>&1 ||
    { row "$name" FAIL "" "preparing data/model failed: $(tail -1 "$dir/prep.log")"; return; }
  local dev=()
  [[ $backend == gloo ]] && dev=(--device "$DEVICE")
  trainer "$name" --model "$dir/model.pt" --data "mnist:$dir/data" --backend "$backend" "${dev[@]}" \
    --nprocs-per-node "$world" --epochs 3 --batch-size 32 --lr 0.05 --momentum 0.9 \
    --weight-decay 0.0001 --seed 3 --schedule constant --no-eval --deterministic --workers 1 \
    --stop-after-steps 100 --checkpoint-dir ck --print-freq 50
  local rc=$?
  if [[ $rc -ne 3 ]]; then
    row "$name" FAIL "exit $rc" "ddp-trainer: $(grep -m1 -i 'error' "$OUT/$name.log" | cut -c1-150)"
    return
  fi
  timeout 300 "$PY" "$HERE/equivalence.py" train "$dir/model.pt" "$dir/data" "$dir/python.pt" 100 \
    "$backend" "$world" > "$dir/python.log" 2>&1 ||
    { row "$name" FAIL "" "python DDP failed: $(tail -1 "$dir/python.log")"; return; }
  local ours; ours="$(ls "$dir"/ck/ckpt-*.pt | tail -1)"
  local cmp diff
  cmp="$("$PY" "$HERE/equivalence.py" compare "$ours" "$dir/python.pt" 2>&1)"
  diff="$(echo "$cmp" | field max_abs_diff)"
  if [[ -n "$diff" ]] && "$PY" -c "import sys; sys.exit(0 if float('$diff') <= 1e-4 else 1)"; then
    row "$name" PASS "max_dw=$diff" "$backend world $world on $DEVICE, 100 steps, fp32, deterministic (limit 1e-4)"
  else
    row "$name" FAIL "max_dw=${diff:-?}" "$(echo "$cmp" | tail -1 | cut -c1-150)"
  fi
}

check_stop_resume() {
  local common=(--arch resnet18 --data "$(synthetic $RESUME_N)" --batch-size 32
    --epochs 1 --workers 2 --no-eval --deterministic --print-freq 8 --checkpoint-dir ck)
  local backend=nccl
  [[ $DEVICE == cpu ]] && backend=gloo
  common+=(--backend "$backend" --device "$DEVICE")
  trainer stop_resume --stop-after-steps "$RESUME_STOP" "${common[@]}"; local rc1=$?
  trainer stop_resume "${common[@]}"; local rc2=$?  # same folder: resumes (log overwritten)
  cp "$OUT/stop_resume.log" "$OUT/stop_resume.resume.log"
  trainer stop_resume_ref "${common[@]}"; local rc3=$?
  local resumed=no
  grep -q "resuming from .*step $RESUME_STOP\b" "$OUT/stop_resume.resume.log" && resumed=yes
  if [[ $rc1 -ne 3 || $rc2 -ne 0 || $rc3 -ne 0 || $resumed != yes ]]; then
    row stop_resume FAIL "" "exits $rc1/$rc2/$rc3 (want 3/0/0), resumed at step $RESUME_STOP: $resumed"
    return
  fi
  local diff
  diff="$("$PY" - "$OUT/stop_resume/ck/final.pt" "$OUT/stop_resume_ref/ck/final.pt" <<'EOF'
import sys, torch, torch.jit._pickle
with torch.serialization.safe_globals([torch.jit._pickle.restore_type_tag]):
    a, b = (torch.load(p)["model"] for p in sys.argv[1:3])
print(max((a[k].float() - b[k].float()).abs().max().item() for k in b))
EOF
)"
  if [[ -n "$diff" ]] && "$PY" -c "import sys; sys.exit(0 if float('$diff') <= 1e-4 else 1)"; then
    row stop_resume PASS "max_dw=$diff" "$backend on $DEVICE: stop at step $RESUME_STOP (exit 3), resume to step $(( RESUME_N / 32 )) (exit 0) vs uninterrupted"
  else
    row stop_resume FAIL "max_dw=${diff:-?}" "resumed final.pt differs from the uninterrupted run"
  fi
}

# kill_at_step_10 NAME JOB: once rank 0 of job NAME (ddp-trainer pid JOB, log $OUT/NAME.log)
# printed step 10, SIGKILLs its newest worker and waits for the job. Sets KILL_RC (the job's exit)
# and KILL_TOOK (seconds from the kill to the end); on failure adds NAME's FAIL row, returns 1.
kill_at_step_10() {
  local name=$1 job=$2 log="$OUT/$1.log" t=0
  until grep -q "Epoch: \[0\]\[ *[1-9][0-9]/" "$log" 2>/dev/null; do
    sleep 0.5; t=$((t + 1))
    if (( t > 240 )) || ! kill -0 "$job" 2>/dev/null; then
      row "$name" FAIL "" "never reached step 10: $(tail -1 "$log" | cut -c1-120)"
      kill "$job" 2>/dev/null; wait "$job" 2>/dev/null; return 1
    fi
  done
  local victim
  victim=$(pgrep -f -- "--internal-worker" | while read -r pid; do
    grep -qa -- "$name" "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"; done | sort -n | tail -1)
  if [[ -z "$victim" ]]; then
    row "$name" FAIL "" "no worker process found"; kill "$job"; wait "$job" 2>/dev/null; return 1
  fi
  local start; start=$(date +%s.%N)
  kill -9 "$victim"
  wait "$job"; KILL_RC=$?
  KILL_TOOK=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
}

check_nccl_kill() {
  mkdir -p "$OUT/nccl_kill"
  (cd "$OUT/nccl_kill" && exec timeout 300 "$TRAINER" --job-id nccl_kill --backend nccl \
    --arch resnet18 --data synthetic:65536x3x64x64:10 --batch-size 32 --epochs 5 --workers 2 \
    --no-eval --print-freq 5 --heartbeat-timeout 5 --max-restarts 0 --linger 0) > "$OUT/nccl_kill.log" 2>&1 &
  kill_at_step_10 nccl_kill $! || return
  local rc=$KILL_RC took=$KILL_TOOK crash=no
  grep -qiE "terminate called|Watchdog caught|core dumped|Segmentation" "$OUT/nccl_kill.log" && crash=yes
  if [[ $rc -ne 0 ]] && grep -q "rank 0" "$OUT/nccl_kill.log" && [[ $crash == no ]] &&
     awk -v t="$took" 'BEGIN{exit !(t <= 20)}'; then
    row nccl_kill PASS "${took}s" "job exit $rc naming rank 0; no watchdog crash"
  else
    row nccl_kill FAIL "${took}s" "exit $rc, crash text: $crash: $(tail -1 "$OUT/nccl_kill.log" | cut -c1-120)"
  fi
}

# In-job recovery on CUDA tensors: SIGKILL of rank 1 once rank 0 printed step 10; the run must
# end exit 0 with rank 0's "recovery 1:" line, within 120 s of the kill, without a crash.
check_recover_cuda() {
  local dir="$OUT/recover_cuda" log="$OUT/recover_cuda.log"
  mkdir -p "$dir"
  (cd "$dir" && exec timeout 400 "$TRAINER" --job-id recover_cuda --nprocs-per-node 2 \
    --backend gloo --device "$DEVICE" --arch resnet18 \
    --data "$(synthetic $RECOVER_N)" --batch-size 32 \
    --epochs 1 --workers 2 --no-eval --print-freq 5 --heartbeat-timeout 5 --max-restarts 1 \
    --checkpoint-dir ck --linger 0) > "$log" 2>&1 &
  kill_at_step_10 recover_cuda $! || return
  local rc=$KILL_RC took=$KILL_TOOK
  local line; line=$(grep -m1 -o "recovery 1: .*training resumed at step [0-9]*, [0-9.]* s" "$log")
  if [[ $rc -eq 0 && -n "$line" && -f "$dir/ck/final.pt" ]] &&
     ! grep -qiE "terminate called|Watchdog caught|core dumped|Segmentation" "$log"; then
    row recover_cuda PASS "${took}s" "kill to end; ${line##*, } to resume"
  else
    row recover_cuda FAIL "${took}s" "exit $rc: $(tail -1 "$log" | cut -c1-120)"
  fi
}
