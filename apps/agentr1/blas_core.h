// blas_core.h — what agentr1 does about OpenBLAS's kernel choice.
//
// OpenBLAS (0.3.21 in Debian 12) picks its kernels from the CPU model; on CPUs it does
// not know it falls back to its oldest x86-64 kernels ("Prescott"), which measured 62
// instead of 293 GFLOP/s on a 1024^3 fp32 matmul on a 2-core AVX-512 Xeon (same
// results). The choice is read from OPENBLAS_CORETYPE when the library loads, before
// main(), so agentr1 restarts itself once (execv) with OPENBLAS_CORETYPE set when, and
// only when:
//   - OPENBLAS_CORETYPE is not set (a value the user or the machine set always wins),
//   - the loaded BLAS is OpenBLAS and reports "Prescott" (it did not recognise the CPU),
//   - the CPU has AVX-512 (F, BW, VL, DQ: "SkylakeX") or AVX2 + FMA ("Haswell").
// AGENTR1_BLAS_REEXEC marks the restarted process (no second restart) and lets it log
// what happened (at --log-level debug). Nothing changes on a CPU OpenBLAS recognises.
#pragma once

#include <string>

namespace agentr1::cli {

// The OPENBLAS_CORETYPE to restart with, or "" to leave the process alone.
//   env: the current OPENBLAS_CORETYPE (nullptr = unset); core: openblas_get_corename()
//   ("" when the BLAS is not OpenBLAS).
std::string blas_coretype_to_set(const char* env, const std::string& core, bool avx512, bool avx2_fma);

// Applies the rule above to this process: may not return (execv). Call first in main.
void maybe_restart_for_blas(char** argv);

}  // namespace agentr1::cli
