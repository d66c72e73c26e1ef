#!/usr/bin/env bash
# Every GPU check of slurm-ddp, run from the GPU bundle (scripts/gpu-bundle.sh) on a machine with
# one NVIDIA GPU, Python and pip torch 2.11 (CUDA 13) + torchvision. About 6 minutes; prints one
# table at the end; exits 1 when a check failed. A check that cannot run says SKIP and why.
#
#   gpu-bundle/bench/gpu/run.sh          env: OUT (logs, default a temp folder), CHECKS (names,
#                                        default all), PY (python3), STEPS (timed steps, 40)
#   DEVICE=cpu gpu-bundle/bench/gpu/run.sh
#                                        the same bundle on a machine without a GPU: the checks
#                                        that can run on the CPU do (Gloo, small sizes), the others
#                                        say SKIP; tests/bench/gpu_bundle_cpu_test.sh runs it from
#                                        a copy of the bundle in a clean folder
#
# Correctness checks run first, side by side (they share the GPU but not their timings; their
# functions are in correctness.sh):
#   env            the bundle's binaries load, every library resolves into the bundle, the
#                  machine's torch or the C/C++ runtime (none elsewhere), and the GPU is visible
#   gloo_cuda_w2   ddp-trainer, Gloo on CUDA tensors, 2 workers on one GPU, ResNet-18
#   equiv_nccl     ddp-trainer --model vs PyTorch Python DDP, NCCL world 1, fp32, deterministic:
#                  final weights within 1e-4
#   equiv_gloo_w2  the same with Gloo on CUDA tensors, world 2
#   stop_resume    a stop with checkpoint (exit 3), a resume from it to the end, compared with an
#                  uninterrupted run (deterministic algorithms)
#   nccl_kill      SIGKILL of the NCCL worker mid-training, --max-restarts 0: the job ends promptly,
#                  naming the rank, with no NCCL watchdog crash and no wait for NCCL's timeout
#   recover_cuda   in-job recovery on the GPU: Gloo on CUDA tensors, 2 workers on one GPU, one
#                  SIGKILLed mid-training; its replacement (same GPU) gets the state from the
#                  survivor and the job ends exit 0 with one recovery line and no crash
# Then the timed checks, one at a time:
#   bn_relu        the fused BatchNorm+ReLU(+residual) kernels against ATen's on ResNet-50's
#                  shapes (both against a double reference), and their time per layer
#   step           ResNet-50 bf16 channels-last batch 128 world 1 NCCL: our engine (eager and
#                  CUDA graph, each without and with --fused-bn-relu) vs Python DDP (torchvision
#                  ResNet-50), alternating, 2 rounds
#   e2e_resnet50   the whole ddp-trainer (coordinator, gRPC, NCCL), ResNet-50, synthetic data;
#                  then the same with --fused-bn-relu
#   jpeg           generated ImageNet-sized JPEGs: our GPU pipeline, nvJPEG decode alone, our CPU
#                  pipeline, torchvision's GPU decode; then ddp-trainer from JPEG (GPU pipeline)
#                  against e2e_resnet50's synthetic rate
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
B="$(cd "$HERE/../.." && pwd)"
PY="${PY:-python3}"
OUT="${OUT:-$(mktemp -d)}"
STEPS="${STEPS:-40}"
DEVICE="${DEVICE:-cuda}"
[[ $DEVICE == cuda || $DEVICE == cpu ]] || { echo "run.sh: DEVICE is cuda or cpu, not '$DEVICE'" >&2; exit 2; }
export EQUIV_DEVICE="$DEVICE"
ALL_CHECKS="env gloo_cuda_w2 equiv_nccl equiv_gloo_w2 stop_resume nccl_kill recover_cuda bn_relu step e2e_resnet50 jpeg"
CHECKS="${CHECKS:-$ALL_CHECKS}"
REQUESTED="$CHECKS"  # CHECKS is emptied when the environment cannot run anything
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
TRAINER="$B/bin/ddp-trainer"
T0=$(date +%s)

