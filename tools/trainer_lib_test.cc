// The trainer's library in process: flag validation, data specs, the
// digits lookup, the training input iterator (exact epochs, exact resume),
// and whole runs on synthetic data (determinism across thread and prefetch
// settings, resume, checkpoints that belong to another configuration).
#include "tools/trainer_lib.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "tools/trainer_data.h"
#include "tools/trainer_sharding.h"

namespace strata {
namespace trainer {
namespace {

std::string TempDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(t == nullptr ? "/tmp" : t, "/", name);
  std::filesystem::remove_all(dir);
  return dir;
}

TrainerConfig Synthetic() {
  TrainerConfig c;
  c.data = "synthetic:600:12:3";
  c.hidden = {16};
  c.global_batch_size = 20;
  c.steps = 300;
  c.learning_rate = 0.01;
  c.quiet = true;
  return c;
}

TEST(TrainerLibTest, ValidateConfigNamesTheFlag) {
  struct Case {
    void (*edit)(TrainerConfig*);
    const char* flag;
  };
  const Case cases[] = {
      {[](TrainerConfig* c) { c->model = "rnn"; }, "--model"},
      {[](TrainerConfig* c) { c->optimizer = "lamb"; }, "--optimizer"},
      {[](TrainerConfig* c) { c->lr_schedule = "step"; }, "--lr_schedule"},
      {[](TrainerConfig* c) { c->learning_rate = -1; }, "--learning_rate"},
      {[](TrainerConfig* c) { c->test_fraction = 1; }, "--test_fraction"},
      {[](TrainerConfig* c) { c->global_batch_size = 0; }, "--global_batch_size"},
      {[](TrainerConfig* c) { c->steps = -3; }, "--steps"},
      {[](TrainerConfig* c) { c->max_to_keep = -1; }, "--max_to_keep"},
      {[](TrainerConfig* c) { c->save_every_steps = 5; }, "--save_every_steps"},
      {[](TrainerConfig* c) { c->data = "synthetic:10:0"; }, "--data"},
      {[](TrainerConfig* c) { c->hidden = {4, 0}; }, "--hidden"},
      {[](TrainerConfig* c) { c->strategy = "central_storage"; }, "--strategy"},
      {[](TrainerConfig* c) { c->num_cpu_devices = -1; }, "--num_cpu_devices"},
      {[](TrainerConfig* c) { c->devices = {"/cpu:0", "/cpu:1"}; }, "--devices"},
      {[](TrainerConfig* c) { c->gradient_bucket_bytes = -2; }, "--gradient_bucket_bytes"},
      {[](TrainerConfig* c) { c->trace_steps = 0; }, "--trace_steps"},
      {[](TrainerConfig* c) { c->input_sharding = "files"; }, "--input_sharding"},
      {[](TrainerConfig* c) { c->input_sharding = "off"; }, "--input_sharding"},
  };
  for (const Case& k : cases) {
    TrainerConfig c;
    k.edit(&c);
    absl::Status s = ValidateConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.flag;
    EXPECT_TRUE(absl::StartsWith(s.message(), k.flag)) << s;
  }
  EXPECT_TRUE(ValidateConfig(TrainerConfig()).ok());
}

TEST(TrainerLibTest, ParseHiddenAndDataSpec) {
  EXPECT_EQ(*ParseHidden("128,64"), (std::vector<int64_t>{128, 64}));
  EXPECT_TRUE(ParseHidden("")->empty());
  EXPECT_FALSE(ParseHidden("128,,64").ok());
  EXPECT_FALSE(ParseHidden("-3").ok());

  auto syn = ParseDataSpec("synthetic:500:784:10");
  ASSERT_TRUE(syn.ok());
  EXPECT_EQ(syn->kind, SourceSpec::Kind::kSynthetic);
  EXPECT_EQ(syn->num_examples, 500);
  EXPECT_EQ(syn->num_features, 784);
  EXPECT_EQ(syn->num_classes, 10);
  EXPECT_EQ(ParseDataSpec("synthetic:50")->num_features, 64);
  EXPECT_EQ(ParseDataSpec("csv:/a/b.csv")->paths, std::vector<std::string>{"/a/b.csv"});
  EXPECT_EQ(ParseDataSpec("csv:/a/b.csv,c/,d/*.csv")->paths,
            (std::vector<std::string>{"/a/b.csv", "c/", "d/*.csv"}));
  EXPECT_FALSE(ParseDataSpec("csv:a.csv,").ok());
  EXPECT_FALSE(ParseDataSpec("csv:").ok());
  EXPECT_FALSE(ParseDataSpec("synthetic:10:5:1").ok());
  EXPECT_FALSE(ParseDataSpec("synthetic:1:2:3:4").ok());
  EXPECT_FALSE(ParseDataSpec("mnist").ok());
}

// In process: the replicas' devices, the same loss curve as one device (to
// float rounding: the gradient is summed in another order), and the trace.
TEST(TrainerLibTest, MirroredTrainsLikeOneDeviceAndTraces) {
  TrainerConfig one = Synthetic();
  one.steps = 60;
  one.metrics_out = TempDir("lib_one") + ".jsonl";
  TrainerConfig mirrored = one;
  mirrored.strategy = "mirrored";
  mirrored.devices = {"/cpu:1", "/cpu:0"};
  mirrored.metrics_out = TempDir("lib_mirrored") + ".jsonl";
  mirrored.trace_out = TempDir("lib_trace") + ".json";
  mirrored.trace_steps = 2;
  absl::StatusOr<TrainerResult> a = RunTrainer(one, nullptr);
  absl::StatusOr<TrainerResult> b = RunTrainer(mirrored, nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->devices, std::vector<std::string>{"/job:localhost/replica:0/task:0/device:CPU:0"});
  EXPECT_EQ(b->devices, (std::vector<std::string>{"/job:localhost/replica:0/task:0/device:CPU:1",
                                                  "/job:localhost/replica:0/task:0/device:CPU:0"}));
  EXPECT_NEAR(b->test_loss, a->test_loss, 1e-4 * a->test_loss);
  EXPECT_EQ(b->traced_steps, 2);
  EXPECT_EQ(a->traced_steps, 0);

  // A global batch of 20 does not split over 3 replicas: refused before
  // any work, naming the flag.
  TrainerConfig three = one;
  three.strategy = "mirrored";
  three.num_cpu_devices = 3;
  absl::StatusOr<TrainerResult> c = RunTrainer(three, nullptr);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(c.status().message(), "--global_batch_size: 20 does not split evenly over the 3 replicas"))
      << c.status();
}

TEST(TrainerLibTest, SplitIsFixedBySeedAndLabelsAreChecked) {
  auto spec = ParseDataSpec("synthetic:300:5:4");
  auto a = LoadTrainerData(*spec, "", 0.2, 7);
  auto b = LoadTrainerData(*spec, "", 0.2, 7);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->train_x.dim_size(0), 240);
  EXPECT_EQ(a->test_x.dim_size(0), 60);
  EXPECT_EQ(a->num_classes, 4);
  EXPECT_EQ(0, std::memcmp(a->test_x.raw_data(), b->test_x.raw_data(), a->test_x.TotalBytes()));
}

