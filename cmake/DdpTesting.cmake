# ddp_add_test(NAME <name> SOURCES <files...> LIBS <targets...> LABELS <unit|integration|slurm|gpu>
#              [TIMEOUT <s>] [ENV <VAR=value...>])
# Builds a GoogleTest binary into build/tests/ and registers it with CTest under its label.
include(GoogleTest)
function(ddp_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ENV" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  ddp_apply_warnings(${T_NAME})
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "DDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin;DDP_SOURCE_DIR=${CMAKE_SOURCE_DIR};DDP_TORCH_PYTHON=${DDP_TORCH_PYTHON};${T_ENV}"
    SKIP_RETURN_CODE 77)
  if(NOT T_LABELS STREQUAL "unit")
    set_tests_properties(${T_NAME} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()
