# One warning list, applied privately to our own targets (never to generated code or deps), made
# for the compiler at hand: g++ builds the shipped binaries; clang++ builds the sanitizer and
# analysis checks (`make tsan`, `make clang`) and adds the thread-safety analysis, so every
# ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED / ABSL_LOCKS_EXCLUDED is checked by a compiler.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(_ddp_shadow -Wshadow=local)
  set(_ddp_compiler_only "")
elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  # -Wshadow-uncaptured-local is clang's nearest to g++'s -Wshadow=local (a local hiding another
  # local or a parameter); -Wthread-safety is why clang builds exist at all.
  set(_ddp_shadow -Wshadow-uncaptured-local)
  set(_ddp_compiler_only -Wthread-safety)
else()
  message(WARNING "${CMAKE_CXX_COMPILER_ID}: untested compiler; using the common warnings only")
  set(_ddp_shadow "")
  set(_ddp_compiler_only "")
endif()
set(DDP_WARNING_FLAGS
  -Wall -Wextra -Wpedantic ${_ddp_shadow} -Wnon-virtual-dtor -Wcast-align
  -Woverloaded-virtual -Wimplicit-fallthrough -Wformat=2
  -Wmissing-declarations -Wno-unused-parameter ${_ddp_compiler_only})

find_program(DDP_CLANG_TIDY_EXE clang-tidy)

function(ddp_apply_warnings target)
  target_compile_options(${target} PRIVATE ${DDP_WARNING_FLAGS})
  if(DDP_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(DDP_CLANG_TIDY AND DDP_CLANG_TIDY_EXE)
    set_target_properties(${target} PROPERTIES
      CXX_CLANG_TIDY "${DDP_CLANG_TIDY_EXE};--quiet;--config-file=${CMAKE_SOURCE_DIR}/.clang-tidy")
  endif()
endfunction()
