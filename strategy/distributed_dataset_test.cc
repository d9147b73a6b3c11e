// DistributedDataset: global batches split into per-replica feeds in
// replica order, placeholders on the replicas' devices, and its errors
// (uneven batches, mismatched specs, GetNext before Inputs); with several
// (simulated) workers, auto-sharding: FILE gives each worker per-worker
// batches of its own files, DATA its part of every global batch.
#include "strategy/distributed_dataset.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/status.h"
#include "gtest/gtest.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/test_util.h"
#include "train/data/csv.h"
#include "train/data/sources.h"
#include "train/data/transforms.h"

namespace strata {
namespace distribute {
namespace {

// Examples i = 0..n-1: x = [i, 10 i], y = i.
data::DatasetPtr Batches(int64_t n, int64_t batch) {
  std::vector<float> x;
  std::vector<int32_t> y;
  for (int64_t i = 0; i < n; ++i) {
    x.push_back(float(i));
    x.push_back(float(10 * i));
    y.push_back(int32_t(i));
  }
  auto ds = data::FromTensors({Tensor::FromVector(x, TensorShape{n, 2}), Tensor::FromVector(y)});
  return *data::Batch(*ds, batch);
}

std::vector<InputSpec> Specs() {
  return {{"x", DT_FLOAT, PartialTensorShape({-1, 2})}, {"y", DT_INT32, PartialTensorShape({-1})}};
}

TEST(DistributedDatasetTest, SplitsEachGlobalBatchInReplicaOrder) {
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(4), testing::Machine(4));
  auto dist = s->DistributeDataset(Batches(16, 8), Specs());
  ASSERT_TRUE(dist.ok()) << dist.status();
  Scope root = Scope::NewRootScope();
  auto inputs = (*dist)->Inputs(root);
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  ASSERT_EQ(inputs->size(), 2u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ((*inputs)[0][r].node()->name(), "x/replica_" + std::to_string(r));
    EXPECT_EQ((*inputs)[1][r].node()->requested_device(), s->devices()[r]);
  }
  // A second call returns the same placeholders.
  EXPECT_EQ((*(*dist)->Inputs(root))[0][2].node(), (*inputs)[0][2].node());

  for (int batch = 0; batch < 2; ++batch) {
    std::vector<std::pair<std::string, Tensor>> feeds;
    bool end = true;
    ASSERT_TRUE((*dist)->GetNext(&feeds, &end).ok());
    ASSERT_FALSE(end);
    ASSERT_EQ(feeds.size(), 8u);  // 2 components x 4 replicas
    for (int k = 0; k < 2; ++k) {
      for (int r = 0; r < 4; ++r) {
        const auto& [name, t] = feeds[k * 4 + r];
        EXPECT_EQ(name, (*inputs)[k][r].name());
        ASSERT_EQ(t.dim_size(0), 2);
        const int first = batch * 8 + r * 2;  // replica r: examples [2r, 2r+2) of the batch
        if (k == 0) {
          EXPECT_EQ(t.data<float>()[0], float(first));
          EXPECT_EQ(t.data<float>()[3], float(10 * (first + 1)));
        } else {
          EXPECT_EQ(t.data<int32_t>()[1], first + 1);
        }
      }
    }
  }
  std::vector<std::pair<std::string, Tensor>> feeds;
  bool end = false;
  ASSERT_TRUE((*dist)->GetNext(&feeds, &end).ok());
  EXPECT_TRUE(end);
}

TEST(DistributedDatasetTest, UnevenGlobalBatchIsAnError) {
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(4), testing::Machine(4));
  auto dist = *s->DistributeDataset(Batches(10, 10), Specs());
  Scope root = Scope::NewRootScope();
  ASSERT_TRUE(dist->Inputs(root).ok());
  std::vector<std::pair<std::string, Tensor>> feeds;
  bool end = false;
  absl::Status st = dist->GetNext(&feeds, &end);
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "global batch of 10 examples")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "4 replicas")) << st;
}

