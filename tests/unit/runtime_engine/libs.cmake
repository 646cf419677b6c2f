# beam-nano's tokenizer (text), and the server's structured-output vocabulary for the
# constrained-decoding tests.
target_link_libraries(${dir}_tests PRIVATE beamserve_text beamserve_server)
# The LoRA tests write PEFT adapters with the model tests' safetensors writer.
target_sources(${dir}_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/model/test_checkpoint_writer.cpp)
