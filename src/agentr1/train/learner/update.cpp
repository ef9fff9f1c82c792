#include "agentr1/train/learner/update.h"

#include <algorithm>
#include <cmath>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/train/distributed/distributed.h"

namespace agentr1::train {

void LoopOptions::validate(const std::string& section) const {
  AGENTR1_CHECK(ppo_epochs >= 1, section << ".ppo_epochs must be >= 1, got " << ppo_epochs);
  AGENTR1_CHECK(ppo_mini_batch_size >= 0,
                section << ".ppo_mini_batch_size must be >= 0 (0 = whole batch), got " << ppo_mini_batch_size);
  AGENTR1_CHECK(micro_batch_size >= 1, section << ".micro_batch_size must be >= 1, got " << micro_batch_size);
  AGENTR1_CHECK(micro_batch_max_tokens >= 0,
                section << ".micro_batch_max_tokens must be >= 0 (0 = none), got " << micro_batch_max_tokens);
  AGENTR1_CHECK(min_shared_prefix >= 0,
                section << ".min_shared_prefix must be >= 0 (0 = off), got " << min_shared_prefix);
  AGENTR1_CHECK(max_consecutive_skips >= 1,
                section << ".max_consecutive_skips must be >= 1, got " << max_consecutive_skips);
}

UpdateLoopOptions LoopOptions::update_loop(at::Device device) const {
  UpdateLoopOptions u;
  u.epochs = ppo_epochs;
  u.mini_batch_trajectories = ppo_mini_batch_size;
  u.micro_batch_size = micro_batch_size;
  u.micro_batch_max_tokens = micro_batch_max_tokens;
  u.min_shared_prefix = min_shared_prefix;
  u.tree_packing = tree_packing;
  u.device = device;
  return u;
}

ScoringOptions LoopOptions::scoring(at::Device device, double temperature) const {
  ScoringOptions s;
  s.micro_batch_size = micro_batch_size;
  s.micro_batch_max_tokens = micro_batch_max_tokens;
  s.min_shared_prefix = min_shared_prefix;
  s.tree_packing = tree_packing;
  s.temperature = temperature;
  s.device = device;
  return s;
}

MicroBatchScale micro_batch_scale(const LossSpec& spec, double micro_units, int64_t micro_rows, double mini_units,
                                  int64_t mini_rows, double mini_norm_len) {
  MicroBatchScale s;
  const double unit_share = micro_units / mini_units;
  const double row_share = static_cast<double>(micro_rows) / static_cast<double>(mini_rows);
  switch (spec.agg) {
    case algo::LossAgg::kTokenMean:
      s.loss_weight = s.metric_weight = unit_share;
      break;
    case algo::LossAgg::kSeqMeanTokenSum:
    case algo::LossAgg::kSeqMeanTokenMean:
      s.loss_weight = s.metric_weight = row_share;
      break;
    case algo::LossAgg::kSeqMeanTokenSumNorm:
      s.loss_weight = 1.0;  // the aggregate is a sum over rows divided by a fixed norm_len
      s.metric_weight = unit_share;
      break;
  }
  s.norm_len = mini_norm_len;
  return s;
}

Metrics run_update(const std::vector<PackedRow>& rows, const UpdateLoopOptions& o, const LossSpec& spec,
                   Optimizer& opt, const MicroLossFn& loss_fn) {
  AGENTR1_CHECK(spec.units, "run_update: LossSpec::units is not set");
  AGENTR1_CHECK(o.epochs >= 1, "run_update: epochs must be >= 1, got " << o.epochs);
  ProcessGroup* pg = o.process_group;
  Metrics sum;      // the loss function's metrics and <name>/loss: this rank's part
  Metrics opt_sum;  // the optimiser's (grad_norm, lr): the same on every rank
  int64_t n_updates = 0;
  const auto minis = trajectory_mini_batches(rows, o.mini_batch_trajectories);  // indices into rows
  std::vector<double> units(rows.size(), 0.0);  // by row index
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    for (const auto& whole : minis) {
      // The weights' denominators come from the whole mini-batch (every rank has it).
      double mini_units = 0;
      int64_t mini_rows = 0;
      size_t longest = 0;
      for (int64_t r : whole) {
        units[r] = spec.units(rows[r]);
        mini_units += units[r];
        mini_rows += units[r] > 0;
        longest = std::max(longest, rows[r].tokens.size());
      }
      if (mini_units == 0) continue;
      std::vector<int64_t> share;
      if (pg != nullptr) {  // this rank's rows
        const std::vector<uint8_t> mine = update_share(rows, whole, pg->rank(), pg->world_size());
        for (size_t i = 0; i < whole.size(); ++i)
          if (mine[i]) share.push_back(whole[i]);
      }
      const std::vector<int64_t>& mini = pg != nullptr ? share : whole;
      const double norm_len = spec.norm_len > 0 ? spec.norm_len : static_cast<double>(longest) - 1.0;
      opt.zero_grad();
      Metrics step_m;
      bool finite = true;
      for (const auto& mb :
           make_micro_batches(rows, mini, o.micro_batch_size, o.micro_batch_max_tokens, o.tree_packing)) {
        double mb_units = 0;
        int64_t mb_rows = 0;
        for (int64_t r : mb) {
          mb_units += units[r];
          mb_rows += units[r] > 0;
        }
        if (mb_units == 0) continue;
        const TrainBatch b = collate(rows, mb, o.min_shared_prefix, o.device, o.tree_packing);
        const MicroBatchScale scale = micro_batch_scale(spec, mb_units, mb_rows, mini_units, mini_rows, norm_len);
        Metrics mm;
        at::Tensor loss = loss_fn(b, scale, mm);
        if (!std::isfinite(loss.item<double>())) {
          finite = false;
          break;
        }
        for (const auto& kv : mm) step_m[kv.first] += kv.second * scale.metric_weight;
        const at::Tensor weighted = loss * scale.loss_weight;
        step_m[opt.name() + "/loss"] += weighted.item<double>();
        weighted.backward();
      }
      if (!finite && pg == nullptr) {
        opt.skip("non-finite loss");
        continue;
      }
      // Data parallel: the step is collective; a non-finite loss here makes the summed
      // gradient non-finite, so every rank skips it in step().
      if (!finite) {
        AGENTR1_LOG(WARN) << "rank " << pg->rank() << ": non-finite " << opt.name()
                          << " loss in this rank's share of the mini-batch; every rank skips the step";
        opt.poison_gradients();
      }
      Metrics opt_m;
      if (opt.step(opt_m)) {
        for (const auto& kv : step_m) sum[kv.first] += kv.second;
        for (const auto& kv : opt_m) opt_sum[kv.first] += kv.second;
        n_updates++;
      }
    }
  }
  if (pg != nullptr) sum = sum_metrics(sum, *pg, opt.name() + " update metrics");
  Metrics out;
  for (const auto& kv : sum) out[kv.first] = n_updates > 0 ? kv.second / static_cast<double>(n_updates) : 0.0;
  for (const auto& kv : opt_sum) out[kv.first] = n_updates > 0 ? kv.second / static_cast<double>(n_updates) : 0.0;
  out[opt.name() + "/updates"] = static_cast<double>(n_updates);
  out[opt.name() + "/skipped_updates"] = static_cast<double>(opt.skipped());
  return out;
}

}  // namespace agentr1::train
