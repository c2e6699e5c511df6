# FindMPFI: the mpfi library. Defines the imported target MPFI::MPFI.
find_path(MPFI_INCLUDE_DIR NAMES mpfi.h)
find_library(MPFI_LIBRARY NAMES mpfi)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MPFI REQUIRED_VARS MPFI_LIBRARY MPFI_INCLUDE_DIR)
if(MPFI_FOUND AND NOT TARGET MPFI::MPFI)
  add_library(MPFI::MPFI UNKNOWN IMPORTED)
  set_target_properties(MPFI::MPFI PROPERTIES IMPORTED_LOCATION "${MPFI_LIBRARY}"
                                          INTERFACE_INCLUDE_DIRECTORIES "${MPFI_INCLUDE_DIR}")
endif()
mark_as_advanced(MPFI_INCLUDE_DIR MPFI_LIBRARY)
