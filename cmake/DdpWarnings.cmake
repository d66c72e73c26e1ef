# One warning list, applied privately to our own targets (never to generated code or deps).
set(DDP_WARNING_FLAGS
  -Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor -Wcast-align
  -Woverloaded-virtual -Wimplicit-fallthrough -Wformat=2
  -Wmissing-declarations -Wno-unused-parameter)

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
