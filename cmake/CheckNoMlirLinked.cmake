# cmake -DBINARY=path [-DALSO="regex"] -P CheckNoMlirLinked.cmake
# Fails when the binary's dynamic dependencies include libMLIR or libLLVM, or
# a library matching ALSO (e.g. "cublas|nvrtc": ones it must load only when
# asked to).
execute_process(COMMAND ldd ${BINARY} OUTPUT_VARIABLE deps RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd failed on ${BINARY}")
endif()
if(deps MATCHES "lib(MLIR|LLVM)[^ ]*")
  message(FATAL_ERROR "${BINARY} links ${CMAKE_MATCH_0}; the runtime must never link MLIR or LLVM")
endif()
if(ALSO AND deps MATCHES "lib(${ALSO})[^ ]*")
  message(FATAL_ERROR "${BINARY} links ${CMAKE_MATCH_0}, which it must load only when it needs it")
endif()
message(STATUS "${BINARY}: no MLIR or LLVM among its libraries")
