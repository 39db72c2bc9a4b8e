# Settings shared by paro's own executables (tests, benchmarks, examples); not exported to users.

add_library(paro_tool_flags INTERFACE)
target_compile_options(paro_tool_flags INTERFACE -Wall -Wextra -Wpedantic)
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

# paro_add_tool(NAME SOURCE): a command-line tool (CLI11, nlohmann-json) with the mpi backend where built.
function(paro_add_tool name source)
  find_package(CLI11 CONFIG REQUIRED)
  find_package(nlohmann_json CONFIG REQUIRED)
  add_executable(${name} ${source})
  target_link_libraries(${name} PRIVATE paro::paro paro_tool_flags CLI11::CLI11 nlohmann_json::nlohmann_json)
  if(PARO_HAVE_MPI)
    target_link_libraries(${name} PRIVATE paro::mpi)
  endif()
endfunction()
