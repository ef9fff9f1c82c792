#include "blas_core.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

#include "agentr1/core/log.h"

namespace agentr1::cli {

std::string blas_coretype_to_set(const char* env, const std::string& core, bool avx512, bool avx2_fma) {
  if (env != nullptr) return "";         // the user's (or the machine's) choice
  if (core != "Prescott") return "";     // recognised, or not OpenBLAS
  if (avx512) return "SkylakeX";
  if (avx2_fma) return "Haswell";
  return "";
}

void maybe_restart_for_blas(char** argv) {
  if (const char* done = std::getenv("AGENTR1_BLAS_REEXEC")) {
    AGENTR1_LOG(DEBUG) << "OpenBLAS did not recognise this CPU (it chose its Prescott kernels); agentr1 restarted with "
                         "OPENBLAS_CORETYPE="
                      << done << " (set OPENBLAS_CORETYPE yourself to choose)";
    return;
  }
  using CoreName = char* (*)();
  auto fn = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const std::string core = fn ? fn() : "";
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool avx512 = false, avx2 = false;
#endif
  const std::string want = blas_coretype_to_set(std::getenv("OPENBLAS_CORETYPE"), core, avx512, avx2);
  if (want.empty()) return;
  setenv("OPENBLAS_CORETYPE", want.c_str(), 1);
  setenv("AGENTR1_BLAS_REEXEC", want.c_str(), 1);
  execv("/proc/self/exe", argv);
  // execv failed: carry on with the slower kernels.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("AGENTR1_BLAS_REEXEC");
}

}  // namespace agentr1::cli
