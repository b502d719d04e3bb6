# A consumer of oar outside its build, built and run one of four ways (KIND):
#   find_package               `cmake --install` of the build tree in BIN, find_package(oar), oar::oar
#   find_package_header_only   the same with oar::header_only
#   add_subdirectory           oar built inside the consumer's tree, both targets (tests/install/subdirectory)
#   command_line               header-only with nothing but the compiler: include paths (EIGEN: Eigen's) and
#                              system libraries
# Each builds tests/install/consumer/main.cpp and runs it ("consumer ok"). Header-only builds use Debug (-O0):
# they check that everything compiles and links, and -O0 keeps CI quick.
file(REMOVE_RECURSE ${WORK})
function(check rc what)
  if(rc)
    message(FATAL_ERROR "${what} failed: ${rc}")
  endif()
endfunction()

if(KIND MATCHES "^find_package")
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${BIN} --prefix ${WORK}/prefix RESULT_VARIABLE rc OUTPUT_QUIET)
  check("${rc}" "cmake --install")
  set(target oar::oar)
  set(type Release)
  if(KIND STREQUAL "find_package_header_only")
    set(target oar::header_only)
    set(type Debug)
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC}/tests/install/consumer -B ${WORK}/build -DCMAKE_PREFIX_PATH=${WORK}/prefix
    -DCMAKE_BUILD_TYPE=${type} -DOAR_TARGET=${target} RESULT_VARIABLE rc)
  check("${rc}" "configuring the consumer")
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build RESULT_VARIABLE rc)
  check("${rc}" "building the consumer")
  set(exe ${WORK}/build/consumer)
elseif(KIND STREQUAL "add_subdirectory")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC}/tests/install/subdirectory -B ${WORK}/build -DOAR_SRC=${SRC}
    -DCMAKE_BUILD_TYPE=Debug RESULT_VARIABLE rc)
  check("${rc}" "configuring the project")
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build -j2 RESULT_VARIABLE rc)
  check("${rc}" "building the project")
  set(exe ${WORK}/build/consumer)
elseif(KIND STREQUAL "command_line")
  file(MAKE_DIRECTORY ${WORK})
  set(eigen "")
  foreach(d ${EIGEN})
    list(APPEND eigen -I${d})
  endforeach()
  set(cmd ${CXX} -std=c++20 -I${SRC}/include -I${SRC} ${eigen} ${SRC}/tests/install/consumer/main.cpp
      -o ${WORK}/consumer -lprotobuf -lfmt -lz -pthread)
  string(JOIN " " shown ${cmd})
  message(STATUS "${shown}")
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc)
  check("${rc}" "compiling with the command line alone")
  set(exe ${WORK}/consumer)
else()
  message(FATAL_ERROR "unknown KIND '${KIND}'")
endif()

execute_process(COMMAND ${exe} RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "${out}")
if(rc OR NOT out MATCHES "consumer ok")
  message(FATAL_ERROR "the consumer did not run: ${rc} ${out}")
endif()
