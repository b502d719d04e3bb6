# OarCuda.cmake: the CUDA backend (kernels/cuda -> oar_cuda), built only when the toolkit is found.
# NOTE: CMake 3.25 fails to configure with CMAKE_CUDA_STANDARD 20; the flag is passed as an option instead.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80 90)
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
add_subdirectory(${PROJECT_SOURCE_DIR}/kernels/cuda ${PROJECT_BINARY_DIR}/kernels/cuda)
target_compile_definitions(oar_header_only INTERFACE OAR_WITH_CUDA=1)
target_link_libraries(oar_header_only INTERFACE oar_cuda)
