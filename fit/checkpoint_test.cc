// Checkpoint objects: a mirrored run's checkpoint resumes on one device with
// the same bits, tracked state comes back, N are kept, a corrupt newest one
// is skipped, and a checkpoint of another model is refused by name.
#include "fit/checkpoint.h"

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/file_io.h"
#include "base/status.h"
#include "fit/strategy_flags.h"
#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "strategy/distributed_optimizer.h"
#include "strategy/replica_context.h"
#include "train/initializers.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/optimizers.h"
#include "train/partitioned_variable.h"

namespace strata {
namespace fit {
namespace {

// An MLP trained with Adam under the strategy `config` describes, every
// replica on the same fixed batch, with a Checkpoint of every variable.
struct TrainRun {
  std::unique_ptr<distribute::Strategy> strategy;
  Scope root = Scope::NewRootScope();
  std::unique_ptr<train::Sequential> model;
  std::unique_ptr<distribute::DistributedOptimizer<train::Adam>> adam;
  Node* train_op = nullptr;
  Node* init = nullptr;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Session> session;
};

absl::StatusOr<std::unique_ptr<TrainRun>> Build(const StrategyConfig& config, std::vector<int64_t> hidden) {
  auto r = std::make_unique<TrainRun>();
  STRATA_ASSIGN_OR_RETURN(r->strategy, MakeStrategy(config));
  distribute::StrategyScope in_scope = r->strategy->Scope();
  Tensor x(DT_FLOAT, TensorShape{8, 3});
  Tensor y(DT_INT32, TensorShape{8});
  for (int i = 0; i < 24; ++i) x.data<float>()[i] = static_cast<float>((i * 7) % 5) - 2.0f;
  for (int i = 0; i < 8; ++i) y.data<int32_t>()[i] = i % 2;
  std::vector<Output> xs, ys;
  for (const std::string& d : r->strategy->devices()) {
    xs.push_back(ops::Const(r->root.WithDevice(d), x));
    ys.push_back(ops::Const(r->root.WithDevice(d), y));
  }
  STRATA_ASSIGN_OR_RETURN(r->model, train::MakeMlp(hidden, 2, /*seed=*/3));
  r->adam = std::make_unique<distribute::DistributedOptimizer<train::Adam>>(0.01);
  auto step_fn = [&](distribute::ReplicaContext& ctx,
                     const std::vector<Output>& in) -> absl::StatusOr<distribute::ReplicaResult> {
    STRATA_ASSIGN_OR_RETURN(Output logits, r->model->Build(ctx.scope(), in[0]));
    Output loss = train::SparseSoftmaxCrossEntropy(ctx.scope().NewSubScope("loss"), in[1], logits);
    STRATA_ASSIGN_OR_RETURN(Node* train_op, train::Minimize(ctx.scope(), loss, r->model->reads(), r->adam.get()));
    return distribute::ReplicaResult{{loss}, {train_op}};
  };
  STRATA_ASSIGN_OR_RETURN(distribute::RunResult step,
                          r->strategy->Run(r->root, step_fn, {distribute::PerReplica(xs), distribute::PerReplica(ys)}));
  r->train_op = step.op;
  r->init = train::GlobalVariablesInitializer(r->root);
  STRATA_ASSIGN_OR_RETURN(r->checkpoint, Checkpoint::Create(r->root, train::GlobalVariables(r->root)));
  STRATA_RETURN_IF_ERROR(r->root.status());
  STRATA_ASSIGN_OR_RETURN(r->session, Session::Create(r->root, r->strategy->session_options()));
  return r;
}

StrategyConfig OneDevice() {
  StrategyConfig c;
  c.intra_op_threads = 1;
  return c;
}

StrategyConfig Mirrored(int n) {
  StrategyConfig c;
  c.strategy = "mirrored";
  c.num_cpu_devices = n;
  c.intra_op_threads = 1;
  return c;
}

std::vector<std::pair<std::string, Tensor>> Values(const TrainRun& r) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
  EXPECT_TRUE(r.checkpoint->Collect(r.session.get(), &tensors, &metadata).ok());
  return tensors;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::string(static_cast<const char*>(a.raw_data()), a.TotalBytes()) ==
             std::string(static_cast<const char*>(b.raw_data()), b.TotalBytes());
}

TEST(CheckpointTest, AMirroredRunResumesOnOneDeviceBitForBit) {
  std::string dir = *io::MakeTempDir("fit_checkpoint");
  auto mirrored = Build(Mirrored(2), {4});
  ASSERT_TRUE(mirrored.ok()) << mirrored.status();
  TrainRun& m = **mirrored;
  std::string input_position = "batch 3 of epoch 0";
  ASSERT_TRUE(m.checkpoint
                  ->TrackString("input", [&]() -> absl::StatusOr<std::string> { return input_position; },
                                [&](const std::string& s) {
                                  input_position = s;
                                  return absl::OkStatus();
                                })
                  .ok());
  auto manager = CheckpointManager::Create(m.checkpoint.get(), dir, 3);
  ASSERT_TRUE(manager.ok()) << manager.status();
  auto fresh = (*manager)->RestoreOrInitialize(m.session.get(), m.init);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->step, 0);
  EXPECT_EQ(fresh->prefix, "");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(m.session->Run({}, {}, {m.train_op->name()}, nullptr).ok());
  auto prefix = (*manager)->Save(m.session.get(), 3);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  const auto saved = Values(m);
  // Weights, both Adam slots per weight and Adam's step counter, each once.
  EXPECT_EQ(saved.size(), 4u * 3u + 1u);

