// Fit: a regression trains under one device and mirrored replicas to the
// same weights, resumes bit for bit, evaluates, stops early, and refuses bad
// input by name.
#include "fit/fit.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/file_io.h"
#include "base/status.h"
#include "fit/optimizers.h"
#include "fit/strategy_flags.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "train/data/sources.h"
#include "train/layers.h"
#include "train/losses.h"
#include "train/phase_layers.h"
#include "train/models.h"

namespace strata {
namespace fit {
namespace {

// y = 2 x0 - 3 x1 + 1 + noise; features [n, 2], labels [n, 1].
std::vector<Tensor> Regression(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0, 1);
  Tensor x(DT_FLOAT, TensorShape{n, 2}), y(DT_FLOAT, TensorShape{n, 1});
  for (int64_t i = 0; i < n; ++i) {
    const float a = normal(gen), b = normal(gen);
    x.data<float>()[2 * i] = a;
    x.data<float>()[2 * i + 1] = b;
    y.data<float>()[i] = 2 * a - 3 * b + 1 + 0.01f * normal(gen);
  }
  return {x, y};
}

data::DatasetPtr Data(int64_t n, uint32_t seed) { return *data::FromTensors(Regression(n, seed)); }

StrategyConfig Config(const std::string& strategy, int devices) {
  StrategyConfig c;
  c.strategy = strategy;
  c.num_cpu_devices = strategy == "one_device" ? 0 : devices;
  c.intra_op_threads = 1;
  return c;
}

// A Dense(1) regression with MSE, trained by Fit; the final checkpoint's
// kernel comes back in *kernel.
struct Outcome {
  FitResult result;
  Tensor kernel;
};

absl::StatusOr<Outcome> Train(const StrategyConfig& config, FitOptions o, const std::string& optimizer = "sgd",
                              int64_t examples = 256) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::Strategy> strategy, MakeStrategy(config));
  train::Sequential net(/*seed=*/5);
  net.Add<train::Dense>(1);
  Model m;
  m.predict = [&net](const Scope& s, Output x) { return net.Build(s, x); };
  m.loss = [](const Scope& s, Output y, Output p) -> absl::StatusOr<Output> {
    Output l = train::MeanSquaredError(s, y, p);
    STRATA_RETURN_IF_ERROR(s.status());
    return l;
  };
  m.metrics = {MeanSquaredErrorMetric()};
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Optimizer> opt, MakeOptimizer(optimizer, 0.05));
  o.quiet = true;
  if (o.checkpoint_dir.empty()) {
    STRATA_ASSIGN_OR_RETURN(o.checkpoint_dir, io::MakeTempDir("fit_test"));
  }
  STRATA_ASSIGN_OR_RETURN(FitResult r, Fit(strategy.get(), m, opt.get(), Data(examples, 1), Data(64, 2), o));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(r.final_checkpoint));
  Outcome out{r, Tensor()};
  STRATA_RETURN_IF_ERROR(reader->Read("dense/kernel", &out.kernel));
  return out;
}

// Ids in, an Embedding first: int32 features through the distributed input,
// on one device and mirrored, to the same weights.
absl::StatusOr<Tensor> TrainEmbeddingModel(const StrategyConfig& config) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::Strategy> strategy, MakeStrategy(config));
  std::mt19937 gen(4);
  Tensor x(DT_INT32, TensorShape{256, 4}), y(DT_INT32, TensorShape{256});
  for (int i = 0; i < 256; ++i) {
    int sum = 0;
    for (int j = 0; j < 4; ++j) sum += (x.data<int32_t>()[i * 4 + j] = static_cast<int32_t>(gen() % 10));
    y.data<int32_t>()[i] = sum % 2;
  }
  train::Sequential net(/*seed=*/2);
  net.Add<train::Embedding>(10, 3);
  net.Add<train::Flatten>();
  net.Add<train::Dense>(2);
  Model m;
  m.predict = [&net](const Scope& s, Output ids) { return net.Build(s, ids); };
  m.loss = [](const Scope& s, Output labels, Output logits) -> absl::StatusOr<Output> {
    return train::SparseSoftmaxCrossEntropy(s, labels, logits);
  };
  m.metrics = {AccuracyMetric()};
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Optimizer> opt, MakeOptimizer("adam", 0.01));
  FitOptions o;
  o.quiet = true;
  o.global_batch_size = 32;
  o.epochs = 2;
  STRATA_ASSIGN_OR_RETURN(o.checkpoint_dir, io::MakeTempDir("fit_test"));
  STRATA_ASSIGN_OR_RETURN(FitResult r,
                          Fit(strategy.get(), m, opt.get(), *data::FromTensors({x, y}), *data::FromTensors({x, y}), o));
  if (!(r.validation.at("val_accuracy") >= 0)) return absl::InternalError("no accuracy");
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(r.final_checkpoint));
  Tensor table;
  STRATA_RETURN_IF_ERROR(reader->Read("embedding/embeddings", &table));
  return table;
}

