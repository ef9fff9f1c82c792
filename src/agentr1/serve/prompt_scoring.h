// agentr1/serve/prompt_scoring.h — the torch side of /v1/completions `prompt_logprobs`
// (openai_api.h): a scoring forward of the served model over each prompt. Its own
// library (agentr1_serve_scoring), so agentr1_serve itself stays without torch.
//
//   rollout::Engine engine(model, eo);
//   serve::OpenAIServer server(engine, served, so, reload, serve::engine_prompt_scorer(engine));
//   PromptLogprobs lp = serve::prompt_logprobs(*model, ids, /*temperature=*/0.7, /*k=*/5);
#pragma once

#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "agentr1/serve/openai_server.h"

namespace agentr1::serve {

// The log-probs of every token of `ids` under `model` (no grad): one forward over the
// prompt, log_softmax(logits / temperature) in fp32 (temperature > 0), read at position
// t - 1 for token t; the rank of each token (1 + the ids with a larger log-prob) and the
// k most likely ids at each position (k >= 0, ties in torch's topk order). Entry 0 is 0.
// Throws Error for an empty prompt or a bad temperature / k.
PromptLogprobs prompt_logprobs(model::TransformerImpl& model, const TokenIds& ids, double temperature, int k);

// The server's scorer over the engine's model: each call runs prompt_logprobs inside
// engine.with_model (the worker paused between iterations, as it is for a weight
// reload), so no generation step or weight copy touches the model meanwhile. `engine`
// must outlive the scorer.
PromptScorer engine_prompt_scorer(rollout::Engine& engine);

}  // namespace agentr1::serve
