// The OpenBLAS core-type rule of blas_core.h: only an unset OPENBLAS_CORETYPE on a CPU
// OpenBLAS fell back to Prescott on is changed, to the best kernels the CPU runs.
#include "blas_core.h"

#include <gtest/gtest.h>

namespace agentr1::cli {
namespace {

TEST(BlasCore, OnlyAnUnrecognisedCpuWithoutAUserChoiceIsChanged) {
  EXPECT_EQ(blas_coretype_to_set(nullptr, "Prescott", true, true), "SkylakeX");
  EXPECT_EQ(blas_coretype_to_set(nullptr, "Prescott", false, true), "Haswell");
  EXPECT_EQ(blas_coretype_to_set(nullptr, "Prescott", false, false), "");  // nothing better to run
  EXPECT_EQ(blas_coretype_to_set("Prescott", "Prescott", true, true), "");  // the user's value wins
  EXPECT_EQ(blas_coretype_to_set("", "Prescott", true, true), "");          // even an empty one
  EXPECT_EQ(blas_coretype_to_set(nullptr, "Cooperlake", true, true), "");   // recognised
  EXPECT_EQ(blas_coretype_to_set(nullptr, "SkylakeX", true, true), "");
  EXPECT_EQ(blas_coretype_to_set(nullptr, "", true, true), "");              // not OpenBLAS
}

}  // namespace
}  // namespace agentr1::cli
