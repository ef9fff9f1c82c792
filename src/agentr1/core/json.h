// agentr1/core/json.h — the JSON type used everywhere (nlohmann::json, ordered so
// that files we write keep the key order a human or HF tool expects).
#pragma once

#include <nlohmann/json.hpp>

namespace agentr1 {
using json = nlohmann::ordered_json;
}  // namespace agentr1
