# Finds every external dependency once, so that targets only name imported targets.

find_package(absl CONFIG REQUIRED)
find_package(FlatBuffers CONFIG REQUIRED)
find_program(FLATC_EXECUTABLE flatc REQUIRED)
find_package(Python3 REQUIRED COMPONENTS Interpreter)
find_package(nlohmann_json 3 REQUIRED)
# Tensor parallelism's ranks as processes (runtime/dist/MpiCommunicator.h):
# Open MPI from Debian; only the C API is used, and mpirun runs the tests.
find_package(MPI COMPONENTS C)
if(NOT MPI_C_FOUND OR NOT MPIEXEC_EXECUTABLE)
  message(FATAL_ERROR "kvjit: MPI (libmpi and mpirun) was not found: run scripts/setup.sh "
                      "(Debian's openmpi-bin and libopenmpi-dev)")
endif()
if(KVJIT_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()

if(KVJIT_BUILD_COMPILER)
  # Debian installs LLVM/MLIR 19 under /usr/lib/llvm-19; MLIR_DIR overrides it.
  set(MLIR_DIR "/usr/lib/llvm-19/lib/cmake/mlir" CACHE PATH "Directory holding MLIRConfig.cmake")
  find_package(MLIR CONFIG REQUIRED)
  if(NOT LLVM_VERSION_MAJOR EQUAL 19)
    message(FATAL_ERROR "kvjit: needs LLVM/MLIR 19, found ${LLVM_PACKAGE_VERSION} in ${MLIR_DIR}")
  endif()
  message(STATUS "kvjit: MLIR ${LLVM_PACKAGE_VERSION} from ${MLIR_DIR}")
  list(APPEND CMAKE_MODULE_PATH ${MLIR_CMAKE_DIR} ${LLVM_CMAKE_DIR})
  include(TableGen)
  include(AddLLVM)
  include(AddMLIR)
  # add_mlir_doc writes into ${MLIR_BINARY_DIR}/docs, under the mlir-doc target
  # (AddMLIR.cmake defines it in LLVM 19; older configs do not).
  set(MLIR_BINARY_DIR ${CMAKE_BINARY_DIR})
  if(NOT TARGET mlir-doc)
    add_custom_target(mlir-doc)
  endif()
  include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
  # Debian ships MLIR as one shared library; linking it alone (never the static
  # component archives beside it) keeps a single copy of MLIR's global registries.
  if(NOT TARGET MLIR)
    message(FATAL_ERROR "kvjit: the MLIR shared library (libMLIR.so) was not found in ${MLIR_DIR}")
  endif()
  # libMLIR.so leaves the LLVM symbols it uses to libLLVM.so.
  set(KVJIT_MLIR_LIBS MLIR LLVM)
  set(KVJIT_LIT "${LLVM_TOOLS_BINARY_DIR}/../build/utils/lit/lit.py")
  if(NOT EXISTS "${KVJIT_LIT}")
    find_program(KVJIT_LIT NAMES lit llvm-lit lit.py)
  endif()
endif()

set(KVJIT_HAVE_CUDA OFF)
if(NOT KVJIT_ENABLE_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit)
  if(CUDAToolkit_FOUND AND TARGET CUDA::nvrtc AND TARGET CUDA::cublas)
    set(KVJIT_HAVE_CUDA ON)
    message(STATUS "kvjit: CUDA backend ON (toolkit ${CUDAToolkit_VERSION} in ${CUDAToolkit_LIBRARY_DIR})")
  elseif(KVJIT_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "kvjit: KVJIT_ENABLE_CUDA=ON but the CUDA Toolkit (NVRTC, cuBLAS) was not found")
  endif()
endif()
if(NOT KVJIT_HAVE_CUDA)
  message(STATUS "kvjit: CUDA backend OFF: building CPU-only")
endif()

# xgrammar's C++ library, built by scripts/build_xgrammar.sh at the version
# scripts/deps/xgrammar.pin names; KVJIT_XGRAMMAR_ROOT overrides where.
file(STRINGS "${PROJECT_SOURCE_DIR}/scripts/deps/xgrammar.pin" KVJIT_XGRAMMAR_VERSION_LINE
     REGEX "^version=")
string(REPLACE "version=" "" KVJIT_XGRAMMAR_VERSION "${KVJIT_XGRAMMAR_VERSION_LINE}")
if(DEFINED ENV{KVJIT_DEPS_DIR})
  set(KVJIT_DEPS_DIR "$ENV{KVJIT_DEPS_DIR}")
else()
  set(KVJIT_DEPS_DIR "$ENV{HOME}/.cache/kvjit/deps")
endif()
set(KVJIT_XGRAMMAR_ROOT "${KVJIT_DEPS_DIR}/xgrammar-${KVJIT_XGRAMMAR_VERSION}"
    CACHE PATH "Install prefix of xgrammar's C++ library")
find_library(KVJIT_XGRAMMAR_LIBRARY NAMES libxgrammar.a PATHS "${KVJIT_XGRAMMAR_ROOT}/lib"
             NO_DEFAULT_PATH)
if(NOT KVJIT_XGRAMMAR_LIBRARY OR NOT EXISTS "${KVJIT_XGRAMMAR_ROOT}/include/xgrammar/xgrammar.h")
  message(FATAL_ERROR "kvjit: xgrammar ${KVJIT_XGRAMMAR_VERSION} was not found in "
                      "${KVJIT_XGRAMMAR_ROOT}: run scripts/setup.sh (or scripts/build_xgrammar.sh)")
endif()
add_library(kvjit::xgrammar STATIC IMPORTED GLOBAL)
set_target_properties(kvjit::xgrammar PROPERTIES
  IMPORTED_LOCATION "${KVJIT_XGRAMMAR_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${KVJIT_XGRAMMAR_ROOT}/include"
  INTERFACE_COMPILE_DEFINITIONS "XGRAMMAR_ENABLE_CPPTRACE=0")
message(STATUS "kvjit: xgrammar ${KVJIT_XGRAMMAR_VERSION} from ${KVJIT_XGRAMMAR_ROOT}")
