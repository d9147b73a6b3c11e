// Optimizers on a quadratic, loss = 0.5 * |w - c|^2 with the hand-written
// gradient w - c, against the update formulas written out in double.
#include "train/optimizers.h"

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "train/initializers.h"

namespace strata {
namespace train {
namespace {

const std::vector<float> kStart = {1.0f, -2.0f, 0.5f};
const std::vector<float> kTarget = {3.0f, 1.0f, -1.0f};

struct Problem {
  Scope root = Scope::NewRootScope();
  Variable* w = nullptr;
  Node* train = nullptr;
  Node* init = nullptr;
  Output read;
  Output iter;  // the optimizer's step counter
  std::unique_ptr<Session> session;

  // Builds the quadratic and `opt`'s step, then a session on `devices` CPUs.
  void Build(Optimizer& opt, int devices = 1) {
    w = CreateVariable(root, "w", TensorShape{3}, DT_FLOAT,
                       ConstantTensor(Tensor::FromVector<float>(kStart)));
    ASSERT_NE(w, nullptr) << root.status();
    Output grad = ops::Sub(root, w->Read(root), ops::Const<float>(root, {3, 1, -1}));
    train = opt.ApplyGradients(root, {{grad, w}});
    init = GlobalVariablesInitializer(root);
    read = w->Read(root);
    ASSERT_NE(opt.iterations(), nullptr);
    iter = opt.iterations()->Read(root);
    ASSERT_TRUE(root.ok()) << root.status();
    SessionOptions so;
    so.devices.num_cpu_devices = devices;
    auto s = Session::Create(root, so);
    ASSERT_TRUE(s.ok()) << s.status();
    session = *std::move(s);
    ASSERT_TRUE(session->Run({}, {}, {init->name()}, nullptr).ok());
  }
  std::vector<float> Step() {
    EXPECT_TRUE(session->Run({}, {}, {train->name()}, nullptr).ok());
    return Fetch(read);
  }
  std::vector<float> Fetch(Output o) {
    std::vector<Tensor> out;
    absl::Status s = session->Run({}, {o.name()}, {}, &out);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return {};
    return std::vector<float>(out[0].data<float>(), out[0].data<float>() + out[0].NumElements());
  }
  int64_t Iterations() {
    std::vector<Tensor> out;
    EXPECT_TRUE(session->Run({}, {iter.name()}, {}, &out).ok());
    return out.empty() ? -1 : *out[0].data<int64_t>();
  }
};

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, int step) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "step " << step << " elt " << i;
  }
}

double Loss(const std::vector<double>& w) {
  double l = 0;
  for (size_t i = 0; i < w.size(); ++i) l += 0.5 * (w[i] - kTarget[i]) * (w[i] - kTarget[i]);
  return l;
}

TEST(OptimizersTest, SgdMatchesReferenceAndMinimizes) {
  SGD sgd(0.1);
  Problem p;
  p.Build(sgd);
  std::vector<double> w(kStart.begin(), kStart.end());
  for (int step = 1; step <= 100; ++step) {
    auto got = p.Step();
    for (int i = 0; i < 3; ++i) w[i] -= double(0.1f) * (w[i] - kTarget[i]);
    ExpectClose(got, w, step);
  }
  EXPECT_LT(Loss(w), 1e-8);  // 7.6 * 0.81^100
  EXPECT_EQ(p.Iterations(), 100);
  EXPECT_EQ(sgd.iterations()->name(), "SGD/iter");
  EXPECT_EQ(sgd.iterations()->dtype(), DT_INT64);
}

class MomentumTest : public ::testing::TestWithParam<bool> {};

TEST_P(MomentumTest, MatchesReference) {
  const bool nesterov = GetParam();
  Momentum opt(0.05, 0.9, nesterov);
  Problem p;
  p.Build(opt);
  Variable* slot = opt.GetSlot(p.w, "Momentum");
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot->name(), "w/Momentum");
  EXPECT_FALSE(slot->trainable());
  std::vector<double> w(kStart.begin(), kStart.end()), a(3, 0.0);
  const double lr = double(0.05f), m = double(0.9f);
  for (int step = 1; step <= 100; ++step) {
    auto got = p.Step();
    for (int i = 0; i < 3; ++i) {
      const double g = w[i] - kTarget[i];
      a[i] = a[i] * m + g;
      w[i] -= nesterov ? g * lr + a[i] * m * lr : a[i] * lr;
    }
    ExpectClose(got, w, step);
  }
  EXPECT_LT(Loss(w), 1e-3);
  EXPECT_EQ(p.Iterations(), 100);
}

