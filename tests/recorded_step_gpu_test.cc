// Whole-step CUDA graphs on a real GPU: an MLP training step (features fed
// as float, labels as int32, SGD or Adam) run by two sessions from the same
// initial weights, one recording its GPU partition and replaying it, one
// kernel by kernel. Every step's loss and the final weights must agree, a
// new batch size must be recorded of its own, and a restored variable must
// make the step record again. Skips without a GPU.
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/state_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "runtime/gpu/gpu_info.h"
#include "runtime/session.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/optimizers.h"

namespace strata {
namespace {

#define SKIP_WITHOUT_GPU()                                                                    \
  do {                                                                                        \
    const GpuCount gpus = CountGpus();                                                        \
    if (gpus.count == 0) GTEST_SKIP() << "no GPU: cudaGetDeviceCount said " << gpus.why_none; \
  } while (0)

constexpr int64_t kFeatures = 64, kClasses = 10;

struct Model {
  Scope root = Scope::NewRootScope();
  std::unique_ptr<train::Sequential> mlp;
  std::unique_ptr<train::Optimizer> opt;
  std::string loss, train_op, init;
  std::vector<std::string> weights;
};

Model Build(bool adam) {
  Model m;
  Output x = ops::Placeholder(m.root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, kFeatures}));
  Output y = ops::Placeholder(m.root.WithOpName("y"), DT_INT32, PartialTensorShape({-1}));
  const Scope gpu = m.root.WithDevice("/gpu:0");
  m.mlp = *train::MakeMlp({128, 64}, kClasses, /*seed=*/7);
  Output logits = *m.mlp->Build(gpu, x);
  Output loss = train::SparseSoftmaxCrossEntropy(gpu.NewSubScope("loss"), y, logits);
  if (adam) {
    m.opt = std::make_unique<train::Adam>(0.01);
  } else {
    m.opt = std::make_unique<train::SGD>(0.1);
  }
  Node* op = *train::Minimize(gpu, loss, m.mlp->reads(), m.opt.get());
  m.init = train::GlobalVariablesInitializer(m.root)->name();
  m.loss = loss.name();
  m.train_op = op->name();
  for (const train::VariableRead& r : m.mlp->reads()) m.weights.push_back(r.value.name());
  EXPECT_TRUE(m.root.status().ok()) << m.root.status();
  return m;
}

std::unique_ptr<Session> Open(const Model& m, bool record) {
  SessionOptions opts;
  opts.devices.num_gpus = 1;
  opts.host_fallback_without_kernel = true;  // the initializers run on the CPU
  opts.record_gpu_steps = record;
  auto s = Session::Create(m.root, opts);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  EXPECT_TRUE((*s)->Run({}, {}, {m.init}, nullptr).ok());
  return *std::move(s);
}

std::vector<std::pair<std::string, Tensor>> Batch(int64_t n, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Tensor x(DT_FLOAT, TensorShape{n, kFeatures});
  for (int64_t i = 0; i < x.NumElements(); ++i) x.data<float>()[i] = normal(rng);
  Tensor y(DT_INT32, TensorShape{n});
  for (int64_t i = 0; i < n; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng() % kClasses);
  return {{"x", x}, {"y", y}};
}

float Step(Session* s, const Model& m, const std::vector<std::pair<std::string, Tensor>>& batch) {
  std::vector<Tensor> out;
  absl::Status st = s->Run(batch, {m.loss}, {m.train_op}, &out);
  EXPECT_TRUE(st.ok()) << st;
  return st.ok() ? out[0].data<float>()[0] : NAN;
}

void ExpectSameWeights(Session* a, Session* b, const Model& m) {
  std::vector<Tensor> wa, wb;
  ASSERT_TRUE(a->Run({}, m.weights, {}, &wa).ok());
  ASSERT_TRUE(b->Run({}, m.weights, {}, &wb).ok());
  for (size_t i = 0; i < wa.size(); ++i) {
    ASSERT_EQ(wa[i].NumElements(), wb[i].NumElements());
    for (int64_t j = 0; j < wa[i].NumElements(); ++j) {
      const float x = wa[i].data<float>()[j], y = wb[i].data<float>()[j];
      ASSERT_NEAR(x, y, 1e-5f * std::max(1.0f, std::fabs(y))) << m.weights[i] << " element " << j;
    }
  }
}

