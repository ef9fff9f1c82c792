// place_in_huge_pages: which tensors move (large, the module's own), that they keep their
// bits, stay shared where they were, can still be written and trained, and that a model
// computes the same logits after the move.
#include "agentr1/model/huge_pages.h"

#include <gtest/gtest.h>

#include <cstring>

#include <torch/nn/module.h>
#include <torch/optim/sgd.h>

#include "agentr1/model/model_test_util.h"

namespace agentr1::model {
namespace {

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.numel() * a.element_size()) == 0;
}

struct Net : torch::nn::Module {
  at::Tensor big, small, tied_a, tied_b, view_half, outside, buf;
  at::Tensor outsider;  // held beside the module: its storage is not the module's alone
  Net() {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
    big = register_parameter("big", at::randn({768, 1024}, gen));                  // 3 MiB
    small = register_parameter("small", at::randn({16, 16}, gen));                // 1 KiB: stays
    tied_a = register_parameter("tied_a", at::randn({600, 1024}, gen));           // 2.3 MiB
    tied_b = register_parameter("tied_b", tied_a);                                 // the same tensor
    // The second half of a 4 MiB storage (set_, not a view: a view's autograd metadata
    // would hold its base, and with it the storage, outside the module).
    at::Tensor whole = at::randn({2, 512, 1024}, gen);
    view_half = register_parameter(
        "view_half", at::empty({0}).set_(whole.storage(), 512 * 1024, {512, 1024}, {1024, 1}), /*requires_grad=*/false);
    outsider = at::randn({700, 1024}, gen);
    outside = register_parameter("outside", outsider.view({1024, 700}));          // shares outsider's storage
    buf = register_buffer("buf", at::arange(0, 600000, at::kFloat));              // 2.3 MiB buffer
  }
};

TEST(HugePages, MovesTheModulesLargeStoragesKeepingBitsAndSharing) {
  Net net;
  const at::Tensor big0 = net.big.clone(), tied0 = net.tied_a.clone(), view0 = net.view_half.clone(),
                   buf0 = net.buf.clone();
  const void* small_ptr = net.small.data_ptr();
  const void* outside_ptr = net.outside.data_ptr();
  const void* big_ptr = net.big.data_ptr();
  const HugePageReport r = place_in_huge_pages(net);
  if (r.thp_mode.empty() || r.thp_mode == "never") GTEST_SKIP() << "THP is '" << r.thp_mode << "' here: nothing moves";
  // big, tied_a (= tied_b, one tensor), view_half's storage and buf; outside is skipped.
  EXPECT_EQ(r.tensors, 4);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_EQ(r.bytes, (768 * 1024 + 600 * 1024 + 2 * 512 * 1024 + 600000) * 4);
  EXPECT_NE(net.big.data_ptr(), big_ptr);
  EXPECT_EQ(net.small.data_ptr(), small_ptr);
  EXPECT_EQ(net.outside.data_ptr(), outside_ptr);
  EXPECT_EQ(net.outside.data_ptr(), net.outsider.data_ptr());  // still one storage with its outsider
  EXPECT_TRUE(same_bits(net.big, big0));
  EXPECT_TRUE(same_bits(net.tied_a, tied0));
  EXPECT_TRUE(same_bits(net.view_half, view0));
  EXPECT_TRUE(same_bits(net.buf, buf0));
  EXPECT_EQ(net.view_half.storage_offset(), 512 * 1024);  // the view keeps its place in its storage
  // The module's registered handles are the moved tensors (set_data keeps the objects).
  EXPECT_EQ(net.named_parameters()["big"].data_ptr(), net.big.data_ptr());
  EXPECT_EQ(net.named_parameters()["tied_b"].data_ptr(), net.tied_a.data_ptr());
  EXPECT_EQ(net.named_buffers()["buf"].data_ptr(), net.buf.data_ptr());
  // The arena starts on a 2 MiB boundary (the first storage taken is big's).
  EXPECT_EQ(reinterpret_cast<uintptr_t>(net.big.data_ptr()) % (uintptr_t{2} << 20), 0u);
  // Writes land in the arena and are seen through every handle.
  net.tied_b.data().add_(1.0f);
  EXPECT_TRUE(same_bits(net.tied_a, tied0 + 1.0f));
  // A second call leaves the arena's storages where they are (no second copy); the
  // outsider's storage is still left alone.
  const void* moved_ptr = net.big.data_ptr();
  const HugePageReport again = place_in_huge_pages(net);
  EXPECT_EQ(again.tensors, 0);
  EXPECT_EQ(again.skipped, 1);
  EXPECT_EQ(net.big.data_ptr(), moved_ptr);
  // The report says what the kernel did (not asserted: THP may be off or fragmented).
  std::printf("THP mode '%s', %lld of %lld bytes on huge pages\n", r.thp_mode.c_str(),
              static_cast<long long>(r.huge_bytes), static_cast<long long>(r.bytes));
}

