#include "agentr1/algo/advantage.h"

#include <cmath>
#include <unordered_map>

#include "agentr1/core/error.h"

namespace agentr1::algo {

std::vector<int64_t> group_indices(const std::vector<std::string>& groups, int64_t* num_groups) {
  std::unordered_map<std::string, int64_t> ids;
  std::vector<int64_t> out;
  out.reserve(groups.size());
  for (const auto& g : groups) {
    auto it = ids.find(g);
    if (it == ids.end()) it = ids.emplace(g, static_cast<int64_t>(ids.size())).first;
    out.push_back(it->second);
  }
  if (num_groups != nullptr) *num_groups = static_cast<int64_t>(ids.size());
  return out;
}

std::vector<float> grpo_advantages(const std::vector<float>& scores,
                                   const std::vector<std::string>& groups, bool norm_by_std,
                                   double eps) {
  AGENTR1_CHECK(scores.size() == groups.size(),
                "grpo_advantages: " << scores.size() << " scores but " << groups.size() << " groups");
  int64_t g = 0;
  const std::vector<int64_t> idx = group_indices(groups, &g);
  std::vector<std::vector<double>> members(g);
  for (size_t i = 0; i < scores.size(); ++i) members[idx[i]].push_back(scores[i]);
  std::vector<double> mean(g, 0.0), stdev(g, 1.0);
  for (int64_t k = 0; k < g; ++k) {
    const auto& v = members[k];
    if (v.size() < 2) continue;  // singleton: mean 0, std 1 (verl)
    double s = 0;
    for (double x : v) s += x;
    mean[k] = s / static_cast<double>(v.size());
    double ss = 0;
    for (double x : v) ss += (x - mean[k]) * (x - mean[k]);
    stdev[k] = std::sqrt(ss / static_cast<double>(v.size() - 1));
  }
  std::vector<float> adv(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    const double centred = scores[i] - mean[idx[i]];
    adv[i] = static_cast<float>(norm_by_std ? centred / (stdev[idx[i]] + eps) : centred);
  }
  return adv;
}

at::Tensor grpo_advantages_vectorized(const at::Tensor& scores, const at::Tensor& group_index,
                                      int64_t num_groups, bool norm_by_std, double eps) {
  // scores [N], group_index [N] -> [N]
  const at::Tensor s = scores.to(at::kDouble);
  const at::Tensor ones = at::ones_like(s);
  const at::Tensor count = at::zeros({num_groups}, s.options()).index_add(0, group_index, ones);
  const at::Tensor sum = at::zeros({num_groups}, s.options()).index_add(0, group_index, s);
  const at::Tensor multi = count >= 2;
  const at::Tensor mean = at::where(multi, sum / count.clamp_min(1), at::zeros_like(sum));
  const at::Tensor dev = s - mean.index_select(0, group_index);
  const at::Tensor ss = at::zeros({num_groups}, s.options()).index_add(0, group_index, dev * dev);
  const at::Tensor stdev = at::where(multi, (ss / (count - 1).clamp_min(1)).sqrt(), at::ones_like(ss));
  at::Tensor adv = norm_by_std ? dev / (stdev.index_select(0, group_index) + eps) : dev;
  return adv.to(at::kFloat);
}

std::vector<float> rloo_advantages(const std::vector<float>& scores,
                                   const std::vector<std::string>& groups) {
  AGENTR1_CHECK(scores.size() == groups.size(),
                "rloo_advantages: " << scores.size() << " scores but " << groups.size() << " groups");
  int64_t g = 0;
  const std::vector<int64_t> idx = group_indices(groups, &g);
  std::vector<double> sum(g, 0.0);
  std::vector<int64_t> count(g, 0);
  for (size_t i = 0; i < scores.size(); ++i) sum[idx[i]] += scores[i], ++count[idx[i]];
  std::vector<float> adv(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    const int64_t n = count[idx[i]];
    adv[i] = n < 2 ? scores[i]
                   : static_cast<float>(scores[i] - (sum[idx[i]] - scores[i]) / static_cast<double>(n - 1));
  }
  return adv;
}

at::Tensor rloo_advantages_vectorized(const at::Tensor& scores, const at::Tensor& group_index,
                                      int64_t num_groups) {
  // scores [N], group_index [N] -> [N]
  const at::Tensor s = scores.to(at::kDouble);
  const at::Tensor count =
      at::zeros({num_groups}, s.options()).index_add(0, group_index, at::ones_like(s));
  const at::Tensor sum = at::zeros({num_groups}, s.options()).index_add(0, group_index, s);
  const at::Tensor n = count.index_select(0, group_index);                 // [N]
  const at::Tensor others = (sum.index_select(0, group_index) - s) / (n - 1).clamp_min(1);
  return at::where(n >= 2, s - others, s).to(at::kFloat);
}

std::vector<float> group_mean_centred(const std::vector<float>& scores,
                                      const std::vector<std::string>& groups) {
  return grpo_advantages(scores, groups, /*norm_by_std=*/false);
}

}  // namespace agentr1::algo