TEST(DistributedDatasetTest, SpecMismatchesAndMisuseAreErrors) {
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2));
  std::vector<std::pair<std::string, Tensor>> feeds;
  bool end = false;
  {
    auto dist = *s->DistributeDataset(Batches(4, 4), Specs());
    EXPECT_EQ(dist->GetNext(&feeds, &end).code(), absl::StatusCode::kFailedPrecondition);
  }
  {
    auto dist = *s->DistributeDataset(
        Batches(4, 4), {{"x", DT_INT32, PartialTensorShape({-1, 2})}, {"y", DT_INT32, PartialTensorShape({-1})}});
    Scope root = Scope::NewRootScope();
    ASSERT_TRUE(dist->Inputs(root).ok());
    absl::Status st = dist->GetNext(&feeds, &end);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(st.message(), "'x'")) << st;
  }
  {
    auto dist = *s->DistributeDataset(
        Batches(4, 4), {{"x", DT_FLOAT, PartialTensorShape({-1, 3})}, {"y", DT_INT32, PartialTensorShape({-1})}});
    Scope root = Scope::NewRootScope();
    ASSERT_TRUE(dist->Inputs(root).ok());
    EXPECT_EQ(dist->GetNext(&feeds, &end).code(), absl::StatusCode::kInvalidArgument);
  }
  {
    auto dist = *s->DistributeDataset(Batches(4, 4), {{"x", DT_FLOAT, PartialTensorShape({-1, 2})}});
    Scope root = Scope::NewRootScope();
    ASSERT_TRUE(dist->Inputs(root).ok());
    EXPECT_EQ(dist->GetNext(&feeds, &end).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(s->DistributeDataset(Batches(4, 4), {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->DistributeDataset(Batches(4, 4), {{"x", DT_FLOAT, {}}, {"x", DT_INT32, {}}})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// Worker `index` of a simulated cluster of `workers`, each with `local`
// replicas: the strategy's view of the cluster without its runtime, which
// is all DistributedDataset asks for (the graphs are never run).
class SimulatedWorker : public MirroredStrategy {
 public:
  SimulatedWorker(int local, int workers, int index)
      : MirroredStrategy(FullNames(local), testing::Machine(local), StrategyOptions(), workers,
                         index) {}

 private:
  static std::vector<std::string> FullNames(int local) {
    std::vector<std::string> out;
    for (int r = 0; r < local; ++r) {
      out.push_back("/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(r));
    }
    return out;
  }
};

// `n` CSV files of `per_file` examples each: x = [id, 10 id], y = id.
std::vector<std::string> IdFiles(const std::string& prefix, int n, int per_file) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::vector<std::string> paths;
  for (int f = 0; f < n; ++f) {
    paths.push_back(std::string(tmp != nullptr ? tmp : "/tmp") + "/" + prefix + std::to_string(f) + ".csv");
    std::ofstream out(paths.back());
    for (int i = 0; i < per_file; ++i) {
      const int id = f * per_file + i;
      out << id << "," << 10 * id << "," << id << "\n";
    }
  }
  return paths;
}

data::DatasetPtr CsvBatches(const std::vector<std::string>& files, int64_t batch) {
  return *data::Batch(*data::Shuffle(*data::LoadCsv(files), 3), batch, /*drop_remainder=*/true);
}

// Every feed of every step of `dist`, as (replica, step) -> the ids (y) it
// got; checks x against y.
std::map<std::pair<int, int>, std::vector<int>> FeedAll(DistributedDataset* dist, int local) {
  std::map<std::pair<int, int>, std::vector<int>> out;
  Scope root = Scope::NewRootScope();
  EXPECT_TRUE(dist->Inputs(root).ok());
  for (int step = 0;; ++step) {
    std::vector<std::pair<std::string, Tensor>> feeds;
    bool end = false;
    absl::Status st = dist->GetNext(&feeds, &end);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok() || end) break;
    EXPECT_EQ(feeds.size(), size_t(2 * local));
    for (int r = 0; r < local && feeds.size() == size_t(2 * local); ++r) {
      const Tensor& x = feeds[r].second;
      const Tensor& y = feeds[local + r].second;
      EXPECT_EQ(feeds[local + r].first, "y/replica_" + std::to_string(r));
      for (int64_t i = 0; i < y.dim_size(0); ++i) {
        EXPECT_EQ(x.data<float>()[2 * i], float(y.data<int32_t>()[i]));
        out[{r, step}].push_back(y.data<int32_t>()[i]);
      }
    }
  }
  return out;
}

TEST(DistributedDatasetTest, MultiWorkerFileShardingFeedsEachWorkerItsOwnFiles) {
  // 2 workers x 2 replicas, 4 files of 8 examples, global batch 8: each
  // worker reads 2 files in batches of 4, each replica gets 2 per step.
  const std::vector<std::string> files = IdFiles("file_shard_", 4, 8);
  std::map<int, int> owner;
  int steps[2] = {0, 0};
  for (int w = 0; w < 2; ++w) {
    SimulatedWorker s(2, 2, w);
    auto dist = s.DistributeDataset(CsvBatches(files, 8), Specs());
    ASSERT_TRUE(dist.ok()) << dist.status();
    EXPECT_EQ((*dist)->policy(), data::AutoShardPolicy::kFile) << (*dist)->reason();
    EXPECT_EQ((*dist)->files(), data::ShardFiles(files, 2, w));
    EXPECT_TRUE((*dist)->per_worker_batches());
    for (const auto& [key, ids] : FeedAll(dist->get(), 2)) {
      EXPECT_EQ(ids.size(), 2u);
      steps[w] = std::max(steps[w], key.second + 1);
      for (int id : ids) {
        EXPECT_EQ((id / 8) % 2, w) << "worker " << w << " got id " << id << " of another's file";
        EXPECT_TRUE(owner.emplace(id, w).second) << "id " << id << " fed twice";
      }
    }
  }
  EXPECT_EQ(owner.size(), 32u);  // the epoch, complete
  EXPECT_EQ(steps[0], 4);
  EXPECT_EQ(steps[1], 4);
}

TEST(DistributedDatasetTest, MultiWorkerFallsBackToDataWithFewerFilesThanWorkers) {
  // One file, 2 workers x 2 replicas: every worker reads every global batch
  // of 8; worker w's replica r gets part 2w + r.
  const std::vector<std::string> files = IdFiles("data_shard_", 1, 16);
  std::map<std::pair<int, int>, std::vector<int>> by_global_replica;
  for (int w = 0; w < 2; ++w) {
    SimulatedWorker s(2, 2, w);
    auto dist = s.DistributeDataset(CsvBatches(files, 8), Specs());
    ASSERT_TRUE(dist.ok()) << dist.status();
    EXPECT_EQ((*dist)->policy(), data::AutoShardPolicy::kData);
    EXPECT_TRUE(absl::StrContains((*dist)->reason(), "fewer than the 2 workers")) << (*dist)->reason();
    EXPECT_FALSE((*dist)->per_worker_batches());
    for (const auto& [key, ids] : FeedAll(dist->get(), 2)) {
      by_global_replica[{2 * w + key.first, key.second}] = ids;
    }
  }
  // The parts are those of one process with 4 replicas over the same batches.
  auto one = *MirroredStrategy::Create(testing::CpuSpecs(4), testing::Machine(4));
  auto whole = *one->DistributeDataset(CsvBatches(files, 8), Specs());
  EXPECT_EQ(FeedAll(whole.get(), 4), by_global_replica);
  EXPECT_EQ(whole->policy(), data::AutoShardPolicy::kOff);  // one worker: nothing changes
}

TEST(DistributedDatasetTest, MultiWorkerPolicyCanBeForced) {
  const std::vector<std::string> files = IdFiles("forced_", 4, 8);
  SimulatedWorker s(1, 2, 1);
  DistributeOptions data_policy;
  data_policy.auto_shard_policy = data::AutoShardPolicy::kData;
  auto dist = s.DistributeDataset(CsvBatches(files, 8), Specs(), data_policy);
  ASSERT_TRUE(dist.ok());
  EXPECT_EQ((*dist)->policy(), data::AutoShardPolicy::kData);

  DistributeOptions file_policy;
  file_policy.auto_shard_policy = data::AutoShardPolicy::kFile;
  auto bad = s.DistributeDataset(CsvBatches({files[0]}, 8), Specs(), file_policy);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "fewer than the 2 workers")) << bad.status();
  // A global batch that does not split over the workers.
  auto uneven = s.DistributeDataset(CsvBatches(files, 7), Specs());
  EXPECT_EQ(uneven.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(uneven.status().message(), "global batch of 7")) << uneven.status();
}

TEST(DistributedDatasetTest, PerWorkerBatchThatDoesNotSplitOverLocalReplicasIsAnError) {
  // Global 6 over 2 workers: 3 per worker, not a multiple of 2 local replicas.
  const std::vector<std::string> files = IdFiles("local_uneven_", 2, 6);
  SimulatedWorker s(2, 2, 0);
  auto dist = *s.DistributeDataset(CsvBatches(files, 6), Specs());
  Scope root = Scope::NewRootScope();
  ASSERT_TRUE(dist->Inputs(root).ok());
  std::vector<std::pair<std::string, Tensor>> feeds;
  bool end = false;
  absl::Status st = dist->GetNext(&feeds, &end);
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "batch of 3 examples")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "2 local replicas")) << st;
}

