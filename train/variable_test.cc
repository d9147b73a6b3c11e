#include "train/variable.h"

#include <memory>
#include <string>
#include <vector>

#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/state_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "train/initializers.h"

namespace strata {
namespace train {
namespace {

std::unique_ptr<Session> MakeSession(const Scope& root, int devices = 1) {
  SessionOptions opts;
  opts.devices.num_cpu_devices = devices;
  opts.devices.intra_op_threads_per_device = 1;
  auto s = Session::Create(root, opts);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements());
}

TEST(VariableTest, PersistsAcrossRunsAndLivesOnItsDevice) {
  Scope root = Scope::NewRootScope();
  Variable* a = CreateVariable(root.WithDevice("/cpu:0"), "a", TensorShape{2}, DT_FLOAT, Constant(1));
  Variable* b = CreateVariable(root.WithDevice("/cpu:1"), "b", TensorShape{2}, DT_FLOAT, Constant(10));
  ASSERT_TRUE(root.ok()) << root.status();
  Node* init = GlobalVariablesInitializer(root);
  Output one = ops::Const<float>(root, {1, 2});
  Node* add_a = a->AssignAdd(root, one);
  Node* sub_b = b->AssignSub(root, one);
  Output ra = a->Read(root), rb = b->Read(root);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(a->name(), "a");
  EXPECT_EQ(init->name(), "init");
  EXPECT_EQ(ra.shape(), PartialTensorShape({2}));  // known from the VarHandleOp

  auto session = MakeSession(root, 2);
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Run({}, {}, {init->name()}, nullptr).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(session->Run({}, {}, {add_a->name(), sub_b->name()}, nullptr).ok());
  }
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {ra.name(), rb.name()}, {}, &out).ok());
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{4, 7}));
  EXPECT_EQ(Floats(out[1]), (std::vector<float>{7, 4}));

  // Each variable is in its own device's resource manager.
  const auto& devices = session->device_mgr().devices();
  ASSERT_EQ(devices.size(), 2u);
  auto names = [](Device* d) {
    std::vector<std::string> n;
    for (const auto& e : d->resource_manager()->List()) n.push_back(e.name);
    return n;
  };
  EXPECT_EQ(names(devices[0]), std::vector<std::string>{"a"});
  EXPECT_EQ(names(devices[1]), std::vector<std::string>{"b"});
}

TEST(VariableTest, OneSharedNameOnTwoDevicesIsTwoVariables) {
  Scope root = Scope::NewRootScope();
  auto attrs = ops::VarHandleAttrs().SharedName("v");
  Output h0 = ops::VarHandleOp(root.WithOpName("h0").WithDevice("/cpu:0"), DT_FLOAT, {}, attrs);
  Output h1 = ops::VarHandleOp(root.WithOpName("h1").WithDevice("/cpu:1"), DT_FLOAT, {}, attrs);
  Node* a0 = ops::AssignVariableOp(root, h0, ops::Const(root, 1.0f));
  Node* a1 = ops::AssignVariableOp(root, h1, ops::Const(root, 2.0f));
  Output r0 = ops::ReadVariableOp(root, h0, DT_FLOAT);
  Output r1 = ops::ReadVariableOp(root, h1, DT_FLOAT);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = MakeSession(root, 2);
  ASSERT_TRUE(session->Run({}, {}, {a0->name(), a1->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {r0.name(), r1.name()}, {}, &out).ok());
  EXPECT_EQ(*out[0].data<float>(), 1.0f);
  EXPECT_EQ(*out[1].data<float>(), 2.0f);
}

TEST(VariableTest, ReadingBeforeInitIsFailedPreconditionNamingTheVariable) {
  Scope root = Scope::NewRootScope();
  Variable* w = CreateVariable(root.NewSubScope("dense"), "kernel", TensorShape{3}, DT_FLOAT, Zeros());
  Output r = w->Read(root);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(w->name(), "dense/kernel");
  auto session = MakeSession(root);
  std::vector<Tensor> out;
  absl::Status s = session->Run({}, {r.name()}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("dense/kernel"), std::string::npos) << s;
  // After the initializer it reads.
  ASSERT_TRUE(session->Run({}, {}, {w->initializer()->name()}, nullptr).ok());
  ASSERT_TRUE(session->Run({}, {r.name()}, {}, &out).ok());
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{0, 0, 0}));
}

