# libFuzzer target for the chat-template engine (src/text/jinja), included from tests/CMakeLists.txt.
# Built with clang (-fsanitize=fuzzer,address,undefined) whatever compiler builds the project, and
# run for ~20 s under ctest (test "template_fuzz"). Without clang++ it is skipped with a message.
find_program(BEAMSERVE_FUZZ_CLANGXX NAMES clang++ clang++-14 clang++-15 clang++-16)
if(NOT BEAMSERVE_FUZZ_CLANGXX)
  message(STATUS "clang++ not found: template_fuzz (libFuzzer) is not built; install clang to enable it")
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/libfuzzer.cmake)

file(GLOB template_fuzz_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/text/jinja/*.cpp)
file(GLOB template_fuzz_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/text/jinja/*.h)
# text/utf8.cpp: the UTF-8 encoder the engine shares with the tokenizer (and core's decoder).
list(APPEND template_fuzz_sources ${CMAKE_SOURCE_DIR}/src/text/utf8.cpp ${CMAKE_SOURCE_DIR}/src/core/utf8_decode.cpp
     ${CMAKE_CURRENT_LIST_DIR}/template_fuzz.cpp)
list(APPEND template_fuzz_headers ${CMAKE_SOURCE_DIR}/src/text/utf8.h ${CMAKE_SOURCE_DIR}/src/core/utf8_decode.h)
beamserve_libfuzzer(template_fuzz SOURCES ${template_fuzz_sources}
                    HEADERS ${template_fuzz_headers} LIBS -lutf8proc)

add_test(NAME template_fuzz
         COMMAND ${CMAKE_COMMAND} -DFUZZER=${template_fuzz_binary} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/fuzz/template_fuzz_work -DSECONDS=20
                 -P ${CMAKE_CURRENT_LIST_DIR}/template_fuzz_run.cmake)
set_tests_properties(template_fuzz PROPERTIES TIMEOUT 180)