TEST(FitTest, AnEmbeddingModelOnIdsTrainsAlikeUnderEveryStrategy) {
  auto one = TrainEmbeddingModel(Config("one_device", 1));
  auto two = TrainEmbeddingModel(Config("mirrored", 2));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(one->shape(), (TensorShape{10, 3}));
  for (int64_t i = 0; i < one->NumElements(); ++i) {
    EXPECT_NEAR(one->data<float>()[i], two->data<float>()[i], 1e-5) << i;
  }
}

TEST(FitTest, LearnsARegressionAndEvaluatesIt) {
  FitOptions o;
  o.global_batch_size = 32;
  o.epochs = 20;
  auto r = Train(Config("one_device", 1), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->result.total_steps, 20 * (256 / 32));
  EXPECT_EQ(r->result.final_step, r->result.total_steps);
  EXPECT_LT(r->result.validation.at("val_mse"), 0.01);
  EXPECT_NEAR(r->result.validation.at("val_loss"), r->result.validation.at("val_mse"), 1e-6);
  EXPECT_NEAR(r->kernel.data<float>()[0], 2.0f, 0.05f);
  EXPECT_NEAR(r->kernel.data<float>()[1], -3.0f, 0.05f);
}

TEST(FitTest, ThePredictorRunsTheTrainedModel) {
  for (const char* strategy : {"one_device", "mirrored"}) {
    SCOPED_TRACE(strategy);
    FitOptions o;
    o.global_batch_size = 32;
    o.epochs = 5;
    auto r = Train(Config(strategy, 2), o);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_NE(r->result.predictor, nullptr);
    const std::vector<Tensor> val = Regression(64, 2);  // Train's validation examples
    auto p = r->result.predictor->Predict(val[0]);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->shape(), (TensorShape{64, 1}));
    double mse = 0;
    for (int64_t i = 0; i < 64; ++i) mse += std::pow(p->data<float>()[i] - val[1].data<float>()[i], 2) / 64;
    EXPECT_NEAR(mse, r->result.validation.at("val_mse"), 1e-5) << "the weights the last evaluation used";
    auto bad = r->result.predictor->Predict(Tensor(DT_FLOAT, TensorShape{4, 3}));
    EXPECT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("Predictor"), std::string::npos) << bad.status();
  }
}

TEST(FitTest, EveryStrategyEndsOnTheSameWeights) {
  FitOptions o;
  o.global_batch_size = 32;
  o.epochs = 3;
  auto one = Train(Config("one_device", 1), o, "adam");
  auto two = Train(Config("mirrored", 2), o, "adam");
  auto four = Train(Config("mirrored", 4), o, "adam");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_TRUE(four.ok()) << four.status();
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(two->kernel.data<float>()[i], one->kernel.data<float>()[i], 1e-5);
    EXPECT_NEAR(four->kernel.data<float>()[i], one->kernel.data<float>()[i], 1e-5);
  }
}

