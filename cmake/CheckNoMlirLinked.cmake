# cmake -DBINARY=path -P CheckNoMlirLinked.cmake
# Fails when the binary's dynamic dependencies include libMLIR or libLLVM.
execute_process(COMMAND ldd ${BINARY} OUTPUT_VARIABLE deps RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd failed on ${BINARY}")
endif()
if(deps MATCHES "lib(MLIR|LLVM)[^ ]*")
  message(FATAL_ERROR "${BINARY} links ${CMAKE_MATCH_0}; the runtime must never link MLIR or LLVM")
endif()
message(STATUS "${BINARY}: no MLIR or LLVM among its libraries")
