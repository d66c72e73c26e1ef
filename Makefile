# slurm-ddp: the two set-up commands and the developer targets.
#
#   make demo    installs what is missing, builds the three binaries only, trains on Fashion-MNIST
#                with 4 local workers
#   make test    installs what is missing, builds, runs every test (CTest labels: unit,
#                integration, slurm, gpu), then the torch-free unit tests under ASan+UBSan and
#                under TSan (a clang build that is also the thread-safety check)
#
#   make build   every target: the three binaries in build/bin/ (ddp-trainer, ddp-coordinator,
#                ddpctl), the tests, the benchmarks and the fuzz harnesses' standalone runners
#   make check   the main build's tests only (make test without the sanitizer runs)
#   make asan    ASan+UBSan build (every target) and unit tests in build-asan/
#   make tsan    clang + TSan build of the torch-free targets against a TSan-built abseil, with
#                -Wthread-safety -Werror, and their unit tests, in build-tsan/
#   make clang   clang build of the torch-free targets with -Wthread-safety -Werror (build-clang/)
#   make tidy    build with clang-tidy on our targets         make format  clang-format in place
#   make bench   every benchmark under bench/ but the hour-long chaos run (bench/chaos.sh)
#   make fuzz    libFuzzer (clang) on every harness under fuzz/: 10^6 runs or FUZZ_SECONDS each
#   make gpu-bundle  gpu-bundle/: the binaries and libraries for a GPU machine (bench/gpu/run.sh)
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?=
CLANG_ARGS = -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
# The sanitizer runs of `make test` build without optimization: half the compile time of
# RelWithDebInfo, and their unit tests are quick either way.
SANITIZER_BUILD_TYPE ?= Debug
# ccache, when installed (scripts/setup-deps.sh installs it), keeps its cache outside the clone
# beside the PyTorch venv: a second clone, `git clean` or a CI rerun compiles only what changed.
# CCACHE=0 builds without it. The sloppiness lets the precompiled LibTorch header be cached.
CCACHE ?= 1
SLURM_DDP_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/slurm-ddp
export CCACHE_DIR ?= $(SLURM_DDP_CACHE)/ccache
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1
export CCACHE_SLOPPINESS ?= pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_MAXSIZE ?= 5G
# Expanded when `configure` runs, after `deps` has installed ccache.
LAUNCHER = $(if $(and $(filter 1,$(CCACHE)),$(shell command -v ccache)),ccache)
LAUNCHER_ARGS = $(foreach l,C CXX CUDA,-DCMAKE_$(l)_COMPILER_LAUNCHER=$(LAUNCHER))
# The side builds below (sanitizers, clang, tidy) leave the root's compile_commands.json alone.
LINK_COMPILE_COMMANDS ?= 1
SIDE = --no-print-directory LINK_COMPILE_COMMANDS=0

.PHONY: deps configure build check test sanitize demo asan asan-torch-free tsan clang tidy format \
        bench fuzz clean gpu-bundle

deps:
	@scripts/setup-deps.sh

configure: deps
	@mkdir -p $(BUILD_DIR)
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(LAUNCHER_ARGS) $(CMAKE_ARGS) > $(BUILD_DIR)/configure.log 2>&1 \
	  || { cat $(BUILD_DIR)/configure.log; exit 1; }
	@[ "$(LINK_COMPILE_COMMANDS)" != 1 ] || ln -sf $(BUILD_DIR)/compile_commands.json compile_commands.json

build: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)
	@ls $(BUILD_DIR)/bin/

check: build
	@scripts/run-tests.sh $(BUILD_DIR) $(CTEST_ARGS)

# CI (.ci/run) runs this: every test of the main build, then the sanitizer runs of the torch-free
# unit tests (cheap to build).
test: check
	@$(MAKE) $(SIDE) sanitize

sanitize: asan-torch-free tsan

# The demo builds only what it runs: the three binaries (no test, benchmark or fuzzer).
BINARIES = ddp-trainer ddp-coordinator ddpctl

demo: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS) --target $(BINARIES)
	@scripts/demo.sh $(BUILD_DIR)

asan:
	@$(MAKE) $(SIDE) check BUILD_DIR=build-asan \
	  CMAKE_ARGS="$(CMAKE_ARGS) -DDDP_SANITIZE=address" CTEST_ARGS="-L unit"

asan-torch-free:
	@$(MAKE) $(SIDE) check BUILD_DIR=build-asan-torch-free BUILD_TYPE=$(SANITIZER_BUILD_TYPE) \
	  CMAKE_ARGS="$(CMAKE_ARGS) -DDDP_SANITIZE=address -DDDP_WITH_TORCH=OFF" CTEST_ARGS="-L unit"

tsan: deps
	@absl=$$(scripts/build-tsan-abseil.sh --compiler clang++) && \
	  $(MAKE) $(SIDE) check BUILD_DIR=build-tsan BUILD_TYPE=$(SANITIZER_BUILD_TYPE) \
	  CMAKE_ARGS="$(CMAKE_ARGS) $(CLANG_ARGS) -DDDP_SANITIZE=thread -DDDP_TSAN_ABSEIL_DIR=$$absl" \
	  CTEST_ARGS="-L unit"

clang:
	@$(MAKE) $(SIDE) build BUILD_DIR=build-clang \
	  CMAKE_ARGS="$(CMAKE_ARGS) $(CLANG_ARGS) -DDDP_WITH_TORCH=OFF"

tidy:
	@$(MAKE) $(SIDE) build BUILD_DIR=build-tidy CMAKE_ARGS="-DDDP_CLANG_TIDY=ON"

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

bench: build
	@for b in bench/*.sh; do [ "$$b" != bench/chaos.sh ] || continue; echo "== $$b"; \
	  BUILD_DIR=$(BUILD_DIR) bash $$b || exit 1; done

fuzz: deps
	@fuzz/run.sh $(FUZZ_ARGS)

gpu-bundle: build
	@BUILD_DIR=$(BUILD_DIR) scripts/gpu-bundle.sh

clean:
	@rm -rf $(BUILD_DIR) build-asan build-asan-torch-free build-tsan build-clang build-tidy build-fuzz