// Statistics summed over several workers' shares (FILE sharding) are those
// of the union of the shares, as ComputeStats gives them on one process.
TEST(TrainerLibTest, StatisticsFromSumsOverSharesMatchTheWhole) {
  auto spec = ParseDataSpec("synthetic:301:6:3");
  auto whole = LoadTrainerData(*spec, "", 0.0, 5);
  ASSERT_TRUE(whole.ok());
  // Three shares of consecutive rows of the training split.
  std::vector<TrainerData> shares;
  const int64_t n = whole->train_x.dim_size(0), f = whole->num_features;
  for (int k = 0; k < 3; ++k) {
    const int64_t begin = n * k / 3, end = n * (k + 1) / 3;
    TrainerData part = *whole;
    part.train_x = Tensor(DT_FLOAT, TensorShape{end - begin, f});
    std::memcpy(part.train_x.raw_data(), whole->train_x.data<float>() + begin * f,
                sizeof(float) * f * (end - begin));
    shares.push_back(part);
  }
  std::vector<double> sums(f, 0.0), dev(f, 0.0);
  for (const TrainerData& p : shares) {
    const std::vector<double> s = FeatureSums(p);
    for (int64_t j = 0; j < f; ++j) sums[j] += s[j];
  }
  std::vector<double> mean(f);
  for (int64_t j = 0; j < f; ++j) mean[j] = sums[j] / n;
  for (const TrainerData& p : shares) {
    const std::vector<double> s = SquaredDeviationSums(p, mean);
    for (int64_t j = 0; j < f; ++j) dev[j] += s[j];
  }
  const Tensor m = MeanFromSums(sums, double(n)), sd = StddevFromSums(dev, double(n));
  auto expected = ComputeStats(*whole);
  ASSERT_TRUE(expected.ok());
  for (int64_t j = 0; j < f; ++j) {
    EXPECT_NEAR(m.data<float>()[j], expected->first.data<float>()[j], 1e-6) << j;
    EXPECT_NEAR(sd.data<float>()[j], expected->second.data<float>()[j], 1e-6) << j;
  }
}

