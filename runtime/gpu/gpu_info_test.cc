// Runs everywhere a --config=cuda build runs: without a GPU it checks the
// "no GPU" answers, with one the reported properties.
#include "runtime/gpu/gpu_info.h"

#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(GpuInfoTest, CountAndListAgree) {
  const GpuCount c = CountGpus();
  auto gpus = ListGpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  EXPECT_EQ(static_cast<int>(gpus->size()), c.count);
  if (c.count == 0) {
    EXPECT_FALSE(c.why_none.empty());
  } else {
    EXPECT_TRUE(c.why_none.empty());
  }
  for (int i = 0; i < static_cast<int>(gpus->size()); ++i) {
    const GpuInfo& g = (*gpus)[i];
    EXPECT_EQ(g.ordinal, i);
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.total_bytes, 0);
    EXPECT_GT(g.free_bytes, 0);
    EXPECT_LE(g.free_bytes, g.total_bytes);
    EXPECT_GE(g.compute_major, 1);
    EXPECT_GT(g.multiprocessors, 0);
  }
}

TEST(GpuInfoTest, RequireGpusSaysWhyNot) {
  const GpuCount c = CountGpus();
  EXPECT_TRUE(RequireGpus(0).ok());
  absl::Status s = RequireGpus(c.count + 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  if (c.count == 0) {
    EXPECT_NE(s.message().find("no GPU: cudaGetDeviceCount said "), std::string::npos) << s;
    EXPECT_NE(s.message().find(c.why_none), std::string::npos) << s;
  } else {
    EXPECT_NE(s.message().find("this machine has"), std::string::npos) << s;
    EXPECT_TRUE(RequireGpus(c.count).ok());
  }
}

}  // namespace
}  // namespace strata
