#include "agentr1/core/generator.h"

namespace agentr1 {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStopToken: return "stop_token";
    case FinishReason::kStopString: return "stop_string";
    case FinishReason::kLength: return "length";
    case FinishReason::kContextFull: return "context_full";
    case FinishReason::kAborted: return "aborted";
  }
  return "unknown";
}

std::vector<GenResult> Generator::generate(std::vector<GenRequest> requests) {
  std::vector<std::future<GenResult>> futures;
  futures.reserve(requests.size());
  for (auto& r : requests) futures.push_back(submit(std::move(r)));
  std::vector<GenResult> out;
  out.reserve(futures.size());
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

}  // namespace agentr1