TEST(FitTest, PartialBatchesTrainEveryExampleOnceUnderEveryStrategy) {
  // 101 examples in global batches of 32: each epoch 3 full batches and one
  // of 5. Over 3 replicas a full batch splits 11/11/10, the last 2/2/1; over
  // 4, 8 each and 2/1/1/1; over 8, the last leaves 3 replicas without an
  // example. Weighted by their shares they train as one device does.
  FitOptions o;
  o.global_batch_size = 32;
  o.epochs = 3;
  auto one = Train(Config("one_device", 1), o, "adam", 101);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->result.total_steps, 3 * 4);
  for (int devices : {3, 4, 8}) {
    auto many = Train(Config("mirrored", devices), o, "adam", 101);
    ASSERT_TRUE(many.ok()) << many.status();
    EXPECT_EQ(many->result.final_step, 12);
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(many->kernel.data<float>()[i], one->kernel.data<float>()[i], 1e-5) << devices << " replicas";
    }
  }
  // A global batch that is no multiple of the replicas: 33 over 2.
  o.global_batch_size = 33;
  auto odd_one = Train(Config("one_device", 1), o, "adam", 101);
  auto odd_two = Train(Config("mirrored", 2), o, "adam", 101);
  ASSERT_TRUE(odd_one.ok()) << odd_one.status();
  ASSERT_TRUE(odd_two.ok()) << odd_two.status();
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(odd_two->kernel.data<float>()[i], odd_one->kernel.data<float>()[i], 1e-5);
  // drop_remainder: 3 steps an epoch, and other weights.
  o.global_batch_size = 32;
  o.drop_remainder = true;
  auto dropped = Train(Config("mirrored", 4), o, "adam", 101);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->result.total_steps, 3 * 3);
  EXPECT_GT(std::abs(dropped->kernel.data<float>()[0] - one->kernel.data<float>()[0]), 1e-4);
}

// Dense(8, relu) -> BatchNormalization -> [Dropout] -> Dense(1) on the
// regression, SGD: the final checkpoint's weights and moving statistics.
struct PhaseModel {
  bool synchronized = true;
  double dropout = 0;
  int64_t steps = 16;
  std::string checkpoint_dir;  // a fresh one if empty
};
const std::vector<std::string> kPhaseModelWeights = {"dense/kernel", "batch_normalization/gamma",
                                                     "batch_normalization/beta", "batch_normalization/moving_mean",
                                                     "batch_normalization/moving_variance", "dense_1/kernel"};

absl::StatusOr<std::map<std::string, Tensor>> TrainPhaseModel(const StrategyConfig& config, const PhaseModel& p) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::Strategy> strategy, MakeStrategy(config));
  train::Sequential net(/*seed=*/3);
  net.Add<train::Dense>(8, train::Activation::kRelu);
  net.Add<train::BatchNormalization>(train::BatchNormalization::Options{.synchronized = p.synchronized});
  if (p.dropout > 0) net.Add<train::Dropout>(p.dropout);
  net.Add<train::Dense>(1);
  Model m;
  m.predict = [&net](const Scope& s, Output x) { return net.Build(s, x); };
  m.loss = [](const Scope& s, Output y, Output pred) -> absl::StatusOr<Output> {
    return train::MeanSquaredError(s, y, pred);
  };
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Optimizer> opt, MakeOptimizer("sgd", 0.05));
  FitOptions o;
  o.quiet = true;
  o.global_batch_size = 32;
  o.steps = p.steps;
  o.save_every_steps = 4;
  o.checkpoint_dir = p.checkpoint_dir;
  if (o.checkpoint_dir.empty()) {
    STRATA_ASSIGN_OR_RETURN(o.checkpoint_dir, io::MakeTempDir("fit_test"));
  }
  STRATA_ASSIGN_OR_RETURN(FitResult r, Fit(strategy.get(), m, opt.get(), Data(256, 1), Data(64, 2), o));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(r.final_checkpoint));
  std::map<std::string, Tensor> out;
  for (const std::string& name : kPhaseModelWeights) STRATA_RETURN_IF_ERROR(reader->Read(name, &out[name]));
  return out;
}

double WorstDifference(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b,
                       const std::string& name) {
  const Tensor& x = a.at(name);
  const Tensor& y = b.at(name);
  double worst = 0;
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    worst = std::max<double>(worst, std::abs(x.data<float>()[i] - y.data<float>()[i]));
  }
  return worst;
}

TEST(FitTest, SynchronizedBatchNormTrainsAcrossReplicasAsOnOneDevice) {
  auto one = TrainPhaseModel(Config("one_device", 1), {});
  auto two = TrainPhaseModel(Config("mirrored", 2), {});
  auto four = TrainPhaseModel(Config("mirrored", 4), {});
  auto local = TrainPhaseModel(Config("mirrored", 2), {.synchronized = false});
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_TRUE(four.ok()) << four.status();
  ASSERT_TRUE(local.ok()) << local.status();
  for (const std::string& name : kPhaseModelWeights) {
    EXPECT_LE(WorstDifference(*one, *two, name), 1e-5) << name;
    EXPECT_LE(WorstDifference(*one, *four, name), 1e-5) << name;
  }
  // The statistics moved away from their initial values.
  EXPECT_GT(std::abs(one->at("batch_normalization/moving_mean").data<float>()[0]), 1e-3);
  // Per-replica statistics (16 examples each) are another computation:
  // their mean variance is below the global batch's.
  EXPECT_GT(WorstDifference(*one, *local, "batch_normalization/moving_variance"), 1e-4);
  EXPECT_GT(WorstDifference(*one, *local, "dense_1/kernel"), 1e-5);
}

