// The complete example of docs/training.md, compiled and checked: build a
// model, train it with the session, checkpoint, and resume. A run stopped
// at step 60 and resumed to step 100 must end with exactly the weights of a
// run that went to 100 at once. Keep this file and the doc in step.
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_manager.h"
#include "runtime/session.h"
#include "train/data/dataset.h"
#include "train/data/sources.h"
#include "train/data/transforms.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/optimizers.h"

namespace strata {
namespace {

// ---- docs/training.md example begins ----
// Trains a 2-16-3 MLP on (features [n, 2], labels [n]) with Adam, batches of
// 25, until `steps`; checkpoints every 20 steps into `dir` and resumes from
// the newest intact checkpoint there.
absl::Status Train(const Tensor& features, const Tensor& labels, const std::string& dir,
                   int64_t steps) {
  // 1. Model code: inputs, the model, the loss, the optimizer's update.
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 2}));
  Output y = ops::Placeholder(root.WithOpName("y"), DT_INT32, PartialTensorShape({-1}));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Sequential> model,
                          train::MakeMlp({16}, /*num_classes=*/3, /*seed=*/1));
  STRATA_ASSIGN_OR_RETURN(Output logits, model->Build(root, x));
  Output loss = train::SparseSoftmaxCrossEntropy(root, y, logits);
  train::Adam adam(0.01);
  STRATA_ASSIGN_OR_RETURN(Node* train_op, train::Minimize(root, loss, model->reads(), &adam));
  Node* init = train::GlobalVariablesInitializer(root);  // after Minimize: Adam's slots too

  // Every variable (weights, Adam's m and v, the step counter): a read to
  // save it, and an assignment from a placeholder to restore it.
  const std::vector<train::Variable*> vars = train::GlobalVariables(root);
  std::vector<std::string> reads, restore_feeds;
  std::vector<Node*> assigns;
  for (train::Variable* v : vars) {
    reads.push_back(v->Read(root).name());
    Output value = ops::Placeholder(root.WithOpName("restore/" + v->name()), v->dtype(),
                                    PartialTensorShape(v->shape()));
    restore_feeds.push_back(value.name());
    assigns.push_back(v->Assign(root, value));
  }
  Node* restore = ops::NoOp(root.WithOpName("restore_all").WithControlDependencies(assigns));
  STRATA_RETURN_IF_ERROR(root.status());

  // 2. The input pipeline: a new shuffle every epoch, batches of 25, forever.
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr ds, data::FromTensors({features, labels}, "blobs"));
  STRATA_ASSIGN_OR_RETURN(ds, data::Shuffle(ds, /*seed=*/7));
  STRATA_ASSIGN_OR_RETURN(ds, data::Batch(ds, 25, /*drop_remainder=*/true));
  STRATA_ASSIGN_OR_RETURN(ds, data::Repeat(ds));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<data::DatasetIterator> it, data::DatasetIterator::Create(ds));

  // 3. A session; the variables and the input position come from the newest
  //    intact checkpoint (a corrupt one is skipped), else the initializers.
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointManager> ckpt,
                          CheckpointManager::Create(dir, /*max_to_keep=*/3));
  int64_t step = 0;
  absl::StatusOr<std::unique_ptr<CheckpointReader>> latest = ckpt->LoadLatestValid();
  if (latest.ok()) {
    std::vector<std::pair<std::string, Tensor>> feeds;
    for (size_t i = 0; i < vars.size(); ++i) {
      Tensor value;
      STRATA_RETURN_IF_ERROR((*latest)->Read(vars[i]->name(), &value));
      feeds.emplace_back(restore_feeds[i], value);
    }
    STRATA_RETURN_IF_ERROR(session->Run(feeds, {}, {restore->name()}, nullptr));
    STRATA_ASSIGN_OR_RETURN(std::string global_step, (*latest)->GetMetadata("global_step"));
    STRATA_ASSIGN_OR_RETURN(std::string position, (*latest)->GetMetadata("input"));
    std::string state;
    if (!absl::SimpleAtoi(global_step, &step) || !absl::Base64Unescape(position, &state)) {
      return absl::DataLossError("bad checkpoint metadata in " + (*latest)->prefix());
    }
    STRATA_RETURN_IF_ERROR(it->RestoreState(state));
  } else if (latest.status().code() == absl::StatusCode::kNotFound) {
    STRATA_RETURN_IF_ERROR(session->Run({}, {}, {init->name()}, nullptr));
  } else {
    return latest.status();  // every checkpoint is corrupt
  }

  // 4. The loop: one Run per step feeds the batch, fetches the loss and runs
  //    the train op (planned on the first step, cached after).
  data::Example batch;
  bool end = false;
  std::vector<Tensor> out;
  while (step < steps) {
    STRATA_RETURN_IF_ERROR(it->GetNext(&batch, &end));
    STRATA_RETURN_IF_ERROR(
        session->Run({{"x", batch[0]}, {"y", batch[1]}}, {loss.name()}, {train_op->name()}, &out));
    ++step;
    if (step % 20 == 0 || step == steps) {
      std::vector<Tensor> values;
      STRATA_RETURN_IF_ERROR(session->Run({}, reads, {}, &values));
      std::vector<std::pair<std::string, Tensor>> named;
      for (size_t i = 0; i < vars.size(); ++i) named.emplace_back(vars[i]->name(), values[i]);
      STRATA_ASSIGN_OR_RETURN(std::string position, it->SaveState());
      STRATA_RETURN_IF_ERROR(
          ckpt->Save(step, named, {{"input", absl::Base64Escape(position)}}).status());
    }
  }
  return absl::OkStatus();
}
// ---- docs/training.md example ends ----

