// Checkpoint: the safetensors tensors of a model directory, memory-mapped read-only — one
// model.safetensors, or shards listed by model.safetensors.index.json (weight_map name → file).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "model/mapped_file.h"
#include "model/safetensors.h"

namespace beam {

// Immutable after open(); safe to read from several threads.
class Checkpoint {
 public:
  // Opens DIR/model.safetensors when it exists, else DIR/model.safetensors.index.json and every
  // shard it names. Every header is validated (see read_safetensors); for shards also: every
  // tensor the index lists is in its shard, no tensor is in two shards, no shard holds a tensor
  // the index does not list.
  static Expected<Checkpoint> open(const std::string& dir);
  // True when DIR holds model.safetensors or model.safetensors.index.json.
  static bool exists(const std::string& dir);

  // The tensor called `name`, or an error naming it and the directory.
  Expected<RawTensor> get(const std::string& name) const;
  // The tensor called `name`, or nullptr.
  const RawTensor* find(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  size_t num_tensors() const { return tensors_.size(); }
  // Total tensor bytes per dtype.
  std::map<DType, size_t> bytes_by_dtype() const;
  // The file whose mapping holds p (a tensor's data), or nullptr.
  const MappedFile* file_of(const void* p) const;
  // The mappings the tensors point into (share them to keep tensor data alive).
  const std::vector<std::shared_ptr<MappedFile>>& files() const { return files_; }
  const std::string& dir() const { return dir_; }

 private:
  static Expected<Checkpoint> open_single(const std::string& dir, const std::string& path);
  static Expected<Checkpoint> open_sharded(const std::string& dir, const std::string& index_path);
  Status add_file(const std::string& path, std::vector<RawTensor>* tensors);

  std::string dir_;
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::unordered_map<std::string, RawTensor> tensors_;
};

}  // namespace beam