INSTANTIATE_TEST_SUITE_P(Nesterov, MomentumTest, ::testing::Bool());

// Adam's reference: TensorFlow's ApplyAdam with t = updates so far + 1 and
// `lr_at(step)` as the learning rate.
std::vector<std::vector<double>> AdamReference(int steps, const std::function<double(int)>& lr_at,
                                               bool nesterov) {
  const double b1 = double(0.9f), b2 = double(0.999f), eps = double(1e-7f);
  std::vector<double> w(kStart.begin(), kStart.end()), m(3, 0.0), v(3, 0.0);
  std::vector<std::vector<double>> out;
  for (int t = 1; t <= steps; ++t) {
    const double lr = double(static_cast<float>(lr_at(t - 1)));
    const double b1p = double(static_cast<float>(std::pow(0.9, t)));
    const double b2p = double(static_cast<float>(std::pow(0.999, t)));
    const double lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);
    for (int i = 0; i < 3; ++i) {
      const double g = w[i] - kTarget[i];
      m[i] += (g - m[i]) * (1 - b1);
      v[i] += (g * g - v[i]) * (1 - b2);
      const double num = nesterov ? m[i] * b1 + (1 - b1) * g : m[i];
      w[i] -= lr_t * num / (std::sqrt(v[i]) + eps);
    }
    out.push_back(w);
  }
  return out;
}

class AdamTest : public ::testing::TestWithParam<bool> {};

TEST_P(AdamTest, MatchesReference) {
  const bool nesterov = GetParam();
  AdamOptions o;
  o.use_nesterov = nesterov;
  Adam adam(0.1, o);
  Problem p;
  p.Build(adam);
  ASSERT_NE(adam.GetSlot(p.w, "m"), nullptr);
  EXPECT_EQ(adam.GetSlot(p.w, "m")->name(), "w/Adam");
  EXPECT_EQ(adam.GetSlot(p.w, "v")->name(), "w/Adam_1");
  auto ref = AdamReference(200, [](int) { return 0.1; }, nesterov);
  for (int step = 1; step <= 200; ++step) ExpectClose(p.Step(), ref[step - 1], step);
  EXPECT_LT(Loss(ref.back()), 1e-3);
  EXPECT_EQ(p.Iterations(), 200);
  // Every variable is in the collection; only w is trainable.
  EXPECT_EQ(GlobalVariables(p.root).size(), 4u);  // w, Adam/iter, w/Adam, w/Adam_1
  EXPECT_EQ(TrainableVariables(p.root), std::vector<Variable*>{p.w});
}

INSTANTIATE_TEST_SUITE_P(Nesterov, AdamTest, ::testing::Bool());

TEST(OptimizersTest, AdamFollowsTheScheduleOfTheStepCounter) {
  Adam adam(ExponentialDecay(0.2, 3, 0.5, /*staircase=*/true));
  Problem p;
  p.Build(adam);
  auto ref = AdamReference(10, [](int step) { return 0.2 * std::pow(0.5, step / 3); }, false);
  for (int step = 1; step <= 10; ++step) ExpectClose(p.Step(), ref[step - 1], step);
}

