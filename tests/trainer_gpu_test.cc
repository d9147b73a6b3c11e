// The trainer on GPUs (issue 6), in process through tools/trainer_lib: the
// same model code trains on one GPU and ends where the same run on the CPU
// ends, and a mirrored run over every local GPU works end to end through
// NCCL. Needs a GPU: every test skips, saying why, where the CUDA runtime
// finds none (built only under --config=cuda; tagged "gpu").
//
//   - the digits MLP and CNN, SGD with a fixed seed, N steps on /gpu:0 and on
//     /cpu:0: every weight within a small tolerance of the CPU's (relative to
//     the tensor's largest element; float sums run in another order on the
//     GPU), and the test accuracy within 1 percentage point;
//   - MirroredStrategy with no devices takes every GPU, its sessions run
//     collectives through NCCL (an explicit CollectiveReduce over the
//     replicas, one NCCL rank per GPU: one on a one-GPU machine), and the
//     trainer's --strategy=mirrored run on them reaches the CPU's accuracy.
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/collective_ops.h"
#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "runtime/gpu/gpu_info.h"
#include "runtime/session.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/strategy_devices.h"
#include "tools/trainer_lib.h"

namespace strata {
namespace {

#define SKIP_WITHOUT_GPU()                                                        \
  do {                                                                            \
    const GpuCount gpus = CountGpus();                                            \
    if (gpus.count == 0) GTEST_SKIP() << "no GPU: cudaGetDeviceCount said " << gpus.why_none; \
  } while (0)

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base != nullptr ? base : "/tmp", "/trainer_gpu_", name);
  std::string cmd = absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'");
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

trainer::TrainerConfig Config(const std::string& model, int64_t steps, const std::string& dir) {
  trainer::TrainerConfig c;
  c.model = model;
  c.hidden = {64};
  c.data = "digits";
  c.optimizer = "sgd";
  c.learning_rate = 0.05;
  c.global_batch_size = 32;
  c.steps = steps;
  c.seed = 7;
  c.prefetch = 0;
  c.quiet = true;
  c.intra_op_threads = 1;
  c.checkpoint_dir = dir;
  return c;
}

// Largest |a - b| of each float tensor over the tensor's largest |a|; other
// dtypes must be equal. Returns the worst ratio over all tensors.
double CompareCheckpoints(const std::string& a, const std::string& b) {
  auto ra = CheckpointReader::Open(a);
  auto rb = CheckpointReader::Open(b);
  EXPECT_TRUE(ra.ok()) << ra.status();
  EXPECT_TRUE(rb.ok()) << rb.status();
  if (!ra.ok() || !rb.ok()) return 1e30;
  EXPECT_EQ((*ra)->tensors().size(), (*rb)->tensors().size());
  double worst = 0;
  for (const auto& [name, info] : (*ra)->tensors()) {
    Tensor ta, tb;
    EXPECT_TRUE((*ra)->Read(name, &ta).ok()) << name;
    if (!(*rb)->Read(name, &tb).ok()) {
      ADD_FAILURE() << name << " is missing in " << b;
      continue;
    }
    if (ta.dtype() != tb.dtype() || ta.shape() != tb.shape()) {
      ADD_FAILURE() << name << ": " << ta.DebugString() << " vs " << tb.DebugString();
      continue;
    }
    if (ta.dtype() != DT_FLOAT) {
      EXPECT_EQ(ta.DebugString(), tb.DebugString()) << name;
      continue;
    }
    double max_abs = 0, max_diff = 0;
    for (int64_t i = 0; i < ta.NumElements(); ++i) {
      const double x = ta.data<float>()[i], y = tb.data<float>()[i];
      max_abs = std::max(max_abs, std::abs(x));
      max_diff = std::max(max_diff, std::abs(x - y));
      if (!std::isfinite(y)) ADD_FAILURE() << name << " element " << i << " is " << y;
    }
    worst = std::max(worst, max_diff / std::max(max_abs, 1e-6));
  }
  return worst;
}

// Trains `model` for `steps` on /cpu:0 and on /gpu:0 from the same seed.
void ExpectGpuMatchesCpu(const std::string& model, int64_t steps, double tolerance) {
  trainer::TrainerConfig cpu = Config(model, steps, TempDir(model + "_cpu"));
  cpu.devices = {"/cpu:0"};
  trainer::TrainerConfig gpu = Config(model, steps, TempDir(model + "_gpu"));
  gpu.devices = {"/gpu:0"};
  absl::StatusOr<trainer::TrainerResult> rc = trainer::RunTrainer(cpu);
  ASSERT_TRUE(rc.ok()) << rc.status();
  absl::StatusOr<trainer::TrainerResult> rg = trainer::RunTrainer(gpu);
  ASSERT_TRUE(rg.ok()) << rg.status();
  ASSERT_EQ(rg->devices.size(), 1u);
  EXPECT_TRUE(absl::EndsWith(rg->devices[0], "device:GPU:0")) << rg->devices[0];
  EXPECT_EQ(rg->final_step, steps);
  const double worst = CompareCheckpoints(rc->final_checkpoint, rg->final_checkpoint);
  EXPECT_LE(worst, tolerance) << model << ": the GPU's weights drifted from the CPU's";
  EXPECT_NEAR(rg->test_accuracy, rc->test_accuracy, 0.01)
      << model << ": GPU " << rg->test_accuracy << ", CPU " << rc->test_accuracy;
  EXPECT_NEAR(rg->test_loss, rc->test_loss, 0.01 * std::max(1.0, rc->test_loss));
  std::printf("%s: %lld steps, worst relative weight difference %.3g; test accuracy GPU %.4f, CPU %.4f\n",
              model.c_str(), static_cast<long long>(steps), worst, rg->test_accuracy,
              rc->test_accuracy);
}

TEST(TrainerGpuTest, MlpOnOneGpuMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  ExpectGpuMatchesCpu("mlp", 300, 1e-3);
}

TEST(TrainerGpuTest, CnnOnOneGpuMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  ExpectGpuMatchesCpu("cnn", 150, 1e-3);
}

TEST(TrainerGpuTest, MirroredOverEveryGpuAllReducesThroughNccl) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<distribute::MirroredStrategy>> s =
      distribute::MirroredStrategy::Create({});
  ASSERT_TRUE(s.ok()) << s.status();
  distribute::MirroredStrategy& strategy = **s;
  const int n = strategy.num_local_replicas();
  ASSERT_EQ(n, CountGpus().count);
  ASSERT_TRUE(distribute::AllGpus(strategy.devices()));
  ASSERT_NE(strategy.device_mgr(), nullptr);
  ASSERT_NE(strategy.session_options().collective_executor, nullptr);

