# ddp_add_test(NAME <name> SOURCES <files...> LIBS <targets...> LABELS <unit|integration|slurm|gpu>
#              [TIMEOUT <s>] [ENV <VAR=value...>])
# Builds a GoogleTest binary into build/tests/ and registers it with CTest under its label.
#
# Skips are never passes: every binary's main() is tests/testing/skip_aware_main.cc, which exits
# 77 (CTest: "Skipped") when no test failed but one called GTEST_SKIP, naming each skipped test and
# its reason; script tests exit 77 themselves. scripts/run-tests.sh lists them in its summary.
include(GoogleTest)
set(DDP_SKIP_RETURN_CODE 77)
if(NOT TARGET ddp_gtest_main)
  add_library(ddp_gtest_main STATIC ${CMAKE_SOURCE_DIR}/tests/testing/skip_aware_main.cc)
  target_link_libraries(ddp_gtest_main PUBLIC GTest::gtest)
  ddp_apply_warnings(ddp_gtest_main)
endif()
function(ddp_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ENV" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock ddp_gtest_main)
  target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  ddp_apply_warnings(${T_NAME})
  if(COMMAND ddp_use_torch_pch AND "${T_LIBS}" MATCHES "ddp_(dist|data|models|trainer_lib)")
    ddp_use_torch_pch(${T_NAME})
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "DDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin;DDP_SOURCE_DIR=${CMAKE_SOURCE_DIR};DDP_TORCH_PYTHON=${DDP_TORCH_PYTHON};${DDP_TEST_SANITIZER_ENV};${T_ENV}"
    SKIP_RETURN_CODE ${DDP_SKIP_RETURN_CODE})
  if(NOT T_LABELS STREQUAL "unit")
    set_tests_properties(${T_NAME} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()
