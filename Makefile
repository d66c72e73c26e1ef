# slurm-ddp: the two set-up commands and the developer targets.
#
#   make demo    installs what is missing, builds, trains on Fashion-MNIST with 4 local workers
#   make test    installs what is missing, builds, runs every test (CTest labels: unit,
#                integration, slurm, gpu)
#
#   make build   the three binaries in build/bin/
#   make asan    ASan+UBSan build and tests in build-asan/   make tsan  TSan (torch-free) in build-tsan/
#   make tidy    build with clang-tidy on our targets         make format  clang-format in place
#   make bench   every benchmark under bench/
#   make gpu-bundle  gpu-bundle/: the binaries and libraries for a GPU machine (bench/gpu/run.sh)
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?=

.PHONY: deps configure build test demo asan tsan tidy format bench clean gpu-bundle

deps:
	@scripts/setup-deps.sh

configure: deps
	@mkdir -p $(BUILD_DIR)
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS) > $(BUILD_DIR)/configure.log 2>&1 \
	  || { cat $(BUILD_DIR)/configure.log; exit 1; }
	@ln -sf $(BUILD_DIR)/compile_commands.json compile_commands.json

build: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)
	@ls $(BUILD_DIR)/bin/

test: build
	@scripts/run-tests.sh $(BUILD_DIR) $(CTEST_ARGS)

demo: build
	@scripts/demo.sh $(BUILD_DIR)

asan:
	@$(MAKE) test BUILD_DIR=build-asan CMAKE_ARGS="-DDDP_SANITIZE=address" CTEST_ARGS="-L unit"

tsan:
	@$(MAKE) test BUILD_DIR=build-tsan CMAKE_ARGS="-DDDP_SANITIZE=thread" CTEST_ARGS="-L unit"

tidy:
	@$(MAKE) build BUILD_DIR=build-tidy CMAKE_ARGS="-DDDP_CLANG_TIDY=ON"

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

bench: build
	@for b in bench/*.sh; do echo "== $$b"; BUILD_DIR=$(BUILD_DIR) bash $$b || exit 1; done

gpu-bundle: build
	@BUILD_DIR=$(BUILD_DIR) scripts/gpu-bundle.sh

clean:
	@rm -rf $(BUILD_DIR) build-asan build-tsan build-tidy