ROWS="$OUT/rows.txt"
: > "$ROWS"
row() {  # check status figure detail (appended to a file: background checks add rows too)
  echo "$1|$2|$3|$4" >> "$ROWS"
  printf '[%4ss] %-14s %-5s %s %s\n' "$(( $(date +%s) - T0 ))" "$1" "$2" "$3" "$4"
}
want() { [[ " $CHECKS " == *" $1 "* ]]; }
# steady-state samples/s of a trainer log, from the "Time x (avg)" columns of rank 0's progress
# lines (the average covers every step): the steps between the first line past a third of the run
# (cuDNN autotuning and warm-up excluded) and the last line, over the time they took.
rate_from_log() {  # log batch world
  sed -n 's/.*Epoch: \[[0-9]*\]\[ *\([0-9]*\)\/\([0-9]*\)\].*Time *[0-9.]* *( *\([0-9.]*\)).*/\1 \2 \3/p' "$1" |
    awk -v b="$2" -v w="$3" '{k[NR]=$1; n=$2; a[NR]=$3} END {
      if (NR < 2) { print 0; exit }
      for (i = 1; i < NR && k[i] < n / 3; i++) ;
      t = a[NR] * (k[NR] + 1) - a[i] * (k[i] + 1)
      printf "%.1f", (t > 0 && k[NR] > k[i]) ? b * w * (k[NR] - k[i]) / t : 0 }'
}
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" | tail -1; }
# The running average loss of rank 0's last progress line.
avg_loss_from_log() { sed -n 's/.*Loss [^ ]* *( *\([^)]*\)).*/\1/p' "$1" | tail -1; }
# trainer ARGS... : runs ddp-trainer in its own folder $OUT/<name>; returns its exit code. The
# coordinator exits with the job (--linger 0) instead of waiting 10 s for a last `ddpctl status`.
trainer() {
  local name=$1; shift
  mkdir -p "$OUT/$name"
  (cd "$OUT/$name" && timeout 300 "$TRAINER" --job-id "$name" --linger 0 "$@") > "$OUT/$name.log" 2>&1
}

echo "== slurm-ddp GPU checks: bundle $(head -1 "$B/COMMIT" 2>/dev/null), logs in $OUT"
nvidia-smi -L 2>/dev/null || true

