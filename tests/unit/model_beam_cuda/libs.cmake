# The GPU forward-pass tests reuse the CPU tests' helpers (golden loading, chunked runs, PEFT
# adapters written for the LoRA tests, logits
# comparison) and the engine test helpers, compiled in rather than copied; the engine test needs
# the runtime, beam-nano's tokenizer and the server's structured-output vocabulary.
target_sources(${dir}_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/model_beam/beam_test_util.cpp
               ${CMAKE_CURRENT_SOURCE_DIR}/unit/model_beam/beam_goldens.cpp
               ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_engine/engine_test_util.cpp
               ${CMAKE_CURRENT_SOURCE_DIR}/unit/model/test_checkpoint_writer.cpp)
target_link_libraries(${dir}_tests PRIVATE beamserve_runtime beamserve_text beamserve_server)
