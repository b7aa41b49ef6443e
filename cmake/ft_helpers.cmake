# Small helpers so each folder's CMakeLists.txt is a few lines.

# ft_library(NAME [UNITY] [DEPS target...] [SOURCES file...] [EXCLUDE file...] [SUBDIRS folder...])
#   A static library from every .cpp in the current folder and its SUBDIRS (tests excluded), or
#   from SOURCES only; EXCLUDE leaves files out (a folder split into two libraries). UNITY
#   compiles it as a unity build (ft_unity below).
function(ft_library name)
  cmake_parse_arguments(ARG "UNITY" "" "DEPS;SOURCES;EXCLUDE;SUBDIRS" ${ARGN})
  if(ARG_SOURCES)
    list(TRANSFORM ARG_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/ OUTPUT_VARIABLE srcs)
  else()
    file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
    foreach(sub IN LISTS ARG_SUBDIRS)
      file(GLOB sub_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${sub}/*.cpp)
      list(APPEND srcs ${sub_srcs})
    endforeach()
  endif()
  list(FILTER srcs EXCLUDE REGEX "_test\\.cpp$")
  foreach(x IN LISTS ARG_EXCLUDE)
    list(REMOVE_ITEM srcs ${CMAKE_CURRENT_SOURCE_DIR}/${x})
  endforeach()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  if(ARG_UNITY)
    ft_unity(${name})
  endif()
endfunction()

# ft_unity(TARGET): compile TARGET's sources a few at a time as one translation unit (CMake's
# unity build) when FT_UNITY_BUILD is ON (the default). For the libraries of parsers, servers,
# planners and commands, whose files each instantiate the same heavy header-only libraries
# (nlohmann-json, CLI11, cpp-httplib, fmt): a clean build — what CI does — compiles those once
# per batch instead of once per file. Never for the numeric code (kernels, tensors, the model,
# the optimizer, the trainer): a batch changes what the compiler inlines, and with it the
# rounding of floating-point expressions.
function(ft_unity target)
  if(FT_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()

# ft_test(NAME SOURCES... [DEPS target...] [LABELS label...] [ENVIRONMENT VAR=value...])
#   A GoogleTest executable registered with CTest (ENVIRONMENT: set for each of its tests).
function(ft_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS;ENVIRONMENT" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  if(ARG_ENVIRONMENT)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ENVIRONMENT "${ARG_ENVIRONMENT}")
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
  endif()
  # The labels are set by a script CTest runs after the discovered tests' list (which names them
  # in ${name}_TESTS): passed through gtest_discover_tests, a list of labels loses all but its first.
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
  file(WRITE ${script} "foreach(t IN LISTS ${name}_TESTS)\n  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"${ARG_LABELS}\")\nendforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()
