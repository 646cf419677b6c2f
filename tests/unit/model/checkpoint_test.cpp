// Safetensors reader and Checkpoint: well-formed layouts load identically; every malformed
// file is an error naming the file, the tensor and the problem.
#include "model/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <initializer_list>

#include "test_checkpoint_writer.h"

namespace beam {
namespace {

using test::TestTensor;

std::vector<TestTensor> sample_tensors() {
  return {test::random_tensor("a.weight", "BF16", {3, 5}, 1),
          test::random_tensor("b.weight", "F16", {7}, 2),
          test::random_tensor("c.router", "F32", {2, 3, 4}, 3),
          test::random_tensor("d.scalar", "F32", {}, 4),
          test::random_tensor("e.empty", "BF16", {0, 4}, 5)};
}

// Every sample tensor is present with its dtype, shape and bytes.
void expect_matches(const Checkpoint& ckpt, const std::vector<TestTensor>& tensors) {
  ASSERT_EQ(ckpt.num_tensors(), tensors.size());
  for (const TestTensor& t : tensors) {
    auto r = ckpt.get(t.name);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(safetensors_dtype_name(r->dtype), t.dtype) << t.name;
    ASSERT_EQ(r->shape.rank, static_cast<int>(t.shape.size())) << t.name;
    for (size_t d = 0; d < t.shape.size(); ++d) EXPECT_EQ(r->shape[d], t.shape[d]) << t.name;
    ASSERT_EQ(r->nbytes, t.bytes.size()) << t.name;
    if (!t.bytes.empty()) {
      EXPECT_EQ(std::memcmp(r->data, t.bytes.data(), r->nbytes), 0) << t.name;
    }
  }
}

// Opening `dir` fails with a message containing every part.
void expect_open_error(const std::string& dir, std::initializer_list<std::string> parts) {
  auto r = Checkpoint::open(dir);
  ASSERT_FALSE(r.ok()) << "opened a malformed checkpoint; expected an error with " << *parts.begin();
  for (const std::string& p : parts) {
    EXPECT_NE(r.error().message.find(p), std::string::npos) << "'" << p << "' not in: " << r.error().message;
  }
}

// A directory whose model.safetensors has `header` and `data`.
std::string raw_checkpoint(const std::string& name, const std::string& header, std::vector<uint8_t> data = {}) {
  std::string dir = test::make_temp_dir(name);
  test::write_raw_safetensors(dir + "/model.safetensors", header, data);
  return dir;
}

TEST(CheckpointTest, SingleFileLoads) {
  std::string dir = test::make_temp_dir("ckpt_single");
  auto tensors = sample_tensors();
  test::write_safetensors(dir + "/model.safetensors", tensors);
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
  expect_matches(*ckpt, tensors);
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"a.weight", "b.weight", "c.router", "d.scalar", "e.empty"}));
  EXPECT_EQ(ckpt->get("a.weight")->file, dir + "/model.safetensors");
  auto bytes = ckpt->bytes_by_dtype();
  EXPECT_EQ(bytes[DType::kBF16], 30u);
  EXPECT_EQ(bytes[DType::kF16], 14u);
  EXPECT_EQ(bytes[DType::kF32], 100u);
  EXPECT_TRUE(Checkpoint::exists(dir));
}

TEST(CheckpointTest, OrderPaddingAndMetadataDoNotMatter) {
  auto tensors = sample_tensors();
  std::vector<test::WriteOptions> variants(5);
  variants[0].shuffle_seed = 17;
  variants[1].header_padding = 64;
  variants[2].header_padding = 3;
  variants[2].align_header = false;  // data section starts at an odd offset
  variants[3].metadata = true;
  variants[4] = {.header_padding = 5, .align_header = false, .metadata = true, .shuffle_seed = 3};
  for (size_t i = 0; i < variants.size(); ++i) {
    std::string dir = test::make_temp_dir("ckpt_variant" + std::to_string(i));
    test::write_safetensors(dir + "/model.safetensors", tensors, variants[i]);
    auto ckpt = Checkpoint::open(dir);
    ASSERT_TRUE(ckpt.ok()) << "variant " << i << ": " << ckpt.error().message;
    expect_matches(*ckpt, tensors);
  }
}