TEST(TrainerLibTest, CsvPathsExpandFilesDirectoriesAndPatterns) {
  const std::string dir = TempDir("csv_paths");
  std::filesystem::create_directories(dir + "/d");
  for (const char* name : {"d/b.csv", "d/a.csv", "d/.hidden", "c.csv", "e1.csv", "e0.csv"}) {
    std::ofstream(absl::StrCat(dir, "/", name)) << "1,0\n2,1\n";
  }
  SourceSpec spec = *ParseDataSpec(absl::StrCat("csv:", dir, "/c.csv,", dir, "/d,", dir, "/e?.csv"));
  auto files = ExpandCsvPaths(spec);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, (std::vector<std::string>{dir + "/c.csv", dir + "/d/a.csv", dir + "/d/b.csv",
                                              dir + "/e0.csv", dir + "/e1.csv"}));
  auto loaded = LoadTrainerData(spec, "", 0.0, 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->train_x.dim_size(0), 10);

  spec = *ParseDataSpec(absl::StrCat("csv:", dir, "/d,", dir, "/d/a.csv"));
  EXPECT_EQ(ExpandCsvPaths(spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec = *ParseDataSpec(absl::StrCat("csv:", dir, "/nothing*.csv"));
  EXPECT_EQ(ExpandCsvPaths(spec).status().code(), absl::StatusCode::kNotFound);
  std::filesystem::create_directories(dir + "/empty");
  spec = *ParseDataSpec(absl::StrCat("csv:", dir, "/empty"));
  EXPECT_EQ(ExpandCsvPaths(spec).status().code(), absl::StatusCode::kNotFound);
  spec = *ParseDataSpec(absl::StrCat("csv:", dir, "/missing.csv"));
  EXPECT_EQ(LoadTrainerData(spec, "", 0.0, 1).status().code(), absl::StatusCode::kNotFound);
}

TEST(TrainerLibTest, TrainIteratorCoversEachEpochOnceAndResumesExactly) {
  auto spec = ParseDataSpec("synthetic:103:3:2");
  auto d = LoadTrainerData(*spec, "", 0.0, 1);
  ASSERT_TRUE(d.ok());
  // Label each example by its row so batches can be traced back.
  for (int64_t i = 0; i < 103; ++i) d->train_x.data<float>()[i * 3] = static_cast<float>(i);
  auto it = MakeTrainIterator(*d, 10, 5, /*prefetch=*/2);
  ASSERT_TRUE(it.ok());
  data::Example batch;
  bool end = false;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<int> seen;
    for (int b = 0; b < 10; ++b) {  // 103 / 10: 10 batches, 3 examples dropped
      ASSERT_TRUE((*it)->GetNext(&batch, &end).ok());
      ASSERT_EQ(batch[0].shape(), (TensorShape{10, 3}));
      for (int i = 0; i < 10; ++i) seen.insert(static_cast<int>(batch[0].data<float>()[i * 3]));
    }
    EXPECT_EQ(seen.size(), 100u) << "epoch " << epoch;
  }
  auto state = (*it)->SaveState();
  ASSERT_TRUE(state.ok());
  std::vector<float> expected;
  for (int b = 0; b < 13; ++b) {
    ASSERT_TRUE((*it)->GetNext(&batch, &end).ok());
    expected.insert(expected.end(), batch[0].data<float>(), batch[0].data<float>() + 30);
  }
  // A fresh iterator restored to the state.
  auto again = MakeTrainIterator(*d, 10, 5, /*prefetch=*/2);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->RestoreState(*state).ok());
  std::vector<float> got;
  for (int b = 0; b < 13; ++b) {
    ASSERT_TRUE((*again)->GetNext(&batch, &end).ok());
    got.insert(got.end(), batch[0].data<float>(), batch[0].data<float>() + 30);
  }
  EXPECT_EQ(got, expected);
  // Another batch size or seed is another pipeline: its state does not fit.
  EXPECT_FALSE((*MakeTrainIterator(*d, 20, 5, 2))->RestoreState(*state).ok());
  EXPECT_FALSE((*MakeTrainIterator(*d, 10, 6, 2))->RestoreState(*state).ok());
}