TEST(DistributedDatasetTest, DatasetsFromFunctionShardThemselves) {
  for (int w = 0; w < 2; ++w) {
    SimulatedWorker s(2, 2, w);
    InputContext seen;
    auto dist = s.DistributeDatasetsFromFunction(
        [&](const InputContext& ctx) -> absl::StatusOr<data::DatasetPtr> {
          seen = ctx;
          STRATA_ASSIGN_OR_RETURN(int64_t per_replica, ctx.PerReplicaBatchSize(8));
          std::vector<float> x;
          std::vector<int32_t> y;
          for (int i = 0; i < 16; ++i) {
            x.push_back(float(i));
            x.push_back(float(10 * i));
            y.push_back(i);
          }
          STRATA_ASSIGN_OR_RETURN(data::DatasetPtr ds, data::FromTensors({Tensor::FromVector(x, TensorShape{16, 2}),
                                                                         Tensor::FromVector(y)}));
          STRATA_ASSIGN_OR_RETURN(ds, data::Shard(ds, ctx.num_input_pipelines, ctx.input_pipeline_id));
          return data::Batch(ds, per_replica * 2, true);
        },
        Specs());
    ASSERT_TRUE(dist.ok()) << dist.status();
    EXPECT_EQ(seen.num_input_pipelines, 2);
    EXPECT_EQ(seen.input_pipeline_id, w);
    EXPECT_EQ(seen.num_replicas_in_sync, 4);
    EXPECT_EQ((*dist)->policy(), data::AutoShardPolicy::kOff);
    auto fed = FeedAll(dist->get(), 2);
    EXPECT_EQ(fed.size(), 4u);  // 8 examples, 2 steps x 2 replicas
    for (const auto& [key, ids] : fed) {
      for (int id : ids) EXPECT_EQ(id % 2, w);
    }
  }
  SimulatedWorker s(1, 2, 0);  // 2 replicas in sync: 7 does not divide
  auto failing = s.DistributeDatasetsFromFunction(
      [](const InputContext& ctx) -> absl::StatusOr<data::DatasetPtr> {
        return ctx.PerReplicaBatchSize(7).status();
      },
      Specs());
  EXPECT_EQ(failing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(failing.status().message(), "input pipeline 0")) << failing.status();
}

