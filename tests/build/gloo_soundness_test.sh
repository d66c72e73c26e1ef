#!/usr/bin/env bash
# Proves that building ProcessGroupGloo against Debian's gloo headers (declarations only) is
# sound with the LibTorch wheel (docs/development.md, "Gloo from C++ with the pip wheel"):
#  1. gloo_backend.o defines no gloo symbol (no inline gloo function, vtable or typeinfo of ours
#     could interpose the gloo compiled into libtorch_cpu);
#  2. every gloo / ProcessGroupGloo symbol it needs is exported by a LibTorch library;
#  3. the linked test binary does not load any other gloo (no libgloo.so);
#  4. the symbols LibTorch exports do not collide with those of Debian's protobuf, gRPC, abseil
#     (apart from identical std:: template instantiations and std::call_once trampolines).
# usage: gloo_soundness_test.sh GLOO_OBJECT TORCH_LIB_DIR LINKED_BINARY
set -uo pipefail
obj="$1"
torch_lib="$2"
binary="$3"
fail=0
err() { echo "FAIL: $*" >&2; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[[ -f "$obj" ]] || { echo "FAIL: $obj not found" >&2; exit 1; }

nm -C --defined-only "$obj" | awk '{ $1=""; $2=""; sub(/^  /, ""); print }' |
  grep -E '^(gloo::|vtable for gloo::|typeinfo (name )?for gloo::)' > "$tmp/defined_gloo"
[[ -s "$tmp/defined_gloo" ]] && err "gloo_backend.o defines gloo symbols: $(head -3 "$tmp/defined_gloo")"

for l in "$torch_lib"/libtorch*.so "$torch_lib"/libc10*.so; do
  nm -D --defined-only "$l" 2>/dev/null | awk '{print $NF}'
done | sort -u > "$tmp/torch_defined"
nm -u "$obj" | awk '{print $NF}' | grep -E 'gloo|ProcessGroupGloo' | sort -u > "$tmp/needed"
missing=$(comm -23 "$tmp/needed" "$tmp/torch_defined")
[[ -n "$missing" ]] && err "symbols not provided by LibTorch: $missing"
echo "gloo_backend.o needs $(wc -l < "$tmp/needed") gloo/ProcessGroupGloo symbols; all exported by LibTorch: $([[ -z $missing ]] && echo yes || echo no)"

ldd "$binary" | grep -E 'libgloo' && err "$binary loads a second gloo library"

sys_libs=$(ls /usr/lib/x86_64-linux-gnu/libprotobuf.so.* /usr/lib/x86_64-linux-gnu/libgrpc*.so.* \
  /usr/lib/x86_64-linux-gnu/libgpr.so.* /usr/lib/x86_64-linux-gnu/libabsl_*.so.* 2>/dev/null)
for l in $sys_libs; do nm -D --defined-only "$l" 2>/dev/null | awk '{print $NF}'; done | sort -u > "$tmp/sys_defined"
comm -12 "$tmp/torch_defined" "$tmp/sys_defined" |
  grep -vE '^_ZN?K?St|^_ZT[ISV]N?St|^_ZT[IS]P?F|^_ZZNSt9once_flag|^_ZZNSt19_Sp_make_shared_tag' > "$tmp/clash"
[[ -s "$tmp/clash" ]] && err "LibTorch and Debian's gRPC/protobuf/abseil export the same symbols: $(head -5 "$tmp/clash")"
echo "exported symbols shared by LibTorch and gRPC/protobuf/abseil (beyond std:: instantiations): $(wc -l < "$tmp/clash")"

((fail == 0)) && echo "gloo soundness: OK"
exit $fail
