# Finds LibTorch.
#  1. A user's own LibTorch: -DTorch_DIR=... or -DCMAKE_PREFIX_PATH=... (clusters usually have one).
#  2. Otherwise the torch package of DDP_TORCH_PYTHON, by default the project's cached venv
#     (scripts/setup-deps.sh installs it).
find_package(Torch QUIET)
if(NOT Torch_FOUND)
  if(NOT DDP_TORCH_PYTHON)
    execute_process(COMMAND ${CMAKE_SOURCE_DIR}/scripts/setup-deps.sh --print-venv
                    OUTPUT_VARIABLE _ddp_venv OUTPUT_STRIP_TRAILING_WHITESPACE)
    set(DDP_TORCH_PYTHON "${_ddp_venv}/bin/python" CACHE FILEPATH "" FORCE)
  endif()
  execute_process(
    COMMAND ${DDP_TORCH_PYTHON} -c "import torch; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _ddp_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _ddp_torch_rc)
  if(NOT _ddp_torch_rc EQUAL 0)
    message(FATAL_ERROR "LibTorch not found: ${DDP_TORCH_PYTHON} cannot import torch. Run "
                        "scripts/setup-deps.sh, or pass -DTorch_DIR=/path/to/libtorch/share/cmake/Torch")
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${_ddp_torch_prefix}")
  find_package(Torch REQUIRED)
endif()

# TORCH_LIBRARY points at .../torch/lib/libtorch.so; everything lives next to it.
get_filename_component(DDP_TORCH_LIB_DIR "${TORCH_LIBRARY}" DIRECTORY)
get_filename_component(DDP_TORCH_ROOT "${DDP_TORCH_LIB_DIR}" DIRECTORY)
message(STATUS "LibTorch: ${DDP_TORCH_ROOT} (version ${Torch_VERSION})")

# Gloo: the wheel ships libtorch_cpu with gloo compiled in but no gloo headers. We compile the one
# translation unit that constructs ProcessGroupGloo against Debian's libgloo-dev headers, for
# declarations only; every gloo symbol resolves to libtorch_cpu at run time (docs/development.md, "Gloo from C++ with the pip wheel").
find_path(DDP_GLOO_INCLUDE_DIR gloo/config.h PATHS /usr/include NO_DEFAULT_PATH)
if(NOT DDP_GLOO_INCLUDE_DIR)
  message(FATAL_ERROR "gloo headers not found (Debian: libgloo-dev); scripts/setup-deps.sh installs them")
endif()

# NCCL header for ProcessGroupNCCL.hpp: the wheel's nvidia-nccl package, else the system's.
file(GLOB _ddp_nccl_hints "${DDP_TORCH_ROOT}/../nvidia/nccl/include" "${DDP_TORCH_ROOT}/../nvidia/*/include")
find_path(DDP_NCCL_INCLUDE_DIR nccl.h HINTS ${_ddp_nccl_hints} /usr/include /usr/local/cuda/include)
message(STATUS "NCCL header: ${DDP_NCCL_INCLUDE_DIR}")

# NCCL is compiled in whenever this LibTorch is a CUDA build.
if(TARGET torch_cuda OR EXISTS "${DDP_TORCH_LIB_DIR}/libtorch_cuda.so")
  set(DDP_WITH_NCCL ON)
  if(NOT DDP_NCCL_INCLUDE_DIR)
    message(FATAL_ERROR "CUDA LibTorch found but nccl.h is missing (the nvidia-nccl wheel or libnccl-dev)")
  endif()
else()
  set(DDP_WITH_NCCL OFF)
endif()
message(STATUS "NCCL backend compiled in: ${DDP_WITH_NCCL}")