  auto one = Build(OneDevice(), {4});
  ASSERT_TRUE(one.ok()) << one.status();
  TrainRun& o = **one;
  std::string restored_position;
  ASSERT_TRUE(o.checkpoint
                  ->TrackString("input", [&]() -> absl::StatusOr<std::string> { return restored_position; },
                                [&](const std::string& s) {
                                  restored_position = s;
                                  return absl::OkStatus();
                                })
                  .ok());
  auto manager_one = CheckpointManager::Create(o.checkpoint.get(), dir, 3);
  ASSERT_TRUE(manager_one.ok());
  auto restored = (*manager_one)->RestoreOrInitialize(o.session.get(), o.init);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->step, 3);
  EXPECT_EQ(restored->prefix, *prefix);
  EXPECT_EQ(restored_position, "batch 3 of epoch 0");
  const auto back = Values(o);
  ASSERT_EQ(back.size(), saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_EQ(back[i].first, saved[i].first);
    EXPECT_TRUE(SameBytes(back[i].second, saved[i].second)) << saved[i].first;
  }
  // And one more step on each ends on the same weights (to float rounding:
  // the mirrored gradient is a mean over two equal replicas).
  ASSERT_TRUE(m.session->Run({}, {}, {m.train_op->name()}, nullptr).ok());
  ASSERT_TRUE(o.session->Run({}, {}, {o.train_op->name()}, nullptr).ok());
  const auto m4 = Values(m), o4 = Values(o);
  for (size_t i = 0; i < m4.size(); ++i) {
    const Tensor& a = m4[i].second;
    const Tensor& b = o4[i].second;
    if (a.dtype() != DT_FLOAT) continue;
    for (int64_t k = 0; k < a.NumElements(); ++k) EXPECT_NEAR(a.data<float>()[k], b.data<float>()[k], 1e-6);
  }
}

TEST(CheckpointTest, KeepsTheNewestAndSkipsACorruptOne) {
  std::string dir = *io::MakeTempDir("fit_checkpoint");
  auto run = Build(OneDevice(), {4});
  ASSERT_TRUE(run.ok()) << run.status();
  TrainRun& r = **run;
  auto manager = CheckpointManager::Create(r.checkpoint.get(), dir, 2);
  ASSERT_TRUE(manager.ok());
  ASSERT_TRUE((*manager)->RestoreOrInitialize(r.session.get(), r.init).ok());
  for (int step = 1; step <= 3; ++step) {
    ASSERT_TRUE(r.session->Run({}, {}, {r.train_op->name()}, nullptr).ok());
    ASSERT_TRUE((*manager)->Save(r.session.get(), step).ok());
  }
  EXPECT_EQ((*manager)->checkpoints().size(), 2u);
  // Flip a byte of the newest checkpoint's data.
  std::string data;
  absl::StatusOr<std::vector<std::string>> names = io::ListDir(dir);
  ASSERT_TRUE(names.ok()) << names.status();
  for (const std::string& name : *names) {
    if (absl::StartsWith(name, "ckpt-3.data-")) data = dir + "/" + name;
  }
  ASSERT_FALSE(data.empty()) << "no data file of ckpt-3 in " << dir;
  {
    std::fstream f(data, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << data;
    f.seekg(10);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x5a;
    f.seekp(10);
    f.write(&c, 1);
  }
  auto again = Build(OneDevice(), {4});
  ASSERT_TRUE(again.ok());
  auto manager2 = CheckpointManager::Create((*again)->checkpoint.get(), dir, 2);
  ASSERT_TRUE(manager2.ok());
  auto restored = (*manager2)->RestoreOrInitialize((*again)->session.get(), (*again)->init);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->step, 2);
  ASSERT_EQ(restored->skipped.size(), 1u);
  EXPECT_EQ(restored->skipped[0].code(), absl::StatusCode::kDataLoss) << restored->skipped[0];
}

