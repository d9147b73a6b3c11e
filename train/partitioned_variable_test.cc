// Partitioned variables: partitioning rules, whole reads and writes, the
// embedding lookup's sparse reads, and sparse updates that equal the dense
// update of an unpartitioned table.
#include "train/partitioned_variable.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "train/initializers.h"
#include "train/layers.h"
#include "train/models.h"
#include "train/optimizers.h"

namespace strata {
namespace train {
namespace {

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements());
}

// While alive, variables of rank >= 1 are split into `n` partitions on
// /cpu:0, /cpu:1, ... in turn.
class Partitioning {
 public:
  explicit Partitioning(int n)
      : creator_([n](const Scope& scope, const VariableArgs& args, const VariableCreatorFn& next) {
          const int parts = FixedShardsPartitioner(n)(args.shape, args.dtype);
          return CreatePartitioned(scope, args, parts, [&](int p, const VariableArgs& part) {
            return next(scope.WithDevice("/cpu:" + std::to_string(p)), part);
          });
        }) {}

 private:
  VariableCreatorScope creator_;
};

Tensor Iota(int64_t rows, int64_t cols) {
  Tensor t(DT_FLOAT, TensorShape({rows, cols}));
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

std::unique_ptr<Session> MakeSession(const Scope& root) {
  SessionOptions o;
  o.devices.num_cpu_devices = 3;
  o.devices.intra_op_threads_per_device = 1;
  auto s = Session::Create(root, o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

TEST(PartitionedVariableTest, RowsAndPartitioners) {
  EXPECT_EQ(PartitionRows(10, 3), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(PartitionRows(4, 4), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(FixedShardsPartitioner(4)(TensorShape({3, 2}), DT_FLOAT), 3);  // one row each at most
  EXPECT_EQ(FixedShardsPartitioner(4)(TensorShape(), DT_FLOAT), 1);        // a scalar has no rows
  EXPECT_EQ(MinSizePartitioner(1000, 8)(TensorShape({100, 10}), DT_FLOAT), 4);  // 4000 bytes
  EXPECT_EQ(MinSizePartitioner(1000, 3)(TensorShape({100, 10}), DT_FLOAT), 3);
  EXPECT_EQ(MinSizePartitioner(1 << 20, 8)(TensorShape({100, 10}), DT_FLOAT), 1);
}

TEST(PartitionedVariableTest, ReadsWritesAndLooksUpRowsLikeTheWhole) {
  Scope root = Scope::NewRootScope();
  Variable* table = nullptr;
  {
    Partitioning three(3);
    table =
        CreateVariable(root, "table", TensorShape({7, 2}), DT_FLOAT, ConstantTensor(Iota(7, 2)));
  }
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_EQ(table->num_partitions(), 3);
  EXPECT_EQ(table->name(), "table");
  EXPECT_EQ(table->partition(1)->name(), "table/part_1");
  EXPECT_EQ(table->partition(2)->device(), "/cpu:2");
  EXPECT_EQ(table->partition_offset(1), 3);
  EXPECT_EQ(table->partition(2)->shape(), TensorShape({2, 2}));
  EXPECT_FALSE(table->handle().ok());
  std::vector<VariableRead> reads;
  Output ids = ops::Const<int64_t>(root, {6, 0, 3, 3}, TensorShape({2, 2}));
  Output rows = EmbeddingLookup(root, table, ids, &reads);
  Output whole = table->Read(root);
  Output next =
      ops::Const<float>(root, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, TensorShape({7, 2}));
  Node* assign = table->Assign(root, ops::Mul(root, next, ops::Const(root, -1.0f)));
  Node* init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_EQ(reads.size(), 3u);  // one sparse read per partition
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ(reads[p].variable, table->partition(p));
    EXPECT_TRUE(reads[p].indices.ok());
  }
  EXPECT_EQ(rows.shape(), PartialTensorShape({2, 2, 2}));
  auto session = MakeSession(root);
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Run({}, {}, {init->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {rows.name(), whole.name()}, {}, &out).ok());
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{12, 13, 0, 1, 6, 7, 6, 7}));
  EXPECT_EQ(Floats(out[1]), Floats(Iota(7, 2)));
  ASSERT_TRUE(session->Run({}, {}, {assign->name()}, nullptr).ok());
  ASSERT_TRUE(session->Run({}, {whole.name()}, {}, &out).ok());
  EXPECT_EQ(out[0].data<float>()[13], -13.0f);
  EXPECT_EQ(out[0].data<float>()[5], -5.0f);
}

// A table [7, 2] looked up by ids with repeats, trained for 3 steps: the
// table after. `listed`: Minimize gets the lookup's reads, else finds them.
std::vector<float> Train(int partitions, Optimizer* optimizer, bool listed = true) {
  Scope root = Scope::NewRootScope();
  Variable* table = nullptr;
  {
    std::unique_ptr<Partitioning> p;
    if (partitions > 1) p = std::make_unique<Partitioning>(partitions);
    table =
        CreateVariable(root, "table", TensorShape({7, 2}), DT_FLOAT, ConstantTensor(Iota(7, 2)));
  }
  std::vector<VariableRead> reads;
  Output ids = ops::Const<int32_t>(root, {0, 6, 6, 1, 0});
  Output rows = EmbeddingLookup(root, table, ids, &reads);
  Output weights =
      ops::Const<float>(root, {1, -2, 0.5f, 3, 1, 1, -1, 2, 0.25f, 1}, TensorShape({5, 2}));
  Output loss =
      ops::Sum(root, ops::Square(root, ops::Mul(root, rows, weights)), ops::Const(root, {0, 1}));
  auto train_op = listed ? Minimize(root, loss, reads, optimizer) : Minimize(root, loss, optimizer);
  EXPECT_TRUE(train_op.ok()) << train_op.status();
  Output whole = table->Read(root);
  Node* init = GlobalVariablesInitializer(root);
  if (!train_op.ok() || !root.ok()) return {};
  auto session = MakeSession(root);
  if (session == nullptr || !session->Run({}, {}, {init->name()}, nullptr).ok()) return {};
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(session->Run({}, {}, {(*train_op)->name()}, nullptr).ok());
  std::vector<Tensor> out;
  EXPECT_TRUE(session->Run({}, {whole.name()}, {}, &out).ok());
  return out.empty() ? std::vector<float>() : Floats(out[0]);
}

TEST(PartitionedVariableTest, SparseUpdatesEqualTheWholeTablesDenseOnes) {
  for (const bool adam : {false, true}) {
    SCOPED_TRACE(adam ? "Adam (rows summed on the partition's device)"
                      : "SGD (a scatter of the rows)");
    auto make = [&]() -> std::unique_ptr<Optimizer> {
      if (adam) return std::make_unique<Adam>(0.1);
      return std::make_unique<SGD>(0.01);
    };
    auto whole_opt = make(), parts_opt = make(), found_opt = make();
    const std::vector<float> whole = Train(1, whole_opt.get());
    const std::vector<float> parts = Train(3, parts_opt.get());
    // Minimize without a list finds the partitions' lookups itself.
    EXPECT_EQ(Train(3, found_opt.get(), /*listed=*/false), parts);
    ASSERT_EQ(whole.size(), 14u);
    ASSERT_EQ(parts.size(), 14u);
    for (size_t i = 0; i < whole.size(); ++i)
      EXPECT_NEAR(parts[i], whole[i], 1e-4f * (1 + std::abs(whole[i]))) << i;
    // Rows 2..5 are never looked up: untouched (SGD) and the trained rows moved.
    if (!adam) {
      for (int i = 4; i < 12; ++i) EXPECT_EQ(parts[i], static_cast<float>(i)) << i;
    }
    EXPECT_NE(parts[12], 12.0f);
  }
}

TEST(PartitionedVariableTest, SeededPartitionsInitializeAloneToTheWholesValues) {
  // [1001, 3] in 3 partitions of 334, 334, 333 rows: offsets of 1002 and
  // 2004 elements, inside Philox blocks of 4.
  const std::vector<std::pair<std::string, Initializer>> inits = {
      {"glorot", GlorotUniform(3)},
      {"normal", RandomNormal(0, 1, 4)},
      {"truncated", TruncatedNormal(0, 1, 5)}};
  for (const auto& [what, init] : inits) {
    SCOPED_TRACE(what);
    Scope root = Scope::NewRootScope();
    Variable* whole = CreateVariable(root, "whole", TensorShape({1001, 3}), DT_FLOAT, init);
    Variable* table = nullptr;
    {
      Partitioning three(3);
      table = CreateVariable(root, "table", TensorShape({1001, 3}), DT_FLOAT, init);
    }
    Node* initialize = GlobalVariablesInitializer(root);
    Output a = whole->Read(root), b = table->Read(root);
    ASSERT_TRUE(root.ok()) << root.status();
    ASSERT_EQ(table->num_partitions(), 3);
    auto session = MakeSession(root);
    ASSERT_NE(session, nullptr);
    ASSERT_TRUE(session->Run({}, {}, {initialize->name()}, nullptr).ok());
    std::vector<Tensor> out;
    ASSERT_TRUE(session->Run({}, {a.name(), b.name()}, {}, &out).ok());
    EXPECT_EQ(Floats(out[0]), Floats(out[1]));
    if (what == "glorot") {
      float largest = 0;
      for (float v : Floats(out[1])) largest = std::max(largest, std::abs(v));
      EXPECT_LE(largest, std::sqrt(6.0f / 1004));  // the whole's fans
    }
  }
  // Unseeded, each partition draws afresh (as a whole would on each run).
  Scope root = Scope::NewRootScope();
  Variable* table = nullptr;
  {
    Partitioning two(2);
    table = CreateVariable(root, "table", TensorShape({8, 2}), DT_FLOAT, RandomUniform());
  }
  Node* initialize = GlobalVariablesInitializer(root);
  Output a = table->partition(0)->Read(root), b = table->partition(1)->Read(root);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = MakeSession(root);
  ASSERT_TRUE(session->Run({}, {}, {initialize->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {a.name(), b.name()}, {}, &out).ok());
  EXPECT_NE(Floats(out[0]), Floats(out[1]));
}

TEST(PartitionedVariableTest, ErrorsNameTheVariable) {
  Scope root = Scope::NewRootScope();
  VariableArgs args;
  args.name = "small";
  args.shape = TensorShape({2, 3});
  args.initializer = Zeros();
  auto v = CreatePartitioned(root, args, 3, [](int, const VariableArgs& a) {
    return DefaultVariableCreator(Scope::NewRootScope(), a);
  });
  ASSERT_FALSE(v.ok());
  EXPECT_TRUE(absl::StrContains(v.status().message(), "'small'")) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "3 partitions")) << v.status();
  // A sparse gradient must name a partition, not the partitioned whole.
  Variable* table = nullptr;
  {
    Partitioning two(2);
    table = CreateVariable(root, "table", TensorShape({4, 2}), DT_FLOAT, Zeros());
  }
  SGD sgd(0.1);
  Node* op = sgd.ApplyGradients(
      root, {},
      {{ops::Const<float>(root, {1, 1}, TensorShape({1, 2})), ops::Const(root, {0}), table}});
  EXPECT_EQ(op, nullptr);
  EXPECT_TRUE(absl::StrContains(root.status().message(), "pair it with the partition"))
      << root.status();
}

}  // namespace
}  // namespace train
}  // namespace strata