// Restoring every variable (weights, slots, counter) into a fresh session
// continues exactly where the first run stopped: the schedule and the bias
// corrections come from the restored counter.
TEST(OptimizersTest, ResumedRunContinuesExactly) {
  Adam adam(CosineDecay(0.3, 8));
  Problem p;
  p.Build(adam);
  // Restore ops: a placeholder and an assignment per variable.
  std::vector<Variable*> vars = GlobalVariables(p.root);
  std::vector<std::string> reads, restores, feeds;
  for (size_t i = 0; i < vars.size(); ++i) {
    Output ph = ops::Placeholder(p.root.WithOpName("restore_value_" + std::to_string(i)),
                                 vars[i]->dtype());
    restores.push_back(vars[i]->Assign(p.root, ph)->name());
    feeds.push_back(ph.name());
    reads.push_back(vars[i]->Read(p.root).name());
  }
  ASSERT_TRUE(p.root.ok()) << p.root.status();
  auto make_session = [&]() {
    auto s = Session::Create(p.root);
    EXPECT_TRUE(s.ok());
    return *std::move(s);
  };
  auto run_steps = [&](Session* s, int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(s->Run({}, {}, {p.train->name()}, nullptr).ok());
  };
  // Continuous: 6 steps.
  auto continuous = make_session();
  ASSERT_TRUE(continuous->Run({}, {}, {p.init->name()}, nullptr).ok());
  run_steps(continuous.get(), 6);
  std::vector<Tensor> want;
  ASSERT_TRUE(continuous->Run({}, reads, {}, &want).ok());
  // Interrupted: 3 steps, save, restore into a new session, 3 more.
  auto first = make_session();
  ASSERT_TRUE(first->Run({}, {}, {p.init->name()}, nullptr).ok());
  run_steps(first.get(), 3);
  std::vector<Tensor> saved;
  ASSERT_TRUE(first->Run({}, reads, {}, &saved).ok());
  auto second = make_session();
  std::vector<std::pair<std::string, Tensor>> feed;
  for (size_t i = 0; i < vars.size(); ++i) feed.push_back({feeds[i], saved[i].DeepCopy()});
  ASSERT_TRUE(second->Run(feed, {}, restores, nullptr).ok());
  run_steps(second.get(), 3);
  std::vector<Tensor> got;
  ASSERT_TRUE(second->Run({}, reads, {}, &got).ok());
  for (size_t i = 0; i < vars.size(); ++i) {
    ASSERT_EQ(got[i].TotalBytes(), want[i].TotalBytes());
    EXPECT_EQ(std::memcmp(got[i].raw_data(), want[i].raw_data(), got[i].TotalBytes()), 0)
        << vars[i]->name() << ": " << got[i].DebugString() << " vs " << want[i].DebugString();
  }
}

// A strategy's hook sees the gradients before they are applied.
class HalvingSGD : public SGD {
 public:
  using SGD::SGD;
  int calls = 0;
  std::vector<GradAndVar> AggregateGradients(const Scope& scope,
                                             const std::vector<GradAndVar>& gv) override {
    ++calls;
    std::vector<GradAndVar> out;
    for (const auto& [g, v] : gv) out.push_back({ops::Mul(scope, g, ops::Const(scope, 0.5f)), v});
    return out;
  }
};

TEST(OptimizersTest, ClipByGlobalNormScalesEveryGradientAlike) {
  // grad = w - target: at the start (-2, -3, 1.5), norm sqrt(15.25) = 3.905;
  // clipped to 1, then one SGD step of 1.
  SGD sgd(1.0);
  sgd.set_clip_global_norm(1.0);
  Problem p;
  p.Build(sgd);
  const std::vector<double> g = {kStart[0] - kTarget[0], kStart[1] - kTarget[1], kStart[2] - kTarget[2]};
  const double norm = std::sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
  std::vector<double> want;
  for (int i = 0; i < 3; ++i) want.push_back(kStart[i] - g[i] / norm);
  ExpectClose(p.Step(), want, 1);

  // Under the clip the gradients pass unchanged.
  SGD loose(0.1);
  loose.set_clip_global_norm(100.0);
  Problem q;
  q.Build(loose);
  std::vector<double> w(kStart.begin(), kStart.end());
  for (int i = 0; i < 3; ++i) w[i] -= double(0.1f) * (w[i] - kTarget[i]);
  ExpectClose(q.Step(), w, 1);
}

TEST(OptimizersTest, AdamWDecaysTheWeightsBeforeAdamsUpdate) {
  // With a zero gradient Adam's update is 0: only the decay moves w,
  // w *= 1 - lr * wd each step.
  Scope root = Scope::NewRootScope();
  Variable* w = CreateVariable(root, "w", TensorShape{2}, DT_FLOAT, ConstantTensor(Tensor::FromVector<float>({1, -4})));
  AdamW adamw(0.1, /*weight_decay=*/0.5);
  Node* train = adamw.ApplyGradients(root, {{ops::ZerosLike(root, w->Read(root)), w}});
  Output read = w->Read(root.WithOpName("after"));
  Node* init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = Session::Create(root);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}, nullptr).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*session)->Run({}, {}, {train->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {read.name()}, {}, &out).ok());
  EXPECT_NEAR(out[0].data<float>()[0], 1.0 * 0.95 * 0.95, 1e-6);
  EXPECT_NEAR(out[0].data<float>()[1], -4.0 * 0.95 * 0.95, 1e-6);
  EXPECT_NE(adamw.GetSlot(w, "m"), nullptr);
}