TEST(TrainerLibTest, UnevenBatchesCoverEachExampleOncePerEpochThenPlaceholders) {
  auto spec = ParseDataSpec("synthetic:61:3:2");
  auto d = LoadTrainerData(*spec, "", 0.0, 1);
  ASSERT_TRUE(d.ok());
  for (int64_t i = 0; i < 61; ++i) d->train_x.data<float>()[i * 3] = static_cast<float>(i);
  // A worker of 61 examples beside ones of 100 and 97, batches of 16: every
  // epoch is 7 steps (ceil(100 / 16)); this worker's are 16, 16, 16, 13,
  // then 3 with a placeholder row only.
  const UnevenEpoch plan = PlanUnevenEpoch({100, 97, 61}, 16);
  ASSERT_EQ(plan.steps, 7);
  EXPECT_FALSE(plan.even());
  auto ds = MakeUnevenTrainBatches(*d, 16, plan.steps, 5, /*prefetch=*/0, /*start_batch=*/0, plan.examples);
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto it = data::DatasetIterator::Create(*ds);
  ASSERT_TRUE(it.ok());
  data::Example batch;
  bool end = false;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::multiset<int> seen;
    for (int s = 0; s < plan.steps; ++s) {
      ASSERT_TRUE((*it)->GetNext(&batch, &end).ok());
      const int64_t step = epoch * plan.steps + s;
      const int64_t k = plan.Examples(2, step);
      EXPECT_EQ(k, std::vector<int64_t>({16, 16, 16, 13, 0, 0, 0})[s]);
      ASSERT_EQ(batch[0].dim_size(0), std::max<int64_t>(k, 1)) << "step " << s;
      for (int64_t i = 0; i < k; ++i) seen.insert(static_cast<int>(batch[0].data<float>()[i * 3]));
      // The counts DistributedDataset weighs by: this worker's examples and
      // the step's over every worker.
      ASSERT_EQ(batch.size(), 3u);
      EXPECT_EQ(batch[2].data<int64_t>()[0], k);
      EXPECT_EQ(batch[2].data<int64_t>()[1], plan.TotalExamples(step));
      EXPECT_EQ(plan.TotalExamples(step), plan.Examples(0, step) + plan.Examples(1, step) + k);
    }
    // Each of the 61 exactly once.
    EXPECT_EQ(seen.size(), 61u) << "epoch " << epoch;
    EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), 61u) << "epoch " << epoch;
  }
  // The last step of an epoch: 100 - 96 = 4 and 97 - 96 = 1 examples.
  EXPECT_EQ(plan.TotalExamples(6), 5);
  // Even shards that are a multiple of the batch need none of this.
  EXPECT_TRUE(PlanUnevenEpoch({32, 32}, 16).even());
  EXPECT_FALSE(PlanUnevenEpoch({40, 40}, 16).even());
  // Too many examples for the epoch's steps is refused.
  EXPECT_FALSE(MakeUnevenTrainBatches(*d, 16, 3, 5, 0, 0, plan.examples).ok());
  // Nor a shard that is none of the workers'.
  EXPECT_FALSE(MakeUnevenTrainBatches(*d, 16, 7, 5, 0, 0, {100, 97}).ok());
}

