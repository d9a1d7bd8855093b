# aoti_debug_find_torch(): find_package(Torch REQUIRED) that also works with a
# CUDA build of torch on a machine without the CUDA toolkit.
#
# libtorch's CMake config of a CUDA build (the wheels the registry installs by
# default) looks for the CUDA toolkit and stops when it is missing ("Your
# installed Caffe2 version uses CUDA but I cannot find the CUDA libraries").
# A program that only calls libtorch's C++ API, as aoti-debug-run and a C++
# server loading a .pt2 do, compiles no CUDA code and needs none of the toolkit:
# libtorch_cuda.so finds the CUDA runtime it was built with through its own
# RPATH.  So when the toolkit is missing, the one target of the toolkit that
# libtorch's libraries name in their link interface, torch::cudart, is defined
# empty beforehand; libtorch's config then skips its toolkit search (its
# public/cuda.cmake returns at once when torch::cudart exists) and everything
# else is found as usual.  The program links the same libraries either way and
# loads CPU and CUDA packages alike.
#
#   AOTI_DEBUG_TORCH_CUDA=AUTO (default)  the toolkit when libtorch's own search finds it
#                                         with the NVRTC library libtorch's config links,
#                                         else the above ("for CPU use": no CUDA compilation)
#   AOTI_DEBUG_TORCH_CUDA=ON              libtorch's own search, which stops when it fails
#   AOTI_DEBUG_TORCH_CUDA=OFF             the above, even where a toolkit is installed
#
# Afterwards TORCH_LIBRARIES, TORCH_INCLUDE_DIRS, TORCH_CXX_FLAGS are those of
# find_package(Torch), and AOTI_DEBUG_TORCH_WITH_TOOLKIT says which way it went;
# a program linking ${TORCH_LIBRARIES} is compiled with at least the C++
# standard torch's headers need (C++20 from torch 2.14 on).
# A CPU build of torch is plain find_package(Torch).

set(AOTI_DEBUG_TORCH_CUDA "AUTO" CACHE STRING
    "A CUDA build of torch: AUTO uses the CUDA toolkit when found, OFF never needs it, ON requires it")
set_property(CACHE AOTI_DEBUG_TORCH_CUDA PROPERTY STRINGS AUTO ON OFF)

macro(aoti_debug_find_torch)
  _aoti_debug_torch_needs_toolkit_stub(_aoti_debug_stub)
  if(_aoti_debug_stub AND NOT TARGET torch::cudart)
    add_library(torch::cudart INTERFACE IMPORTED)
  endif()
  find_package(Torch REQUIRED)
  # torch 2.14's config puts the C++ standard its headers need (20) in the
  # imported target's CXX_STANDARD, which does not reach the programs that link
  # it (2.15 makes it a compile feature they inherit): make it one.
  if(TARGET torch)
    get_target_property(_aoti_debug_torch_std torch CXX_STANDARD)
    if(_aoti_debug_torch_std MATCHES "^[0-9]+$")
      target_compile_features(torch INTERFACE cxx_std_${_aoti_debug_torch_std})
    endif()
  endif()
endmacro()

# Sets `out` to TRUE when torch is a CUDA build whose toolkit is not to be (or
# cannot be) used.  Only finds files: nothing here can stop the configure step.
function(_aoti_debug_torch_needs_toolkit_stub out)
  set(${out} FALSE PARENT_SCOPE)
  set(AOTI_DEBUG_TORCH_WITH_TOOLKIT FALSE PARENT_SCOPE)
  string(TOUPPER "${AOTI_DEBUG_TORCH_CUDA}" _mode)
  if(NOT _mode MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "aoti_debug: AOTI_DEBUG_TORCH_CUDA='${AOTI_DEBUG_TORCH_CUDA}' is not valid: "
                        "expected AUTO, ON or OFF")
  endif()
  if(TARGET torch::cudart)          # libtorch's config has run already (or someone defined it)
    return()
  endif()
  # Where find_package(Torch) will look: Torch_DIR, then the prefix paths
  # (torch.utils.cmake_prefix_path is .../torch/share/cmake; a libtorch
  # archive's prefix is its top folder).
  string(REPLACE ":" ";" _env_prefixes "$ENV{CMAKE_PREFIX_PATH}")
  set(_config "")
  foreach(_dir ${Torch_DIR} $ENV{Torch_DIR} ${CMAKE_PREFIX_PATH} ${_env_prefixes})
    foreach(_suffix "" "/Torch" "/share/cmake/Torch")
      if(NOT _config AND EXISTS "${_dir}${_suffix}/TorchConfig.cmake")
        set(_config "${_dir}${_suffix}/TorchConfig.cmake")
      endif()
    endforeach()
  endforeach()
  if(NOT _config)
    return()                        # find_package(Torch) says what is missing
  endif()
  get_filename_component(_torch_dir "${_config}" DIRECTORY)
  get_filename_component(_prefix "${_torch_dir}/../../.." ABSOLUTE)
  file(GLOB _cuda_libs "${_prefix}/lib/*torch_cuda.*")
  if(NOT _cuda_libs)
    return()                        # a CPU build: nothing to decide
  endif()
  if(_mode STREQUAL "ON")
    set(AOTI_DEBUG_TORCH_WITH_TOOLKIT TRUE PARENT_SCOPE)
    return()
  endif()
  if(_mode STREQUAL "AUTO")
    # the same search libtorch's config makes (Caffe2/public/cuda.cmake), with
    # the same FindCUDA module, so that both come to the same answer
    set(CMAKE_MODULE_PATH ${CMAKE_MODULE_PATH} "${_torch_dir}/../Caffe2/Modules_CUDA_fix")
    find_package(CUDA QUIET)
    if(CUDA_FOUND AND CUDA_nvrtc_LIBRARY)   # libtorch's config links NVRTC too
      message(STATUS "aoti_debug: torch is a CUDA build; using the CUDA toolkit in ${CUDA_TOOLKIT_ROOT_DIR}")
      set(AOTI_DEBUG_TORCH_WITH_TOOLKIT TRUE PARENT_SCOPE)
      return()
    endif()
    if(CUDA_FOUND)
      set(_why "the CUDA toolkit in ${CUDA_TOOLKIT_ROOT_DIR} has no NVRTC library")
    else()
      set(_why "no CUDA toolkit was found")
    endif()
  else()
    set(_why "AOTI_DEBUG_TORCH_CUDA=OFF")
  endif()
  message(STATUS "aoti_debug: torch is a CUDA build and ${_why}: building for CPU use "
                 "(libtorch's CUDA libraries are linked as they are; no CUDA code is compiled)")
  set(${out} TRUE PARENT_SCOPE)
endfunction()