// A graph with a table [7, 3] in `parts` partitions (1: a plain variable)
// on /cpu:0, /cpu:1, ..., a plain bias beside it, a Checkpoint of both, and
// a read of the whole table.
struct TableRun {
  Scope root = Scope::NewRootScope();
  Node* init = nullptr;
  Output table;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Session> session;
};

std::unique_ptr<TableRun> BuildTable(int parts, float scale, int64_t block_bytes = 0) {
  auto r = std::make_unique<TableRun>();
  Tensor values(DT_FLOAT, TensorShape({7, 3}));
  for (int i = 0; i < 21; ++i) values.data<float>()[i] = scale * static_cast<float>(i + 1);
  train::Variable* table = nullptr;
  {
    train::VariableCreatorScope creator([parts](const Scope& scope, const train::VariableArgs& args,
                                                const train::VariableCreatorFn& next) {
      return train::CreatePartitioned(scope, args, args.shape.dims() == 2 ? parts : 1,
                                      [&](int p, const train::VariableArgs& part) {
                                        return next(scope.WithDevice("/cpu:" + std::to_string(p)),
                                                    part);
                                      });
    });
    table = train::CreateVariable(r->root, "table", TensorShape({7, 3}), DT_FLOAT,
                                  train::ConstantTensor(values));
    train::CreateVariable(r->root, "bias", TensorShape({3}), DT_FLOAT, train::Ones());
  }
  r->init = train::GlobalVariablesInitializer(r->root);
  EXPECT_TRUE(r->root.ok()) << r->root.status();
  if (!r->root.ok()) return nullptr;
  EXPECT_EQ(table->num_partitions(), parts);
  r->table = table->Read(r->root);
  auto checkpoint = Checkpoint::Create(r->root, train::GlobalVariables(r->root));
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  if (!checkpoint.ok()) return nullptr;
  r->checkpoint = *std::move(checkpoint);
  if (block_bytes > 0) {
    EXPECT_TRUE(r->checkpoint->set_block_bytes(block_bytes).ok());
  }
  SessionOptions o;
  o.devices.num_cpu_devices = 3;
  auto session = Session::Create(r->root, o);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return nullptr;
  r->session = *std::move(session);
  return r;
}

std::vector<float> Table(TableRun& r) {
  std::vector<Tensor> out;
  EXPECT_TRUE(r.session->Run({}, {r.table.name()}, {}, &out).ok());
  if (out.empty()) return {};
  return std::vector<float>(out[0].data<float>(), out[0].data<float>() + out[0].NumElements());
}

TEST(CheckpointTest, APartitionedTableIsSavedByPartitionAndRestoresIntoAnyPartitioning) {
  // Saved from 2 partitions, from 3 and from a plain variable; each restored
  // into 3 partitions, 2 and a plain variable; read and written a row (12
  // bytes) or 2 rows at a time, or whole.
  for (int saved_parts : {2, 3, 1}) {
    const std::string dir = *io::MakeTempDir("fit_checkpoint_partitioned");
    auto saver = BuildTable(saved_parts, 1.0f, saved_parts == 2 ? 12 : 0);
    ASSERT_NE(saver, nullptr);
    auto manager = CheckpointManager::Create(saver->checkpoint.get(), dir, 1);
    ASSERT_TRUE(manager.ok()) << manager.status();
    ASSERT_TRUE((*manager)->RestoreOrInitialize(saver->session.get(), saver->init).ok());
    const std::vector<float> want = Table(*saver);
    auto prefix = (*manager)->Save(saver->session.get(), 5);
    ASSERT_TRUE(prefix.ok()) << prefix.status();
    auto reader = CheckpointReader::Open(*prefix);
    ASSERT_TRUE(reader.ok()) << reader.status();
    // One shard per partition, the table whole under its name.
    EXPECT_EQ((*reader)->shard_prefixes().size(), saved_parts == 1 ? 0u : size_t(saved_parts));
    ASSERT_TRUE((*reader)->Contains("table"));
    EXPECT_EQ((*reader)->tensors().at("table").shape, TensorShape({7, 3}));
    for (int restored_parts : {3, 2, 1}) {
      auto restorer = BuildTable(restored_parts, -1.0f, restored_parts == 3 ? 30 : 0);
      ASSERT_NE(restorer, nullptr);
      auto again = CheckpointManager::Create(restorer->checkpoint.get(), dir, 1);
      ASSERT_TRUE(again.ok()) << again.status();
      auto restored = (*again)->RestoreOrInitialize(restorer->session.get(), restorer->init);
      ASSERT_TRUE(restored.ok()) << restored.status();
      EXPECT_EQ(restored->step, 5);
      EXPECT_EQ(Table(*restorer), want) << saved_parts << " -> " << restored_parts;
    }
  }
}