// A worker's shard of each global batch (DATA sharding): the shards of one
// position are the global batch cut in order, across epochs and with
// prefetch, and a state saved by any shard or by the whole pipeline resumes
// any other at the same position.
TEST(TrainerLibTest, ShardsOfTheTrainBatchesAreTheGlobalBatchCutInOrder) {
  auto spec = ParseDataSpec("synthetic:103:3:2");
  auto d = LoadTrainerData(*spec, "", 0.0, 1);
  ASSERT_TRUE(d.ok());
  for (int64_t i = 0; i < 103; ++i) d->train_x.data<float>()[i * 3] = static_cast<float>(i);
  auto rows = [](const data::Example& batch) {
    std::vector<float> v;
    for (int64_t i = 0; i < batch[0].dim_size(0); ++i) v.push_back(batch[0].data<float>()[i * 3]);
    return v;
  };
  for (int shards : {2, 4}) {
    SCOPED_TRACE(absl::StrCat(shards, " shards"));
    auto whole = data::DatasetIterator::Create(*MakeTrainBatches(*d, 12, 5, /*prefetch=*/2));
    ASSERT_TRUE(whole.ok());
    std::vector<std::unique_ptr<data::DatasetIterator>> parts;
    for (int k = 0; k < shards; ++k) {
      auto ds = MakeTrainBatches(*d, 12, 5, /*prefetch=*/2, 0, k, shards);
      ASSERT_TRUE(ds.ok()) << ds.status();
      auto it = data::DatasetIterator::Create(*ds);
      ASSERT_TRUE(it.ok());
      parts.push_back(std::move(*it));
    }
    data::Example batch;
    bool end = false;
    for (int step = 0; step < 20; ++step) {  // 8 batches an epoch: crosses two epochs
      ASSERT_TRUE((*whole)->GetNext(&batch, &end).ok());
      const std::vector<float> want = rows(batch);
      std::vector<float> got;
      for (auto& part : parts) {
        ASSERT_TRUE(part->GetNext(&batch, &end).ok());
        ASSERT_EQ(batch[0].shape(), (TensorShape{12 / shards, 3}));
        const std::vector<float> r = rows(batch);
        got.insert(got.end(), r.begin(), r.end());
      }
      ASSERT_EQ(got, want) << "step " << step;
    }
    // Shard 0's state resumes the last shard, and the whole pipeline's a shard.
    auto state = parts[0]->SaveState();
    ASSERT_TRUE(state.ok());
    auto resumed = data::DatasetIterator::Create(*MakeTrainBatches(*d, 12, 5, 2, 0, shards - 1, shards));
    ASSERT_TRUE(resumed.ok());
    ASSERT_TRUE((*resumed)->RestoreState(*state).ok());
    ASSERT_TRUE(parts.back()->GetNext(&batch, &end).ok());
    const std::vector<float> next = rows(batch);
    ASSERT_TRUE((*resumed)->GetNext(&batch, &end).ok());
    EXPECT_EQ(rows(batch), next);
  }
  EXPECT_FALSE(MakeTrainBatches(*d, 12, 5, 0, 0, 0, 5).ok());  // 5 does not divide 12
  EXPECT_FALSE(MakeTrainBatches(*d, 12, 5, 0, 0, 2, 2).ok());  // no shard 2 of 2
}

// keep_remainder: 103 examples in global batches of 12 make 9 batches an
// epoch, the last of 7. Sharded over 2 workers of 2 replicas (4 replicas,
// 2/2/2/1 of the 7), worker 0 gets 4 of them and worker 1 3, each with its
// {n, K} counts; every example once per epoch.
TEST(TrainerLibTest, KeptRemaindersCoverEveryExampleOnceAndCarryTheirCounts) {
  auto spec = ParseDataSpec("synthetic:103:3:2");
  auto d = LoadTrainerData(*spec, "", 0.0, 1);
  ASSERT_TRUE(d.ok());
  for (int64_t i = 0; i < 103; ++i) d->train_x.data<float>()[i * 3] = static_cast<float>(i);
  auto whole = data::DatasetIterator::Create(*MakeTrainBatches(*d, 12, 5, 0, 0, 0, 1, /*keep_remainder=*/true));
  ASSERT_TRUE(whole.ok());
  std::vector<std::unique_ptr<data::DatasetIterator>> workers;
  for (int w = 0; w < 2; ++w) {
    auto ds = MakeTrainBatches(*d, 12, 5, /*prefetch=*/2, 0, w, 2, /*keep_remainder=*/true, 2);
    ASSERT_TRUE(ds.ok()) << ds.status();
    workers.push_back(std::move(*data::DatasetIterator::Create(*ds)));
  }
  data::Example batch;
  bool end = false;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::multiset<int> seen;
    for (int s = 0; s < 9; ++s) {
      ASSERT_TRUE((*whole)->GetNext(&batch, &end).ok());
      const int64_t k = s < 8 ? 12 : 7;
      ASSERT_EQ(batch.size(), 2u) << "one worker: no counts";
      ASSERT_EQ(batch[0].dim_size(0), k);
      std::vector<float> want;
      for (int64_t i = 0; i < k; ++i) want.push_back(batch[0].data<float>()[i * 3]);
      std::vector<float> got;
      for (int w = 0; w < 2; ++w) {
        ASSERT_TRUE(workers[w]->GetNext(&batch, &end).ok());
        ASSERT_EQ(batch.size(), 3u);
        const int64_t n = batch[2].data<int64_t>()[0];
        EXPECT_EQ(n, s < 8 ? 6 : (w == 0 ? 4 : 3)) << "step " << s;
        EXPECT_EQ(batch[2].data<int64_t>()[1], k);
        for (int64_t i = 0; i < n; ++i) got.push_back(batch[0].data<float>()[i * 3]);
      }
      EXPECT_EQ(got, want) << "step " << s;
      for (float v : want) seen.insert(static_cast<int>(v));
    }
    EXPECT_EQ(seen.size(), 103u);
    EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), 103u);
  }
  // Fewer examples than one batch still make one (partial) batch an epoch.
  EXPECT_TRUE(MakeTrainBatches(*d, 200, 5, 0, 0, 0, 1, true).ok());
  EXPECT_FALSE(MakeTrainBatches(*d, 200, 5, 0, 0, 0, 1, false).ok());
}

