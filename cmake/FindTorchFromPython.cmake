# Finds libtorch through the installed Python torch unless CMAKE_PREFIX_PATH already has it.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c "import torch; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE SOFTALIGN_TORCH_PREFIX
    OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE SOFTALIGN_TORCH_FOUND)
  if(SOFTALIGN_TORCH_FOUND EQUAL 0)
    list(APPEND CMAKE_PREFIX_PATH "${SOFTALIGN_TORCH_PREFIX}")
  endif()
endif()