TEST(FitTest, DropoutRunsRepeatExactlyAndResumeExactly) {
  const PhaseModel with_dropout{.dropout = 0.3};
  auto a = TrainPhaseModel(Config("mirrored", 2), with_dropout);
  auto b = TrainPhaseModel(Config("mirrored", 2), with_dropout);
  auto none = TrainPhaseModel(Config("mirrored", 2), {});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(none.ok()) << none.status();
  for (const std::string& name : kPhaseModelWeights) EXPECT_EQ(WorstDifference(*a, *b, name), 0) << name;
  EXPECT_GT(WorstDifference(*a, *none, "dense_1/kernel"), 1e-4) << "dropout changed the training";
  // Stopped at step 10 (its checkpoint at 8) and run on to 16: the masks
  // continue from the checkpointed step counters.
  PhaseModel first = with_dropout;
  first.steps = 10;
  first.checkpoint_dir = *io::MakeTempDir("fit_test");
  ASSERT_TRUE(TrainPhaseModel(Config("mirrored", 2), first).ok());
  PhaseModel second = with_dropout;
  second.checkpoint_dir = first.checkpoint_dir;
  auto resumed = TrainPhaseModel(Config("mirrored", 2), second);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  for (const std::string& name : kPhaseModelWeights) EXPECT_EQ(WorstDifference(*a, *resumed, name), 0) << name;
}

TEST(FitTest, AResumedRunEndsBitForBitWhereAnUninterruptedOneDoes) {
  FitOptions o;
  o.global_batch_size = 16;
  o.steps = 37;
  o.save_every_steps = 5;
  auto whole = Train(Config("one_device", 1), o, "adam");
  ASSERT_TRUE(whole.ok()) << whole.status();

  FitOptions first = o;
  first.steps = 23;  // stops mid-epoch, between two saves
  first.checkpoint_dir = *io::MakeTempDir("fit_test");
  ASSERT_TRUE(Train(Config("mirrored", 2), first, "adam").ok());
  FitOptions second = o;
  second.checkpoint_dir = first.checkpoint_dir;
  auto resumed = Train(Config("one_device", 1), second, "adam");
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->result.start_step, 23);
  EXPECT_EQ(resumed->result.final_step, 37);
  // Mirrored for the first part, one device after: the same to rounding.
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(resumed->kernel.data<float>()[i], whole->kernel.data<float>()[i], 1e-5);

  // On one strategy throughout, bit for bit.
  first.checkpoint_dir = *io::MakeTempDir("fit_test");
  second.checkpoint_dir = first.checkpoint_dir;
  ASSERT_TRUE(Train(Config("one_device", 1), first, "adam").ok());
  resumed = Train(Config("one_device", 1), second, "adam");
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->result.final_loss, whole->result.final_loss);
  EXPECT_EQ(resumed->kernel.data<float>()[0], whole->kernel.data<float>()[0]);
  EXPECT_EQ(resumed->kernel.data<float>()[1], whole->kernel.data<float>()[1]);
}