TEST(TrainerLibTest, TrainsDeterministicallyWithOrWithoutPrefetchAndInterOpThreads) {
  TrainerConfig a = Synthetic();
  a.checkpoint_dir = TempDir("det_a");
  TrainerConfig b = a;
  b.checkpoint_dir = TempDir("det_b");
  b.prefetch = 0;
  b.inter_op_threads = 2;
  auto ra = RunTrainer(a);
  auto rb = RunTrainer(b);
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(ra->final_step, 300);
  EXPECT_EQ(ra->num_classes, 3);
  EXPECT_EQ(ra->train_examples, 480);
  EXPECT_GT(ra->test_accuracy, 0.9);
  EXPECT_EQ(ra->test_accuracy, rb->test_accuracy);
  EXPECT_EQ(ra->test_loss, rb->test_loss);
  auto ca = CheckpointReader::Open(ra->final_checkpoint);
  auto cb = CheckpointReader::Open(rb->final_checkpoint);
  ASSERT_TRUE(ca.ok() && cb.ok());
  for (const auto& [name, info] : (*ca)->tensors()) {
    Tensor x, y;
    ASSERT_TRUE((*ca)->Read(name, &x).ok());
    ASSERT_TRUE((*cb)->Read(name, &y).ok());
    EXPECT_EQ(0, std::memcmp(x.raw_data(), y.raw_data(), x.TotalBytes())) << name;
  }
}

TEST(TrainerLibTest, ResumesAndRefusesAnotherConfigurationsCheckpoint) {
  TrainerConfig c = Synthetic();
  c.checkpoint_dir = TempDir("resume");
  c.save_every_steps = 40;
  c.optimizer = "momentum";
  c.lr_schedule = "cosine";
  c.steps = 80;
  c.learning_rate = 0;  // momentum's default
  auto first = RunTrainer(c);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->start_step, 0);
  c.steps = 120;
  auto second = RunTrainer(c);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->start_step, 80);
  EXPECT_EQ(second->final_step, 120);
  EXPECT_EQ(second->total_steps, 120);
  EXPECT_EQ(second->resumed_from, c.checkpoint_dir + "/ckpt-80");

  TrainerConfig other = c;
  other.hidden = {32};
  auto refused = RunTrainer(other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "hidden=16")) << refused.status();
}

// The largest difference between two checkpoints' float tensors, which
// must hold the same names and shapes.
float MaxDifference(const std::string& a, const std::string& b) {
  auto ca = CheckpointReader::Open(a);
  auto cb = CheckpointReader::Open(b);
  EXPECT_TRUE(ca.ok() && cb.ok()) << a << " " << b;
  if (!ca.ok() || !cb.ok()) return 1e30f;
  EXPECT_EQ((*ca)->tensors().size(), (*cb)->tensors().size());
  float worst = 0;
  for (const auto& [name, info] : (*ca)->tensors()) {
    Tensor x, y;
    EXPECT_TRUE((*ca)->Read(name, &x).ok()) << name;
    EXPECT_TRUE((*cb)->Read(name, &y).ok()) << name;
    EXPECT_EQ(x.shape(), y.shape()) << name;
    if (x.dtype() != DT_FLOAT || x.shape() != y.shape()) continue;
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      worst = std::max(worst, std::abs(x.data<float>()[i] - y.data<float>()[i]));
    }
  }
  return worst;
}

