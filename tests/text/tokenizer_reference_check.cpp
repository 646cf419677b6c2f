// Reference identity check and encode benchmark for the tokenizer. Reads a corpus
// (build_corpus.py format) and the reference ids (reference_encode.mjs JSONL), encodes every
// document in-process and compares; also checks decode(encode(x)) == NFC(x) for valid UTF-8
// documents (the Qwen tokenizer normalizes to NFC, so that is x itself for NFC text).
//
// usage: tokenizer_reference_check --model DIR --corpus C.bin --expected E.jsonl
//          [--expected-plain P.jsonl] [--bench]
// Exit status 0 when every document matches. --bench prints encode MB/s (one thread).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/normalizer.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

using beam::text::TokenId;
using beam::text::Tokenizer;
using Clock = std::chrono::steady_clock;

// CPU seconds of the calling thread: throughput on one core, whatever else the machine runs.
double thread_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    std::exit(2);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> read_corpus(const std::string& path) {
  const std::string data = read_file(path);
  std::vector<std::string> docs;
  for (size_t pos = 0; pos + 4 <= data.size();) {
    uint32_t len;
    std::memcpy(&len, data.data() + pos, 4);
    docs.push_back(data.substr(pos + 4, len));
    pos += 4 + len;
  }
  return docs;
}

// One JSON array (or null → empty optional marker) per line.
std::vector<std::optional<std::vector<TokenId>>> read_jsonl(const std::string& path) {
  std::vector<std::optional<std::vector<TokenId>>> rows;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.is_null()) {
      rows.emplace_back();
    } else {
      rows.emplace_back(j.get<std::vector<TokenId>>());
    }
  }
  return rows;
}

std::string show_tokens(const Tokenizer& tok, const std::vector<TokenId>& ids, size_t from, size_t count) {
  std::string out;
  for (size_t i = from; i < ids.size() && i < from + count; ++i) {
    auto text = tok.decode(std::span<const TokenId>(&ids[i], 1), false);
    out += std::to_string(ids[i]) + ":" + nlohmann::json(text.ok() ? beam::text::to_valid_utf8(*text) : "?").dump() + " ";
  }
  return out;
}

// Compares and prints the first difference; returns true on a match.
bool compare(const Tokenizer& tok, size_t doc, const std::vector<TokenId>& got,
             const std::vector<TokenId>& want, const char* mode) {
  if (got == want) return true;
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i >= 3 ? i - 3 : 0;
  std::fprintf(stderr, "MISMATCH doc %zu (%s) at token %zu of %zu/%zu\n  beamserve: %s\n  reference: %s\n", doc,
               mode, i, got.size(), want.size(), show_tokens(tok, got, from, 8).c_str(),
               show_tokens(tok, want, from, 8).c_str());
  return false;
}

struct Flags {
  std::string model, corpus, expected, expected_plain;
  bool bench = false;
};

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model") f.model = value();
    else if (a == "--corpus") f.corpus = value();
    else if (a == "--expected") f.expected = value();
    else if (a == "--expected-plain") f.expected_plain = value();
    else if (a == "--bench") f.bench = true;
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      std::exit(2);
    }
  }
  if (f.model.empty() || f.corpus.empty() || f.expected.empty()) {
    std::fprintf(stderr, "usage: tokenizer_reference_check --model DIR --corpus C.bin --expected E.jsonl "
                         "[--expected-plain P.jsonl] [--bench]\n");
    std::exit(2);
  }
  return f;
}

// Encodes every document (allow_special) and measures the pass; nullopt if an encode fails.
struct Pass {
  std::vector<std::vector<TokenId>> ids;
  double wall_seconds = 0, cpu_seconds = 0;
};
std::optional<Pass> encode_all(const Tokenizer& tok, const std::vector<std::string>& docs) {
  Pass pass;
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  for (size_t d = 0; d < docs.size(); ++d) {
    auto ids = tok.encode(docs[d], /*allow_special=*/true);
    if (!ids.ok()) {
      std::fprintf(stderr, "doc %zu: %s\n", d, ids.error().message.c_str());
      return std::nullopt;
    }
    pass.ids.push_back(std::move(ids).value());
  }
  pass.wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  pass.cpu_seconds = thread_cpu_seconds() - cpu0;
  return pass;
}

