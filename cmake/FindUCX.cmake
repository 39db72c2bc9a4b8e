# FindUCX: UCX's ucp library via pkg-config (Debian's libucx-dev ships ucx.pc).
# Result: UCX_FOUND, UCX_VERSION, imported target UCX::ucp.

find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_UCX QUIET ucx)
endif()
find_path(UCX_INCLUDE_DIR ucp/api/ucp.h HINTS ${PC_UCX_INCLUDE_DIRS})
find_library(UCX_UCP_LIBRARY ucp HINTS ${PC_UCX_LIBRARY_DIRS})
find_library(UCX_UCS_LIBRARY ucs HINTS ${PC_UCX_LIBRARY_DIRS})
set(UCX_VERSION "${PC_UCX_VERSION}")
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(UCX REQUIRED_VARS UCX_UCP_LIBRARY UCX_UCS_LIBRARY UCX_INCLUDE_DIR
                                  VERSION_VAR UCX_VERSION)
if(UCX_FOUND AND NOT TARGET UCX::ucp)
  add_library(UCX::ucp UNKNOWN IMPORTED)
  set_target_properties(UCX::ucp PROPERTIES IMPORTED_LOCATION "${UCX_UCP_LIBRARY}"
                                            INTERFACE_INCLUDE_DIRECTORIES "${UCX_INCLUDE_DIR}"
                                            INTERFACE_LINK_LIBRARIES "${UCX_UCS_LIBRARY}")
endif()
mark_as_advanced(UCX_INCLUDE_DIR UCX_UCP_LIBRARY UCX_UCS_LIBRARY)