TEST(CheckpointTest, ShardSplitsLoadIdentically) {
  auto tensors = sample_tensors();
  std::vector<std::vector<int>> splits = {{0, 0, 0, 0, 0}, {0, 1, 0, 1, 0}, {2, 1, 0, 2, 1}, {0, 1, 2, 3, 4}};
  for (size_t i = 0; i < splits.size(); ++i) {
    std::string dir = test::make_temp_dir("ckpt_shards" + std::to_string(i));
    test::write_sharded(dir, tensors, splits[i], {.header_padding = i, .align_header = i % 2 == 0,
                                                  .metadata = true, .shuffle_seed = static_cast<uint32_t>(i)});
    auto ckpt = Checkpoint::open(dir);
    ASSERT_TRUE(ckpt.ok()) << "split " << i << ": " << ckpt.error().message;
    expect_matches(*ckpt, tensors);
    EXPECT_TRUE(ckpt->get("c.router")->file.find("-of-") != std::string::npos);
  }
}

TEST(CheckpointTest, MissingCheckpointNamesDirectory) {
  std::string dir = test::make_temp_dir("ckpt_none");
  EXPECT_FALSE(Checkpoint::exists(dir));
  expect_open_error(dir, {dir, "model.safetensors", "model.safetensors.index.json"});
}

TEST(CheckpointTest, GetUnknownTensorNamesIt) {
  std::string dir = test::make_temp_dir("ckpt_get");
  test::write_safetensors(dir + "/model.safetensors", sample_tensors());
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.ok());
  auto r = ckpt->get("nope.weight");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("'nope.weight'"), std::string::npos);
  EXPECT_EQ(ckpt->find("nope.weight"), nullptr);
}

TEST(CheckpointTest, FileShorterThanHeaderLength) {
  std::string dir = test::make_temp_dir("ckpt_short");
  test::write_text_file(dir + "/model.safetensors", "");
  expect_open_error(dir, {"model.safetensors", "truncated", "0 bytes"});
  test::write_text_file(dir + "/model.safetensors", "abc");
  expect_open_error(dir, {"model.safetensors", "truncated", "3 bytes"});
}

TEST(CheckpointTest, HeaderLengthPastEndOfFile) {
  std::string dir = test::make_temp_dir("ckpt_past_eof");
  std::string bytes(8, '\0');
  bytes[0] = 100;  // claims a 100-byte header
  test::write_text_file(dir + "/model.safetensors", bytes + "{\"a\":1}");
  expect_open_error(dir, {"model.safetensors", "truncated", "header length 100"});
  bytes.assign(8, '\xff');  // 2^64 - 1
  test::write_text_file(dir + "/model.safetensors", bytes);
  expect_open_error(dir, {"model.safetensors", "truncated"});
}

TEST(CheckpointTest, HeaderNotJson) {
  expect_open_error(raw_checkpoint("ckpt_badjson", "{\"a\": {\"dtype\": "), {"model.safetensors", "not valid JSON"});
  expect_open_error(raw_checkpoint("ckpt_binary", std::string("\x01\x02\x03", 3)), {"not valid JSON"});
}

TEST(CheckpointTest, HeaderNotAnObject) {
  expect_open_error(raw_checkpoint("ckpt_array", "[1, 2, 3]"), {"model.safetensors", "must be a JSON object", "array"});
}

TEST(CheckpointTest, EntryNotAnObject) {
  expect_open_error(raw_checkpoint("ckpt_entry", R"({"w": 5})"), {"model.safetensors", "tensor 'w'", "must be an object"});
}

TEST(CheckpointTest, EntryMissingFields) {
  expect_open_error(raw_checkpoint("ckpt_nodtype", R"({"w": {"shape": [2], "data_offsets": [0, 4]}})", {0, 0, 0, 0}),
                    {"tensor 'w'", "missing 'dtype'"});
  expect_open_error(raw_checkpoint("ckpt_noshape", R"({"w": {"dtype": "BF16", "data_offsets": [0, 4]}})", {0, 0, 0, 0}),
                    {"tensor 'w'", "missing 'shape'"});
  expect_open_error(raw_checkpoint("ckpt_nooffs", R"({"w": {"dtype": "BF16", "shape": [2]}})", {0, 0, 0, 0}),
                    {"tensor 'w'", "missing 'data_offsets'"});
}