TEST(CheckpointTest, APartitionedTableOfAnotherShapeIsRefusedByName) {
  const std::string dir = *io::MakeTempDir("fit_checkpoint_partitioned_shape");
  auto saver = BuildTable(2, 1.0f);
  ASSERT_NE(saver, nullptr);
  auto manager = CheckpointManager::Create(saver->checkpoint.get(), dir, 1);
  ASSERT_TRUE(manager.ok());
  ASSERT_TRUE((*manager)->RestoreOrInitialize(saver->session.get(), saver->init).ok());
  // The checkpoint holds "table" as [21]: saved by a model whose table is
  // flat, under the same name.
  Tensor flat(DT_FLOAT, TensorShape({21}));
  Tensor bias(DT_FLOAT, TensorShape({3}));
  ASSERT_TRUE(
      SaveCheckpoint(dir + "/ckpt-9", {{"table", flat}, {"bias", bias}}, {{"global_step", "9"}})
          .ok());
  auto again = CheckpointManager::Create(saver->checkpoint.get(), dir, 1);
  ASSERT_TRUE(again.ok());
  const std::vector<float> before = Table(*saver);
  auto restored = (*again)->RestoreOrInitialize(saver->session.get(), saver->init);
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition) << restored.status();
  EXPECT_TRUE(absl::StrContains(restored.status().message(), "'table'")) << restored.status();
  EXPECT_EQ(Table(*saver), before);  // nothing assigned
}

TEST(CheckpointTest, ACheckpointOfAnotherModelIsRefusedByName) {
  std::string dir = *io::MakeTempDir("fit_checkpoint");
  auto small = Build(OneDevice(), {4});
  ASSERT_TRUE(small.ok());
  auto manager = CheckpointManager::Create((*small)->checkpoint.get(), dir, 1);
  ASSERT_TRUE((*manager)->RestoreOrInitialize((*small)->session.get(), (*small)->init).ok());
  ASSERT_TRUE((*manager)->Save((*small)->session.get(), 1).ok());

  auto wider = Build(OneDevice(), {5});
  ASSERT_TRUE(wider.ok());
  auto manager2 = CheckpointManager::Create((*wider)->checkpoint.get(), dir, 1);
  auto restored = (*manager2)->RestoreOrInitialize((*wider)->session.get(), (*wider)->init);
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition) << restored.status();
  // The first variable that differs, with both shapes.
  EXPECT_TRUE(absl::StrContains(restored.status().message(), "'dense/bias'")) << restored.status();
  EXPECT_TRUE(absl::StrContains(restored.status().message(), "expected float [5]")) << restored.status();
  EXPECT_TRUE(absl::StrContains(restored.status().message(), "ckpt-1")) << restored.status();
}

TEST(CheckpointTest, TrackingErrors) {
  Scope root = Scope::NewRootScope();
  EXPECT_EQ(Checkpoint::Create(root, {}).status().code(), absl::StatusCode::kInvalidArgument);
  train::Variable* v = train::CreateVariable(root, "v", TensorShape{}, DT_FLOAT, train::Zeros());
  EXPECT_EQ(Checkpoint::Create(root, {v, v}).status().code(), absl::StatusCode::kInvalidArgument);
  auto c = Checkpoint::Create(root, {v});
  ASSERT_TRUE(c.ok()) << c.status();
  auto save = []() -> absl::StatusOr<std::string> { return std::string("x"); };
  auto restore = [](const std::string&) { return absl::OkStatus(); };
  EXPECT_TRUE((*c)->TrackString("k", save, restore).ok());
  EXPECT_EQ((*c)->TrackString("k", save, restore).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->TrackString("v", save, restore).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->TrackString("global_step", save, restore).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fit
}  // namespace strata
