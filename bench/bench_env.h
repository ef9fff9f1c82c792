// bench/bench_env.h — what the benches print about the machine beside their numbers:
//   cpu_name()      /proc/cpuinfo's model name
//   load_average()  /proc/loadavg's 1, 5 and 15 minute averages
//   blas_core()     OpenBLAS's kernel set (and OPENBLAS_CORETYPE when set), if OpenBLAS is loaded
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace agentr1::bench {

inline std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

inline std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

inline std::string blas_core() {
  using Fn = char* (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  std::string core = fn ? fn() : "not OpenBLAS";
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  return core + (env ? std::string(" (OPENBLAS_CORETYPE=") + env + ")" : std::string(" (OPENBLAS_CORETYPE unset)"));
}

}  // namespace agentr1::bench