# --- env ------------------------------------------------------------------------------------
# Where each binary's libraries resolve (name path). Outside the bundle's lib/ and the machine's
# torch and nvidia wheels only the C/C++ runtime and the GPU driver should come from the system.
# With DEVICE=cpu (run where the bundle was built, which has every library) one found elsewhere is
# a library the bundle lacks, and env fails; on a GPU machine, where a lacking library shows as
# "not found", it is only noted.
RUNTIME='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libutil\.so|libresolv\.so|libgcc_s|libstdc\+\+|libcuda\.so|libnvidia-)'
resolved_libs() {  # "name real-path" per library, "name not" when none is found
  (source "$B/env.sh" && for f in "$B"/libexec/*; do
    ldd "$f" | awk '$2 == "=>" {print $1, $3}'; done | sort -u) |
    while read -r name path; do
      if [[ $path == not ]]; then echo "$name not"; else echo "$name $(readlink -f "$path")"; fi
    done
}
if [[ $DEVICE == cuda ]] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  row env FAIL "" "$PY's torch sees no CUDA device; nothing else can run (DEVICE=cpu runs the CPU checks)"
  CHECKS=""
elif ! torch_lib="$("$PY" -c "import os, torch; print(os.path.dirname(os.path.dirname(os.path.realpath(torch.__file__))))" 2>&1)"; then
  row env FAIL "" "$PY cannot import torch: $(echo "$torch_lib" | tail -1 | cut -c1-120)"
  CHECKS=""
else
  if [[ $DEVICE == cuda ]]; then
    info="$("$PY" -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))" 2>&1 | tail -1)"
  else
    info="$("$PY" -c "import torch; print(torch.__version__)" 2>&1 | tail -1), DEVICE=cpu"
  fi
  libs="$(resolved_libs)"
  missing="$(echo "$libs" | awk '$2 == "not" {print $1}' | sort -u)"
  # torch_lib: the site-packages folder that holds torch/ and the nvidia/ wheels.
  outside="$(echo "$libs" | awk -v b="$(readlink -f "$B/lib")/" -v t="$torch_lib/" -v rt="$RUNTIME" \
    '$2 != "not" && index($2, b) != 1 && index($2, t "torch/") != 1 && index($2, t "nvidia/") != 1 &&
     $1 !~ rt {print $1 "=" $2}' | sort -u)"
  if [[ -n "$missing" ]]; then
    row env FAIL "" "unresolved libraries: $(echo $missing)"
    CHECKS=""
  elif [[ -n "$outside" && $DEVICE == cpu ]]; then
    row env FAIL "" "libraries found outside the bundle and torch (missing from the bundle): $(echo $outside | cut -c1-200)"
    CHECKS=""
  elif ! "$B/bin/ddpctl" --help > "$OUT/env.log" 2>&1; then
    row env FAIL "" "ddpctl does not start: $(tail -1 "$OUT/env.log")"
    CHECKS=""
  else
    note="the rest from torch and the C/C++ runtime"
    [[ -n "$outside" ]] && note="from the system: $(echo $outside | cut -c1-150)"
    row env PASS "" "$info; $(echo "$libs" | grep -c "$(readlink -f "$B/lib")/") libraries from the bundle, $note"
  fi
fi

# On the CPU: the checks that need NCCL or CUDA say so and are dropped.
if [[ $DEVICE == cpu ]]; then
  skip_cpu() {  # check reason
    want "$1" && row "$1" SKIP "" "DEVICE=cpu: $2"
    CHECKS=" $CHECKS "; CHECKS="${CHECKS/ $1 / }"
  }
  skip_cpu equiv_nccl "NCCL needs a GPU (equiv_gloo_w2 runs the same comparison on the CPU)"
  skip_cpu nccl_kill "NCCL needs a GPU"
  skip_cpu bn_relu "the fused kernels are CUDA (the CPU tests check their code under emulation)"
  skip_cpu step "a GPU benchmark"
  skip_cpu e2e_resnet50 "a GPU benchmark"
fi

# --- correctness, side by side ----------------------------------------------------------------
source "$HERE/correctness.sh"
pids=()
want gloo_cuda_w2 && { check_gloo_cuda_w2 & pids+=($!); }
want equiv_nccl && { check_equiv equiv_nccl nccl 1 & pids+=($!); }
want equiv_gloo_w2 && { check_equiv equiv_gloo_w2 gloo 2 & pids+=($!); }
want stop_resume && { check_stop_resume & pids+=($!); }
want nccl_kill && { check_nccl_kill & pids+=($!); }
want recover_cuda && { check_recover_cuda & pids+=($!); }
# Rows printed by background checks are in their logs; collect them from stdout afterwards.
for p in "${pids[@]}"; do wait "$p"; done

# --- timed checks, one at a time ------------------------------------------------------------------
if want bn_relu; then
  o="$(timeout 300 "$B/bin/ddp_gpu_bench" --variants check 2>&1)"; rc=$?; echo "$o" > "$OUT/bn_relu.log"
  sum="$(echo "$o" | grep 'CHECK bn_relu_summary')"
  worst="$(echo "$o" | grep 'CHECK bn_relu case=' | sed -n 's/.*err_fused=\([^ ]*\).*/\1/p' | sort -g | tail -1)"
  if echo "$o" | grep -q 'CHECK bn_relu SKIP'; then
    row bn_relu SKIP "" "the bundle was built without nvcc: no fused kernels"
  elif [[ $rc -eq 0 && -n "$sum" && "$(echo "$sum" | field failed)" == 0 ]]; then
    row bn_relu PASS "max err ${worst}" "fused vs ATen BatchNorm+add+ReLU, 7 shapes/types, both vs double (limit 2x ATen's + 1e-3)"
  else
    row bn_relu FAIL "" "$(echo "$o" | grep -m1 -E 'FAIL|error' | cut -c1-150)"
  fi
  sp="$(echo "$sum" | field time_speedup)"
  [[ -n "$sp" ]] && row bn_relu:time INFO "${sp}x" "ATen time / fused time, fwd+bwd, 3 ResNet-50 b128 layer shapes: $(echo "$o" | grep 'bn_relu_time' | sed 's/.*case=\([^ ]*\).*speedup=\([^ ]*\)/\1 \2x/' | tr '\n' ' ')"
fi

SYN_RATE=""
# step BATCH ROUNDS: alternating rounds of Python DDP and our engine (eager + graph) at one batch size.
step_row() {
  local batch=$1 rounds=$2 o py=() cpp=() graph=() cppf=() graphf=() summary st fig det fused
  for ((round = 1; round <= rounds; round++)); do
    o="$(timeout 240 "$PY" "$HERE/gpu_bench.py" "$STEPS" 10 "$batch" 2>&1)"; echo "$o" >> "$OUT/step.log"
    py+=("$(echo "$o" | grep RESULT | field images_per_s)")
    for fused in 0 1; do
      o="$(timeout 240 "$B/bin/ddp_gpu_bench" --steps "$STEPS" --warmup 10 --batch "$batch" \
        --fused-bn-relu $fused 2>&1)"
      echo "$o" >> "$OUT/step.log"
      if [[ $fused == 0 ]]; then
        cpp+=("$(echo "$o" | grep 'impl=cpp-eager ' | field images_per_s)")
        graph+=("$(echo "$o" | grep 'impl=cpp-graph ' | field images_per_s)")
      else
        cppf+=("$(echo "$o" | grep 'impl=cpp-eager-fused ' | field images_per_s)")
        graphf+=("$(echo "$o" | grep 'impl=cpp-graph-fused ' | field images_per_s)")
      fi
    done
  done
  summary="$("$PY" - "${py[*]}" "${cpp[*]}" "${graph[*]}" "${cppf[*]}" "${graphf[*]}" <<'EOF'
import sys, statistics
def vals(s): return [float(x) for x in s.split() if x]
py, cpp, graph, cppf, graphf = (vals(a) for a in sys.argv[1:6])
if not py or not cpp:
    print("FAIL||missing results"); raise SystemExit
out, detail, best = [], [f"img/s python {statistics.median(py):.0f}"], 0.0
for name, ours in (("eager", cpp), ("graph", graph), ("eager+fused", cppf), ("graph+fused", graphf)):
    if ours and len(ours) == len(py):
        r = statistics.median(c / p for c, p in zip(ours, py)); best = max(best, r)
        out.append(f"{name} {r:.3f}x"); detail.append(f"{name} {statistics.median(ours):.0f}")
    else:
        detail.append(f"{name} failed")
print(("PASS" if best >= 1.10 else "BELOW") + "|" + ", ".join(out) + "|" + ", ".join(detail))
EOF
)"
  IFS='|' read -r st fig det <<< "$summary"
  row "step:b$batch" "$st" "$fig" "$det; ResNet-50 bf16 CL world 1 NCCL, $rounds round(s) (target 1.10x)"
}
if want step; then
  step_row 128 2
  step_row 32 1
fi

if want e2e_resnet50; then
  trainer e2e_resnet50 --backend nccl --arch resnet50 --data "synthetic:$((128 * 60))x3x224x224:1000" \
    --batch-size 128 --epochs 1 --bf16 --channels-last --workers 12 --no-eval --print-freq 2 \
    --checkpoint-dir ck
  rc=$?
  SYN_RATE="$(rate_from_log "$OUT/e2e_resnet50.log" 128 1)"
  if [[ $rc -eq 0 && -f "$OUT/e2e_resnet50/ck/final.pt" ]]; then
    row e2e_resnet50 PASS "${SYN_RATE} img/s" "ddp-trainer NCCL world 1, ResNet-50 bf16 channels-last b128, 60 steps, synthetic"
  else
    row e2e_resnet50 FAIL "exit $rc" "$(grep -m1 -i error "$OUT/e2e_resnet50.log" | cut -c1-150)"
  fi
  trainer e2e_resnet50_fused --backend nccl --arch resnet50 \
    --data "synthetic:$((128 * 60))x3x224x224:1000" --batch-size 128 --epochs 1 --bf16 \
    --channels-last --fused-bn-relu --workers 12 --no-eval --print-freq 2 --checkpoint-dir ck
  rc=$?
  FUSED_RATE="$(rate_from_log "$OUT/e2e_resnet50_fused.log" 128 1)"
  # Same seed, data and order: the epoch's average loss must agree with the unfused run's up to
  # float rounding grown over 60 steps (10%), and be finite.
  l0="$(avg_loss_from_log "$OUT/e2e_resnet50.log")"; l1="$(avg_loss_from_log "$OUT/e2e_resnet50_fused.log")"
  if [[ $rc -eq 0 && -f "$OUT/e2e_resnet50_fused/ck/final.pt" ]] &&
     awk -v a="$l1" -v b="$l0" 'BEGIN{num = "^[0-9.]+(e[-+]?[0-9]+)?$"; d = a - b; if (d < 0) d = -d
       exit !(a ~ num && b ~ num && b > 0 && d <= 0.1 * b)}'; then
    row e2e_resnet50_fused PASS "${FUSED_RATE} img/s" "the same with --fused-bn-relu: $(awk -v a="$FUSED_RATE" -v b="$SYN_RATE" 'BEGIN{if (b > 0) printf "%.3f", a/b}') of the unfused rate; avg loss $l1 vs $l0"
  elif [[ $rc -eq 0 ]]; then
    row e2e_resnet50_fused FAIL "${FUSED_RATE} img/s" "avg loss $l1 with --fused-bn-relu vs $l0 without (limit 10%)"
  else
    row e2e_resnet50_fused FAIL "exit $rc" "$(grep -m1 -i error "$OUT/e2e_resnet50_fused.log" | cut -c1-150)"
  fi
