# tests/layering/model_unit_includes.cmake: in the compiled mode (OAR_LIB) a model unit includes the headers
# only: <oar/oar.hpp> must reach no kernel, no Eigen, no protobuf, no op list and no -inl.hpp (docs/building.md).
# cmake -DCXX=<compiler> -DFLAGS="<include and define flags>" -DWORK=<scratch folder> -P model_unit_includes.cmake
separate_arguments(flags UNIX_COMMAND "${FLAGS}")
file(WRITE ${WORK}/model_unit.cpp "#include <oar/oar.hpp>\n")  # -H lists nothing for a -include'd header
execute_process(COMMAND ${CXX} -std=c++20 -DOAR_LIB ${flags} -H -E ${WORK}/model_unit.cpp
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE tree)
if(rc)
  message(FATAL_ERROR "oar/oar.hpp does not preprocess in the compiled mode:\n${tree}")
endif()
string(REGEX MATCHALL "[^\n]*(/Eigen/|/google/protobuf/|/kernels/|-inl\\.hpp|/ops/op_list\\.hpp|immintrin)[^\n]*" bad "${tree}")
if(bad)
  list(JOIN bad "\n" text)
  message(FATAL_ERROR "a model unit in the compiled mode includes what only liboar should (the dots are the include depth):\n${text}")
endif()
string(REGEX MATCHALL "\n\\.+ " lines "\n${tree}")
list(LENGTH lines n)
message(STATUS "oar/oar.hpp in the compiled mode: ${n} headers, none of them kernels, Eigen, protobuf or implementation files")