// --pipeline_stages / --micro_batches: every shape of pipeline ends on the
// one device's weights (1e-5), and a pipeline's checkpoint resumes without
// one (and the other way round): the weights keep their names.
TEST(TrainerLibTest, PipelinesTrainLikeOneDeviceAndShareItsCheckpoints) {
  TrainerConfig one = Synthetic();
  one.hidden = {16, 8};  // 3 layers
  one.steps = 100;
  one.optimizer = "momentum";
  one.drop_remainder = true;
  one.checkpoint_dir = TempDir("pipe_one");
  auto base = RunTrainer(one);
  ASSERT_TRUE(base.ok()) << base.status();
  struct Shape {
    int stages, micro_batches;
    const char* schedule;
  };
  for (const Shape& shape : {Shape{2, 1, "1f1b"}, Shape{2, 4, "1f1b"}, Shape{3, 4, "gpipe"},
                             Shape{3, 2, "1f1b"}, Shape{1, 5, "gpipe"}}) {
    const std::string what =
        absl::StrCat(shape.stages, "x", shape.micro_batches, " ", shape.schedule);
    TrainerConfig c = one;
    c.pipeline_stages = shape.stages;
    c.micro_batches = shape.micro_batches;
    c.pipeline_schedule = shape.schedule;
    c.checkpoint_dir = TempDir(absl::StrCat("pipe_", shape.stages, "_", shape.micro_batches));
    auto r = RunTrainer(c);
    ASSERT_TRUE(r.ok()) << what << ": " << r.status();
    EXPECT_LT(MaxDifference(base->final_checkpoint, r->final_checkpoint), 1e-5f) << what;
    EXPECT_NEAR(r->test_loss, base->test_loss, 1e-5) << what;
  }
  // --strategy=mirrored: a mesh of 2 stages x 2 replicas, and of 1 stage x
  // 4 (data parallelism alone, through the pipeline's graph).
  for (int stages : {2, 1}) {
    TrainerConfig c = one;
    c.strategy = "mirrored";
    c.num_cpu_devices = 4;
    c.pipeline_stages = stages;
    c.micro_batches = stages == 2 ? 2 : 5;
    c.checkpoint_dir = TempDir(absl::StrCat("pipe_mesh_", stages));
    auto r = RunTrainer(c);
    ASSERT_TRUE(r.ok()) << stages << " stages x " << 4 / stages << ": " << r.status();
    EXPECT_LT(MaxDifference(base->final_checkpoint, r->final_checkpoint), 1e-5f) << stages;
  }
  // 50 steps as 2 stages, then 50 on one device; and the other way round.
  for (int first : {2, 1}) {
    TrainerConfig c = one;
    c.checkpoint_dir = TempDir(absl::StrCat("pipe_resume_", first));
    c.steps = 50;
    c.pipeline_stages = first;
    c.micro_batches = 2;
    ASSERT_TRUE(RunTrainer(c).ok());
    c.steps = 100;
    c.pipeline_stages = 3 - first;
    c.micro_batches = first == 2 ? 1 : 4;
    auto resumed = RunTrainer(c);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    EXPECT_EQ(resumed->start_step, 50);
    EXPECT_LT(MaxDifference(base->final_checkpoint, resumed->final_checkpoint), 1e-5f) << first;
  }
  // A mesh of 2 stages x 2 replicas resumed as 1 stage x 4 replicas.
  TrainerConfig mesh = one;
  mesh.checkpoint_dir = TempDir("pipe_resume_mesh");
  mesh.steps = 50;
  mesh.strategy = "mirrored";
  mesh.num_cpu_devices = 4;
  mesh.pipeline_stages = 2;
  ASSERT_TRUE(RunTrainer(mesh).ok());
  mesh.steps = 100;
  mesh.pipeline_stages = 1;
  auto resumed = RunTrainer(mesh);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->start_step, 50);
  EXPECT_LT(MaxDifference(base->final_checkpoint, resumed->final_checkpoint), 1e-5f);
}

// --trace_out with a pipeline: every traced step's forward and backward of
// each micro-batch on each stage of each replica, as an item of its own.
TEST(TrainerLibTest, APipelinesTraceShowsItsItems) {
  TrainerConfig c = Synthetic();
  c.steps = 15;
  c.strategy = "mirrored";
  c.num_cpu_devices = 4;
  c.pipeline_stages = 2;
  c.micro_batches = 2;
  c.drop_remainder = true;
  c.trace_out = TempDir("pipe_trace") + ".json";
  c.trace_steps = 2;
  auto r = RunTrainer(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->traced_steps, 2);
  std::ifstream in(c.trace_out);
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int items = 0;
  for (size_t p = trace.find("\"op\":\"PipelineItem\""); p != std::string::npos;
       p = trace.find("\"op\":\"PipelineItem\"", p + 1)) {
    ++items;
  }
  EXPECT_EQ(items, 2 * 4 * 2 * 2);  // steps x stages of replicas x micro-batches x (F, B)
  EXPECT_NE(trace.find("\"name\":\"B1\""), std::string::npos);
}

