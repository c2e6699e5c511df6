# REGATTA_CUDA=AUTO|ON|OFF decides whether the CUDA backend (core/cuda, the private library regatta_cuda behind
# pairwise_cuda.hpp) is built. Every later target, and the installed regattaConfig.cmake (which then finds
# CUDAToolkit for its consumers), sees one answer in REGATTA_WITH_CUDA.
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
message(STATUS "regatta: CUDA backend (regatta::pairwise::cuda): ${REGATTA_WITH_CUDA}")
