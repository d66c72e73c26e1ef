# DDP_SANITIZE=address -> ASan + UBSan on every target; DDP_SANITIZE=thread -> TSan (the top-level
# CMakeLists then builds only the torch-free targets, since the LibTorch wheel is not TSan-built).
#
# TSan and abseil: Debian's abseil is not instrumented, so TSan cannot see absl::Mutex's
# synchronization and reports races on data that every access reaches under an absl::MutexLock.
# DDP_TSAN_ABSEIL_DIR names a folder of the same libraries built with -fsanitize=thread
# (scripts/build-tsan-abseil.sh, which `make tsan` runs): every binary and test of a TSan build
# loads them first (DT_RPATH, which also covers gRPC's own abseil dependencies), so a TSan report
# is a real race.
set(DDP_TSAN_ABSEIL_DIR "" CACHE PATH "abseil built with -fsanitize=thread (scripts/build-tsan-abseil.sh)")
set(DDP_TEST_SANITIZER_ENV "")
set(DDP_LSAN_STRICT_ENV "")
if(DDP_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  # tests/build/lsan_suppressions.txt says which leak reports come from OpenSSL's own per-thread
  # state and why; tls_identity_test runs without it (DDP_LSAN_STRICT_ENV).
  set(DDP_TEST_SANITIZER_ENV
      "DDP_SANITIZER=address;LSAN_OPTIONS=suppressions=${CMAKE_SOURCE_DIR}/tests/build/lsan_suppressions.txt")
  set(DDP_LSAN_STRICT_ENV "LSAN_OPTIONS=report_objects=1")
elseif(DDP_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  if(DDP_TSAN_ABSEIL_DIR)
    if(NOT EXISTS "${DDP_TSAN_ABSEIL_DIR}/libabsl_synchronization.so.20220623")
      message(FATAL_ERROR "DDP_TSAN_ABSEIL_DIR=${DDP_TSAN_ABSEIL_DIR} holds no TSan abseil; run "
                          "scripts/build-tsan-abseil.sh --compiler ${CMAKE_CXX_COMPILER}")
    endif()
    set(CMAKE_BUILD_RPATH "${DDP_TSAN_ABSEIL_DIR}")
    add_link_options(-Wl,--disable-new-dtags)
    message(STATUS "TSan: abseil from ${DDP_TSAN_ABSEIL_DIR}")
  else()
    message(WARNING "DDP_SANITIZE=thread without DDP_TSAN_ABSEIL_DIR: absl::Mutex is invisible to "
                    "TSan, expect false reports (make tsan builds and uses the TSan abseil)")
  endif()
  # tests/build/tsan_suppressions.txt says what TSan cannot see in uninstrumented gRPC, and why.
  set(DDP_TSAN_OPTIONS "halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1 suppressions=${CMAKE_SOURCE_DIR}/tests/build/tsan_suppressions.txt")
  set(DDP_TEST_SANITIZER_ENV "DDP_SANITIZER=thread;TSAN_OPTIONS=${DDP_TSAN_OPTIONS}")
elseif(NOT DDP_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DDP_SANITIZE must be '', 'address' or 'thread', not '${DDP_SANITIZE}'")
endif()
