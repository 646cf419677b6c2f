// Checkpoint implementation: single-file and index-sharded safetensors checkpoints.
#include "model/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace beam {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// weight_map of an index file: tensor name → shard file name (relative to the directory).
Expected<std::map<std::string, std::string>> read_weight_map(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  json index;
  try {
    index = json::parse(ss.str());
  } catch (const json::exception& e) {
    return make_error(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return make_error(path + ": expected an object with a 'weight_map' object");
  }
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) {
      return make_error(path + ": weight_map entry for tensor '" + name + "' must be a file name, got " + file.dump());
    }
    fs::path rel(file.get<std::string>());
    bool escapes = rel.empty() || rel.is_absolute() ||
                   std::any_of(rel.begin(), rel.end(), [](const fs::path& part) { return part == ".."; });
    if (escapes) {
      return make_error(path + ": weight_map entry for tensor '" + name + "' names '" + rel.string() +
                        "', which is not a file inside the model directory");
    }
    map[name] = rel.string();
  }
  return map;
}

}  // namespace

bool Checkpoint::exists(const std::string& dir) {
  return is_file(fs::path(dir) / kSingleFile) || is_file(fs::path(dir) / kIndexFile);
}

Expected<Checkpoint> Checkpoint::open(const std::string& dir) {
  fs::path single = fs::path(dir) / kSingleFile, index = fs::path(dir) / kIndexFile;
  if (is_file(single)) return open_single(dir, single.string());
  if (is_file(index)) return open_sharded(dir, index.string());
  return make_error(dir + ": no " + kSingleFile + " or " + kIndexFile + " found");
}

const MappedFile* Checkpoint::file_of(const void* p) const {
  for (const auto& f : files_)
    if (f->holds(p)) return f.get();
  return nullptr;
}

Status Checkpoint::add_file(const std::string& path, std::vector<RawTensor>* tensors) {
  BEAM_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::open(path));
  BEAM_ASSIGN_OR_RETURN(*tensors, read_safetensors(*file));
  files_.push_back(std::move(file));
  return ok_status();
}

Expected<Checkpoint> Checkpoint::open_single(const std::string& dir, const std::string& path) {
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  std::vector<RawTensor> tensors;
  BEAM_RETURN_IF_ERROR(ckpt.add_file(path, &tensors));
  for (RawTensor& t : tensors) ckpt.tensors_.emplace(t.name, std::move(t));
  return ckpt;
}

Expected<Checkpoint> Checkpoint::open_sharded(const std::string& dir, const std::string& index_path) {
  BEAM_ASSIGN_OR_RETURN(auto weight_map, read_weight_map(index_path));
  std::vector<std::string> shards;
  for (const auto& [name, file] : weight_map) shards.push_back(file);
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  std::map<std::string, std::string> shard_of;  // tensor name → shard it was found in
  for (const std::string& shard : shards) {
    std::string path = (fs::path(dir) / shard).string();
    if (!is_file(path)) return make_error(index_path + ": names shard '" + shard + "', which does not exist (" + path + ")");
    std::vector<RawTensor> tensors;
    BEAM_RETURN_IF_ERROR(ckpt.add_file(path, &tensors));
    for (RawTensor& t : tensors) {
      if (auto prev = ckpt.tensors_.find(t.name); prev != ckpt.tensors_.end()) {
        return make_error("tensor '" + t.name + "' appears in two shards: " + prev->second.file + " and " + path);
      }
      shard_of[t.name] = shard;
      ckpt.tensors_.emplace(t.name, std::move(t));
    }
  }
  for (const auto& [name, shard] : shard_of) {
    auto listed = weight_map.find(name);
    std::string path = (fs::path(dir) / shard).string();
    if (listed == weight_map.end()) return make_error(path + ": tensor '" + name + "' is not listed in " + index_path);
    if (listed->second != shard) {
      return make_error(index_path + ": tensor '" + name + "' is listed in the index but absent from shard " +
                        (fs::path(dir) / listed->second).string() + " (it is in " + path + ")");
    }
  }
  for (const auto& [name, shard] : weight_map) {
    if (!shard_of.count(name)) {
      return make_error(index_path + ": tensor '" + name + "' is listed in the index but absent from shard " +
                        (fs::path(dir) / shard).string());
    }
  }
  return ckpt;
}

Expected<RawTensor> Checkpoint::get(const std::string& name) const {
  const RawTensor* t = find(name);
  if (t == nullptr) return make_error(dir_ + ": checkpoint has no tensor '" + name + "'");
  return *t;
}

const RawTensor* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

std::map<DType, size_t> Checkpoint::bytes_by_dtype() const {
  std::map<DType, size_t> out;
  for (const auto& [name, t] : tensors_) out[t.dtype] += t.nbytes;
  return out;
}

}  // namespace beam