TEST(FitTest, AShardedRunSavesTheUnshardedSlotsAndResumesUnderAnyStrategy) {
  // zero_stage 1 on 4 replicas: the regression's 3 parameters in blocks of
  // 1 (the last padded). Its checkpoint holds what an unsharded run's does,
  // and resumes on 3 sharded replicas or one device as if never sharded.
  FitOptions o;
  o.global_batch_size = 16;
  o.steps = 37;
  o.save_every_steps = 5;
  auto whole = Train(Config("one_device", 1), o, "adam");
  ASSERT_TRUE(whole.ok()) << whole.status();
  StrategyConfig sharded4 = Config("mirrored", 4);
  sharded4.zero_stage = 1;
  StrategyConfig sharded3 = Config("mirrored", 3);
  sharded3.zero_stage = 1;

  FitOptions first = o;
  first.steps = 23;
  first.checkpoint_dir = *io::MakeTempDir("fit_test");
  auto part = Train(sharded4, first, "adam");
  ASSERT_TRUE(part.ok()) << part.status();
  auto reader = CheckpointReader::Open(part->result.final_checkpoint);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (const char* slot : {"dense/kernel/Adam", "dense/kernel/Adam_1"}) {
    ASSERT_TRUE((*reader)->Contains(slot)) << slot;
    EXPECT_EQ((*reader)->tensors().at(slot).shape, TensorShape({2, 1})) << slot;
  }
  for (const auto& [name, info] : (*reader)->tensors()) {
    EXPECT_FALSE(absl::StrContains(name, "zero_")) << name;
  }
  FitOptions second = o;
  second.checkpoint_dir = first.checkpoint_dir;
  auto resumed = Train(sharded3, second, "adam");
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->result.start_step, 23);
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(resumed->kernel.data<float>()[i], whole->kernel.data<float>()[i], 1e-5);

  // One device first, sharded after; and sharded first, one device after.
  first.checkpoint_dir = *io::MakeTempDir("fit_test");
  second.checkpoint_dir = first.checkpoint_dir;
  ASSERT_TRUE(Train(Config("one_device", 1), first, "adam").ok());
  resumed = Train(sharded4, second, "adam");
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(resumed->kernel.data<float>()[i], whole->kernel.data<float>()[i], 1e-5);
  first.checkpoint_dir = *io::MakeTempDir("fit_test");
  second.checkpoint_dir = first.checkpoint_dir;
  ASSERT_TRUE(Train(sharded3, first, "adam").ok());
  resumed = Train(Config("one_device", 1), second, "adam");
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(resumed->kernel.data<float>()[i], whole->kernel.data<float>()[i], 1e-5);
}

// Asks to stop at a given epoch.
class StopAt : public Callback {
 public:
  explicit StopAt(int64_t epoch) : epoch_(epoch) {}
  void OnEpochEnd(int64_t epoch, const Logs& logs) override {
    epochs_seen.push_back(epoch);
    EXPECT_TRUE(logs.count("loss") && logs.count("val_loss") && logs.count("val_mse"));
    if (epoch == epoch_) RequestStop();
  }
  std::vector<int64_t> epochs_seen;

 private:
  const int64_t epoch_;
};

