# Target helpers shared by every folder.

include(GoogleTest)

# Where the shared test material lives (../shared beside the checkout). Tests
# find it through tests/unit/common/TestPaths.h (defaults compiled in, the
# environment variables KVJIT_SHARED_DIR and KVJIT_TEST_DATA_DIR override)
# and skip with a message where it is absent.
get_filename_component(KVJIT_SHARED_DIR "${CMAKE_SOURCE_DIR}/../shared" ABSOLUTE)
set(KVJIT_SHARED_DIR "${KVJIT_SHARED_DIR}" CACHE PATH "The shared test material (models, tokenizer cases)")
set(KVJIT_TEST_DATA_DIR "${CMAKE_SOURCE_DIR}/tests/data")

# Every generated header (ODS .inc files, flatc headers) hangs off this target,
# and every compiler-side target waits for it: a target may include a header
# generated for a library it only reaches through its link closure.
add_custom_target(kvjit-generated-headers)

# kvjit_tablegen_target(name): add_public_tablegen_target, registered above.
function(kvjit_tablegen_target name)
  add_public_tablegen_target(${name})
  add_dependencies(kvjit-generated-headers ${name})
endfunction()

# kvjit_runtime_library(name SOURCES ... [LIBS ...])
# A library of the runtime: it may depend on Abseil, FlatBuffers, CUDA and other
# runtime libraries, never on MLIR or LLVM (checked by kvjit_check_runtime_isolation).
function(kvjit_runtime_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_link_libraries(${name} PUBLIC ${ARG_LIBS})
  set_property(GLOBAL APPEND PROPERTY KVJIT_RUNTIME_TARGETS ${name})
endfunction()

# kvjit_library(name SOURCES ... [LIBS ...] [DEPENDS tablegen targets])
# A compiler-side library.
function(kvjit_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;DEPENDS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_link_libraries(${name} PUBLIC ${ARG_LIBS})
  add_dependencies(${name} kvjit-generated-headers ${ARG_DEPENDS})
endfunction()

# kvjit_gtest(name SOURCES ... [LIBS ...])
# A GoogleTest binary; each TEST becomes its own ctest entry.
function(kvjit_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  add_dependencies(${name} kvjit-generated-headers)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST)
endfunction()

function(_kvjit_collect_links target out_var)
  set(seen ${${out_var}})
  if(NOT TARGET ${target} OR target IN_LIST seen)
    set(${out_var} ${seen} PARENT_SCOPE)
    return()
  endif()
  list(APPEND seen ${target})
  get_target_property(aliased ${target} ALIASED_TARGET)
  if(aliased)
    _kvjit_collect_links(${aliased} seen)
  endif()
  foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(libs ${target} ${prop})
    if(libs)
      foreach(lib ${libs})
        string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" lib "${lib}")
        if(TARGET ${lib})
          _kvjit_collect_links(${lib} seen)
        else()
          list(APPEND seen ${lib})
        endif()
      endforeach()
    endif()
  endforeach()
  set(${out_var} ${seen} PARENT_SCOPE)
endfunction()

# Fails the configure step when a runtime library reaches MLIR or LLVM through
# its link closure: the runtime must build and ship without them.
function(kvjit_check_runtime_isolation)
  get_property(runtime_targets GLOBAL PROPERTY KVJIT_RUNTIME_TARGETS)
  foreach(target ${runtime_targets})
    set(closure "")
    _kvjit_collect_links(${target} closure)
    foreach(dep ${closure})
      if(dep MATCHES "^(MLIR|LLVM)" OR dep MATCHES "lib(MLIR|LLVM)")
        message(FATAL_ERROR "kvjit: runtime library '${target}' links '${dep}'; the runtime must never link MLIR or LLVM")
      endif()
    endforeach()
  endforeach()
endfunction()
