#include "kernels/resource_mgr.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace strata {
namespace {

class Counter : public ResourceBase {
 public:
  std::string DebugString() const override { return "counter"; }
};

std::function<absl::StatusOr<std::shared_ptr<Var>>()> MakeVar(const std::string& name) {
  return [name]() -> absl::StatusOr<std::shared_ptr<Var>> {
    return std::make_shared<Var>(name, DT_FLOAT, PartialTensorShape({2}));
  };
}

TEST(ResourceMgrTest, LookupOrCreateReturnsTheSameResourceAndId) {
  ResourceMgr rm("/device:CPU:0");
  uint64_t id1 = 0, id2 = 0;
  auto a = rm.LookupOrCreate<Var>("", "w", MakeVar("w"), &id1);
  auto b = rm.LookupOrCreate<Var>("", "w", MakeVar("w"), &id2);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(id1, id2);
  EXPECT_NE(id1, 0u);
  uint64_t id3 = 0;
  auto c = rm.LookupOrCreate<Var>("other", "w", MakeVar("w"), &id3);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->get(), a->get());
  EXPECT_NE(id3, id1);
  EXPECT_EQ(rm.size(), 2u);
  auto found = rm.Lookup<Var>(id1);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->get(), a->get());
}

TEST(ResourceMgrTest, WrongTypeAndUnknownIdsAreErrors) {
  ResourceMgr rm("/device:CPU:0");
  uint64_t id = 0;
  ASSERT_TRUE(rm.LookupOrCreate<Counter>(
                    "", "c", []() -> absl::StatusOr<std::shared_ptr<Counter>> {
                      return std::make_shared<Counter>();
                    },
                    &id)
                  .ok());
  auto v = rm.LookupOrCreate<Var>("", "c", MakeVar("c"), &id);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rm.Lookup<Var>(id).status().code(), absl::StatusCode::kInvalidArgument);
  auto missing = rm.Lookup<Var>(id + 1000);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/device:CPU:0"), std::string::npos);
}

TEST(ResourceMgrTest, IdsAreNotSharedBetweenManagers) {
  ResourceMgr a("cpu0"), b("cpu1");
  uint64_t ida = 0, idb = 0;
  ASSERT_TRUE(a.LookupOrCreate<Var>("", "w", MakeVar("w"), &ida).ok());
  ASSERT_TRUE(b.LookupOrCreate<Var>("", "w", MakeVar("w"), &idb).ok());
  EXPECT_NE(ida, idb);
  EXPECT_EQ(b.Lookup<Var>(ida).status().code(), absl::StatusCode::kNotFound);
}