TEST(FitTest, CallbacksSeeEachEpochAndCanStopTheRun) {
  StopAt stop(3);
  FitOptions o;
  o.global_batch_size = 32;
  o.epochs = 10;
  o.callbacks = {&stop};
  auto r = Train(Config("one_device", 1), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(stop.epochs_seen, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(r->result.stopped_early);
  EXPECT_EQ(r->result.final_step, 3 * (256 / 32));
}

TEST(FitTest, WritesAChromeTraceOfTheStepsAfterWarmUp) {
  FitOptions o;
  o.global_batch_size = 32;
  o.steps = 10;
  o.trace_out = io::JoinPath(*io::MakeTempDir("fit_test"), "trace.json");
  o.trace_warmup_steps = 2;
  o.trace_steps = 3;
  auto r = Train(Config("mirrored", 2), o);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<std::string> trace = io::ReadFileToString(o.trace_out);
  ASSERT_TRUE(trace.ok()) << trace.status();
  for (const char* span : {"\"step 3\"", "\"step 4\"", "\"step 5\""}) {
    EXPECT_TRUE(absl::StrContains(*trace, span)) << span;
  }
  EXPECT_FALSE(absl::StrContains(*trace, "\"step 6\""));
  EXPECT_TRUE(absl::StrContains(*trace, "MatMul"));
  EXPECT_TRUE(absl::StrContains(*trace, "Collective"));  // the replicas' all-reduce
}

TEST(FitTest, EarlyStoppingWaitsForItsPatience) {
  EarlyStopping es("val_loss", /*patience=*/2);
  Logs logs;
  for (double v : {1.0, 0.5, 0.6, 0.55}) {
    logs["val_loss"] = v;
    es.OnEpochEnd(1, logs);
  }
  EXPECT_TRUE(es.stop_requested());
  EarlyStopping copy("val_loss", 2);
  EarlyStopping fresh("val_loss", 2);
  ASSERT_TRUE(fresh.RestoreState(EarlyStopping("val_loss", 2).SaveState()).ok());
  logs["val_loss"] = 0.5;
  copy.OnEpochEnd(1, logs);
  ASSERT_TRUE(fresh.RestoreState(copy.SaveState()).ok());
  logs["val_loss"] = 0.7;
  fresh.OnEpochEnd(2, logs);
  fresh.OnEpochEnd(3, logs);
  EXPECT_TRUE(fresh.stop_requested()) << "the restored best (0.5) was kept";
  EXPECT_FALSE(fresh.RestoreState("garbage").ok());
}

// A regression model written as two stages with a skip connection (the
// features cross the boundary beside the hidden layer):
//   stage 0: h = relu(x W0 + b0)                -> {h, x}
//   stage 1: p = (relu(h W1 + b1) + h) Wo + x Ws -> {p}
struct StagedRegression {
  std::vector<distribute::PipelineStageFn> Stages() {
    return {[this](const Scope& s, const OutputList& in) -> absl::StatusOr<OutputList> {
              STRATA_ASSIGN_OR_RETURN(Output h, d0.Apply(s, in[0]));
              return OutputList{h, in[0]};
            },
            [this](const Scope& s, const OutputList& in) -> absl::StatusOr<OutputList> {
              STRATA_ASSIGN_OR_RETURN(Output h, d1.Apply(s, in[0]));
              STRATA_ASSIGN_OR_RETURN(Output p, out.Apply(s, ops::Add(s, h, in[0])));
              STRATA_ASSIGN_OR_RETURN(Output q, skip.Apply(s, in[1]));
              return OutputList{ops::Add(s, p, q)};
            }};
  }
  static constexpr const char* kWeights[] = {"d0/kernel",  "d0/bias",  "d1/kernel",   "d1/bias",
                                             "out/kernel", "out/bias", "skip/kernel", "skip/bias"};
  train::Dense d0{"d0", 8, train::Activation::kRelu, 1};
  train::Dense d1{"d1", 8, train::Activation::kRelu, 2};
  train::Dense out{"out", 1, train::Activation::kNone, 3};
  train::Dense skip{"skip", 1, train::Activation::kNone, 4};
};

// Fits StagedRegression (momentum SGD, 256 examples, batches of 32) as two
// pipeline stages on CPU devices 0 and 1 with 4 micro-batches (1F1B), or
// unsplit on one device (its stages called in a row as `predict`); returns
// the final checkpoint's weights.
absl::StatusOr<std::map<std::string, Tensor>> FitStaged(bool pipelined, FitOptions o,
                                                        Logs* validation = nullptr) {
  StrategyConfig config = Config("one_device", 1);
  config.num_cpu_devices = pipelined ? 2 : 1;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::Strategy> strategy, MakeStrategy(config));
  StagedRegression net;
  Model m;
  if (pipelined) {
    m.stages = net.Stages();
    o.pipeline.micro_batches = 4;
  } else {
    m.predict = [&net](const Scope& s, Output x) -> absl::StatusOr<Output> {
      OutputList h = {x};
      for (const auto& stage : net.Stages()) {
        STRATA_ASSIGN_OR_RETURN(h, stage(s, h));
      }
      return h[0];
    };
  }
  m.loss = [](const Scope& s, Output y, Output p) -> absl::StatusOr<Output> {
    return train::MeanSquaredError(s, y, p);
  };
  m.metrics = {MeanSquaredErrorMetric()};
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Optimizer> opt, MakeOptimizer("momentum", 0.02));
  o.quiet = true;
  o.global_batch_size = 32;
  if (o.checkpoint_dir.empty()) {
    STRATA_ASSIGN_OR_RETURN(o.checkpoint_dir, io::MakeTempDir("fit_staged"));
  }
  STRATA_ASSIGN_OR_RETURN(FitResult r,
                          Fit(strategy.get(), m, opt.get(), Data(256, 1), Data(64, 2), o));
  if (validation != nullptr) *validation = r.validation;
  if (pipelined) {  // the Predictor runs the stages one after the other
    STRATA_ASSIGN_OR_RETURN(Tensor p, r.predictor->Predict(Regression(5, 3)[0]));
    if (p.shape() != TensorShape({5, 1})) {
      return absl::InternalError(absl::StrCat("predictions of shape ", p.shape().DebugString()));
    }
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                          CheckpointReader::Open(r.final_checkpoint));
  std::map<std::string, Tensor> weights;
  for (const char* name : StagedRegression::kWeights) {
    STRATA_RETURN_IF_ERROR(reader->Read(name, &weights[name]));
  }
  return weights;
}

