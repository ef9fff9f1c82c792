// agentr1/train/device.h — the one torch::Device of a run (trainer.device).
//
//   at::Device dev = parse_device(cfg.trainer.device);   // "cpu", "cuda", "cuda:1"
//   require_device_available(dev);                        // Error with a HINT if not usable
//   model::load_pretrained(dir, dtype, dev);  collate(rows, idx, p, dev);  Engine(policy, ...)
//
// The trainer parses it once and passes it down; nothing in train/ assumes the CPU.
// Tensors go to the host only where host memory is the destination (packed rows are
// std::vectors; safetensors are written from host memory), and each such line says so.
#pragma once

#include <string>

#include <c10/core/Device.h>

namespace torch::nn {
class Module;
}

namespace agentr1::train {

// "cpu" | "cuda" | "cuda:N" (N >= 0). Throws Error naming the value and the forms.
at::Device parse_device(const std::string& name);

// Where a module's weights live (the first parameter's device; the host for a module
// without parameters). Learners put their tensors there.
at::Device module_device(const torch::nn::Module& module);

// Throws Error if `device` is CUDA and this libtorch build or machine has none
// (HINT: trainer.device=cpu).
void require_device_available(const at::Device& device);

}  // namespace agentr1::train
