// agentr1/model/safetensors.h — reading and writing the safetensors format.
//
//   TensorList t = read_safetensors(dir + "/model.safetensors");     // validated, CPU
//   write_safetensors(path, {{"a", x}, {"b", y}});                   // given order
//   TensorList all = read_safetensors_dir(dir);  // model.safetensors or the sharded index
//
// Format: 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [..],
//    "data_offsets": [begin, end]}, ...}
// then the raw little-endian tensor bytes; offsets are relative to the byte after the
// header. Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace agentr1::model {

// Named tensors in file order.
using TensorList = std::vector<std::pair<std::string, at::Tensor>>;

// "F32" -> at::kFloat etc.; throws Error naming the dtype and the supported ones.
at::ScalarType safetensors_dtype(const std::string& name);
const char* safetensors_dtype_name(at::ScalarType t);  // throws Error if unsupported

// Reads every tensor of one file into CPU tensors (copies; the file is not kept open).
// metadata (optional) receives the "__metadata__" string map.
// Throws Error naming the file, the tensor and the problem: truncated file, header
// length beyond the file, invalid JSON, unknown dtype, offsets out of bounds or not
// matching shape * dtype size, overlapping tensors.
TensorList read_safetensors(const std::string& path,
                            std::map<std::string, std::string>* metadata = nullptr);

// Writes tensors in the given order (any device/layout; copied to CPU contiguous).
// The header is padded with spaces so the data starts 8-byte aligned, as HF does.
// Throws Error on duplicate names, unsupported dtypes or I/O failure.
void write_safetensors(const std::string& path, const TensorList& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Reads a model directory's weights: model.safetensors if present, else the shards
// listed in model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map":
// {name: file}}); checks every tensor sits in the file the index names.
TensorList read_safetensors_dir(const std::string& dir);

// Writes tensors into dir as model.safetensors, or, when max_shard_bytes > 0 and the
// total exceeds it, as model-0000i-of-0000n.safetensors plus the index json (a tensor
// larger than the limit gets a shard of its own). Removes a stale single file or
// index left by an earlier save of the other kind. Returns the files written.
std::vector<std::string> write_safetensors_dir(const std::string& dir, const TensorList& tensors,
                                               int64_t max_shard_bytes = 0);

}  // namespace agentr1::model
