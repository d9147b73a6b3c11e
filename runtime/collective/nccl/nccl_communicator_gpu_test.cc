// NcclClique on a real GPU, one rank (a one-GPU machine cannot run more):
// the collectives end to end on device buffers, both ways of making a clique,
// and abort. Skips without a GPU.
#include <cuda_runtime.h>

#include <atomic>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "runtime/collective/nccl/nccl_communicator.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {
namespace {

#define SKIP_WITHOUT_GPU()                                                        \
  do {                                                                            \
    int n = 0;                                                                    \
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {                        \
      cudaGetLastError();                                                         \
      GTEST_SKIP() << "no CUDA GPU on this machine: NCCL tests need one";         \
    }                                                                             \
  } while (0)

class DeviceBuffers {
 public:
  explicit DeviceBuffers(const std::vector<float>& in) : n_(in.size()) {
    EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
    EXPECT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&in_, n_ * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&out_, n_ * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(in_, in.data(), n_ * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemset(out_, 0, n_ * sizeof(float)), cudaSuccess);
  }
  ~DeviceBuffers() {
    cudaFree(in_);
    cudaFree(out_);
    cudaStreamDestroy(stream_);
  }
  NcclLaunch launch() const { return {in_, out_, stream_}; }
  std::vector<float> Result() {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<float> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), out_, n_ * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemset(out_, 0, n_ * sizeof(float)), cudaSuccess);
    return out;
  }

 private:
  size_t n_;
  cudaStream_t stream_ = nullptr;
  void* in_ = nullptr;
  void* out_ = nullptr;
};

void RunAllCollectives(NcclClique& clique) {
  const std::vector<float> in = {1.5f, -2, 3, 4.25f, 0, 7};
  DeviceBuffers b(in);
  const NcclLaunch l = b.launch();
  ASSERT_TRUE(clique.AllReduce({&l, 1}, in.size(), DT_FLOAT, MergeOp::kAdd, FinalOp::kId).ok());
  EXPECT_EQ(b.Result(), in);
  ASSERT_TRUE(clique.AllReduce({&l, 1}, in.size(), DT_FLOAT, MergeOp::kAdd, FinalOp::kDiv).ok());
  EXPECT_EQ(b.Result(), in);
  ASSERT_TRUE(clique.AllReduce({&l, 1}, in.size(), DT_FLOAT, MergeOp::kMax, FinalOp::kId).ok());
  EXPECT_EQ(b.Result(), in);
  ASSERT_TRUE(clique.AllGather({&l, 1}, in.size(), DT_FLOAT).ok());
  EXPECT_EQ(b.Result(), in);
  ASSERT_TRUE(clique.Broadcast({&l, 1}, in.size(), DT_FLOAT, /*root=*/0).ok());
  EXPECT_EQ(b.Result(), in);
  EXPECT_TRUE(clique.CheckAsyncErrors().ok());
}

TEST(NcclCliqueGpuTest, LocalCliqueOfOneRankRunsEveryCollective) {
  SKIP_WITHOUT_GPU();
  auto clique = NcclClique::CreateLocal({0});
  ASSERT_TRUE(clique.ok()) << clique.status();
  EXPECT_EQ((*clique)->nranks(), 1);
  RunAllCollectives(**clique);
}

TEST(NcclCliqueGpuTest, RankCliqueThroughTheStoreRunsEveryCollective) {
  SKIP_WITHOUT_GPU();
  InMemoryKeyValueStore kv;
  auto clique = NcclClique::CreateRank(0, 1, 0, &kv, "nccl/gpu-test", absl::Seconds(60));
  ASSERT_TRUE(clique.ok()) << clique.status();
  RunAllCollectives(**clique);
}

TEST(NcclCliqueGpuTest, LaunchArgumentsAreChecked) {
  SKIP_WITHOUT_GPU();
  auto clique = NcclClique::CreateLocal({0});
  ASSERT_TRUE(clique.ok()) << clique.status();
  DeviceBuffers b({1, 2});
  NcclLaunch two[2] = {b.launch(), b.launch()};
  absl::Status s = (*clique)->AllReduce({two, 2}, 2, DT_FLOAT, MergeOp::kAdd, FinalOp::kId);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  NcclLaunch no_stream = b.launch();
  no_stream.stream = nullptr;
  s = (*clique)->AllReduce({&no_stream, 1}, 2, DT_FLOAT, MergeOp::kAdd, FinalOp::kId);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  const NcclLaunch l = b.launch();
  s = (*clique)->AllReduce({&l, 1}, 2, DT_STRING, MergeOp::kAdd, FinalOp::kId);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  s = (*clique)->Broadcast({&l, 1}, 2, DT_FLOAT, /*root=*/1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // Bad arguments do not break the clique.
  EXPECT_TRUE((*clique)->status().ok());
  EXPECT_TRUE((*clique)->AllReduce({&l, 1}, 2, DT_FLOAT, MergeOp::kAdd, FinalOp::kId).ok());
  EXPECT_EQ(b.Result(), (std::vector<float>{1, 2}));
}

TEST(NcclCliqueGpuTest, AbortedCliqueFailsEveryLaterCallNamingTheReason) {
  SKIP_WITHOUT_GPU();
  std::atomic<int> errors{0};
  NcclCliqueOptions o;
  o.on_error = [&](const absl::Status& s) {
    ++errors;
    EXPECT_TRUE(absl::StrContains(s.message(), "worker 3 lost")) << s;
  };
  auto clique = NcclClique::CreateLocal({0}, o);
  ASSERT_TRUE(clique.ok()) << clique.status();
  (*clique)->Abort(absl::UnavailableError("worker 3 lost"));
  (*clique)->Abort(absl::InternalError("second reason, ignored"));
  EXPECT_EQ(errors.load(), 1);
  DeviceBuffers b({1, 2});
  const NcclLaunch l = b.launch();
  absl::Status s = (*clique)->AllReduce({&l, 1}, 2, DT_FLOAT, MergeOp::kAdd, FinalOp::kId);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "worker 3 lost")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "clique is broken")) << s;
  EXPECT_EQ((*clique)->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*clique)->CheckAsyncErrors().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace strata