std::pair<Tensor, Tensor> Blobs() {
  std::mt19937 gen(3);
  std::normal_distribution<float> noise(0, 0.3f);
  const float centers[3][2] = {{1, 0}, {-1, 1}, {-1, -1}};
  Tensor xs(DT_FLOAT, TensorShape{150, 2});
  Tensor ys(DT_INT32, TensorShape{150});
  for (int i = 0; i < 150; ++i) {
    xs.data<float>()[2 * i] = centers[i % 3][0] + noise(gen);
    xs.data<float>()[2 * i + 1] = centers[i % 3][1] + noise(gen);
    ys.data<int32_t>()[i] = i % 3;
  }
  return {xs, ys};
}

std::string TempDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(t == nullptr ? "/tmp" : t) + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(ModelsExampleTest, StoppedAndResumedRunEndsWithTheSameWeights) {
  const auto [xs, ys] = Blobs();
  const std::string straight = TempDir("straight"), resumed = TempDir("resumed");
  ASSERT_TRUE(Train(xs, ys, straight, 100).ok());
  ASSERT_TRUE(Train(xs, ys, resumed, 60).ok());
  ASSERT_TRUE(Train(xs, ys, resumed, 100).ok());
  auto a = CheckpointReader::Open(straight + "/ckpt-100");
  auto b = CheckpointReader::Open(resumed + "/ckpt-100");
  ASSERT_TRUE(a.ok() && b.ok());
  // 2 kernels, 2 biases, Adam's m and v of each, the step counter.
  EXPECT_EQ((*a)->tensors().size(), 13u);
  for (const auto& [name, info] : (*a)->tensors()) {
    Tensor ta, tb;
    ASSERT_TRUE((*a)->Read(name, &ta).ok());
    ASSERT_TRUE((*b)->Read(name, &tb).ok()) << name;
    EXPECT_EQ(0, std::memcmp(ta.raw_data(), tb.raw_data(), ta.TotalBytes())) << name;
  }
  Tensor iter;
  ASSERT_TRUE((*b)->Read("Adam/iter", &iter).ok());
  EXPECT_EQ(*iter.data<int64_t>(), 100);
}

}  // namespace
}  // namespace strata
