// The JSONL sample reader on arbitrary files, strict and lenient; accepted samples
// must survive a to_json -> from_json round trip.
#include <sstream>

#include "agentr1/tasks/gsm8k.h"
#include "agentr1/tasks/dataset.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quiet();
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (bool lenient : {false, true}) {
    agentr1::tasks::JsonlReadOptions o;
    o.skip_bad_rows = lenient;
    std::istringstream in(text);
    std::vector<agentr1::Sample> rows;
    const bool ok = fuzz::guarded([&] { rows = agentr1::tasks::load_jsonl(in, "fuzz.jsonl", o); });
    FUZZ_REQUIRE(ok || !lenient);  // the lenient reader skips every bad row
    for (const auto& s : rows) {
      const agentr1::json j = s.to_json();
      agentr1::Sample back;
      FUZZ_REQUIRE(fuzz::guarded([&] { back = agentr1::Sample::from_json(j); }));
      FUZZ_REQUIRE(back.to_json() == j);
    }
  }
  // GSM8K's own row format, one line at a time.
  std::istringstream lines(text);
  std::string line;
  int64_t i = 0;
  while (std::getline(lines, line)) {
    agentr1::json row = agentr1::json::parse(line, nullptr, false);
    if (row.is_discarded()) continue;
    fuzz::guarded([&] { (void)agentr1::tasks::gsm8k_row_to_sample(row, i++, "test"); });
  }
  return 0;
}