void ExpectSameWeights(const std::map<std::string, Tensor>& got,
                       const std::map<std::string, Tensor>& want) {
  for (const auto& [name, t] : want) {
    const Tensor& g = got.at(name);
    ASSERT_EQ(g.shape(), t.shape()) << name;
    for (int64_t i = 0; i < t.NumElements(); ++i) {
      EXPECT_NEAR(g.data<float>()[i], t.data<float>()[i], 1e-5) << name << "[" << i << "]";
    }
  }
}

// A model given as stages trains pipelined to the unsplit model's weights,
// evaluates alike, and its checkpoints resume unsplit (and the other way).
TEST(FitTest, AModelOfStagesTrainsPipelinedAsUnsplitAndResumesEitherWay) {
  FitOptions o;
  o.epochs = 4;
  Logs pipelined_val, unsplit_val;
  auto unsplit = FitStaged(false, o, &unsplit_val);
  auto pipelined = FitStaged(true, o, &pipelined_val);
  ASSERT_TRUE(unsplit.ok()) << unsplit.status();
  ASSERT_TRUE(pipelined.ok()) << pipelined.status();
  ExpectSameWeights(*pipelined, *unsplit);
  EXPECT_NEAR(pipelined_val.at("val_mse"), unsplit_val.at("val_mse"), 1e-5);
  EXPECT_LT(unsplit_val.at("val_mse"), 0.5);  // it learned (the labels' variance is ~14)
  for (bool first_pipelined : {true, false}) {
    SCOPED_TRACE(first_pipelined ? "pipelined, then unsplit" : "unsplit, then pipelined");
    FitOptions half = o;
    half.epochs = 2;
    auto dir = io::MakeTempDir("fit_staged");
    ASSERT_TRUE(dir.ok());
    half.checkpoint_dir = *dir;
    ASSERT_TRUE(FitStaged(first_pipelined, half).ok());
    FitOptions rest = o;
    rest.checkpoint_dir = *dir;
    auto resumed = FitStaged(!first_pipelined, rest);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    ExpectSameWeights(*resumed, *unsplit);
  }
}

// Stages under several replicas, and micro-batches that do not divide a
// batch, are refused by name.
TEST(FitTest, APipelineThatCannotRunIsRefusedByName) {
  auto run = [](const std::string& strategy_name, int64_t examples, int micro_batches) {
    auto strategy = MakeStrategy(Config(strategy_name, 2));
    if (!strategy.ok()) return strategy.status();
    StagedRegression net;
    Model m;
    m.stages = net.Stages();
    m.loss = [](const Scope& s, Output y, Output p) -> absl::StatusOr<Output> {
      return train::MeanSquaredError(s, y, p);
    };
    auto opt = MakeOptimizer("sgd", 0.1);
    FitOptions o;
    o.quiet = true;
    o.global_batch_size = 32;
    o.pipeline.micro_batches = micro_batches;
    return Fit(strategy->get(), m, opt->get(), Data(examples, 1), nullptr, o).status();
  };
  auto expect = [](absl::Status s, const std::string& says) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), says)) << s;
  };
  expect(run("mirrored", 64, 4), "trains under a strategy of one replica");
  expect(run("one_device", 64, 3),
         "pipeline.micro_batches = 3 does not divide global_batch_size 32");
  expect(run("one_device", 90, 4), "does not divide an epoch's last batch of 26 examples");
  expect(run("one_device", 64, 0), "pipeline.micro_batches must be >= 1");
}