// Two modules whose tensors share one storage (a LoRA engine copy shares its policy's
// base): neither moves it, so they still share it afterwards.
TEST(HugePages, StorageSharedWithAnotherModuleStaysShared) {
  Net a, b;
  b.big.set_data(a.big);
  ASSERT_EQ(a.big.data_ptr(), b.big.data_ptr());
  place_in_huge_pages(b);
  place_in_huge_pages(a);
  EXPECT_EQ(a.big.data_ptr(), b.big.data_ptr());
}

// The old storage is freed once the tensor points at the arena.
TEST(HugePages, OldStorageIsReleased) {
  Net net;
  const c10::weak_intrusive_ptr<c10::StorageImpl> old(net.big.storage().getWeakStorageImpl());
  ASSERT_FALSE(old.expired());
  if (place_in_huge_pages(net).tensors == 0) GTEST_SKIP() << "THP is off here: nothing moves";
  EXPECT_TRUE(old.expired());
}

TEST(HugePages, TensorsOutliveTheModule) {
  at::Tensor kept;
  at::Tensor want;
  {
    Net net;
    want = net.big.clone();
    if (place_in_huge_pages(net).tensors == 0) GTEST_SKIP() << "THP is off here: nothing moves";
    kept = net.big;
  }
  EXPECT_TRUE(same_bits(kept, want));  // the arena lives while a tensor in it does
}

TEST(HugePages, NothingBelowTheThreshold) {
  Net net;
  const HugePageReport r = place_in_huge_pages(net, int64_t{1} << 30);
  EXPECT_EQ(r.tensors, 0);
  EXPECT_EQ(r.bytes, 0);
}

// A model moved whole (min_bytes 0: every storage) computes the same logits, and
// still trains: gradients reach the moved parameters and an optimiser step changes them.
TEST(HugePages, ModelComputesAndTrainsTheSameAfterTheMove) {
  for (bool tied : {false, true}) {
    const ModelConfig cfg = testing::tiny_config(Arch::kQwen3, tied);
    Transformer a = testing::spicy_model(cfg, 5), b = testing::spicy_model(cfg, 5);
    const at::Tensor ids = testing::random_ids(2, 9, cfg.vocab_size, 7);
    const HugePageReport r = place_in_huge_pages(*b, 0);
    EXPECT_EQ(r.skipped, 0);
    if (r.thp_mode != "never" && !r.thp_mode.empty())
      EXPECT_EQ(r.tensors, static_cast<int64_t>(b->parameters().size()));
    {
      at::NoGradGuard ng;
      EXPECT_TRUE(same_bits(a->forward(ids), b->forward(ids))) << "tied " << tied;
    }
    if (tied) EXPECT_EQ(b->lm_head_weight().data_ptr(), b->named_parameters()["model.embed_tokens.weight"].data_ptr());
    b->train();
    torch::optim::SGD opt(b->parameters(), torch::optim::SGDOptions(0.1));
    const at::Tensor before = b->named_parameters()["model.norm.weight"].clone();
    b->forward(ids).logsumexp(-1).sum().backward();
    opt.step();
    EXPECT_FALSE(same_bits(b->named_parameters()["model.norm.weight"], before));
  }
}

}  // namespace
}  // namespace agentr1::model
