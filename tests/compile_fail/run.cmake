# tests/compile_fail/run.cmake: a compile-failure test, as fmt's are. Compiles SOURCE -fsyntax-only in the compiled
cmake_policy(SET CMP0057 NEW)  # IN_LIST
# mode twice: without MACRO it must compile (so the failure below is the misspelling, not a broken setup); with
# -D${MACRO} it must fail and the compiler's output must mention EXPECT. Run by ctest:
# cmake -DCXX=<compiler> -DSOURCE=<file> -DMACRO=<name> -DEXPECT=<regex> -DINCLUDES=<dirs|...> -DDEFINES=<defs|...>
#       [-DFLAGS=<flags|...>] -P run.cmake
# FLAGS are extra compiler flags for both compiles (-Werror=deprecated-declarations: a deprecated spelling fails).
string(REPLACE "|" ";" includes "${INCLUDES}")
string(REPLACE "|" ";" defines "${DEFINES}")
string(REPLACE "|" ";" extra "${FLAGS}")
set(flags -std=c++20 -fsyntax-only ${extra})
foreach(d ${includes})
  list(APPEND flags -I${d})
endforeach()
foreach(d ${defines})
  list(APPEND flags -D${d})
endforeach()
if(NOT "OAR_LIB" IN_LIST defines)
  message(FATAL_ERROR "compile_fail: the compiled mode needs OAR_LIB among the oar target's definitions, got '${DEFINES}'")
endif()

# LC_ALL=C: plain quotes in the diagnostics.
execute_process(COMMAND ${CMAKE_COMMAND} -E env LC_ALL=C ${CXX} ${flags} ${SOURCE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compile_fail: ${SOURCE} must compile without -D${MACRO}, but:\n${out}${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env LC_ALL=C ${CXX} ${flags} -D${MACRO} ${SOURCE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "compile_fail: ${SOURCE} compiles with -D${MACRO}; it must not")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "compile_fail: ${SOURCE} fails with -D${MACRO} as it should, but its diagnostics do not match '${EXPECT}':\n${out}${err}")
endif()
message(STATUS "compile_fail: ${SOURCE} compiles, and with -D${MACRO} fails mentioning '${EXPECT}'")