fi

# mix_jpegs DIR EVERY: re-encodes every EVERY-th train JPEG as progressive or greyscale, as real
# data sets have some: the hardware decoder refuses those and the GPU pipeline decodes them on
# the CPU; the CPU pipeline decodes them as any other.
mix_jpegs() {
  timeout 120 "$PY" - "$1" "$2" >> "$OUT/jpeg.make.log" 2>&1 <<'EOF'
import glob, sys
from PIL import Image
files = sorted(glob.glob(sys.argv[1] + "/train/*/*.jpg"))
every = int(sys.argv[2])
for i, f in enumerate(files[::every]):
    im = Image.open(f)
    (im.convert("L") if i % 4 == 0 else im).save(f, quality=90, progressive=(i % 4 != 0))
print(f"re-encoded {len(files[::every])} of {len(files)} train JPEGs as progressive or greyscale")
EOF
}
if want jpeg && [[ $DEVICE == cpu ]]; then
  # The bundle's JPEG writer and CPU pipeline (libjpeg-turbo): a few ImageNet-sized JPEGs, some
  # progressive or greyscale, through ddp-trainer --data-pipeline cpu.
  jd="$OUT/jpegs"
  if ! "$B/bin/ddp_make_jpegs" "$jd" 40 4 500 375 90 > "$OUT/jpeg.make.log" 2>&1; then
    row jpeg:cpu-train FAIL "" "could not generate JPEGs: $(tail -1 "$OUT/jpeg.make.log")"
  elif ! mix_jpegs "$jd" 5; then
    row jpeg:cpu-train FAIL "" "could not re-encode JPEGs: $(tail -1 "$OUT/jpeg.make.log")"
  else
    trainer jpeg_train_cpu --backend gloo --device cpu --arch resnet18 --data "imagefolder:$jd" \
      --data-pipeline cpu --batch-size 8 --epochs 1 --workers 2 --no-eval --print-freq 1 \
      --checkpoint-dir ck
    rc=$?
    if [[ $rc -eq 0 && -f "$OUT/jpeg_train_cpu/ck/final.pt" ]] &&
       grep -q "data imagefolder .* images, 4 classes" "$OUT/jpeg_train_cpu.log"; then
      row jpeg:cpu-train PASS "" "ddp-trainer from generated 500x375 JPEGs ($(grep -o 're-encoded [0-9]*' "$OUT/jpeg.make.log" | tail -1 | cut -d' ' -f2) progressive or greyscale), --data-pipeline cpu, ResNet-18 at 224x224, $(grep -o 'done: .* steps' "$OUT/jpeg_train_cpu.log" | grep -o '[0-9]* steps'), final.pt written"
    else
      row jpeg:cpu-train FAIL "exit $rc" "$(grep -m1 -i error "$OUT/jpeg_train_cpu.log" | cut -c1-150)"
    fi
  fi
  row jpeg SKIP "" "DEVICE=cpu: nvJPEG, the GPU pipeline and torchvision's GPU decode need a GPU"
