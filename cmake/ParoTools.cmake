# Settings shared by paro's own executables (tests, benchmarks, examples); not exported to users.

add_library(paro_tool_flags INTERFACE)
target_compile_options(paro_tool_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>
                                                 $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
if(PARO_SANITIZE STREQUAL "address")
  target_compile_options(paro_tool_flags INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                                                   -fno-sanitize-recover=undefined)
  target_link_options(paro_tool_flags INTERFACE -fsanitize=address,undefined)
elseif(PARO_SANITIZE STREQUAL "thread")
  target_compile_options(paro_tool_flags INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(paro_tool_flags INTERFACE -fsanitize=thread)
elseif(NOT PARO_SANITIZE STREQUAL "")
  message(FATAL_ERROR "PARO_SANITIZE='${PARO_SANITIZE}': allowed values are '', address, thread")
endif()

# paro_add_tool(NAME SOURCE): a command-line tool (CLI11, nlohmann-json) with the mpi and ucx backends where built.
# Where CLI11 or nlohmann-json is not installed (the GPU machine of scripts/gpu-check.sh), their headers
# copied to third_party/include by scripts/gpu-prepare.sh stand in.
function(paro_header_only_fallback package target header)
  find_package(${package} CONFIG QUIET)
  if(NOT ${package}_FOUND AND NOT TARGET ${target})
    if(NOT EXISTS "${PROJECT_SOURCE_DIR}/third_party/include/${header}")
      message(FATAL_ERROR "${package} not found and no third_party/include/${header} (scripts/gpu-prepare.sh copies it)")
    endif()
    add_library(${target} INTERFACE IMPORTED GLOBAL)
    set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${PROJECT_SOURCE_DIR}/third_party/include")
  endif()
endfunction()

function(paro_add_tool name source)
  paro_header_only_fallback(CLI11 CLI11::CLI11 CLI/CLI.hpp)
  paro_header_only_fallback(nlohmann_json nlohmann_json::nlohmann_json nlohmann/json.hpp)
  add_executable(${name} ${source})
  target_link_libraries(${name} PRIVATE paro::paro paro_tool_flags CLI11::CLI11 nlohmann_json::nlohmann_json)
  if(PARO_HAVE_MPI)
    target_link_libraries(${name} PRIVATE paro::mpi)
  endif()
  if(PARO_HAVE_UCX)
    target_link_libraries(${name} PRIVATE paro::ucx)
  endif()
endfunction()
