// DistributedDataset: global batches split into per-replica feeds in
// replica order, placeholders on the replicas' devices, and its errors
// (uneven batches, mismatched specs, GetNext before Inputs).
#include "strategy/distributed_dataset.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "graph/status.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/test_util.h"
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

}  // namespace
}  // namespace distribute
}  // namespace strata
