#include "agentr1/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/core/log.h"
#include "agentr1/model/safetensors_header.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors I/O assumes a little-endian host"
#endif

namespace agentr1::model {

namespace fs = std::filesystem;

namespace {

const std::vector<std::pair<const char*, at::ScalarType>>& dtype_table() {
  static const std::vector<std::pair<const char*, at::ScalarType>> t = {
      {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
      {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
      {"U8", at::kByte},    {"BOOL", at::kBool}};
  return t;
}

// A read-only mapping of a whole file, unmapped on destruction.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY);
    AGENTR1_CHECK(fd_ >= 0, path << ": cannot open: " << std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      ::close(fd_);
      throw Error(path + ": cannot stat: " + std::strerror(errno));
    }
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
      if (p == MAP_FAILED) {
        ::close(fd_);
        throw Error(path + ": cannot mmap: " + std::strerror(errno));
      }
      data_ = static_cast<const uint8_t*>(p);
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Drops the resident pages wholly inside [begin, end) of the file (read; never read
  // again): a file read tensor by tensor then never holds its whole mapping beside the
  // copies (a 1.5B bf16 checkpoint: 2.9 GB less at the peak of a load).
  void release(uint64_t begin, uint64_t end) const {
    static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t lo = (begin + page - 1) / page * page, hi = std::min(end, size_) / page * page;
    if (data_ != nullptr && hi > lo) ::madvise(const_cast<uint8_t*>(data_) + lo, hi - lo, MADV_DONTNEED);
  }

 private:
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace

at::ScalarType safetensors_dtype(const std::string& name) {
  for (const auto& [n, t] : dtype_table())
    if (name == n) return t;
  std::string known;
  for (const auto& [n, t] : dtype_table()) known += std::string(known.empty() ? "" : ", ") + n;
  throw Error("unknown dtype '" + name + "' (supported: " + known + ")");
}

const char* safetensors_dtype_name(at::ScalarType type) {
  for (const auto& [n, t] : dtype_table())
    if (type == t) return n;
  throw Error(std::string("dtype ") + c10::toString(type) + " cannot be stored in safetensors here");
}

TensorList read_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  MappedFile file(path);
  const SafetensorsHeader h = parse_safetensors_header(file.data(), file.size(), path);
  if (metadata) *metadata = h.metadata;
  const uint8_t* data = file.data() + h.data_offset;
  TensorList out;
  out.reserve(h.entries.size());
  for (const auto& e : h.entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(safetensors_dtype(e.dtype)));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    file.release(h.data_offset + e.begin, h.data_offset + e.end);
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

void write_safetensors(const std::string& path, const TensorList& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) {
    json m = json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  std::vector<at::Tensor> cpu;
  cpu.reserve(tensors.size());
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    AGENTR1_CHECK(name != "__metadata__", path << ": '__metadata__' cannot name a tensor");
    AGENTR1_CHECK(seen.insert(name).second, path << ": duplicate tensor name '" << name << "'");
    AGENTR1_CHECK(t.defined(), path << ": tensor '" << name << "' is undefined");
    const char* dt = with_context(path + ": tensor '" + name + "'",
                                  [&] { return safetensors_dtype_name(t.scalar_type()); });
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * c.element_size();
    json e;
    e["dtype"] = dt;
    e["shape"] = c.sizes().vec();
    e["data_offsets"] = json::array({offset, offset + bytes});
    header[name] = e;
    offset += bytes;
    cpu.push_back(std::move(c));
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const uint64_t n = h.size();

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  AGENTR1_CHECK(out.good(), path << ": cannot open for writing");
  char len[8];
  std::memcpy(len, &n, 8);
  out.write(len, 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& c : cpu) {
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * c.element_size();
    if (bytes) out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(bytes));
  }
  out.close();
  AGENTR1_CHECK(!out.fail(), path << ": write failed (disk full?)");
}

TensorList read_safetensors_dir(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) return read_safetensors(single.string());
  AGENTR1_CHECK(fs::exists(index), dir << ": no model.safetensors or model.safetensors.index.json; "
                                          "expected a HuggingFace model directory");
  json j;
  {
    std::ifstream in(index);
    AGENTR1_CHECK(in.good(), index.string() << ": cannot open");
    try {
      j = json::parse(in);
    } catch (const std::exception& e) {
      throw Error(index.string() + ": invalid JSON: " + e.what());
    }
  }
  AGENTR1_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
                index.string() << ": missing object 'weight_map' {tensor name: file}");
  std::vector<std::string> files;
  std::map<std::string, std::string> where;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    AGENTR1_CHECK(it.value().is_string(), index.string() << ": weight_map['" << it.key()
                                                         << "'] must be a file name, got " << it.value().dump());
    const std::string f = it.value().get<std::string>();
    AGENTR1_CHECK(!f.empty() && f.find('/') == std::string::npos && f != "..",
                  index.string() << ": weight_map['" << it.key() << "'] = '" << f
                                 << "' must be a plain file name in the model directory");
    where[it.key()] = f;
    if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
  }
  TensorList out;
  for (const auto& f : files) {
    const std::string p = (fs::path(dir) / f).string();
    for (auto& [name, t] : read_safetensors(p)) {
      auto w = where.find(name);
      AGENTR1_CHECK(w != where.end(), p << ": tensor '" << name << "' is not listed in " << index.string());
      AGENTR1_CHECK(w->second == f, p << ": tensor '" << name << "' is listed in " << index.string()
                                      << " as stored in '" << w->second << "'");
      where.erase(w);
      out.emplace_back(name, std::move(t));
    }
  }
  AGENTR1_CHECK(where.empty(), index.string() << ": tensor '" << where.begin()->first << "' is listed in file '"
                                              << where.begin()->second << "' but that file does not contain it");
  return out;
}

std::vector<std::string> write_safetensors_dir(const std::string& dir, const TensorList& tensors,
                                               int64_t max_shard_bytes) {
  fs::create_directories(dir);
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  uint64_t total = 0;
  for (const auto& [n, t] : tensors) total += static_cast<uint64_t>(t.numel()) * t.element_size();
  if (max_shard_bytes <= 0 || total <= static_cast<uint64_t>(max_shard_bytes)) {
    write_safetensors(single.string(), tensors);
    if (fs::exists(index)) {
      AGENTR1_LOG(WARN) << "removing stale " << index.string() << " (replaced by model.safetensors)";
      fs::remove(index);
    }
    return {single.string()};
  }
  std::vector<TensorList> shards(1);
  uint64_t cur = 0;
  for (const auto& nt : tensors) {
    const uint64_t b = static_cast<uint64_t>(nt.second.numel()) * nt.second.element_size();
    if (!shards.back().empty() && cur + b > static_cast<uint64_t>(max_shard_bytes)) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(nt);
    cur += b;
  }
  std::vector<std::string> written;
  json weight_map = json::object();
  std::map<std::string, std::string> sorted;
  for (size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    const std::string p = (fs::path(dir) / name).string();
    write_safetensors(p, shards[i]);
    written.push_back(p);
    for (const auto& nt : shards[i]) sorted[nt.first] = name;
  }
  for (const auto& [k, v] : sorted) weight_map[k] = v;
  json j;
  j["metadata"] = {{"total_size", total}};
  j["weight_map"] = weight_map;
  {
    std::ofstream out(index);
    AGENTR1_CHECK(out.good(), index.string() << ": cannot open for writing");
    out << j.dump(2) << "\n";
    AGENTR1_CHECK(out.good(), index.string() << ": write failed");
  }
  written.push_back(index.string());
  if (fs::exists(single)) {
    AGENTR1_LOG(WARN) << "removing stale " << single.string() << " (replaced by " << shards.size() << " shards)";
    fs::remove(single);
  }
  return written;
}

}  // namespace agentr1::model
