// What of NcclClique runs without a GPU: dtype/op mapping, error conversion,
// argument checks, the unique-id exchange through a KeyValueStore with NCCL's
// own ncclGetUniqueId, and the errors a machine without GPUs gives.
#include "runtime/collective/nccl/nccl_communicator.h"

#include <cuda_runtime.h>

#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "runtime/collective/nccl/nccl_unique_id.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {
namespace {

bool HaveGpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

TEST(NcclMappingTest, DataTypes) {
  EXPECT_EQ(*ToNcclDataType(DT_FLOAT), ncclFloat32);
  EXPECT_EQ(*ToNcclDataType(DT_HALF), ncclFloat16);
  EXPECT_EQ(*ToNcclDataType(DT_BFLOAT16), ncclBfloat16);
  EXPECT_EQ(*ToNcclDataType(DT_DOUBLE), ncclFloat64);
  EXPECT_EQ(*ToNcclDataType(DT_INT32), ncclInt32);
  EXPECT_EQ(*ToNcclDataType(DT_INT64), ncclInt64);
  EXPECT_EQ(*ToNcclDataType(DT_INT8), ncclInt8);
  EXPECT_EQ(*ToNcclDataType(DT_UINT8), ncclUint8);
  for (DataType bad : {DT_STRING, DT_BOOL, DT_RESOURCE, DT_INT16, DT_UINT64, DT_INVALID}) {
    absl::StatusOr<ncclDataType_t> r = ToNcclDataType(bad);
    ASSERT_FALSE(r.ok()) << DataTypeString(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(r.status().message(), DataTypeString(bad))) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "supported: float32")) << r.status();
  }
}

TEST(NcclMappingTest, ReductionOps) {
  EXPECT_EQ(*ToNcclRedOp(MergeOp::kAdd, FinalOp::kId), ncclSum);
  EXPECT_EQ(*ToNcclRedOp(MergeOp::kMul, FinalOp::kId), ncclProd);
  EXPECT_EQ(*ToNcclRedOp(MergeOp::kMin, FinalOp::kId), ncclMin);
  EXPECT_EQ(*ToNcclRedOp(MergeOp::kMax, FinalOp::kId), ncclMax);
  EXPECT_EQ(*ToNcclRedOp(MergeOp::kAdd, FinalOp::kDiv), ncclAvg);
  absl::StatusOr<ncclRedOp_t> r = ToNcclRedOp(MergeOp::kMax, FinalOp::kDiv);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "Max")) << r.status();
}

TEST(NcclMappingTest, ResultsBecomeStatusesWithNcclsText) {
  EXPECT_TRUE(NcclResultToStatus(ncclSuccess, "x").ok());
  absl::Status s = NcclResultToStatus(ncclRemoteError, "all-reduce on rank 3", "peer 5 closed");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(s.message(), "all-reduce on rank 3")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), ncclGetErrorString(ncclRemoteError))) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "peer 5 closed")) << s;
  EXPECT_EQ(NcclResultToStatus(ncclSystemError, "c").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NcclResultToStatus(ncclInvalidArgument, "c").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclResultToStatus(ncclInvalidUsage, "c").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclResultToStatus(ncclUnhandledCudaError, "c").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(NcclResultToStatus(ncclInternalError, "c").code(), absl::StatusCode::kInternal);
}

TEST(NcclCliqueArgsTest, BadOrdinalsAreInvalidArgument) {
  for (const std::vector<int>& ordinals : std::vector<std::vector<int>>{{}, {0, 0}, {1, 2, 1}, {-1}}) {
    auto c = NcclClique::CreateLocal(ordinals);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  }
  auto dup = NcclClique::CreateLocal({0, 0});
  EXPECT_TRUE(absl::StrContains(dup.status().message(), "appears twice")) << dup.status();
}

TEST(NcclCliqueArgsTest, BadRanksAreInvalidArgument) {
  InMemoryKeyValueStore kv;
  EXPECT_EQ(NcclClique::CreateRank(2, 2, 0, &kv, "k", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclClique::CreateRank(-1, 2, 0, &kv, "k", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclClique::CreateRanks(3, 4, {0, 1}, &kv, "k").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclClique::CreateRank(0, 1, 0, nullptr, "k", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclClique::CreateRank(0, 1, 0, &kv, "k", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // None of these touched the store.
  EXPECT_FALSE(kv.Get("k", absl::Milliseconds(1)).ok());
}

TEST(NcclUniqueIdWithNcclTest, NcclMakesIdsWithoutAGpuAndTheStoreCarriesThem) {
  absl::StatusOr<std::string> a = MakeNcclUniqueId();
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::string> b = MakeNcclUniqueId();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->size(), kNcclUniqueIdBytes);
  EXPECT_NE(*a, *b);
  InMemoryKeyValueStore kv;
  absl::StatusOr<std::string> r1;
  std::thread t([&] { r1 = ExchangeNcclUniqueId(&kv, "nccl/real", 1, 2, absl::Seconds(30), nullptr); });
  absl::StatusOr<std::string> r0 =
      ExchangeNcclUniqueId(&kv, "nccl/real", 0, 2, absl::Seconds(30), MakeNcclUniqueId);
  t.join();
  ASSERT_TRUE(r0.ok()) << r0.status();
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(*r0, *r1);
}

TEST(NcclCliqueNoGpuTest, MissingRankZeroIsDeadlineExceededNamingTheKey) {
  InMemoryKeyValueStore kv;
  auto c = NcclClique::CreateRank(1, 2, 0, &kv, "nccl/group/3/0", absl::Milliseconds(100));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "nccl/group/3/0")) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "rank 0")) << c.status();
}

TEST(NcclCliqueNoGpuTest, MalformedIdInTheStoreIsInvalidArgumentNamingTheKey) {
  InMemoryKeyValueStore kv;
  ASSERT_TRUE(kv.Insert("nccl/bad", "nccl-id:not-hex").ok());
  auto c = NcclClique::CreateRank(1, 2, 0, &kv, "nccl/bad", absl::Seconds(5));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "nccl/bad")) << c.status();
}

TEST(NcclCliqueNoGpuTest, WithoutAGpuBothRanksGetTheIdThenFailClearly) {
  if (HaveGpu()) GTEST_SKIP() << "this machine has a GPU: the gpu-tagged tests cover clique creation";
  InMemoryKeyValueStore kv;
  absl::StatusOr<std::unique_ptr<NcclClique>> c1;
  std::thread t([&] { c1 = NcclClique::CreateRank(1, 2, 0, &kv, "nccl/nogpu", absl::Seconds(30)); });
  auto c0 = NcclClique::CreateRank(0, 2, 0, &kv, "nccl/nogpu", absl::Seconds(30));
  t.join();
  for (const auto* c : {&c0, &c1}) {
    ASSERT_FALSE(c->ok());
    EXPECT_EQ(c->status().code(), absl::StatusCode::kFailedPrecondition) << c->status();
    EXPECT_TRUE(absl::StrContains(c->status().message(), "cudaGetDeviceCount")) << c->status();
  }
  // Rank 0 published a real, decodable id before finding no GPU.
  absl::StatusOr<std::string> v = kv.Get("nccl/nogpu", absl::Seconds(1));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(DecodeNcclUniqueId(*v, "nccl/nogpu").ok());
  auto local = NcclClique::CreateLocal({0});
  ASSERT_FALSE(local.ok());
  EXPECT_EQ(local.status().code(), absl::StatusCode::kFailedPrecondition) << local.status();
}

}  // namespace
}  // namespace strata