// decode(encode(x)) == NFC(x) for every valid UTF-8 document; returns the number of failures.
size_t check_roundtrip(const Tokenizer& tok, const std::vector<std::string>& docs, const Pass& pass,
                       size_t& num_valid, size_t& num_not_nfc) {
  const beam::text::Normalizer nfc_normalizer({beam::text::NormalizationForm::kNfc});
  size_t failures = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    if (!beam::text::is_valid_utf8(docs[d])) continue;
    ++num_valid;
    std::string scratch;
    const std::string nfc(nfc_normalizer.normalize(docs[d], scratch));
    num_not_nfc += nfc != docs[d];
    auto text = tok.decode(pass.ids[d], /*skip_special=*/false);
    if (!text.ok() || *text != nfc) {
      ++failures;
      std::fprintf(stderr, "ROUNDTRIP doc %zu: decode(encode(x)) != NFC(x)\n", d);
    }
  }
  return failures;
}

// Documents with a reference line in `plain_path`, encoded with special tokens as plain text.
size_t check_plain(const Tokenizer& tok, const std::vector<std::string>& docs, const std::string& plain_path,
                   size_t& num_checked) {
  size_t mismatches = 0;
  const auto plain = read_jsonl(plain_path);
  for (size_t d = 0; d < docs.size() && d < plain.size(); ++d) {
    if (!plain[d]) continue;
    ++num_checked;
    auto ids = tok.encode(docs[d], /*allow_special=*/false);
    if (!ids.ok() || !compare(tok, d, *ids, *plain[d], "special tokens as text")) ++mismatches;
  }
  return mismatches;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  auto tok = Tokenizer::load(flags.model);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.error().message.c_str());
    return 1;
  }
  const auto docs = read_corpus(flags.corpus);
  const auto expected = read_jsonl(flags.expected);
  if (expected.size() != docs.size()) {
    std::fprintf(stderr, "%zu documents but %zu reference lines\n", docs.size(), expected.size());
    return 1;
  }
  size_t total_bytes = 0;
  for (const auto& doc : docs) total_bytes += doc.size();
  const auto first = encode_all(*tok, docs);
  if (!first) return 1;
  size_t mismatches = 0, num_valid = 0, num_not_nfc = 0, plain_checked = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    if (!expected[d] || !compare(*tok, d, first->ids[d], *expected[d], "special tokens allowed")) ++mismatches;
  }
  const size_t roundtrip_failures = check_roundtrip(*tok, docs, *first, num_valid, num_not_nfc);
  if (!flags.expected_plain.empty()) mismatches += check_plain(*tok, docs, flags.expected_plain, plain_checked);
  std::printf("tokenizer identity: %zu documents (%.2f MB), %zu mismatches; %zu special-as-text checks; "
              "roundtrip %zu/%zu valid-UTF-8 documents ok (%zu not in NFC)\n",
              docs.size(), total_bytes / 1e6, mismatches, plain_checked, num_valid - roundtrip_failures, num_valid,
              num_not_nfc);
  if (flags.bench) {
    const auto warm = encode_all(*tok, docs);  // the word cache is filled now
    if (!warm) return 1;
    const double mb = total_bytes / 1e6;
    std::printf("beamserve encode (one thread): first pass %.2f MB/s wall, %.2f MB/s CPU; "
                "warm pass %.2f MB/s wall, %.2f MB/s CPU\n",
                mb / first->wall_seconds, mb / first->cpu_seconds, mb / warm->wall_seconds, mb / warm->cpu_seconds);
  }
  return mismatches == 0 && roundtrip_failures == 0 ? 0 : 1;
}
