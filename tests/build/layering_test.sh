#!/usr/bin/env bash
# The layering rule (docs/architecture.md, "Layers"), checked on the sources and on the linked
# binaries:
#  - trainer/ never includes protobuf or gRPC headers (the LibTorch wheel ships its own protobuf
#    headers; mixing them breaks), nor coordinator/ or proto/; client/ headers it includes must
#    themselves be free of gRPC and protobuf;
#  - common/, proto/, coordinator/, client/ never include LibTorch;
#  - common/ includes neither side;
#  - the launcher (trainer/launcher/) is
#    torch-free and gRPC-free: it forks the workers before any such thread may exist;
#  - ddp-coordinator and ddpctl do not link LibTorch; ddp-trainer does.
# usage: layering_test.sh SOURCE_DIR BIN_DIR
set -uo pipefail
src="$1"
bin="$2"
fail=0
err() { echo "layering violation: $*" >&2; fail=1; }

rpc_re='#include *[<"](grpc|grpcpp|google/protobuf)/|#include *".*\.pb\.h"|#include *"proto/'
torch_re='#include *[<"](torch|ATen|c10|caffe2)/'

while IFS= read -r hit; do err "$hit"; done < <(grep -rnE "$rpc_re|#include *\"coordinator/" "$src/trainer" 2>/dev/null)
for h in $(grep -rhoE '#include *"client/[^"]+"' "$src/trainer" 2>/dev/null | sed 's/.*"\(.*\)"/\1/' | sort -u); do
  grep -nE "$rpc_re" "$src/$h" >/dev/null && err "trainer/ includes $h, which includes gRPC/protobuf headers"
done
for d in common proto coordinator client; do
  [[ -d "$src/$d" ]] || continue
  while IFS= read -r hit; do err "$hit"; done < <(grep -rnE "$torch_re" "$src/$d")
done
while IFS= read -r hit; do err "$hit"; done < <(grep -rnE "$rpc_re|#include *\"(coordinator|client|trainer)/" "$src/common")
launcher_files=()
[[ -d "$src/trainer/launcher" ]] && launcher_files+=("$src/trainer/launcher")
if ((${#launcher_files[@]})); then
  while IFS= read -r hit; do err "launcher: $hit"; done < <(
    grep -rnE "$torch_re|#include *\"(client|coordinator|proto)/|#include *\"trainer/(ddp|data|models|checkpoint|worker|app)/" "${launcher_files[@]}")
fi

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
((fail == 0)) && echo "layering: OK (sources and binaries)"
exit $fail
