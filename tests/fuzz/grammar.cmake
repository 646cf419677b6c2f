# libFuzzer target for the structured-output compilers (src/runtime/structured: grammars, JSON
# schemas, regexes, structural tags; tests/fuzz/grammar_fuzz.cpp), included from
# tests/CMakeLists.txt after template.cmake (which finds clang and defines beamserve_libfuzzer).
# Run for ~20 s under ctest (test "grammar_fuzz") from the seeds in grammar_seeds/.
if(NOT BEAMSERVE_FUZZ_CLANGXX)
  return()
endif()

# The compilers and matchers; not the parts that need a vocabulary (masks, tries, constraints).
file(GLOB grammar_fuzz_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/runtime/structured/*.cpp)
list(FILTER grammar_fuzz_sources EXCLUDE REGEX
     "/(regex_mask_cache|token_trie|vocab_index|output_constraint|pattern_mask_cache)\\.cpp$")
file(GLOB grammar_fuzz_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/runtime/structured/*.h)
foreach(name large_stack strongly_connected logging utf8_decode)
  list(APPEND grammar_fuzz_sources ${CMAKE_SOURCE_DIR}/src/core/${name}.cpp)
  list(APPEND grammar_fuzz_headers ${CMAKE_SOURCE_DIR}/src/core/${name}.h)
endforeach()
list(APPEND grammar_fuzz_sources ${CMAKE_CURRENT_LIST_DIR}/grammar_fuzz.cpp)
beamserve_libfuzzer(grammar_fuzz SOURCES ${grammar_fuzz_sources}
                    HEADERS ${grammar_fuzz_headers} LIBS -lpthread)

beamserve_seeded_fuzz_test(grammar_fuzz ${CMAKE_CURRENT_LIST_DIR}/grammar_seeds)