TEST(ResourceMgrTest, DeleteAndCleanup) {
  ResourceMgr rm("cpu");
  uint64_t id1, id2, id3;
  ASSERT_TRUE(rm.LookupOrCreate<Var>("a", "x", MakeVar("x"), &id1).ok());
  ASSERT_TRUE(rm.LookupOrCreate<Var>("a", "y", MakeVar("y"), &id2).ok());
  ASSERT_TRUE(rm.LookupOrCreate<Var>("b", "x", MakeVar("x"), &id3).ok());
  ASSERT_TRUE(rm.Delete(id1).ok());
  EXPECT_EQ(rm.Delete(id1).code(), absl::StatusCode::kNotFound);
  // A new resource under a deleted name gets a new id: the old handle stays dead.
  uint64_t id4;
  ASSERT_TRUE(rm.LookupOrCreate<Var>("a", "x", MakeVar("x"), &id4).ok());
  EXPECT_NE(id4, id1);
  EXPECT_EQ(rm.Lookup<Var>(id1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rm.Cleanup("a"), 2);
  ASSERT_EQ(rm.List().size(), 1u);
  EXPECT_EQ(rm.List()[0].container, "b");
  EXPECT_EQ(rm.List()[0].id, id3);
}

TEST(ResourceMgrTest, ConcurrentLookupOrCreateMakesOneResource) {
  ResourceMgr rm("cpu");
  std::atomic<int> made{0};
  std::vector<std::thread> threads;
  std::vector<uint64_t> ids(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = rm.LookupOrCreate<Var>(
          "", "w",
          [&]() -> absl::StatusOr<std::shared_ptr<Var>> {
            made.fetch_add(1);
            return std::make_shared<Var>("w", DT_FLOAT, PartialTensorShape({}));
          },
          &ids[i]);
      ASSERT_TRUE(r.ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(made.load(), 1);
  for (uint64_t id : ids) EXPECT_EQ(id, ids[0]);
}

TEST(ResourceHandleTest, RoundTripAndValidation) {
  auto h = MakeResourceHandle(CpuAllocator(), 42);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->dtype(), DT_RESOURCE);
  EXPECT_EQ(h->dims(), 0);
  EXPECT_EQ(h->TotalBytes(), 8u);
  auto id = ResourceIdFromHandle(*h);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 42u);
  EXPECT_EQ(ResourceIdFromHandle(Tensor::Scalar<int64_t>(42)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResourceIdFromHandle(Tensor()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ResourceHandleTest, HandlesAreNeverSerialized) {
  auto h = MakeResourceHandle(CpuAllocator(), 7);
  ASSERT_TRUE(h.ok());
  ::tensorflow::TensorProto p;
  EXPECT_EQ(h->ToProto(&p).code(), absl::StatusCode::kInvalidArgument);
  h->AsProto(&p);
  EXPECT_TRUE(p.tensor_content().empty());
  // A proto claiming to be a handle (even with 8 bytes of content) does not parse.
  p.set_tensor_content(std::string(8, '\x07'));
  EXPECT_EQ(Tensor::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DataTypeSize(DT_RESOURCE), 8u);
  EXPECT_FALSE(DataTypeCanUseMemcpy(DT_RESOURCE));
  EXPECT_TRUE(DataTypeCanAllocate(DT_RESOURCE));
}

TEST(VarTest, CopyOnWriteKeepsReadersSnapshots) {
  Var v("w", DT_FLOAT, PartialTensorShape({-1}));
  MutexLock l(v.mu());
  EXPECT_EQ(v.CheckInitialized().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(v.CheckInitialized().message().find("'w'"), std::string::npos);
  EXPECT_EQ(v.PrepareForUpdate(CpuAllocator()).code(), absl::StatusCode::kFailedPrecondition);
  v.set_value(Tensor::FromVector<float>({1, 2}));
  // Nobody else holds the buffer: updates happen in place.
  const void* before = v.value().raw_data();
  ASSERT_TRUE(v.PrepareForUpdate(CpuAllocator()).ok());
  EXPECT_EQ(v.value().raw_data(), before);
  // A reader's snapshot forces a copy before the write.
  Tensor snapshot = v.value();
  ASSERT_TRUE(v.PrepareForUpdate(CpuAllocator()).ok());
  EXPECT_NE(v.value().raw_data(), snapshot.raw_data());
  v.mutable_value()->data<float>()[0] = 10;
  EXPECT_EQ(snapshot.data<float>()[0], 1);
  EXPECT_EQ(v.value().data<float>()[0], 10);
  EXPECT_EQ(v.value().data<float>()[1], 2);
}

TEST(VarTest, AssignabilityChecks) {
  Var v("w", DT_FLOAT, PartialTensorShape({2, -1}));
  MutexLock l(v.mu());
  EXPECT_TRUE(v.CheckAssignable(Tensor(DT_FLOAT, TensorShape{2, 3}), true).ok());
  EXPECT_EQ(v.CheckAssignable(Tensor(DT_DOUBLE, TensorShape{2, 3}), true).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(v.CheckAssignable(Tensor(DT_FLOAT, TensorShape{3, 3}), true).code(),
            absl::StatusCode::kInvalidArgument);
  v.set_value(Tensor(DT_FLOAT, TensorShape{2, 3}));
  EXPECT_EQ(v.CheckAssignable(Tensor(DT_FLOAT, TensorShape{2, 4}), true).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(v.CheckAssignable(Tensor(DT_FLOAT, TensorShape{2, 4}), false).ok());
  EXPECT_EQ(v.CheckDtype(DT_INT32, "ReadVariableOp").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
