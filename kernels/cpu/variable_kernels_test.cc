#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "kernels/kernel_runner.h"
#include "kernels/resource_mgr.h"

namespace strata {
namespace {

// The kernel runner's CPU device plus a ResourceMgr, as runtime devices have.
class ResourceCpuDevice : public StandaloneCpuDevice {
 public:
  explicit ResourceCpuDevice(const std::string& name = "cpu") : rm_(name) {}
  ResourceMgr* resource_manager() const override { return &rm_; }

 private:
  mutable ResourceMgr rm_;
};

std::map<std::string, AttrValue> HandleAttrs(const std::string& name, DataType dt,
                                             const PartialTensorShape& shape) {
  return {{"shared_name", MakeAttr(name)}, {"dtype", MakeAttr(dt)}, {"shape", MakeAttr(shape)}};
}

Tensor Handle(DeviceBase* dev, const std::string& name, DataType dt = DT_FLOAT,
              const PartialTensorShape& shape = PartialTensorShape({2})) {
  auto out = RunKernel(dev, "VarHandleOp", {}, HandleAttrs(name, dt, shape));
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}

absl::StatusOr<Tensor> Read(DeviceBase* dev, const Tensor& h, DataType dt = DT_FLOAT) {
  auto out = RunKernel(dev, "ReadVariableOp", {h}, {{"dtype", MakeAttr(dt)}});
  if (!out.ok()) return out.status();
  return (*out)[0];
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements());
}

TEST(VariableKernelsTest, HandleIsAStableScalarResource) {
  ResourceCpuDevice dev;
  Tensor h1 = Handle(&dev, "w");
  Tensor h2 = Handle(&dev, "w");
  EXPECT_EQ(h1.dtype(), DT_RESOURCE);
  EXPECT_EQ(h1.dims(), 0);
  EXPECT_EQ(*h1.data<uint64_t>(), *h2.data<uint64_t>());
  EXPECT_NE(*Handle(&dev, "other").data<uint64_t>(), *h1.data<uint64_t>());
  // The same name with another dtype is an error naming the variable.
  auto bad = RunKernel(&dev, "VarHandleOp", {}, HandleAttrs("w", DT_INT32, PartialTensorShape({2})));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'w'"), std::string::npos);
}

TEST(VariableKernelsTest, ReadBeforeAssignIsFailedPreconditionNamingTheVariable) {
  ResourceCpuDevice dev;
  Tensor h = Handle(&dev, "layer/kernel");
  auto r = Read(&dev, h);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("layer/kernel"), std::string::npos);
  auto init = RunKernel(&dev, "VarIsInitializedOp", {h});
  ASSERT_TRUE(init.ok());
  EXPECT_FALSE(*(*init)[0].data<bool>());
}

TEST(VariableKernelsTest, AssignReadAddSub) {
  ResourceCpuDevice dev;
  Tensor h = Handle(&dev, "w");
  ASSERT_TRUE(RunKernel(&dev, "AssignVariableOp", {h, Tensor::FromVector<float>({1, 2})}).ok());
  auto init = RunKernel(&dev, "VarIsInitializedOp", {h});
  ASSERT_TRUE(init.ok());
  EXPECT_TRUE(*(*init)[0].data<bool>());
  ASSERT_TRUE(RunKernel(&dev, "AssignAddVariableOp", {h, Tensor::FromVector<float>({10, 20})}).ok());
  ASSERT_TRUE(RunKernel(&dev, "AssignSubVariableOp", {h, Tensor::FromVector<float>({1, 1})}).ok());
  auto r = Read(&dev, h);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Values(*r), (std::vector<float>{10, 21}));
}

TEST(VariableKernelsTest, ReadsAreSnapshotsThatLaterWritesDoNotChange) {
  ResourceCpuDevice dev;
  Tensor h = Handle(&dev, "w");
  ASSERT_TRUE(RunKernel(&dev, "AssignVariableOp", {h, Tensor::FromVector<float>({1, 2})}).ok());
  auto before = Read(&dev, h);
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(RunKernel(&dev, "AssignAddVariableOp", {h, Tensor::FromVector<float>({5, 5})}).ok());
  auto after = Read(&dev, h);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(Values(*before), (std::vector<float>{1, 2}));
  EXPECT_EQ(Values(*after), (std::vector<float>{6, 7}));
  ASSERT_TRUE(RunKernel(&dev, "AssignVariableOp", {h, Tensor::FromVector<float>({0, 0})}).ok());
  EXPECT_EQ(Values(*after), (std::vector<float>{6, 7}));
}

