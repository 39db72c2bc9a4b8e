# ctest find_nccl: cmake/FindNCCL.cmake finds the layout of NCCL's PyPI wheel (nvidia-nccl-cu13:
# site-packages/nvidia/nccl/{include,lib}, libnccl.so.2 and no libnccl.so) through Python's sys.path, and
# NCCL_ROOT before it. No CUDA needed: the trees are fakes (a header with the version, an empty library).
#   cmake -DPARO_SOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -P run.cmake
find_program(python NAMES python3 REQUIRED)
file(REMOVE_RECURSE "${WORK_DIR}")

function(fake_nccl prefix version library)
  string(REPLACE "." ";" v "${version}")
  list(GET v 0 major)
  list(GET v 1 minor)
  list(GET v 2 patch)
  file(WRITE "${prefix}/include/nccl.h"
       "#define NCCL_MAJOR ${major}\n#define NCCL_MINOR ${minor}\n#define NCCL_PATCH ${patch}\n")
  file(WRITE "${prefix}/lib/${library}" "")
endfunction()
set(wheel "${WORK_DIR}/site-packages/nvidia/nccl")
set(root "${WORK_DIR}/root")
fake_nccl("${wheel}" 2.99.7 libnccl.so.2)
fake_nccl("${root}" 2.99.8 libnccl.so.2)
# Later on sys.path, with the unversioned name: it must lose to the directories before it.
fake_nccl("${WORK_DIR}/later/site-packages/nvidia/nccl" 2.99.9 libnccl.so)

function(expect name nccl_root prefix version)  # with the wheel on PYTHONPATH and NCCL_ROOT, PREFIX is found
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=NCCL_HOME
                          PYTHONPATH=${WORK_DIR}/site-packages:${WORK_DIR}/later/site-packages
                          ${CMAKE_COMMAND} -G "${GENERATOR}" -S "${CMAKE_CURRENT_LIST_DIR}" -B "${WORK_DIR}/${name}"
                          -DPARO_SOURCE_DIR=${PARO_SOURCE_DIR} -DNCCL_ROOT=${nccl_root}
                          -DPython3_EXECUTABLE=${python} -DEXPECTED_INCLUDE_DIR=${prefix}/include
                          -DEXPECTED_LIBRARY=${prefix}/lib/libnccl.so.2 -DEXPECTED_VERSION=${version}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "find_nccl ${name}: failed\n${output}")
  endif()
  message(STATUS "find_nccl ${name}: passed")
endfunction()
expect(wheel "" "${wheel}" 2.99.7)
expect(root_before_wheel "${root}" "${root}" 2.99.8)
