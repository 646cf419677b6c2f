# libFuzzer target for a model folder's config.json and safetensors headers (src/model: the config
# parser and everything computed from a config alone, the safetensors reader;
# tests/fuzz/checkpoint_fuzz.cpp), included from tests/CMakeLists.txt after template.cmake (which
# finds clang and defines beamserve_libfuzzer). Run for ~20 s under ctest (test "checkpoint_fuzz")
# from the seeds in checkpoint_seeds/ (the repository's model configs, a small safetensors file).
if(NOT BEAMSERVE_FUZZ_CLANGXX)
  return()
endif()

set(checkpoint_fuzz_sources)
set(checkpoint_fuzz_headers)
foreach(name config config_keys param_count memory_plan safetensors mapped_file lora_adapter
             tensor_convert)
  list(APPEND checkpoint_fuzz_sources ${CMAKE_SOURCE_DIR}/src/model/${name}.cpp)
  list(APPEND checkpoint_fuzz_headers ${CMAKE_SOURCE_DIR}/src/model/${name}.h)
endforeach()
list(APPEND checkpoint_fuzz_sources ${CMAKE_SOURCE_DIR}/src/core/logging.cpp
     ${CMAKE_CURRENT_LIST_DIR}/checkpoint_fuzz.cpp)
beamserve_libfuzzer(checkpoint_fuzz SOURCES ${checkpoint_fuzz_sources}
                    HEADERS ${checkpoint_fuzz_headers} LIBS -lpthread)

beamserve_seeded_fuzz_test(checkpoint_fuzz ${CMAKE_CURRENT_LIST_DIR}/checkpoint_seeds)