TEST(FitTest, BadInputIsRefusedByName) {
  auto strategy = MakeStrategy(Config("mirrored", 2));
  ASSERT_TRUE(strategy.ok());
  // Each Fit builds its own graph: a fresh network each time.
  std::vector<std::unique_ptr<train::Sequential>> nets;
  auto model = [&nets](std::function<absl::StatusOr<Output>(const Scope&, Output, Output)> loss) {
    nets.push_back(std::make_unique<train::Sequential>(1));
    nets.back()->Add<train::Dense>(1);
    train::Sequential* net = nets.back().get();
    Model m;
    m.predict = [net](const Scope& s, Output x) { return net->Build(s, x); };
    m.loss = std::move(loss);
    return m;
  };
  auto mse = [](const Scope& s, Output y, Output p) -> absl::StatusOr<Output> {
    return train::MeanSquaredError(s, y, p);
  };
  auto opt = MakeOptimizer("sgd", 0.1);
  FitOptions o;
  o.quiet = true;
  o.global_batch_size = 32;
  // A loss that is not a scalar: the squared error of every example.
  auto r = Fit(strategy->get(), model([](const Scope& s, Output y, Output p) -> absl::StatusOr<Output> {
                 return ops::Square(s, ops::Sub(s, p, y));
               }),
               opt->get(), Data(64, 1), nullptr, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "scalar")) << r.status();

  o.global_batch_size = 0;
  r = Fit(strategy->get(), model(mse), opt->get(), Data(64, 1), nullptr, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "global_batch_size")) << r.status();

  o.global_batch_size = 32;
  auto three = data::FromTensors({Tensor(DT_FLOAT, TensorShape{64, 2}), Tensor(DT_FLOAT, TensorShape{64, 1}),
                                  Tensor(DT_FLOAT, TensorShape{64, 1})});
  r = Fit(strategy->get(), model(mse), opt->get(), *three, nullptr, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "(features, label)")) << r.status();

  // Larger than the data: one partial batch an epoch, or nothing to train
  // with drop_remainder.
  o.global_batch_size = 128;
  o.drop_remainder = true;
  r = Fit(strategy->get(), model(mse), opt->get(), Data(64, 1), nullptr, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "larger than the 64")) << r.status();
  o.drop_remainder = false;
  r = Fit(strategy->get(), model(mse), opt->get(), Data(64, 1), nullptr, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total_steps, 1);
  // That optimizer's step counter is the finished Fit's graph's.
  r = Fit(strategy->get(), model(mse), opt->get(), Data(64, 1), nullptr, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "make a new optimizer")) << r.status();
  opt = MakeOptimizer("sgd", 0.1);

  // A loss function that returns no loss.
  o.global_batch_size = 32;
  r = Fit(strategy->get(), model([](const Scope&, Output, Output) -> absl::StatusOr<Output> { return Output(); }),
          opt->get(), Data(64, 1), nullptr, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "the loss is a null Output")) << r.status();

  // A model that returns no prediction.
  Model no_prediction = model(mse);
  no_prediction.predict = [](const Scope&, Output) -> absl::StatusOr<Output> { return Output(); };
  r = Fit(strategy->get(), no_prediction, opt->get(), Data(64, 1), nullptr, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "null prediction")) << r.status();

  // A model whose layers another Fit built: their weights are another graph's.
  Model reused = model(mse);
  ASSERT_TRUE(Fit(strategy->get(), reused, opt->get(), Data(64, 1), nullptr, o).ok());
  r = Fit(strategy->get(), reused, opt->get(), Data(64, 1), nullptr, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "was built in another graph")) << r.status();
}

TEST(FitTest, ACheckpointOfAnotherModelIsRefusedNamingTheVariable) {
  FitOptions o;
  o.global_batch_size = 32;
  o.steps = 4;
  o.checkpoint_dir = *io::MakeTempDir("fit_test");
  ASSERT_TRUE(Train(Config("one_device", 1), o).ok());
  // The same directory, a model with another layer.
  auto strategy = MakeStrategy(Config("one_device", 1));
  ASSERT_TRUE(strategy.ok());
  train::Sequential net(5);
  net.Add<train::Dense>(4, train::Activation::kRelu);
  net.Add<train::Dense>(1);
  Model m;
  m.predict = [&net](const Scope& s, Output x) { return net.Build(s, x); };
  m.loss = [](const Scope& s, Output y, Output p) -> absl::StatusOr<Output> {
    return train::MeanSquaredError(s, y, p);
  };
  auto opt = MakeOptimizer("sgd", 0.05);
  o.quiet = true;
  o.steps = 8;
  auto r = Fit(strategy->get(), m, opt->get(), Data(256, 1), nullptr, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "does not fit this model")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "dense")) << r.status();
}

}  // namespace
}  // namespace fit
}  // namespace strata
