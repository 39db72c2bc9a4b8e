# FindNCCL: NCCL headers and library (Debian ships no CMake config for it).
# Result: NCCL_FOUND, NCCL_VERSION, imported target NCCL::NCCL.
# Searched in order: NCCL_ROOT, CUDAToolkit's tree, $NCCL_HOME, the system, then Python's paths (sys.path,
# purelib, platlib of Python3_EXECUTABLE or python3) for a PyPI wheel (nvidia-nccl-cu12/13), whose layout is
# site-packages/nvidia/nccl/{include,lib} and which ships libnccl.so.2 without libnccl.so.

set(_nccl_wheel_dirs)
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)  # asked once: both are cached when found
  if(Python3_EXECUTABLE)
    set(_nccl_python "${Python3_EXECUTABLE}")
  else()
    find_program(_nccl_python NAMES python3)
    mark_as_advanced(_nccl_python)
  endif()
  if(_nccl_python)
    execute_process(COMMAND "${_nccl_python}" -c "import sys, sysconfig
paths = [p for p in sys.path if p] + [sysconfig.get_path('purelib'), sysconfig.get_path('platlib')]
print(';'.join(dict.fromkeys(p + '/nvidia/nccl' for p in paths)))"
                    OUTPUT_VARIABLE _nccl_wheel_dirs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
endif()

find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME
          PATHS ${_nccl_wheel_dirs} PATH_SUFFIXES include targets/x86_64-linux/include)
# NAMES_PER_DIR: the first directory with either name wins, so NCCL_ROOT's libnccl.so.2 beats a system libnccl.so.
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
             HINTS ${NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME
             PATHS ${_nccl_wheel_dirs} PATH_SUFFIXES lib lib64 targets/x86_64-linux/lib)
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*" "\\1" _major "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_MINOR +([0-9]+).*" "\\1" _minor "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_PATCH +([0-9]+).*" "\\1" _patch "${_nccl_ver}")
  set(NCCL_VERSION "${_major}.${_minor}.${_patch}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
  add_library(NCCL::NCCL UNKNOWN IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
