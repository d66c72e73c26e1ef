# DDP_SANITIZE=address -> ASan + UBSan on every target; DDP_SANITIZE=thread -> TSan (the top-level
# CMakeLists then builds only the torch-free targets, since the LibTorch wheel is not TSan-built).
if(DDP_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(DDP_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT DDP_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DDP_SANITIZE must be '', 'address' or 'thread', not '${DDP_SANITIZE}'")
endif()
