# embed_descriptor.cmake: writes framework.proto's descriptor (protoc --descriptor_set_out) as a C++ byte array,
# so that oar reads and writes its messages through protobuf's reflection with no generated code to compile
# or link. Run with -DPROTOC=<protoc> -DSRC=<oar source dir> -DOUT=<header to write>.
set(proto ${SRC}/include/oar/ir/framework.proto)
set(tmp ${OUT}.descriptor)
execute_process(COMMAND ${PROTOC} --descriptor_set_out=${tmp} -I ${SRC}/include ${proto} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "protoc failed on ${proto}: ${rc}")
endif()
file(READ ${tmp} hex HEX)
file(REMOVE ${tmp})
string(LENGTH "${hex}" n)
set(body "")
set(line "")
math(EXPR last "${n} - 2")
foreach(i RANGE 0 ${last} 2)
  string(SUBSTRING "${hex}" ${i} 2 byte)
  string(APPEND line "0x${byte},")
  string(LENGTH "${line}" len)
  if(len GREATER 100)
    string(APPEND body "    ${line}\n")
    set(line "")
  endif()
endforeach()
if(line)
  string(APPEND body "    ${line}\n")
endif()
math(EXPR bytes "${n} / 2")
file(WRITE ${OUT} "// oar/ir/framework_descriptor.hpp: GENERATED from framework.proto by cmake/embed_descriptor.cmake (the
// target `oar_update_descriptor` rewrites it; the test `framework_descriptor` checks it is current). Do not edit.
// A FileDescriptorSet holding framework.proto: ir/wire-inl.hpp builds its message types from it at run time.
#pragma once

namespace oar::detail {

inline constexpr unsigned char kFrameworkDescriptor[${bytes}] = {
${body}};

}  // namespace oar::detail
")
if(CHECK)
  file(READ ${OUT} made)
  file(READ ${CHECK} kept)
  if(NOT made STREQUAL kept)
    message(FATAL_ERROR "${CHECK} is not what framework.proto gives: run `cmake --build <build> --target oar_update_descriptor`")
  endif()
  message(STATUS "framework_descriptor.hpp matches framework.proto")
endif()
