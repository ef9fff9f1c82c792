// The safetensors header of a model file: arbitrary bytes as a whole file.
#include "agentr1/model/safetensors_header.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::guarded([&] {
    const auto h = agentr1::model::parse_safetensors_header(data, size, "fuzz.safetensors");
    FUZZ_REQUIRE(h.data_offset + h.data_size == size);
    for (const auto& e : h.entries) {
      FUZZ_REQUIRE(e.begin <= e.end && e.end <= h.data_size);
      uint64_t bytes = static_cast<uint64_t>(agentr1::model::safetensors_dtype_size(e.dtype));
      for (int64_t d : e.shape) bytes *= static_cast<uint64_t>(d);  // checked in the parser
      FUZZ_REQUIRE(e.end - e.begin == bytes);
    }
  });
  return 0;
}