elif want jpeg; then
  jd="$OUT/jpegs"
  if ! "$B/bin/ddp_make_jpegs" "$jd" 7680 100 500 375 90 > "$OUT/jpeg.make.log" 2>&1; then
    row jpeg FAIL "" "could not generate JPEGs: $(tail -1 "$OUT/jpeg.make.log")"
  else
    mix_jpegs "$jd" 97
    o="$(timeout 300 "$B/bin/ddp_gpu_jpeg_bench" "$jd" 128 "$(nproc)" 2 2>&1)"; echo "$o" > "$OUT/jpeg.bench.log"
    c="$(echo "$o" | grep 'pipeline=compare ')"
    if [[ -n "$c" ]] && [[ "$(echo "$c" | field labels_equal)" == 1 ]] &&
       awk -v m="$(echo "$c" | field mean_grey)" 'BEGIN{exit !(m < 2.0)}'; then
      row jpeg:compare PASS "mean $(echo "$c" | field mean_grey) grey" "GPU vs CPU pipeline, 512 images: labels equal, max $(echo "$c" | field max_grey) grey levels (nvJPEG vs libjpeg IDCT)"
    else
      row jpeg:compare FAIL "" "${c:-$(echo "$o" | grep -m1 -iE 'error|ddp_gpu_jpeg_bench:' | cut -c1-150)}"
    fi
    for p in gpu-pipeline gpu-decode cpu-pipeline; do
      r="$(echo "$o" | grep "pipeline=$p " | field images_per_s)"
      if [[ -n "$r" ]]; then row "jpeg:$p" INFO "$r img/s" "$(echo "$o" | grep "pipeline=$p " | sed 's/.*seconds=[^ ]*//')"
      else row "jpeg:$p" FAIL "" "$(echo "$o" | grep -m1 -iE 'error|ddp_gpu_jpeg_bench:' | cut -c1-150)"; fi
    done
    gpu_rate="$(echo "$o" | grep 'pipeline=gpu-pipeline ' | field images_per_s)"
    if [[ -n "$gpu_rate" ]] && awk -v r="$gpu_rate" 'BEGIN{exit !(r >= 4000)}'; then
      row jpeg:target PASS "$gpu_rate img/s" "GPU pipeline into device batches (target 4000)"
    else
      row jpeg:target BELOW "${gpu_rate:-?} img/s" "GPU pipeline into device batches (target 4000)"
    fi
    o="$(timeout 300 "$PY" "$HERE/tv_decode_bench.py" "$jd" 128 2 2>&1)"; echo "$o" > "$OUT/jpeg.torchvision.log"
    for p in torchvision-gpu-decode torchvision-gpu-pipeline; do
      r="$(echo "$o" | grep "pipeline=$p " | field images_per_s)"
      if [[ -n "$r" ]]; then row "jpeg:$p" INFO "$r img/s" "files in memory"
      else row "jpeg:$p" SKIP "" "$(echo "$o" | tail -1 | cut -c1-150)"; fi
    done
    trainer jpeg_train --backend nccl --arch resnet50 --data "imagefolder:$jd" --data-pipeline gpu \
      --batch-size 128 --epochs 1 --bf16 --channels-last --workers 12 --no-eval --print-freq 2
    rc=$?
    JPEG_RATE="$(rate_from_log "$OUT/jpeg_train.log" 128 1)"
    if [[ $rc -ne 0 ]]; then
      row jpeg:train FAIL "exit $rc" "$(grep -m1 -i error "$OUT/jpeg_train.log" | cut -c1-150)"
    elif [[ -n "$SYN_RATE" && "$SYN_RATE" != 0 ]]; then
      share="$(awk -v a="$JPEG_RATE" -v b="$SYN_RATE" 'BEGIN{printf "%.3f", a/b}')"
      st=BELOW; awk -v s="$share" 'BEGIN{exit !(s >= 0.95)}' && st=PASS
      row jpeg:train "$st" "${share} of synthetic" "$JPEG_RATE vs $SYN_RATE img/s, $(grep -m1 -o 'data pipeline: [^;]*' "$OUT/jpeg_train.log") (target 0.95)"
    else
      row jpeg:train INFO "$JPEG_RATE img/s" "no synthetic rate to compare with"
    fi
  fi
fi

echo
echo "== slurm-ddp GPU check table ($(date -u +%Y-%m-%dT%H:%MZ), bundle $(head -1 "$B/COMMIT" 2>/dev/null | cut -c1-12), $(( $(date +%s) - T0 )) s)"
printf '| %-26s | %-5s | %-22s | %s\n' check result figure detail
while IFS='|' read -r a b c d; do
  printf '| %-26s | %-5s | %-22s | %s\n' "$a" "$b" "$c" "$d"
done < "$ROWS"
for c in $REQUESTED; do
  [[ " $ALL_CHECKS " == *" $c "* ]] ||
    printf '| %-26s | %-5s | %-22s | %s\n' "$c" SKIP "" "unknown check name"
done
# Exit 1 when a check failed (BELOW, SKIP and INFO are not failures).
! grep -q '^[^|]*|FAIL|' "$ROWS"