TEST(OptimizersTest, AggregateGradientsHookIsApplied) {
  HalvingSGD sgd(0.1);
  Problem p;
  p.Build(sgd);
  EXPECT_EQ(sgd.calls, 1);
  std::vector<double> w(kStart.begin(), kStart.end());
  for (int i = 0; i < 3; ++i) w[i] -= double(0.1f) * 0.5 * (w[i] - kTarget[i]);
  ExpectClose(p.Step(), w, 1);
}

TEST(OptimizersTest, SlotsAndUpdatesFollowTheVariablesDevices) {
  Scope root = Scope::NewRootScope();
  Variable* w0 = CreateVariable(root.WithDevice("/cpu:0"), "w0", TensorShape{2}, DT_FLOAT, Ones());
  Variable* w1 = CreateVariable(root.WithDevice("/cpu:1"), "w1", TensorShape{2}, DT_DOUBLE, Ones());
  Momentum opt(0.5, 0.5);
  Output g0 = ops::Const<float>(root, {1, 2});
  Output g1 = ops::Const<double>(root, {1, 2});
  Node* train = opt.ApplyGradients(root, {{g0, w0}, {g1, w1}});
  Node* init = GlobalVariablesInitializer(root);
  Output r0 = w0->Read(root), r1 = w1->Read(root);
  ASSERT_TRUE(root.ok()) << root.status();
  SessionOptions so;
  so.devices.num_cpu_devices = 2;
  auto s = Session::Create(root, so);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Run({}, {}, {init->name()}, nullptr).ok());
  ASSERT_TRUE((*s)->Run({}, {}, {train->name()}, nullptr).ok());
  ASSERT_TRUE((*s)->Run({}, {}, {train->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*s)->Run({}, {r0.name(), r1.name()}, {}, &out).ok());
  // accum: g, then 1.5 g; w = 1 - 0.5 * g - 0.75 * g = 1 - 1.25 g.
  EXPECT_FLOAT_EQ(out[0].data<float>()[1], 1 - 1.25f * 2);
  EXPECT_DOUBLE_EQ(out[1].data<double>()[0], 1 - 1.25);
  auto names = [&](int d) {
    std::vector<std::string> n;
    for (const auto& e : (*s)->device_mgr().devices()[d]->resource_manager()->List()) {
      n.push_back(e.name);
    }
    return n;
  };
  EXPECT_EQ(names(0), (std::vector<std::string>{"Momentum/iter", "w0", "w0/Momentum"}));
  EXPECT_EQ(names(1), (std::vector<std::string>{"w1", "w1/Momentum"}));
}

TEST(OptimizersTest, BadPairsAreInvalidArgument) {
  Scope root = Scope::NewRootScope();
  Variable* w = CreateVariable(root, "w", TensorShape{2}, DT_FLOAT, Zeros());
  SGD sgd(0.1);
  EXPECT_EQ(sgd.ApplyGradients(root, {{ops::Const<double>(root, {1, 2}), w}}), nullptr);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(root.status().message().find("'w'"), std::string::npos) << root.status();

  Scope r2 = Scope::NewRootScope();
  Variable* w2 = CreateVariable(r2, "w", TensorShape{2}, DT_FLOAT, Zeros());
  EXPECT_EQ(sgd.ApplyGradients(r2, {{ops::Const<float>(r2, {1, 2, 3}), w2}}), nullptr);
  EXPECT_EQ(r2.status().code(), absl::StatusCode::kInvalidArgument);

  Scope r3 = Scope::NewRootScope();
  EXPECT_EQ(sgd.ApplyGradients(r3, {{ops::Const<float>(r3, {1}), nullptr}}), nullptr);
  EXPECT_EQ(r3.status().code(), absl::StatusCode::kInvalidArgument);

  // A null gradient (the loss does not reach the variable) is skipped; with
  // nothing left it is an error.
  Scope r4 = Scope::NewRootScope();
  Variable* w4 = CreateVariable(r4, "w", TensorShape{2}, DT_FLOAT, Zeros());
  EXPECT_EQ(sgd.ApplyGradients(r4, {{Output(), w4}}), nullptr);
  EXPECT_EQ(r4.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace train
}  // namespace strata
