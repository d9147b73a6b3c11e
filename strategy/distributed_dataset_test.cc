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

}  // namespace
}  // namespace distribute
}  // namespace strata