TEST(CheckpointTest, EntryFieldsOfWrongType) {
  std::vector<uint8_t> four(4, 0);
  expect_open_error(raw_checkpoint("ckpt_t1", R"({"w": {"dtype": 5, "shape": [2], "data_offsets": [0, 4]}})", four),
                    {"tensor 'w'", "dtype 5"});
  expect_open_error(raw_checkpoint("ckpt_t2", R"({"w": {"dtype": "BF16", "shape": "2", "data_offsets": [0, 4]}})", four),
                    {"tensor 'w'", "shape \"2\""});
  expect_open_error(raw_checkpoint("ckpt_t3", R"({"w": {"dtype": "BF16", "shape": [-2], "data_offsets": [0, 4]}})", four),
                    {"tensor 'w'", "non-negative"});
  expect_open_error(raw_checkpoint("ckpt_t4", R"({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [4]}})", four),
                    {"tensor 'w'", "data_offsets [4]"});
  expect_open_error(raw_checkpoint("ckpt_t5", R"({"w": {"dtype": "BF16", "shape": [2], "data_offsets": ["0", 4]}})", four),
                    {"tensor 'w'", "data_offsets"});
  expect_open_error(raw_checkpoint("ckpt_t6", R"({"w": {"dtype": "BF16", "shape": [1,1,1,1,2], "data_offsets": [0, 4]}})", four),
                    {"tensor 'w'", "rank 5"});
}

TEST(CheckpointTest, UnsupportedDtype) {
  expect_open_error(raw_checkpoint("ckpt_fp8", R"({"w": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}})",
                                   std::vector<uint8_t>(4)),
                    {"model.safetensors", "tensor 'w'", "unsupported dtype 'F8_E4M3'"});
  expect_open_error(raw_checkpoint("ckpt_i64", R"({"w": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})",
                                   std::vector<uint8_t>(8)),
                    {"tensor 'w'", "unsupported dtype 'I64'"});
}

TEST(CheckpointTest, OffsetsOutOfRange) {
  expect_open_error(raw_checkpoint("ckpt_range", R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
                                   std::vector<uint8_t>(12)),
                    {"model.safetensors", "tensor 'w'", "past the end of the 12-byte data section"});
  expect_open_error(raw_checkpoint("ckpt_huge", R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551612, 18446744073709551615]}})",
                                   std::vector<uint8_t>(12)),
                    {"tensor 'w'", "past the end"});
}

TEST(CheckpointTest, OffsetsEndBeforeBegin) {
  expect_open_error(raw_checkpoint("ckpt_order", R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})",
                                   std::vector<uint8_t>(12)),
                    {"tensor 'w'", "end < begin"});
}

TEST(CheckpointTest, ByteSizeDiffersFromShape) {
  expect_open_error(raw_checkpoint("ckpt_size", R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]}})",
                                   std::vector<uint8_t>(12)),
                    {"tensor 'w'", "spans 8 bytes", "[2, 3]", "needs 12"});
  expect_open_error(raw_checkpoint("ckpt_overflow", R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
                                   std::vector<uint8_t>(12)),
                    {"tensor 'w'", "more than 2^64"});
}

TEST(CheckpointTest, OverlappingTensors) {
  expect_open_error(raw_checkpoint("ckpt_overlap",
                                   R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                                   std::vector<uint8_t>(12)),
                    {"model.safetensors", "overlaps", "'a'", "'b'"});
  // Zero-size tensors and adjacent tensors do not overlap.
  std::string dir = raw_checkpoint("ckpt_adjacent",
                                   R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                       "z": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},
                                       "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                                   std::vector<uint8_t>(12));
  auto ok = Checkpoint::open(dir);
  EXPECT_TRUE(ok.ok()) << ok.error().message;
}

// Truncations and random byte flips of a valid file are errors or valid loads, never crashes
// (run under ASan/UBSan in CI).
TEST(CheckpointTest, CorruptedFilesNeverCrash) {
  std::string dir = test::make_temp_dir("ckpt_fuzz");
  std::string path = dir + "/model.safetensors";
  test::write_safetensors(path, sample_tensors(), {.metadata = true});
  std::ifstream in(path, std::ios::binary);
  std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::mt19937 rng(1234);
  int errors = 0;
  for (int iter = 0; iter < 120; ++iter) {
    std::string bytes = good;
    if (iter % 3 == 0) {
      bytes.resize(rng() % good.size());
    } else {
      for (int flips = 1 + rng() % 3; flips > 0; --flips) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    }
    test::write_text_file(path, bytes);
    auto ckpt = Checkpoint::open(dir);
    if (!ckpt.ok()) {
      ++errors;
      EXPECT_NE(ckpt.error().message.find(path), std::string::npos) << ckpt.error().message;
      continue;
    }
    // Every tensor the reader accepts lies inside the mapped file.
    const MappedFile& file = *ckpt->files().at(0);
    for (const std::string& name : ckpt->names()) {
      const auto* data = static_cast<const uint8_t*>(ckpt->find(name)->data);
      EXPECT_TRUE(data >= file.data() && data + ckpt->find(name)->nbytes <= file.data() + file.size()) << name;
    }
  }
  EXPECT_GT(errors, 40);
}