// The stages of a pipeline in one process run side by side: the session
// gets an inter-op thread per stage device. (The loop gave a strategy of
// one replica the inline pool, which runs one op at a time: the stages
// took turns, and a 2-stage GPipe step of 512-wide layers, 8 micro-batches
// of 64, ran at 23-25k examples/s instead of 35-38k.) One device alone
// keeps the inline pool.
TEST(TrainerLibTest, APipelinesStagesGetAThreadEach) {
  TrainerConfig c = Synthetic();
  c.steps = 5;
  auto alone = RunTrainer(c);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->inter_op_threads, 0);
  c.pipeline_stages = 3;
  c.hidden = {16, 16};
  c.micro_batches = 4;
  c.drop_remainder = true;
  auto pipelined = RunTrainer(c);
  ASSERT_TRUE(pipelined.ok()) << pipelined.status();
  EXPECT_EQ(pipelined->inter_op_threads, 3);
}

TEST(TrainerLibTest, PipelineFlagsAreChecked) {
  struct Case {
    void (*edit)(TrainerConfig*);
    const char* error;
  };
  const Case cases[] = {
      {[](TrainerConfig* c) { c->pipeline_stages = 0; }, "--pipeline_stages: 0 is not in [1, "},
      {[](TrainerConfig* c) { c->micro_batches = 0; }, "--micro_batches: 0 is < 1"},
      {[](TrainerConfig* c) { c->pipeline_schedule = "zb"; },
       "--pipeline_schedule: unknown schedule 'zb'"},
      {[](TrainerConfig* c) { c->micro_batches = 3; },
       "--micro_batches: 3 does not divide --global_batch_size=20"},
      {[](TrainerConfig* c) {
         c->pipeline_stages = 2;
         c->strategy = "parameter_server";
       },
       "--pipeline_stages: a pipeline runs under --strategy=one_device, mirrored or "
       "multi_worker_mirrored, not parameter_server"},
      {[](TrainerConfig* c) {
         c->pipeline_stages = 2;
         c->strategy = "mirrored";
         c->num_cpu_devices = 3;
       },
       "--num_cpu_devices: 3 CPU devices do not make a mesh of replicas of 2 pipeline stages"},
      {[](TrainerConfig* c) {
         c->pipeline_stages = 2;
         c->micro_batches = 4;
         c->strategy = "mirrored";
         c->num_cpu_devices = 4;
       },
       "--micro_batches: 4 on each of 2 replicas does not divide --global_batch_size=20"},
      {[](TrainerConfig* c) {
         c->pipeline_stages = 2;
         c->num_cpu_devices = 1;
       },
       "--num_cpu_devices: 1 CPU devices for 2 pipeline stages"},
      {[](TrainerConfig* c) {
         c->pipeline_stages = 2;
         c->devices = {"/cpu:1"};
       },
       "--devices: a pipeline's stages go on the CPU devices in order"},
      {[](TrainerConfig* c) {
         c->pipeline_stages = 2;
         c->model = "embedding";
       },
       "--pipeline_stages: --model=embedding"},
      // Once the model and the data are known: more stages than the 2
      // layers; 480 training examples in batches of 50 leave a last batch of
      // 30, which 25 micro-batches do not split.
      {[](TrainerConfig* c) { c->pipeline_stages = 3; },
       "--pipeline_stages=3: the model has only 2 layers"},
      {[](TrainerConfig* c) {
         c->global_batch_size = 50;
         c->micro_batches = 25;
       },
       "--micro_batches=25: each epoch's last batch has 30 of the 480 training examples"},
  };
  for (const Case& k : cases) {
    TrainerConfig c = Synthetic();
    c.steps = 2;
    k.edit(&c);
    absl::StatusOr<TrainerResult> r = RunTrainer(c);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << k.error << ": " << r.status();
    EXPECT_TRUE(absl::StartsWith(r.status().message(), k.error)) << r.status();
  }
}

TEST(TrainerLibTest, EveryOptimizerAndScheduleTrains) {
  for (const char* opt : {"sgd", "momentum", "adam"}) {
    for (const char* schedule : {"constant", "exponential", "cosine"}) {
      TrainerConfig c = Synthetic();
      c.optimizer = opt;
      c.lr_schedule = schedule;
      c.learning_rate = std::string(opt) == "sgd" ? 0.1 : 0.01;
      auto r = RunTrainer(c);
      ASSERT_TRUE(r.ok()) << opt << "/" << schedule << ": " << r.status();
      EXPECT_GT(r->test_accuracy, 0.9) << opt << "/" << schedule;
    }
  }
}

}  // namespace
}  // namespace trainer
}  // namespace strata