TEST(VariableTest, WrongValueDtypeOrShapeIsAnError) {
  Scope root = Scope::NewRootScope();
  // The initializer's value must match the declared dtype and shape.
  CreateVariable(root, "bad", TensorShape{2}, DT_FLOAT, ConstantTensor(Tensor::FromVector<float>({1, 2, 3})));
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(root.status().message().find("bad"), std::string::npos) << root.status();

  Scope r2 = Scope::NewRootScope();
  Variable* w = CreateVariable(r2, "w", TensorShape{2}, DT_FLOAT, Zeros());
  Node* assign = w->Assign(r2, ops::Const<float>(r2, {1, 2, 3}));
  ASSERT_TRUE(r2.ok()) << r2.status();
  auto session = MakeSession(r2);
  absl::Status s = session->Run({}, {}, {assign->name()}, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'w'"), std::string::npos) << s;
}

TEST(VariableTest, CreatorsInterceptInnermostFirst) {
  Scope root = Scope::NewRootScope();
  std::vector<std::string> seen;
  Variable* plain = nullptr;
  Variable* renamed = nullptr;
  {
    VariableCreatorScope outer([&](const Scope& s, const VariableArgs& args,
                                   const VariableCreatorFn& next) {
      seen.push_back("outer:" + args.name);
      return next(s, args);
    });
    {
      VariableCreatorScope inner([&](const Scope& s, const VariableArgs& args,
                                     const VariableCreatorFn& next) {
        seen.push_back("inner:" + args.name);
        VariableArgs renamed_args = args;
        renamed_args.name = "renamed_" + args.name;
        renamed_args.trainable = false;
        return next(s, renamed_args);
      });
      renamed = CreateVariable(root, "w", TensorShape{}, DT_FLOAT, Zeros());
    }
    plain = CreateVariable(root, "b", TensorShape{}, DT_FLOAT, Zeros());
  }
  Variable* after = CreateVariable(root, "c", TensorShape{}, DT_FLOAT, Zeros());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(seen, (std::vector<std::string>{"inner:w", "outer:renamed_w", "outer:b"}));
  EXPECT_EQ(renamed->name(), "renamed_w");
  EXPECT_FALSE(renamed->trainable());
  EXPECT_EQ(plain->name(), "b");
  EXPECT_EQ(after->name(), "c");
  EXPECT_EQ(GlobalVariables(root), (std::vector<Variable*>{renamed, plain, after}));
  EXPECT_EQ(TrainableVariables(root), (std::vector<Variable*>{plain, after}));
}

// A creator can make one component per device (what a mirrored strategy
// does) by calling `next` once per device; here it returns the first and
// keeps the others.
TEST(VariableTest, CreatorCanMakeOneComponentPerDevice) {
  Scope root = Scope::NewRootScope();
  std::vector<std::unique_ptr<Variable>> extra;
  Variable* w;
  {
    VariableCreatorScope mirrored([&](const Scope& s, const VariableArgs& args,
                                      const VariableCreatorFn& next)
                                      -> absl::StatusOr<std::unique_ptr<Variable>> {
      auto first = next(s.WithDevice("/cpu:0"), args);
      VariableArgs replica = args;
      replica.name = args.name + "/replica_1";
      auto second = next(s.WithDevice("/cpu:1"), replica);
      if (!second.ok()) return second.status();
      extra.push_back(*std::move(second));
      return first;
    });
    w = CreateVariable(root, "w", TensorShape{2}, DT_FLOAT, Constant(3));
  }
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_EQ(w->device(), "/cpu:0");
  EXPECT_EQ(extra[0]->device(), "/cpu:1");
  Node* init = ops::NoOp(root.WithControlDependencies(std::vector<Node*>{w->initializer(), extra[0]->initializer()}));
  Output r0 = w->Read(root), r1 = extra[0]->Read(root);
  auto session = MakeSession(root, 2);
  ASSERT_TRUE(session->Run({}, {}, {init->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {r0.name(), r1.name()}, {}, &out).ok());
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{3, 3}));
  EXPECT_EQ(Floats(out[1]), (std::vector<float>{3, 3}));
  EXPECT_EQ(session->device_mgr().devices()[1]->resource_manager()->List()[0].name,
            "w/replica_1");
}

TEST(VariableTest, CollectionsArePerGraph) {
  Scope g1 = Scope::NewRootScope();
  Scope g2 = Scope::NewRootScope();
  CreateVariable(g1, "x", TensorShape{}, DT_FLOAT, Zeros());
  CreateVariable(g2, "y", TensorShape{}, DT_FLOAT, Zeros());
  CreateVariable(g2, "z", TensorShape{}, DT_FLOAT, Zeros());
  EXPECT_EQ(GlobalVariables(g1).size(), 1u);
  EXPECT_EQ(GlobalVariables(g2).size(), 2u);
  // A new graph (possibly at a dead graph's address) starts empty.
  { Scope dead = Scope::NewRootScope(); CreateVariable(dead, "q", TensorShape{}, DT_FLOAT, Zeros()); }
  Scope g3 = Scope::NewRootScope();
  EXPECT_TRUE(GlobalVariables(g3).empty());
}

TEST(VariableTest, VariablesIgnoreTheScopesControlDependencies) {
  Scope root = Scope::NewRootScope();
  Node* gate = ops::NoOp(root.WithOpName("gate"));
  Variable* w = CreateVariable(root.WithControlDependencies(std::vector<Node*>{gate}), "w", TensorShape{}, DT_FLOAT, Zeros());
  ASSERT_TRUE(root.ok());
  for (const Edge* e : w->handle().node()->in_edges()) EXPECT_NE(e->src, gate);
}

TEST(VariableTest, Int64CounterVariable) {
  Scope root = Scope::NewRootScope();
  Variable* step = CreateVariable(root, "step", TensorShape{}, DT_INT64, Zeros(), false);
  Node* bump = step->AssignAdd(root, ops::Const(root, int64_t{1}));
  Output r = step->Read(root);
  Node* init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = MakeSession(root);
  ASSERT_TRUE(session->Run({}, {}, {init->name()}, nullptr).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(session->Run({}, {}, {bump->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {r.name()}, {}, &out).ok());
  EXPECT_EQ(*out[0].data<int64_t>(), 4);
}

}  // namespace
}  // namespace train
}  // namespace strata
