# REGATTA_CUDA=AUTO|ON|OFF decides whether the CUDA backend is built. The backend itself arrives with the
# pairwise-kernel work; here we only resolve the option so that every later target sees one answer in
# REGATTA_WITH_CUDA.
set(REGATTA_WITH_CUDA OFF)
if(REGATTA_CUDA STREQUAL "ON" OR REGATTA_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    set(REGATTA_WITH_CUDA ON)
  elseif(REGATTA_CUDA STREQUAL "ON")
    message(FATAL_ERROR "REGATTA_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  endif()
elseif(NOT REGATTA_CUDA STREQUAL "OFF")
  message(FATAL_ERROR "REGATTA_CUDA must be AUTO, ON or OFF (got '${REGATTA_CUDA}')")
endif()
message(STATUS "regatta: CUDA toolchain enabled: ${REGATTA_WITH_CUDA} (no CUDA sources yet: they arrive with the pairwise backend)")