// Every step of a weighted `dist`: (replica, step) -> (weight, the ids of
// its rows, placeholder rows included).
std::map<std::pair<int, int>, std::pair<float, std::vector<int>>> FeedWeighted(DistributedDataset* dist,
                                                                               int local, int max_steps) {
  std::map<std::pair<int, int>, std::pair<float, std::vector<int>>> out;
  Scope root = Scope::NewRootScope();
  EXPECT_TRUE(dist->Inputs(root).ok());
  EXPECT_EQ(dist->weights().num_replicas(), local);
  for (int step = 0; step < max_steps; ++step) {
    std::vector<std::pair<std::string, Tensor>> feeds;
    bool end = false;
    absl::Status st = dist->GetNext(&feeds, &end);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok() || end) break;
    EXPECT_EQ(feeds.size(), size_t(3 * local));  // x, y, weight per replica
    for (int r = 0; r < local && feeds.size() == size_t(3 * local); ++r) {
      const Tensor& x = feeds[3 * r].second;
      const Tensor& y = feeds[3 * r + 1].second;
      EXPECT_EQ(feeds[3 * r + 2].first, dist->weights()[r].name());
      auto& [w, ids] = out[{r, step}];
      w = *feeds[3 * r + 2].second.data<float>();
      for (int64_t i = 0; i < y.dim_size(0); ++i) {
        EXPECT_EQ(x.data<float>()[2 * i], float(y.data<int32_t>()[i]));
        ids.push_back(y.data<int32_t>()[i]);
      }
    }
  }
  return out;
}

