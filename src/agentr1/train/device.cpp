#include "agentr1/train/device.h"

#include <torch/cuda.h>
#include <torch/nn/module.h>

#include <cctype>

#include "agentr1/core/error.h"

namespace agentr1::train {

at::Device parse_device(const std::string& name) {
  const std::string forms = "cpu, cuda or cuda:N (N = 0, 1, ...)";
  if (name == "cpu") return at::Device(at::kCPU);
  if (name == "cuda") return at::Device(at::kCUDA);
  if (name.rfind("cuda:", 0) == 0 && name.size() > 5 && name.size() <= 8) {
    bool digits = true;
    for (size_t i = 5; i < name.size(); ++i) digits = digits && std::isdigit(static_cast<unsigned char>(name[i]));
    if (digits) {
      const int index = std::stoi(name.substr(5));
      AGENTR1_CHECK(index <= 127, "device '" << name << "': the CUDA device index must be 0..127");
      return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
    }
  }
  throw Error("device '" + name + "' is not one of " + forms);
}

at::Device module_device(const torch::nn::Module& module) {
  const auto params = module.parameters();
  return params.empty() ? at::Device(at::kCPU) : params.front().device();  // no weights: nothing to place
}

void require_device_available(const at::Device& device) {
  if (!device.is_cuda()) return;
  AGENTR1_CHECK(torch::cuda::is_available(),
                "trainer.device=" << device << " but this libtorch build or machine has no CUDA device "
                "(HINT: trainer.device=cpu, or install a CUDA build of libtorch)");
  const int64_t n = static_cast<int64_t>(torch::cuda::device_count());
  AGENTR1_CHECK(!device.has_index() || device.index() < n,
                "trainer.device=" << device << " but only " << n << " CUDA device(s) are visible "
                "(HINT: cuda:0 .. cuda:" << n - 1 << ")");
}

}  // namespace agentr1::train
