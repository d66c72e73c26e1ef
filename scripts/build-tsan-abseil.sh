#!/usr/bin/env bash
# Builds the installed Debian abseil (libabsl20220623) again, from its own Debian source package,
# with ThreadSanitizer: shared libraries with the system's file names and SONAMEs
# (libabsl_*.so.20220623), cached outside the clone. A TSan test run puts their folder first on
# LD_LIBRARY_PATH, so our code and gRPC both use the instrumented absl::Mutex and TSan sees its
# synchronization (Debian's own build is uninstrumented: TSan would report races on data every
# access to which holds an absl::MutexLock).
#
#   scripts/build-tsan-abseil.sh [--compiler CXX]    build if missing; prints the lib folder
#   scripts/build-tsan-abseil.sh --print-dir [--compiler CXX]
#
# The compiler must be the one of the TSan build (its runtime must be the only one in a test
# process); the default is clang++, as `make tsan` uses. Idempotent: a stamp written last records
# the source version and compiler, and a second run does nothing. Needs network access once
# (apt-get source, through a private apt state folder: the system's apt configuration is not
# touched) and dpkg-dev.
set -euo pipefail

CACHE_DIR="${SLURM_DDP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-ddp}"
CXX_BIN=clang++
PRINT_ONLY=0
while (($#)); do
  case "$1" in
    --print-dir) PRINT_ONLY=1 ;;
    --compiler) CXX_BIN=$2; shift ;;
    *) echo "usage: $0 [--print-dir] [--compiler CXX]" >&2; exit 2 ;;
  esac
  shift
done

log() { echo "[tsan-abseil] $*" >&2; }
die() { log "error: $*"; exit 1; }

LIBPKG=libabsl20220623
VERSION=$(dpkg-query -W -f='${source:Version}' "$LIBPKG" 2>/dev/null) ||
  die "$LIBPKG is not installed (scripts/setup-deps.sh installs libabsl-dev)"
CC_BIN=${CXX_BIN/clang++/clang}
CC_BIN=${CC_BIN/g++/gcc}
TAG=$(basename "$CXX_BIN")
PREFIX="$CACHE_DIR/abseil-tsan-$VERSION-$TAG"
LIBDIR="$PREFIX/lib"
if ((PRINT_ONLY)); then echo "$LIBDIR"; exit 0; fi

STAMP="$PREFIX/.slurm-ddp-complete"
WANT_STAMP="abseil $VERSION $("$CXX_BIN" --version | head -1) -fsanitize=thread"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT_STAMP" ]]; then
  log "present: $LIBDIR"
  echo "$LIBDIR"
  exit 0
fi
command -v dpkg-source >/dev/null || die "dpkg-source missing (Debian package dpkg-dev)"
command -v "$CXX_BIN" >/dev/null || die "$CXX_BIN missing"

WORK="$CACHE_DIR/abseil-tsan-work"
rm -rf "$WORK" "$PREFIX"
mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/apt/sources" "$WORK/dl"

# The system's Debian sources, as deb-src, in a private apt state folder.
found=0
for f in /etc/apt/sources.list.d/*.sources; do
  [[ -f "$f" ]] || continue
  grep -q 'debian' "$f" || continue
  sed 's/^Types: deb$/Types: deb-src/' "$f" >"$WORK/apt/sources/$(basename "$f")"
  found=1
done
if [[ -f /etc/apt/sources.list ]] && grep -q '^deb ' /etc/apt/sources.list; then
  sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >"$WORK/apt/sources/sources.list"
  found=1
fi
((found)) || die "no Debian apt sources found in /etc/apt"
APT=(apt-get -q -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$WORK/apt/sources"
     -o "Dir::State::Lists=$WORK/apt/lists" -o "Dir::Cache=$WORK/apt/cache"
     -o APT::Sandbox::User=root)
log "fetching the Debian source of abseil $VERSION"
"${APT[@]}" update >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log" >&2; die "apt-get update (deb-src) failed"; }
(cd "$WORK/dl" && "${APT[@]}" source --download-only "abseil=$VERSION") >>"$WORK/apt.log" 2>&1 ||
  { cat "$WORK/apt.log" >&2; die "apt-get source abseil=$VERSION failed"; }
dpkg-source -x "$WORK"/dl/abseil_*.dsc "$WORK/src" >>"$WORK/apt.log" 2>&1 ||
  { cat "$WORK/apt.log" >&2; die "dpkg-source -x failed"; }
cmp -s "$WORK/src/absl/base/options.h" /usr/include/absl/base/options.h ||
  die "the source's absl/base/options.h differs from the installed one: not the same ABI"

# Debian's own shared build (debian/rules: -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON),
# instrumented; NDEBUG stays unset as in Debian's build.
log "building with $CXX_BIN -fsanitize=thread into $PREFIX (a few minutes)"
cmake -S "$WORK/src" -B "$WORK/build" -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DCMAKE_C_FLAGS="-O1 -g -fsanitize=thread" -DCMAKE_CXX_FLAGS="-O1 -g -fsanitize=thread" \
  -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF -DABSL_BUILD_TESTING=OFF \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_LIBDIR=lib >"$WORK/build.log" 2>&1 ||
  { tail -30 "$WORK/build.log" >&2; die "cmake configure failed"; }
cmake --build "$WORK/build" -j"$(nproc)" >>"$WORK/build.log" 2>&1 ||
  { tail -30 "$WORK/build.log" >&2; die "build failed"; }
cmake --install "$WORK/build" >>"$WORK/build.log" 2>&1 || die "install failed"

# Every library the system has must exist here with the same SONAME.
missing=0
for sys in /usr/lib/"$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)"/libabsl_*.so.*; do
  name=$(basename "$sys")
  ours="$LIBDIR/$name"
  if [[ ! -e "$ours" ]]; then log "missing: $name"; missing=1; continue; fi
  [[ "$(objdump -p "$ours" | awk '/SONAME/ {print $2}')" == "$(objdump -p "$sys" | awk '/SONAME/ {print $2}')" ]] ||
    { log "SONAME differs: $name"; missing=1; }
done
((missing == 0)) || die "the TSan build does not match the installed abseil"
rm -rf "$WORK"
echo "$WANT_STAMP" >"$STAMP"
log "done: $LIBDIR"
echo "$LIBDIR"
