#include "agentr1/model/safetensors_header.h"

#include <algorithm>
#include <cstring>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors I/O assumes a little-endian host"
#endif

namespace agentr1::model {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // same limit as the reference reader

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// A JSON number that is a non-negative integer of at most 63 bits.
bool is_size(const json& d) {
  if (d.is_number_unsigned()) return d.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
  return d.is_number_integer() && d.get<int64_t>() >= 0;
}

}  // namespace

const std::vector<std::pair<std::string, int>>& safetensors_dtype_names() {
  static const std::vector<std::pair<std::string, int>> t = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  return t;
}

int safetensors_dtype_size(const std::string& dtype) {
  for (const auto& [n, s] : safetensors_dtype_names())
    if (n == dtype) return s;
  std::string known;
  for (const auto& [n, s] : safetensors_dtype_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown dtype '" + dtype + "' (supported: " + known + ")");
}

SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, uint64_t size,
                                           const std::string& path) {
  AGENTR1_CHECK(size >= 8, path << ": truncated file (" << size
                                << " bytes; a safetensors file starts with an 8-byte header length)");
  uint64_t n = 0;
  std::memcpy(&n, bytes, 8);
  AGENTR1_CHECK(n <= kMaxHeaderBytes, path << ": header length " << n << " is larger than the "
                                           << kMaxHeaderBytes << "-byte limit (not a safetensors file?)");
  AGENTR1_CHECK(n <= size - 8, path << ": header length " << n << " goes beyond the end of the file ("
                                    << size << " bytes); the file is truncated or not safetensors");
  const char* hbeg = reinterpret_cast<const char*>(bytes + 8);
  json header;
  try {
    header = json::parse(hbeg, hbeg + n);
  } catch (const std::exception& e) {
    throw Error(path + ": header is not valid JSON: " + e.what());
  }
  AGENTR1_CHECK(header.is_object(), path << ": header must be a JSON object, got " << header.type_name());
  SafetensorsHeader out;
  out.data_offset = 8 + n;
  out.data_size = size - 8 - n;

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      AGENTR1_CHECK(v.is_object(), path << ": __metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        AGENTR1_CHECK(m.value().is_string(),
                      path << ": __metadata__ key '" << m.key() << "' must be a string, got " << m.value().dump());
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = path + ": tensor '" + name + "'";
    AGENTR1_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
                  where << ": entry must be an object with dtype, shape and data_offsets, got " << v.dump());
    AGENTR1_CHECK(v["dtype"].is_string(), where << ": dtype must be a string, got " << v["dtype"].dump());
    SafetensorsEntry e;
    e.name = name;
    e.dtype = v["dtype"].get<std::string>();
    const int elem = with_context(where, [&] { return safetensors_dtype_size(e.dtype); });
    AGENTR1_CHECK(v["shape"].is_array(), where << ": shape must be an array, got " << v["shape"].dump());
    // Byte size with an overflow check (as libtorch's, which refuses such a shape even
    // when a later dimension is 0).
    uint64_t bytes_needed = static_cast<uint64_t>(elem);
    for (const auto& d : v["shape"]) {
      AGENTR1_CHECK(is_size(d), where << ": shape entries must be non-negative integers below 2^63, got "
                                      << v["shape"].dump());
      const uint64_t dim = d.get<uint64_t>();
      e.shape.push_back(static_cast<int64_t>(dim));
      AGENTR1_CHECK(dim == 0 || bytes_needed <= static_cast<uint64_t>(INT64_MAX) / dim,
                    where << ": shape " << v["shape"].dump() << " of " << e.dtype
                          << " is too large: its byte size overflows 64 bits; the header is corrupt");
      bytes_needed *= dim;
    }
    const json& off = v["data_offsets"];
    AGENTR1_CHECK(off.is_array() && off.size() == 2 && is_size(off[0]) && is_size(off[1]),
                  where << ": data_offsets must be [begin, end] non-negative integers, got " << off.dump());
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    AGENTR1_CHECK(e.begin <= e.end, where << ": data_offsets " << off.dump() << " has begin > end");
    AGENTR1_CHECK(e.end <= out.data_size, where << ": data_offsets " << off.dump()
                                                << " out of bounds: the data section holds "
                                                << out.data_size << " bytes (truncated file?)");
    AGENTR1_CHECK(e.end - e.begin == bytes_needed,
                  where << ": data_offsets " << off.dump() << " span " << (e.end - e.begin)
                        << " bytes but shape " << shape_str(e.shape) << " of " << e.dtype << " needs "
                        << bytes_needed);
    out.entries.push_back(std::move(e));
  }
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : out.entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    AGENTR1_CHECK(by_offset[i]->begin >= by_offset[i - 1]->end,
                  path << ": tensor '" << by_offset[i]->name << "' overlaps tensor '"
                       << by_offset[i - 1]->name << "' in the data section");
  }
  return out;
}

}  // namespace agentr1::model
