# Proves that the op harness rejects a missing row at compile time: for each op of OPS, compiles
# tests/ops/op_cases.cpp with that op's row removed and passes only if the compile fails with the
# harness's message naming the op. The unmodified file must compile with the same command first
# (so a failure is the check's, not a broken command line).
#
#   cmake -DCXX=c++ -DSRC=<source dir> -DWORK=<scratch dir> -DOPS=matmul,scale_inplace -P missing_row_test.cmake
file(MAKE_DIRECTORY ${WORK})
string(REPLACE "," ";" OPS "${OPS}")
file(READ ${SRC}/tests/ops/op_cases.cpp table)
set(flags -std=c++20 -fsyntax-only -I${SRC}/src -I${SRC}/tests)

execute_process(COMMAND ${CXX} ${flags} ${SRC}/tests/ops/op_cases.cpp RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the unmodified tests/ops/op_cases.cpp does not compile with `${CXX} ${flags}`:\n${err}")
endif()

foreach(op IN LISTS OPS)
  set(row "    {OpId::${op}, &rows::${op}},\n")
  string(FIND "${table}" "${row}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "tests/ops/op_cases.cpp has no line `{OpId::${op}, &rows::${op}},` to remove")
  endif()
  string(REPLACE "${row}" "" without "${table}")
  set(tu ${WORK}/op_cases_without_${op}.cpp)
  file(WRITE ${tu} "${without}")
  execute_process(COMMAND ${CXX} ${flags} ${tu} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "op_cases.cpp without the row of ${op} compiled: a missing row is not caught")
  endif()
  string(REGEX MATCH "error: static assertion failed: op '${op}' has no row[^\n]*" line "${err}")
  if(NOT line)
    message(FATAL_ERROR "op_cases.cpp without the row of ${op} failed to compile, but not with the harness's "
                        "message naming it:\n${err}")
  endif()
  string(REGEX MATCHALL "error: " errors "${err}")
  list(LENGTH errors n)
  message(STATUS "without ${op}'s row (${n} error): ${line}")
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "one missing row gave ${n} errors, not one:\n${err}")
  endif()
endforeach()
