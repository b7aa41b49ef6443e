# Proves that the op harness rejects a missing row at build time: kOpRows (tests/ops/op_cases.cpp)
# is expanded from kernels/op_decls.inc, so an op whose row function (rows::name(), defined in
# tests/ops/rows_*.cpp) is missing fails to link, naming the op. For each op of OPS this links
# op_cases.cpp against stand-in rows of every op but that one and passes only if the link fails
# with one undefined symbol, that op's row. Every stand-in row must link first (so a failure is
# the check's, not a broken command line).
#
#   cmake -DCXX=c++ -DSRC=<source dir> -DWORK=<scratch dir> -DOPS=matmul,sum_squares -P missing_row_test.cmake
cmake_minimum_required(VERSION 3.20)  # IN_LIST
file(MAKE_DIRECTORY ${WORK})
string(REPLACE "," ";" OPS "${OPS}")
file(READ ${SRC}/src/kernels/op_decls.inc list)
string(REGEX MATCHALL "\nFT_OP\\(([a-z0-9_]+)," entries "${list}")
set(all "")
foreach(e IN LISTS entries)
  string(REGEX REPLACE "\nFT_OP\\(([a-z0-9_]+)," "\\1" name "${e}")
  list(APPEND all ${name})
endforeach()
list(LENGTH all n_ops)
if(n_ops LESS 10)
  message(FATAL_ERROR "found only ${n_ops} ops in src/kernels/op_decls.inc")
endif()
set(flags -std=c++20 -I${SRC}/src -I${SRC}/tests)
execute_process(COMMAND ${CXX} ${flags} -c ${SRC}/tests/ops/op_cases.cpp -o ${WORK}/op_cases.o RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tests/ops/op_cases.cpp does not compile with `${CXX} ${flags}`:\n${err}")
endif()

# Stand-in rows of every op but `skip` (never called: the program only counts the table's rows).
function(link_without skip rc_var err_var)
  set(tu "#include \"ops/op_cases.h\"\nnamespace ft::test::rows {\n")
  foreach(op IN LISTS all)
    if(NOT op STREQUAL skip)
      string(APPEND tu "const OpCase& ${op}() { throw 0; }\n")
    endif()
  endforeach()
  string(APPEND tu "}  // namespace ft::test::rows\nint main() { return ft::test::op_rows().size() == 0; }\n")
  file(WRITE ${WORK}/rows_without_${skip}.cpp "${tu}")
  execute_process(COMMAND ${CXX} ${flags} ${WORK}/rows_without_${skip}.cpp ${WORK}/op_cases.o -o ${WORK}/without_${skip}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  set(${rc_var} ${rc} PARENT_SCOPE)
  set(${err_var} "${err}" PARENT_SCOPE)
endfunction()

link_without("-" rc err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "op_cases.cpp with a row for every op does not link with `${CXX} ${flags}`:\n${err}")
endif()

foreach(op IN LISTS OPS)
  if(NOT op IN_LIST all)
    message(FATAL_ERROR "${op} is not an op of src/kernels/op_decls.inc")
  endif()
  link_without(${op} rc err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "op_cases.cpp without the row of ${op} linked: a missing row is not caught")
  endif()
  string(REGEX MATCH "undefined (reference to|symbol:) .?ft::test::rows::${op}\\(\\)" line "${err}")
  if(NOT line)
    message(FATAL_ERROR "op_cases.cpp without the row of ${op} failed to link, but not naming it:\n${err}")
  endif()
  string(REGEX MATCHALL "ft::test::rows::[a-z0-9_]+\\(\\)" named "${err}")
  list(REMOVE_DUPLICATES named)
  list(LENGTH named n)
  message(STATUS "without ${op}'s row: ${line}")
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "one missing row named ${n} rows, not one:\n${err}")
  endif()
endforeach()