using Feed = std::pair<float, std::vector<int>>;
Feed F(double weight, std::vector<int> ids) { return {static_cast<float>(weight), std::move(ids)}; }
std::pair<int, int> At(int replica, int step) { return {replica, step}; }

DistributeOptions Weighted(data::AutoShardPolicy policy = data::AutoShardPolicy::kAuto) {
  DistributeOptions o;
  o.auto_shard_policy = policy;
  o.partial_batches = DistributeOptions::PartialBatches::kWeighted;
  return o;
}

TEST(DistributedDatasetTest, WeightedPartialBatchesSplitEvenlyAndWeighByShare) {
  // 10 examples in batches of 8 (the last one partial) over 4 replicas.
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(4), testing::Machine(4));
  auto ds = *data::Batch(*data::FromTensors({Tensor::FromVector(std::vector<float>{0, 0, 1, 10, 2, 20, 3, 30, 4, 40, 5, 50,
                                                                                    6, 60, 7, 70, 8, 80, 9, 90},
                                                                 TensorShape{10, 2}),
                                              Tensor::FromVector(std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})}),
                         8, /*drop_remainder=*/false);
  auto dist = *s->DistributeDataset(ds, Specs(), Weighted());
  auto fed = FeedWeighted(dist.get(), 4, 10);
  ASSERT_EQ(fed.size(), 8u);  // 2 steps x 4 replicas
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(fed[At(r, 0)].first, 1.0f) << "a full batch weighs exactly 1";
    EXPECT_EQ(fed[At(r, 0)].second, (std::vector<int>{2 * r, 2 * r + 1}));
  }
  // The last 2 examples: one each for replicas 0 and 1 (weight 1 * 4 / 2),
  // one row weighted 0 for replicas 2 and 3.
  EXPECT_EQ(fed[At(0, 1)], F(2.0f, {8}));
  EXPECT_EQ(fed[At(1, 1)], F(2.0f, {9}));
  EXPECT_EQ(fed[At(2, 1)].first, 0.0f);
  EXPECT_EQ(fed[At(3, 1)].first, 0.0f);
  EXPECT_EQ(fed[At(3, 1)].second.size(), 1u);

  // A global batch of 6 over 4 replicas: 2, 2, 1, 1 examples.
  auto odd = *s->DistributeDataset(Batches(6, 6), Specs(), Weighted());
  auto six = FeedWeighted(odd.get(), 4, 1);
  EXPECT_EQ(six[At(0, 0)], F(8.0 / 6, {0, 1}));
  EXPECT_EQ(six[At(1, 0)], F(8.0 / 6, {2, 3}));
  EXPECT_EQ(six[At(2, 0)], F(4.0 / 6, {4}));
  EXPECT_EQ(six[At(3, 0)], F(4.0 / 6, {5}));
}

TEST(DistributedDatasetTest, WeightedDataShardingMatchesOneProcess) {
  // 2 workers x 2 replicas, one file of 14 examples, global batches of 8
  // (the last of 6): each global replica's rows and weight are those of one
  // process with 4 replicas.
  const std::vector<std::string> files = IdFiles("weighted_data_", 1, 14);
  auto batches = [&]() { return *data::Batch(*data::LoadCsv(files), 8, /*drop_remainder=*/false); };
  std::map<std::pair<int, int>, std::pair<float, std::vector<int>>> by_global_replica;
  for (int w = 0; w < 2; ++w) {
    SimulatedWorker s(2, 2, w);
    auto dist = s.DistributeDataset(batches(), Specs(), Weighted());
    ASSERT_TRUE(dist.ok()) << dist.status();
    EXPECT_EQ((*dist)->policy(), data::AutoShardPolicy::kData);
    for (const auto& [key, v] : FeedWeighted(dist->get(), 2, 10)) by_global_replica[{2 * w + key.first, key.second}] = v;
  }
  auto one = *MirroredStrategy::Create(testing::CpuSpecs(4), testing::Machine(4));
  auto whole = *one->DistributeDataset(batches(), Specs(), Weighted());
  EXPECT_EQ(FeedWeighted(whole.get(), 4, 10), by_global_replica);
  // The partial batch of 6: global replicas 0, 1 get 2 examples, 2, 3 get 1.
  EXPECT_EQ(by_global_replica[At(2, 1)], F(4.0 / 6, {12}));
  // FILE cannot know the other workers' counts: refused at creation.
  const std::vector<std::string> four = IdFiles("weighted_file_", 4, 4);
  SimulatedWorker s(2, 2, 0);
  auto file = s.DistributeDataset(*data::Batch(*data::LoadCsv(four), 8, false), Specs(), Weighted());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(file.status().message(), "FILE")) << file.status();
}