TEST(VariableKernelsTest, UnsharedValueIsUpdatedInPlace) {
  ResourceCpuDevice dev;
  Tensor h = Handle(&dev, "w", DT_FLOAT, PartialTensorShape({100000}));
  std::vector<float> init(100000, 1.0f);
  ASSERT_TRUE(RunKernel(&dev, "AssignVariableOp", {h, Tensor::FromVector<float>(init)}).ok());
  ASSERT_TRUE(RunKernel(&dev, "AssignAddVariableOp", {h, Tensor::FromVector<float>(init)}).ok());
  const void* p1;
  {
    auto r = Read(&dev, h);
    ASSERT_TRUE(r.ok());
    p1 = r->raw_data();
    EXPECT_EQ(r->data<float>()[99999], 2.0f);
  }  // the snapshot is gone: nobody else holds the buffer
  ASSERT_TRUE(RunKernel(&dev, "AssignAddVariableOp", {h, Tensor::FromVector<float>(init)}).ok());
  auto r = Read(&dev, h);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->raw_data(), p1);
  EXPECT_EQ(r->data<float>()[0], 3.0f);
  EXPECT_EQ(r->data<float>()[99999], 3.0f);
}

TEST(VariableKernelsTest, WrongDtypeOrShapeIsInvalidArgument) {
  ResourceCpuDevice dev;
  Tensor h = Handle(&dev, "w", DT_FLOAT, PartialTensorShape({2}));
  auto s1 = RunKernel(&dev, "AssignVariableOp", {h, Tensor::FromVector<double>({1, 2})});
  EXPECT_EQ(s1.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s1.status().message().find("'w'"), std::string::npos);
  auto s2 = RunKernel(&dev, "AssignVariableOp", {h, Tensor::FromVector<float>({1, 2, 3})});
  EXPECT_EQ(s2.status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(RunKernel(&dev, "AssignVariableOp", {h, Tensor::FromVector<float>({1, 2})}).ok());
  EXPECT_EQ(Read(&dev, h, DT_INT32).status().code(), absl::StatusCode::kInvalidArgument);
  auto s3 = RunKernel(&dev, "AssignAddVariableOp", {h, Tensor::FromVector<float>({1})});
  EXPECT_EQ(s3.status().code(), absl::StatusCode::kInvalidArgument);
  auto s4 = RunKernel(&dev, "ReadVariableOp", {Tensor::Scalar<int64_t>(1)},
                      {{"dtype", MakeAttr(DT_FLOAT)}});
  EXPECT_FALSE(s4.ok());
}

TEST(VariableKernelsTest, HandleFromAnotherDeviceIsNotFound) {
  ResourceCpuDevice dev0("cpu:0"), dev1("cpu:1");
  Tensor h0 = Handle(&dev0, "w");
  Handle(&dev1, "w");
  ASSERT_TRUE(RunKernel(&dev0, "AssignVariableOp", {h0, Tensor::FromVector<float>({1, 2})}).ok());
  auto r = Read(&dev1, h0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("cpu:1"), std::string::npos);
}

TEST(VariableKernelsTest, DestroyResource) {
  ResourceCpuDevice dev;
  Tensor h = Handle(&dev, "w");
  ASSERT_TRUE(RunKernel(&dev, "AssignVariableOp", {h, Tensor::FromVector<float>({1, 2})}).ok());
  ASSERT_TRUE(RunKernel(&dev, "DestroyResourceOp", {h}).ok());
  EXPECT_EQ(Read(&dev, h).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(RunKernel(&dev, "DestroyResourceOp", {h}).ok());  // ignore_lookup_error
  EXPECT_EQ(RunKernel(&dev, "DestroyResourceOp", {h}, {{"ignore_lookup_error", MakeAttr(false)}})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  auto init = RunKernel(&dev, "VarIsInitializedOp", {h});
  ASSERT_TRUE(init.ok());
  EXPECT_FALSE(*(*init)[0].data<bool>());
  // A new VarHandleOp run makes a fresh, uninitialized variable.
  Tensor h2 = Handle(&dev, "w");
  EXPECT_NE(*h2.data<uint64_t>(), *h.data<uint64_t>());
  EXPECT_EQ(Read(&dev, h2).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(VariableKernelsTest, Int64Counter) {
  ResourceCpuDevice dev;
  Tensor h = Handle(&dev, "step", DT_INT64, PartialTensorShape({}));
  ASSERT_TRUE(RunKernel(&dev, "AssignVariableOp", {h, Tensor::Scalar<int64_t>(0)}).ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(RunKernel(&dev, "AssignAddVariableOp", {h, Tensor::Scalar<int64_t>(1)}).ok());
  }
  auto r = Read(&dev, h, DT_INT64);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r->data<int64_t>(), 5);
}

// Writers (AssignAdd of ones) and readers race on one variable whose elements
// are always all equal: a torn or mutated snapshot would show unequal
// elements, and a lost update a wrong final count.
TEST(VariableKernelsTest, ConcurrentUpdatesAndReadsAreAtomic) {
  ResourceCpuDevice dev;
  constexpr int kN = 4096, kWriters = 4, kUpdates = 200;
  Tensor h = Handle(&dev, "w", DT_FLOAT, PartialTensorShape({kN}));
  ASSERT_TRUE(RunKernel(&dev, "AssignVariableOp", {h, Tensor::FromVector<float>(std::vector<float>(kN, 0))}).ok());
  const Tensor ones = Tensor::FromVector<float>(std::vector<float>(kN, 1));
  std::atomic<bool> torn{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kUpdates; ++i) {
        ASSERT_TRUE(RunKernel(&dev, "AssignAddVariableOp", {h, ones}).ok());
      }
    });
  }
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kUpdates; ++i) {
        auto r = Read(&dev, h);
        ASSERT_TRUE(r.ok());
        const float first = r->data<float>()[0];
        for (int j = 0; j < kN; ++j) {
          if (r->data<float>()[j] != first) torn = true;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(torn.load());
  auto r = Read(&dev, h);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data<float>()[0], float(kWriters * kUpdates));
  EXPECT_EQ(r->data<float>()[kN - 1], float(kWriters * kUpdates));
}

TEST(VariableKernelsTest, ResourceGatherTakesRowsAndRefusesAnIndexOutOfRange) {
  ResourceCpuDevice dev;
  Tensor h = Handle(&dev, "table", DT_FLOAT, PartialTensorShape({4, 3}));
  Tensor value(DT_FLOAT, TensorShape{4, 3});
  for (int i = 0; i < 12; ++i) value.data<float>()[i] = static_cast<float>(i);
  ASSERT_TRUE(RunKernel(&dev, "AssignVariableOp", {h, value}, {{"dtype", MakeAttr(DT_FLOAT)}}).ok());
  for (DataType it : {DT_INT32, DT_INT64}) {
    Tensor ids = it == DT_INT32 ? Tensor::FromVector<int32_t>({3, 0, 3, 1}) : Tensor::FromVector<int64_t>({3, 0, 3, 1});
    ids = ids.Reshaped(TensorShape{2, 2}).value();
    auto out = RunKernel(&dev, "ResourceGather", {h, ids}, {{"dtype", MakeAttr(DT_FLOAT)}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (TensorShape{2, 2, 3}));
    EXPECT_EQ(Values((*out)[0]), (std::vector<float>{9, 10, 11, 0, 1, 2, 9, 10, 11, 3, 4, 5}));
  }
  auto bad = RunKernel(&dev, "ResourceGather", {h, Tensor::FromVector<int32_t>({1, 4})}, {{"dtype", MakeAttr(DT_FLOAT)}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ResourceGather indices[1] = 4 is not in [0, 4)"), std::string::npos)
      << bad.status();
  auto unread = RunKernel(&dev, "ResourceGather", {Handle(&dev, "empty", DT_FLOAT, PartialTensorShape({4, 3})),
                                                   Tensor::FromVector<int32_t>({0})},
                          {{"dtype", MakeAttr(DT_FLOAT)}});
  EXPECT_EQ(unread.status().code(), absl::StatusCode::kFailedPrecondition) << unread.status();
}

absl::StatusOr<std::vector<Tensor>> Scatter(DeviceBase* dev, const std::string& op, const Tensor& h,
                                            const Tensor& indices, const Tensor& updates) {
  return RunKernel(dev, op, {h, indices, updates});
}

// A [4, 3] float variable holding 0..11.
Tensor Table(DeviceBase* dev, const std::string& name) {
  Tensor h = Handle(dev, name, DT_FLOAT, PartialTensorShape({4, 3}));
  Tensor value(DT_FLOAT, TensorShape{4, 3});
  for (int i = 0; i < 12; ++i) value.data<float>()[i] = static_cast<float>(i);
  EXPECT_TRUE(RunKernel(dev, "AssignVariableOp", {h, value}).ok());
  return h;
}

TEST(VariableKernelsTest, ResourceScatterAddAccumulatesDuplicateRows) {
  ResourceCpuDevice dev;
  for (DataType it : {DT_INT32, DT_INT64}) {
    Tensor h = Table(&dev, "table");
    // Row 1 twice (both updates land), row 3 once; rows 0 and 2 untouched.
    Tensor ids = it == DT_INT32 ? Tensor::FromVector<int32_t>({1, 3, 1})
                                : Tensor::FromVector<int64_t>({1, 3, 1});
    Tensor updates =
        Tensor::FromVector<float>({10, 20, 30, 100, 200, 300, 1, 2, 3}, TensorShape{3, 3});
    auto s = Scatter(&dev, "ResourceScatterAdd", h, ids, updates);
    ASSERT_TRUE(s.ok()) << s.status();
    auto r = Read(&dev, h);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Values(*r), (std::vector<float>{0, 1, 2, 14, 26, 38, 6, 7, 8, 109, 210, 311}));
  }
}

TEST(VariableKernelsTest, ResourceScatterSubWithRankTwoIndicesAndAScalarUpdate) {
  ResourceCpuDevice dev;
  Tensor h = Table(&dev, "table");
  // indices [2, 2], updates [2, 2, 3] (indices' shape + the rows' [3]).
  Tensor ids = Tensor::FromVector<int32_t>({0, 2, 2, 3}, TensorShape{2, 2});
  std::vector<float> u(12, 1.0f);
  ASSERT_TRUE(Scatter(&dev, "ResourceScatterSub", h, ids,
                      Tensor::FromVector<float>(u, TensorShape{2, 2, 3}))
                  .ok());
  auto r = Read(&dev, h);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Values(*r), (std::vector<float>{-1, 0, 1, 3, 4, 5, 4, 5, 6, 8, 9, 10}));
  // A scalar update applies to every element of every named row.
  ASSERT_TRUE(Scatter(&dev, "ResourceScatterSub", h, Tensor::FromVector<int64_t>({3, 3}),
                      Tensor::Scalar<float>(4))
                  .ok());
  r = Read(&dev, h);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Values(*r), (std::vector<float>{-1, 0, 1, 3, 4, 5, 4, 5, 6, 0, 1, 2}));
  // Integer variables: an int64 counter table.
  Tensor counts = Handle(&dev, "counts", DT_INT64, PartialTensorShape({3}));
  ASSERT_TRUE(
      RunKernel(&dev, "AssignVariableOp", {counts, Tensor::FromVector<int64_t>({5, 5, 5})}).ok());
  ASSERT_TRUE(Scatter(&dev, "ResourceScatterAdd", counts, Tensor::FromVector<int32_t>({2, 0, 2}),
                      Tensor::FromVector<int64_t>({1, 10, 100}))
                  .ok());
  auto c = Read(&dev, counts, DT_INT64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(std::vector<int64_t>(c->data<int64_t>(), c->data<int64_t>() + 3),
            (std::vector<int64_t>{15, 5, 106}));
}

TEST(VariableKernelsTest, ResourceScatterUpdateWritesTheNamedRowsAndKeepsEarlierReads) {
  ResourceCpuDevice dev;
  Tensor h = Table(&dev, "table");
  auto before = Read(&dev, h);  // a snapshot holding the buffer
  ASSERT_TRUE(before.ok());
  // Rows 3 and 1 written; 0 and 2 untouched.
  ASSERT_TRUE(Scatter(&dev, "ResourceScatterUpdate", h, Tensor::FromVector<int64_t>({3, 1}),
                      Tensor::FromVector<float>({-1, -2, -3, 7, 8, 9}, TensorShape{2, 3}))
                  .ok());
  auto r = Read(&dev, h);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Values(*r), (std::vector<float>{0, 1, 2, 7, 8, 9, 6, 7, 8, -1, -2, -3}));
  EXPECT_EQ(Values(*before), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  // A scalar fills every named row.
  ASSERT_TRUE(Scatter(&dev, "ResourceScatterUpdate", h, Tensor::FromVector<int32_t>({0}),
                      Tensor::Scalar<float>(5))
                  .ok());
  r = Read(&dev, h);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Values(*r), (std::vector<float>{5, 5, 5, 7, 8, 9, 6, 7, 8, -1, -2, -3}));
}

TEST(VariableKernelsTest, ResourceScatterRefusesABadIndexAndLeavesTheVariableUnchanged) {
  ResourceCpuDevice dev;
  Tensor h = Table(&dev, "table");
  const std::vector<float> before = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  // Index 4 comes after valid rows: none of them may have been updated.
  for (const char* op : {"ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterUpdate"}) {
    auto bad =
        Scatter(&dev, op, h, Tensor::FromVector<int32_t>({0, 2, 4}), Tensor::Scalar<float>(1));
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(absl::StrCat(op, " indices[2] = 4 is not in [0, 4)")),
              std::string::npos)
        << bad.status();
    auto negative =
        Scatter(&dev, op, h, Tensor::FromVector<int64_t>({1, -1}), Tensor::Scalar<float>(1));
    EXPECT_NE(
        negative.status().message().find(absl::StrCat(op, " indices[1] = -1 is not in [0, 4)")),
        std::string::npos)
        << negative.status();
    auto r = Read(&dev, h);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(Values(*r), before);
  }
  // updates of the wrong shape or dtype.
  auto shape = Scatter(&dev, "ResourceScatterAdd", h, Tensor::FromVector<int32_t>({0, 1}),
                       Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape{2, 2}));
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(shape.status().message().find(
                "ResourceScatterAdd updates have shape [2,2]; they must be a scalar or "
                "have shape [2,3]"),
            std::string::npos)
      << shape.status();
  auto dtype = Scatter(&dev, "ResourceScatterAdd", h, Tensor::FromVector<int32_t>({0}),
                       Tensor::FromVector<double>({1, 2, 3}, TensorShape{1, 3}));
  EXPECT_EQ(dtype.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dtype.status().message().find("'table'"), std::string::npos) << dtype.status();
  auto r = Read(&dev, h);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Values(*r), before);
  // An unassigned variable.
  Tensor empty = Handle(&dev, "empty", DT_FLOAT, PartialTensorShape({4, 3}));
  EXPECT_EQ(Scatter(&dev, "ResourceScatterAdd", empty, Tensor::FromVector<int32_t>({0}),
                    Tensor::Scalar<float>(1))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(VariableKernelsTest, ResourceScatterKeepsEarlierReadsAsSnapshots) {
  ResourceCpuDevice dev;
  Tensor h = Table(&dev, "table");
  auto before = Read(&dev, h);
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(Scatter(&dev, "ResourceScatterAdd", h, Tensor::FromVector<int32_t>({0}),
                      Tensor::Scalar<float>(100))
                  .ok());
  auto after = Read(&dev, h);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(Values(*before), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(Values(*after), (std::vector<float>{100, 101, 102, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_NE(before->raw_data(), after->raw_data());
}

}  // namespace
}  // namespace strata
