#!/usr/bin/env bash
# Installs what slurm-ddp needs to build, test and run, and nothing that is already there.
#
#   scripts/setup-deps.sh            # Debian packages + the pinned PyTorch wheel in a cached venv
#   scripts/setup-deps.sh --print-venv
#
# Safe to run any number of times: each step checks first and does nothing when satisfied.
# The venv lives outside the clone (SLURM_DDP_CACHE, default ~/.cache/slurm-ddp) so that a fresh
# clone, or `git clean`, does not download PyTorch again.
set -euo pipefail

TORCH_VERSION="2.11.0"
CACHE_DIR="${SLURM_DDP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-ddp}"
VENV="${SLURM_DDP_VENV:-$CACHE_DIR/venv-torch-$TORCH_VERSION}"

if [[ "${1:-}" == "--print-venv" ]]; then
  echo "$VENV"
  exit 0
fi

# Build and test dependencies, all from Debian.
# ccache: the Makefile compiles through it, with its cache beside the venv (SLURM_DDP_CACHE).
# clang: the thread-safety and TSan builds (make clang, make tsan); dpkg-dev: dpkg-source, with
# which scripts/build-tsan-abseil.sh unpacks Debian's abseil source.
# libtcmalloc-minimal4: the allocator ddp-coordinator links (coordinator/CMakeLists.txt).
DEB_PACKAGES=(
  build-essential cmake pkg-config clang dpkg-dev ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgtest-dev libgmock-dev libcli11-dev libcpp-httplib-dev libmicrohttpd-dev
  nlohmann-json3-dev
  libjpeg62-turbo-dev zlib1g-dev
  libtcmalloc-minimal4
  libgloo-dev
  dataset-fashion-mnist
  slurm-wlm munge
  prometheus chromium
  procps psmisc curl iproute2
  python3-grpcio
  clang libclang-rt-dev
)

log() { echo "[setup] $*" >&2; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    log "need root to run: $*"; return 1
  fi
}

install_debian_packages() {
  local missing=()
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    log "Debian packages: all ${#DEB_PACKAGES[@]} present"
    return
  fi
  log "Debian packages: installing ${missing[*]}"
  as_root apt-get update -q
  # Services from these packages (munge, slurm, prometheus) are started by the tests that need
  # them, under their own temporary folders; keep the package scripts from starting them.
  as_root env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Python packages of the venv: LibTorch comes from the torch wheel; torchvision and pillow are
# the baselines of the benchmarks and tests (torchvision's ImageFolder, ResNet key names).
PY_PACKAGES=("torch==$TORCH_VERSION" "torchvision==0.26.0" pillow numpy)

install_torch_venv() {
  local py="$VENV/bin/python" stamp="$VENV/.slurm-ddp-complete"
  # The stamp is written last and lists what was installed, so an interrupted install, or one
  # from an older package list, is never mistaken for a good one.
  if [[ -x "$py" && -f "$stamp" && "$(cat "$stamp")" == "${PY_PACKAGES[*]}" ]]; then
    log "Python packages: ${PY_PACKAGES[*]} present in $VENV"
    return
  fi
  log "Python packages: installing ${PY_PACKAGES[*]} into $VENV (a few GB, downloaded once)"
  mkdir -p "$CACHE_DIR"
  [[ -x "$py" ]] || python3 -m venv "$VENV"
  PIP_CACHE_DIR="$CACHE_DIR/pip" "$py" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
  "$py" -c "import torch; print('[setup] torch', torch.__version__, 'cuda', torch.version.cuda)" >&2
  echo "${PY_PACKAGES[*]}" > "$stamp"
}

install_debian_packages
install_torch_venv
