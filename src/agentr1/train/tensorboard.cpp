#include "agentr1/train/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "agentr1/core/error.h"

namespace agentr1::train {
namespace {

// One 256-entry table, built once: entry b is the CRC of byte b alone.
const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[b] = c;
    }
    return t;
  }();
  return table;
}

// Protocol-buffer wire format (what Event needs of it): wire types 0 (varint),
// 1 (64-bit), 2 (length-delimited), 5 (32-bit).
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}
void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}
void put_double(std::string& out, int field, double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  put_key(out, field, 1);
  put_le(out, bits, 8);
}
void put_float(std::string& out, int field, float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  put_key(out, field, 5);
  put_le(out, bits, 4);
}
void put_int(std::string& out, int field, int64_t x) {  // int64 / int32 / enum
  put_key(out, field, 0);
  put_varint(out, static_cast<uint64_t>(x));
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
std::string event_header(int64_t step) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string e;
  put_double(e, 1, now);
  put_int(e, 2, step);
  return e;
}

// Summary.Value { string tag = 1; float simple_value = 2; }
std::string scalar_value(const std::string& tag, double x) {
  std::string v;
  put_bytes(v, 1, tag);
  put_float(v, 2, static_cast<float>(x));
  return v;
}

// Summary.Value { string tag = 1; TensorProto tensor = 8; SummaryMetadata metadata = 9; }
// TensorProto { DataType dtype = 1 (DT_STRING = 7); TensorShapeProto tensor_shape = 2
// (no dims: a scalar); repeated bytes string_val = 8; }
// SummaryMetadata { PluginData plugin_data = 1; } PluginData { string plugin_name = 1; }
std::string text_value(const std::string& tag, const std::string& markdown) {
  std::string tensor;
  put_int(tensor, 1, 7);
  put_bytes(tensor, 2, "");
  put_bytes(tensor, 8, markdown);
  std::string plugin;
  put_bytes(plugin, 1, "text");
  std::string metadata;
  put_bytes(metadata, 1, plugin);
  std::string v;
  put_bytes(v, 1, tag);
  put_bytes(v, 8, tensor);
  put_bytes(v, 9, metadata);
  return v;
}

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& t = crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string tfrecord(const std::string& data) {
  std::string r;
  r.reserve(data.size() + 16);
  put_le(r, data.size(), 8);
  put_le(r, mask_crc32c(crc32c(r.data(), 8)), 4);
  r += data;
  put_le(r, mask_crc32c(crc32c(data.data(), data.size())), 4);
  return r;
}

TensorBoardWriter::TensorBoardWriter(std::string dir) : dir_(std::move(dir)) {}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::write_event(const std::string& event) {
  if (file_ == nullptr) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    AGENTR1_CHECK(!ec, "tensorboard: cannot create '" << dir_ << "': " << ec.message());
    const long long secs = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
    const std::string base =
        dir_ + "/events.out.tfevents." + std::to_string(secs) + "." + hostname() + "." + std::to_string(getpid());
    // Never another writer's file: a second writer of this process in the same second
    // gets a suffix (fopen's "x": fails if the file exists).
    std::string path = base;
    for (int k = 1; (file_ = std::fopen(path.c_str(), "wbx")) == nullptr && errno == EEXIST && k < 1000; ++k)
      path = base + "." + std::to_string(k);
    AGENTR1_CHECK(file_ != nullptr, "tensorboard: cannot create '" << path << "': " << std::strerror(errno));
    path_ = path;
    std::string first = event_header(0);
    put_bytes(first, 3, "brain.Event:2");
    write_event(first);
  }
  const std::string rec = tfrecord(event);
  AGENTR1_CHECK(std::fwrite(rec.data(), 1, rec.size(), file_) == rec.size(),
                "tensorboard: cannot write '" << path_ << "': " << std::strerror(errno));
}

void TensorBoardWriter::scalars(int64_t step, const std::map<std::string, double>& values) {
  if (values.empty()) return;
  std::string summary;
  for (const auto& kv : values) put_bytes(summary, 1, scalar_value(kv.first, kv.second));
  std::string e = event_header(step);
  put_bytes(e, 5, summary);
  write_event(e);
}

void TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value) {
  scalars(step, {{tag, value}});
}

void TensorBoardWriter::text(const std::string& tag, int64_t step, const std::string& markdown) {
  std::string summary;
  put_bytes(summary, 1, text_value(tag, markdown));
  std::string e = event_header(step);
  put_bytes(e, 5, summary);
  write_event(e);
}

// Event { SessionLog session_log = 7; }  SessionLog { SessionStatus status = 1; } START = 1
void TensorBoardWriter::session_start(int64_t step) {
  std::string log;
  put_int(log, 1, 1);
  std::string e = event_header(step);
  put_bytes(e, 7, log);
  write_event(e);
}

void TensorBoardWriter::flush() {
  if (file_ == nullptr) return;
  AGENTR1_CHECK(std::fflush(file_) == 0, "tensorboard: cannot write '" << path_ << "': " << std::strerror(errno));
}

}  // namespace agentr1::train
