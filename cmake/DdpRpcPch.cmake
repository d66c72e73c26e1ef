# Precompiled gRPC / protobuf / abseil headers (and GoogleTest's, for the test binaries) for the
# torch-free targets: the control plane, the client, ddpctl, the load generator and their tests.
# Those headers cost about 3 s of parsing per translation unit, often more than the code itself,
# in every build `make test` does (the main build and the ASan+UBSan one; the clang TSan build
# compiles without, see below). The data-plane targets use the LibTorch header instead
# (DDP_TORCH_PCH); a translation unit has one precompiled header at most.
#
# g++ only: g++ checks a precompiled header against the command line and, where it does not fit
# (another macro definition that its headers read), quietly parses the headers as text instead,
# so a target can never be miscompiled by it; clang++ treats such a mismatch as an error.
option(DDP_RPC_PCH "Precompile the gRPC/protobuf/GoogleTest headers once for the torch-free targets (g++)" ON)
option(DDP_RPC_PCH_WARN_INVALID "Warn (an error under DDP_WERROR) where g++ cannot use that header" OFF)

set(_DDP_RPC_PCH_HEADERS
  <grpcpp/grpcpp.h> <google/protobuf/message.h> <google/protobuf/util/json_util.h>
  <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
  <absl/strings/str_format.h> <absl/synchronization/mutex.h> <absl/time/time.h>
  <absl/container/flat_hash_map.h> <string> <vector> <map> <memory> <functional>)

# Every target defined under `dir` and its subdirectories, into `out`.
function(_ddp_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    _ddp_targets_below(${sub} below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(_ddp_rpc_pch_target name)
  file(WRITE ${CMAKE_BINARY_DIR}/${name}.cc
       "// Anchor of the precompiled headers in cmake/DdpRpcPch.cmake.\n")
  add_library(${name} OBJECT ${CMAKE_BINARY_DIR}/${name}.cc)
  target_link_libraries(${name} PRIVATE gRPC::grpc++ protobuf::libprotobuf absl::status
                        absl::statusor absl::strings absl::str_format absl::synchronization
                        absl::time absl::flat_hash_map ${ARGN})
  target_compile_options(${name} PRIVATE -pthread)
  ddp_apply_warnings(${name})
endfunction()

# Called once, at the end of the top-level CMakeLists.txt, when every target exists.
function(ddp_precompile_rpc_headers)
  if(NOT DDP_RPC_PCH OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU" OR DDP_CLANG_TIDY)
    return()
  endif()
  _ddp_rpc_pch_target(ddp_rpc_pch)
  target_precompile_headers(ddp_rpc_pch PRIVATE ${_DDP_RPC_PCH_HEADERS})
  # The test binaries see GTEST_HAS_PTHREAD=1 (GTest::gtest's definition), which gtest's headers
  # read: they get a header of their own, made with the same definition.
  _ddp_rpc_pch_target(ddp_rpc_test_pch GTest::gtest GTest::gmock)
  target_precompile_headers(ddp_rpc_test_pch PRIVATE ${_DDP_RPC_PCH_HEADERS}
                            <gtest/gtest.h> <gmock/gmock.h>)

  _ddp_targets_below(${CMAKE_SOURCE_DIR} targets)
  set(used 0)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|EXECUTABLE|OBJECT_LIBRARY)$" OR t MATCHES "_pch$")
      continue()
    endif()
    get_target_property(own ${t} PRECOMPILE_HEADERS)
    get_target_property(reuse ${t} PRECOMPILE_HEADERS_REUSE_FROM)
    get_target_property(defs ${t} COMPILE_DEFINITIONS)
    get_target_property(libs ${t} LINK_LIBRARIES)
    get_target_property(srcdir ${t} SOURCE_DIR)
    # Skipped: targets with a header of their own (LibTorch's), their own macro definitions,
    # LibTorch's flags, or the fuzzers' instrumentation.
    if(own OR reuse OR defs OR "${libs}" MATCHES "torch|TORCH|ddp_(dist|data|models|trainer_lib)"
       OR srcdir MATCHES "/fuzz(/|$)")
      continue()
    endif()
    if("${libs}" MATCHES "GTest::")
      target_precompile_headers(${t} REUSE_FROM ddp_rpc_test_pch)
    else()
      target_precompile_headers(${t} REUSE_FROM ddp_rpc_pch)
    endif()
    # -pthread (_REENTRANT, which the headers read) for every target: most have it through
    # gRPC's or GoogleTest's usage requirements, and one header then fits all.
    target_compile_options(${t} PRIVATE -pthread)
    # A header that does not fit (see above) is parsed as text, without a warning under -Werror.
    set_target_properties(${t} PROPERTIES PCH_WARN_INVALID ${DDP_RPC_PCH_WARN_INVALID})
    math(EXPR used "${used} + 1")
  endforeach()
  message(STATUS "Precompiled gRPC/protobuf headers: ${used} torch-free targets")
endfunction()