void TrainsAsKernelByKernel(bool adam) {
  Model m = Build(adam);
  auto rec = Open(m, /*record=*/true);
  auto ref = Open(m, /*record=*/false);
  ASSERT_NE(rec, nullptr);
  ASSERT_NE(ref, nullptr);
  for (int step = 0; step < 30; ++step) {
    const auto batch = Batch(step % 7 == 6 ? 40 : 128, step);  // a smaller batch now and then
    const float lr = Step(rec.get(), m, batch), lk = Step(ref.get(), m, batch);
    ASSERT_NEAR(lr, lk, 1e-5f * std::max(1.0f, std::fabs(lk))) << "step " << step;
  }
  ExpectSameWeights(rec.get(), ref.get(), m);
  const RecordingStats st = rec->recording_stats();
  std::printf("%s: recorded %lld, replayed %lld, kernel by kernel %lld%s%s\n", adam ? "adam" : "sgd",
              static_cast<long long>(st.recorded), static_cast<long long>(st.replayed),
              static_cast<long long>(st.eager), st.not_recorded.empty() ? "" : "; not recorded: ",
              st.not_recorded.c_str());
  // (The initializer's step is not recorded: its random values come from
  // the CPU. not_recorded names it.)
  EXPECT_EQ(st.not_recorded.find(m.train_op), std::string::npos) << st.not_recorded;
  EXPECT_EQ(st.recorded, 2) << "batch 128 and batch 40";
  EXPECT_GE(st.replayed, 24);
}

TEST(RecordedStepGpuTest, SgdStepReplaysAsItRunsKernelByKernel) {
  SKIP_WITHOUT_GPU();
  TrainsAsKernelByKernel(/*adam=*/false);
}

TEST(RecordedStepGpuTest, AdamStepReplaysAsItRunsKernelByKernel) {
  SKIP_WITHOUT_GPU();
  TrainsAsKernelByKernel(/*adam=*/true);
}

TEST(RecordedStepGpuTest, ARestoredVariableIsRecordedAgainNotWrittenStale) {
  SKIP_WITHOUT_GPU();
  Model m = Build(/*adam=*/false);
  auto rec = Open(m, true);
  auto ref = Open(m, false);
  ASSERT_NE(rec, nullptr);
  ASSERT_NE(ref, nullptr);
  for (int step = 0; step < 5; ++step) {
    const auto batch = Batch(128, step);
    Step(rec.get(), m, batch);
    Step(ref.get(), m, batch);
  }
  // Both re-initialised: the variables get new buffers, as a restore gives.
  ASSERT_TRUE(rec->Run({}, {}, {m.init}, nullptr).ok());
  ASSERT_TRUE(ref->Run({}, {}, {m.init}, nullptr).ok());
  for (int step = 0; step < 5; ++step) {
    const auto batch = Batch(128, 100 + step);
    const float lr = Step(rec.get(), m, batch), lk = Step(ref.get(), m, batch);
    ASSERT_NEAR(lr, lk, 1e-5f * std::max(1.0f, std::fabs(lk))) << "step " << step << " after the restore";
  }
  ExpectSameWeights(rec.get(), ref.get(), m);
  EXPECT_EQ(rec->recording_stats().recorded, 2) << rec->recording_stats().not_recorded;
}

TEST(RecordedStepGpuTest, OutOfDeviceMemoryNamesTheNodeTheTensorAndItsSize) {
  SKIP_WITHOUT_GPU();
  Scope root = Scope::NewRootScope();
  const Scope gpu = root.WithDevice("/gpu:0");
  Output big = ops::Fill(gpu.WithOpName("big"), ops::Const(gpu, {int32_t{1} << 20, int32_t{1} << 20}, TensorShape{2}),
                         ops::Const(gpu, 1.0f));
  SessionOptions opts;
  opts.devices.num_gpus = 1;
  auto s = Session::Create(root, opts);
  ASSERT_TRUE(s.ok()) << s.status();
  for (int i = 0; i < 3; ++i) {  // and again: recorded or not, the same error
    std::vector<Tensor> out;
    absl::Status st = (*s)->Run({}, {big.name()}, {}, &out);
    ASSERT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
    EXPECT_NE(st.message().find("node 'big' (op Fill)"), std::string::npos) << st;
    EXPECT_NE(st.message().find("[1048576,1048576]"), std::string::npos) << st;
    EXPECT_NE(st.message().find("4398046511104 bytes"), std::string::npos) << st;
  }
}

}  // namespace
}  // namespace strata
