#!/usr/bin/env bash
# The layering rule (docs/architecture.md, "Layers"), checked on the sources and on the linked
# binaries:
#  - trainer/ never includes protobuf or gRPC headers (the LibTorch wheel ships its own protobuf
#    headers; mixing them breaks), nor coordinator/ or proto/; client/ headers it includes must
#    themselves be free of gRPC and protobuf;
#  - common/, proto/, coordinator/, client/ never include LibTorch;
#  - common/ includes neither side;
#  - inside trainer/, one folder is one layer (the table below): a folder includes its own
#    headers and those of lower layers, never a sibling's or a higher layer's;
#  - the launcher (trainer/launcher/) is torch-free and gRPC-free: it forks the workers before any
#    such thread may exist; it includes no other trainer/ folder;
#  - ddp-coordinator and ddpctl do not link LibTorch; ddp-trainer does.
# usage: layering_test.sh SOURCE_DIR [BIN_DIR]   (without BIN_DIR: the sources only)
set -uo pipefail
src="$1"
bin="${2:-}"
fail=0
err() { echo "layering violation: $*" >&2; fail=1; }

# The trainer's folders and their layers, lowest first. Folders of one layer are siblings,
# independent of each other. A folder of trainer/ missing here is an error: add it (and to
# docs/architecture.md, "Layers").
declare -A trainer_layer=(
  [trainer]=0             # named_tensor.h
  [trainer/launcher]=1    # ddp_launcher (torch-free)
  [trainer/ddp]=1         # ddp_ddp
  [trainer/data]=1        # ddp_data
  [trainer/models]=1      # ddp_models
  [trainer/checkpoint]=2  # ddp_checkpoint
  [trainer/worker]=3      # ddp_worker
  [trainer/app]=4         # ddp_trainer_lib, ddp-trainer: the composition root
)

rpc_re='#include *[<"](grpc|grpcpp|google/protobuf)/|#include *".*\.pb\.h"|#include *"proto/'
torch_re='#include *[<"](torch|ATen|c10|caffe2)/'

while IFS= read -r hit; do err "$hit"; done < <(grep -rnE "$rpc_re|#include *\"coordinator/" "$src/trainer" 2>/dev/null)
for h in $(grep -rhoE '#include *"client/[^"]+"' "$src/trainer" 2>/dev/null | sed 's/.*"\(.*\)"/\1/' | sort -u); do
  [[ -f "$src/$h" ]] && grep -nE "$rpc_re" "$src/$h" >/dev/null && err "trainer/ includes $h, which includes gRPC/protobuf headers"
done
for d in common proto coordinator client; do
  [[ -d "$src/$d" ]] || continue
  while IFS= read -r hit; do err "$hit"; done < <(grep -rnE "$torch_re" "$src/$d")
done
[[ -d "$src/common" ]] && while IFS= read -r hit; do err "$hit"; done < <(grep -rnE "$rpc_re|#include *\"(coordinator|client|trainer)/" "$src/common")

# trainer/a/b/c.h -> trainer/a; trainer/c.h -> trainer
trainer_folder() {
  local rest="${1#trainer/}"
  if [[ "$rest" == */* ]]; then echo "trainer/${rest%%/*}"; else echo trainer; fi
}
if [[ -d "$src/trainer" ]]; then
  while IFS= read -r f; do
    rel="${f#"$src"/}"
    from=$(trainer_folder "$rel")
    if [[ -z "${trainer_layer[$from]+x}" ]]; then
      err "$rel: $from/ has no layer (tests/build/layering_test.sh, trainer_layer)"
      continue
    fi
    while IFS=: read -r line inc; do
      to=$(trainer_folder "$inc")
      if [[ -z "${trainer_layer[$to]+x}" ]]; then
        err "$rel:$line includes $inc: $to/ has no layer"
      elif [[ "$to" != "$from" ]] && ((trainer_layer[$to] >= trainer_layer[$from])); then
        err "$rel:$line includes $inc: $from/ (layer ${trainer_layer[$from]}) may include only layers below it, not $to/ (layer ${trainer_layer[$to]})"
      fi
    done < <(grep -nE '^ *# *include *"trainer/' "$f" | sed -E 's/^([0-9]+):.*"(trainer\/[^"]+)".*/\1:\2/')
  done < <(find "$src/trainer" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) | sort)
fi
if [[ -d "$src/trainer/launcher" ]]; then
  while IFS= read -r hit; do err "launcher: $hit"; done < <(
    grep -rnE "$torch_re|#include *\"(client|coordinator|proto)/|#include *\"trainer/" "$src/trainer/launcher" |
      grep -vE '#include *"trainer/launcher/')
fi

if [[ -n "$bin" ]]; then
  # ldd's output is captured first: `ldd | grep -q` under pipefail fails at random when grep exits
  # before ldd has written everything (SIGPIPE).
  links_torch() {
    local deps
    deps=$(ldd "$1") || { err "ldd $1 failed"; return 1; }
    [[ "$deps" == *libtorch* ]]
  }
  for b in ddp-coordinator ddpctl; do
    if [[ ! -x "$bin/$b" ]]; then err "$bin/$b was not built"; continue; fi
    links_torch "$bin/$b" && err "$b links LibTorch"
  done
  if [[ -x "$bin/ddp-trainer" ]]; then
    links_torch "$bin/ddp-trainer" || err "ddp-trainer does not link LibTorch"
  fi
fi
((fail == 0)) && echo "layering: OK (sources${bin:+ and binaries})"
exit $fail