TEST(CheckpointTest, DuplicateNameInOneHeader) {
  expect_open_error(raw_checkpoint("ckpt_dup1",
                                   R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                       "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                                   std::vector<uint8_t>(8)),
                    {"tensor 'a'", "listed twice"});
}

// A sharded checkpoint of sample_tensors() split over two shards, with a custom index.
std::string sharded_with_index(const std::string& name, const std::string& index_json) {
  std::string dir = test::make_temp_dir(name);
  test::write_sharded(dir, sample_tensors(), {0, 1, 0, 1, 0});
  test::write_text_file(dir + "/model.safetensors.index.json", index_json);
  return dir;
}

constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
constexpr const char* kShard2 = "model-00002-of-00002.safetensors";

std::string index_json(std::vector<std::pair<std::string, std::string>> entries) {
  std::string s = "{\"metadata\": {}, \"weight_map\": {";
  for (size_t i = 0; i < entries.size(); ++i)
    s += (i ? "," : "") + ("\"" + entries[i].first + "\": \"" + entries[i].second + "\"");
  return s + "}}";
}

std::vector<std::pair<std::string, std::string>> good_map() {
  return {{"a.weight", kShard1}, {"b.weight", kShard2}, {"c.router", kShard1}, {"d.scalar", kShard2}, {"e.empty", kShard1}};
}

TEST(CheckpointTest, IndexNotJsonOrWithoutWeightMap) {
  expect_open_error(sharded_with_index("ckpt_idx_json", "{\"weight_map\": "),
                    {"model.safetensors.index.json", "not valid JSON"});
  expect_open_error(sharded_with_index("ckpt_idx_nomap", "{\"metadata\": {}}"),
                    {"model.safetensors.index.json", "weight_map"});
  expect_open_error(sharded_with_index("ckpt_idx_type", "{\"weight_map\": {\"a.weight\": 3}}"),
                    {"model.safetensors.index.json", "tensor 'a.weight'", "file name"});
  expect_open_error(sharded_with_index("ckpt_idx_escape", index_json({{"a.weight", "../model.safetensors"}})),
                    {"tensor 'a.weight'", "not a file inside the model directory"});
}

TEST(CheckpointTest, IndexNamesMissingShardFile) {
  auto map = good_map();
  map[0].second = "model-00009-of-00009.safetensors";
  expect_open_error(sharded_with_index("ckpt_idx_noshard", index_json(map)),
                    {"model.safetensors.index.json", "model-00009-of-00009.safetensors", "does not exist"});
}

TEST(CheckpointTest, IndexListsTensorAbsentFromShard) {
  auto map = good_map();
  map.push_back({"f.missing", kShard2});
  expect_open_error(sharded_with_index("ckpt_idx_absent", index_json(map)),
                    {"tensor 'f.missing'", "listed in the index but absent from shard", kShard2});
  map = good_map();
  map[0].second = kShard2;  // a.weight really lives in shard 1
  expect_open_error(sharded_with_index("ckpt_idx_wrong_shard", index_json(map)),
                    {"tensor 'a.weight'", "absent from shard", kShard2});
}

TEST(CheckpointTest, ShardTensorNotInIndex) {
  auto map = good_map();
  map.pop_back();  // e.empty is in shard 1 but unlisted
  expect_open_error(sharded_with_index("ckpt_idx_unlisted", index_json(map)),
                    {kShard1, "tensor 'e.empty'", "not listed in"});
}

TEST(CheckpointTest, DuplicateTensorAcrossShards) {
  std::string dir = test::make_temp_dir("ckpt_dup_shards");
  auto tensors = sample_tensors();
  tensors.push_back(tensors[0]);  // a.weight again, into shard 2
  test::write_sharded(dir, tensors, {0, 1, 0, 1, 0, 1});
  expect_open_error(dir, {"tensor 'a.weight'", "appears in two shards", kShard1, kShard2});
}

}  // namespace
}  // namespace beam