// A per-worker pipeline of one element: `ids` rows (or one padding row of id
// -1 when empty) and the counts {ids.size(), total}.
DatasetFn CountedBatch(std::vector<int> ids, int64_t total, DataType counts_dtype = DT_INT64) {
  return [ids, total, counts_dtype](const InputContext&) -> absl::StatusOr<data::DatasetPtr> {
    std::vector<float> x;
    std::vector<int32_t> y;
    for (int id : ids.empty() ? std::vector<int>{-1} : ids) {
      x.push_back(float(id));
      x.push_back(float(10 * id));
      y.push_back(id);
    }
    const int64_t rows = static_cast<int64_t>(y.size());
    // One element: each component with a leading dimension of 1.
    Tensor counts = counts_dtype == DT_INT64
                        ? Tensor::FromVector(std::vector<int64_t>{static_cast<int64_t>(ids.size()), total},
                                             TensorShape{1, 2})
                        : Tensor::FromVector(std::vector<int32_t>{static_cast<int32_t>(ids.size()), 1},
                                             TensorShape{1, 2});
    return data::FromTensors(
        {Tensor::FromVector(x, TensorShape{1, rows, 2}), Tensor::FromVector(y, TensorShape{1, rows}), counts});
  };
}

TEST(DistributedDatasetTest, WeightedPerWorkerBatchesCarryTheStepsCounts) {
  // 2 workers x 2 replicas; the step has 7 examples: 5 on worker 0, 2 on
  // worker 1; then a step where worker 1 has none (3 examples in all).
  SimulatedWorker w0(2, 2, 0), w1(2, 2, 1);
  auto a = *w0.DistributeDatasetsFromFunction(CountedBatch({0, 1, 2, 3, 4}, 7), Specs(), Weighted());
  auto b = *w1.DistributeDatasetsFromFunction(CountedBatch({5, 6}, 7), Specs(), Weighted());
  auto fa = FeedWeighted(a.get(), 2, 1), fb = FeedWeighted(b.get(), 2, 1);
  EXPECT_EQ(fa[At(0, 0)], F(12.0 / 7, {0, 1, 2}));
  EXPECT_EQ(fa[At(1, 0)], F(8.0 / 7, {3, 4}));
  EXPECT_EQ(fb[At(0, 0)], F(4.0 / 7, {5}));
  EXPECT_EQ(fb[At(1, 0)], F(4.0 / 7, {6}));
  auto none = *w1.DistributeDatasetsFromFunction(CountedBatch({}, 3), Specs(), Weighted());
  auto fn = FeedWeighted(none.get(), 2, 1);
  EXPECT_EQ(fn[At(0, 0)], F(0.0f, {-1}));
  EXPECT_EQ(fn[At(1, 0)], F(0.0f, {-1}));

  // Counts missing, of the wrong dtype, or impossible: errors naming them.
  auto expect_error = [&](DatasetFn fn, const std::string& words) {
    auto d = *w0.DistributeDatasetsFromFunction(fn, Specs(), Weighted());
    Scope root = Scope::NewRootScope();
    ASSERT_TRUE(d->Inputs(root).ok());
    std::vector<std::pair<std::string, Tensor>> feeds;
    bool end = false;
    absl::Status st = d->GetNext(&feeds, &end);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << words;
    EXPECT_TRUE(absl::StrContains(st.message(), words)) << st;
  };
  expect_error([](const InputContext&) { return absl::StatusOr<data::DatasetPtr>(Batches(4, 4)); },
               "trailing {n, K} counts");
  expect_error(CountedBatch({1, 2}, 7, DT_INT32), "int64 [2]");
  expect_error(CountedBatch({1, 2}, 1), "says it holds 2 examples of the step's 1");
}

}  // namespace
}  // namespace distribute
}  // namespace strata
