// agentr1/model/safetensors_header.h — the safetensors header, parsed and checked
// without torch (the reader in safetensors.h builds tensors from it; the fuzz target
// feeds it arbitrary bytes).
//
//   SafetensorsHeader h = parse_safetensors_header(bytes, size, "model.safetensors");
//   for (const auto& e : h.entries) copy(h.data_offset + e.begin, e.end - e.begin);
//
// Layout: 8-byte little-endian header length N, N bytes of JSON, then the data section.
// Every rule the reader enforces lives here: header length within the file and the
// 100 MiB limit, a JSON object, __metadata__ a map of strings, each tensor an object
// with a known dtype, a shape of non-negative integers whose byte size fits in 64 bits,
// data_offsets [begin, end] inside the data section spanning exactly shape x dtype
// size, and no two tensors overlapping.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace agentr1::model {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;            // "F32", "BF16", ... (one of safetensors_dtype_names())
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets relative to the data section
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;        // in header order
  std::map<std::string, std::string> metadata;  // "__metadata__"
  uint64_t data_offset = 0;                     // where the data section starts (8 + N)
  uint64_t data_size = 0;                       // bytes in the data section
};

// The supported dtype names, in a fixed order, and their element sizes.
const std::vector<std::pair<std::string, int>>& safetensors_dtype_names();
// Element size of a dtype name; throws Error naming it and the supported ones.
int safetensors_dtype_size(const std::string& dtype);

// Parses and validates the header of a whole file held in memory (`size` bytes).
// Throws Error "<path>: ..." naming the tensor and the broken rule.
SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, uint64_t size,
                                           const std::string& path);

}  // namespace agentr1::model
