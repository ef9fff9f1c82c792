# Helpers shared by every layer.

# agentr1_library(<name> SOURCES ... DEPS ... [TORCH])
# Creates static library agentr1_<name>. TORCH links libtorch and uses the shared
# precompiled header (only the model, rollout, algo and train layers may say TORCH).
function(agentr1_library name)
  cmake_parse_arguments(A "TORCH" "" "SOURCES;DEPS" ${ARGN})
  if(NOT A_SOURCES)
    message(FATAL_ERROR "agentr1_library(${name}): no SOURCES")
  endif()
  add_library(agentr1_${name} STATIC ${A_SOURCES})
  target_include_directories(agentr1_${name} PUBLIC ${AGENTR1_SRC})
  target_link_libraries(agentr1_${name} PUBLIC ${A_DEPS})
  target_compile_options(agentr1_${name} PRIVATE -Wall -Wextra $<$<BOOL:${AGENTR1_WERROR}>:-Werror>)
  if(A_TORCH)
    agentr1_torch_pch(agentr1_${name})
  endif()
endfunction()

# One precompiled header for all torch code: built once on the model layer, reused
# everywhere else (saves ~15 s and ~1 GB per translation unit).
function(agentr1_torch_pch target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_link_libraries(${target} PRIVATE ${TORCH_LIBRARIES})
  else()
    target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  endif()
  if(TARGET agentr1_torch_pch_owner)
    target_precompile_headers(${target} REUSE_FROM agentr1_torch_pch_owner)
  else()
    message(FATAL_ERROR "agentr1_torch_pch_owner is not defined yet")
  endif()
endfunction()

# agentr1_test(<name> SOURCES ... DEPS ... LABEL <unit|model|e2e|slow> [TORCH])
function(agentr1_test name)
  if(NOT AGENTR1_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(A "TORCH" "LABEL;TIMEOUT" "SOURCES;DEPS" ${ARGN})
  if(NOT A_LABEL)
    set(A_LABEL unit)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    AGENTR1_REF_DIR="${AGENTR1_REF_DIR}"
    AGENTR1_PYTHON="${AGENTR1_PYTHON}"
    AGENTR1_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  if(A_TORCH)
    agentr1_torch_pch(${name})
  endif()
  add_test(NAME ${name} COMMAND ${name})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS ${A_LABEL} TIMEOUT ${A_TIMEOUT}
    WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
endfunction()