  // Replica r contributes r + 1 in every element; the sum over n replicas
  // reaches each through NCCL (a one-rank clique on one GPU).
  Scope root = Scope::NewRootScope();
  std::vector<Output> reduced;
  for (int r = 0; r < n; ++r) {
    const Scope on = root.WithDevice(strategy.devices()[r]).NewSubScope(absl::StrCat("replica_", r));
    Output value = ops::Fill(on, ops::Const(on, {int32_t{1000}}, TensorShape{1}),
                             ops::Const(on, static_cast<float>(r + 1)));
    reduced.push_back(ops::CollectiveReduce(on, value, n, strategy.collective_group_key(),
                                            /*instance_key=*/1,
                                            ops::CollectiveAttrs().MergeOp("Add").FinalOp("Id")));
  }
  ASSERT_TRUE(root.status().ok()) << root.status();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(root, strategy.session_options());
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<std::string> fetches;
  for (const Output& o : reduced) fetches.push_back(o.name());
  std::vector<Tensor> out;
  absl::Status run = (*session)->Run({}, fetches, {}, &out);
  ASSERT_TRUE(run.ok()) << run;
  const float want = n * (n + 1) / 2.0f;
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(out[r].NumElements(), 1000);
    for (int64_t i = 0; i < 1000; ++i) {
      ASSERT_EQ(out[r].data<float>()[i], want) << "replica " << r << " element " << i;
    }
  }
  session->reset();
  s->reset();

  // The trainer's mirrored run takes every GPU by default and trains as the
  // CPU does (the mean gradient over the replicas is the global batch's).
  trainer::TrainerConfig mirrored = Config("mlp", 200, TempDir("mirrored_gpu"));
  mirrored.strategy = "mirrored";
  mirrored.global_batch_size = 32 * n;
  trainer::TrainerConfig cpu = Config("mlp", 200, TempDir("mirrored_cpu"));
  cpu.global_batch_size = 32 * n;
  absl::StatusOr<trainer::TrainerResult> rm = trainer::RunTrainer(mirrored);
  ASSERT_TRUE(rm.ok()) << rm.status();
  ASSERT_EQ(static_cast<int>(rm->devices.size()), n);
  EXPECT_TRUE(distribute::AllGpus(rm->devices));
  absl::StatusOr<trainer::TrainerResult> rc = trainer::RunTrainer(cpu);
  ASSERT_TRUE(rc.ok()) << rc.status();
  EXPECT_NEAR(rm->test_accuracy, rc->test_accuracy, 0.01);
  EXPECT_LE(CompareCheckpoints(rc->final_checkpoint, rm->final_checkpoint), 1e-3);
}

}  // namespace
}  // namespace strata
