// Precompiled header for the torch layers (model, rollout, algo, train).
#pragma once
#include <torch/torch.h>
