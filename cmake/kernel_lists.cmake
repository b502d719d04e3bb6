# cmake/kernel_lists.cmake: writes kernels/cpu/all.hpp and kernels/cuda/all.hpp, the headers that the unit
# building the kernel registry includes (src/kernels.cpp, or a header-only unit), from the headers in those
# folders. An op's struct declares eval_cpu / eval_cuda and its kernel header defines them, so a new kernel
# header needs no list edited by hand: configuring writes the lists again (only when they change). They stay
# in the repository, for header-only builds from a compiler command line alone.
#   include(kernel_lists) from the top CMakeLists.txt, or: cmake -DSRC=<repo> -P cmake/kernel_lists.cmake
function(oar_write_kernel_list src folder what)
  if(CMAKE_SCRIPT_MODE_FILE)
    file(GLOB headers RELATIVE ${src} ${src}/kernels/${folder}/*.hpp)
  else()  # a header added later makes the build configure again
    file(GLOB headers RELATIVE ${src} CONFIGURE_DEPENDS ${src}/kernels/${folder}/*.hpp)
  endif()
  list(REMOVE_ITEM headers kernels/${folder}/all.hpp)
  list(FILTER headers EXCLUDE REGEX "_launch\\.hpp$")  # a .cu's launcher declarations: its host header includes them
  list(SORT headers)
  set(text "// kernels/${folder}/all.hpp: ${what}\n// Written by cmake/kernel_lists.cmake from the headers of this folder: do not edit.\n#pragma once\n")
  foreach(h ${headers})
    string(APPEND text "#include \"${h}\"\n")
  endforeach()
  set(out ${src}/kernels/${folder}/all.hpp)
  set(old "")
  if(EXISTS ${out})
    file(READ ${out} old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE ${out} "${text}")
    message(STATUS "oar: wrote kernels/${folder}/all.hpp")
  endif()
endfunction()

if(NOT SRC)
  set(SRC ${PROJECT_SOURCE_DIR})
endif()
oar_write_kernel_list(${SRC} cpu "every CPU kernel header (eval_cpu / eval_grad_cpu and what they use).")
oar_write_kernel_list(${SRC} cuda "the host side of every CUDA kernel (eval_cuda / eval_grad_cuda); the device\n// side is the .cu files of this folder, in the oar_cuda library.")
