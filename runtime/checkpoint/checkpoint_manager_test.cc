#include "runtime/checkpoint/checkpoint_manager.h"

#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/testing/test_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_writer.h"

namespace strata {
namespace {

std::string NewTempDir() { return io::MakeTempDir("mgr").value(); }

std::vector<std::pair<std::string, Tensor>> Weights(int64_t step) {
  return {{"w", Tensor::FromVector<float>({static_cast<float>(step), 1, 2, 3})},
          {"b", Tensor::FromVector<int64_t>({step, -step})}};
}

int64_t StepOf(const CheckpointReader& r) {
  Tensor b;
  EXPECT_TRUE(r.Read("b", &b).ok());
  return b.data<int64_t>()[0];
}

void FlipByte(const std::string& path, size_t pos) {
  auto bytes = io::ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  ASSERT_LT(pos, bytes->size());
  (*bytes)[pos] = static_cast<char>((*bytes)[pos] ^ 0x5A);
  auto f = io::WritableFile::Create(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append(*bytes).ok());
  ASSERT_TRUE((*f)->Close().ok());
}

std::vector<std::string> FilesOf(const std::string& dir, const std::string& base) {
  std::vector<std::string> out;
  auto names = io::ListDir(dir);
  EXPECT_TRUE(names.ok());
  for (const auto& n : *names) {
    if (absl::StartsWith(n, base + ".")) out.push_back(io::JoinPath(dir, n));
  }
  return out;
}

TEST(CheckpointManagerTest, KeepsTheNewestAndMaintainsThePointerFile) {
  const std::string dir = NewTempDir();
  auto m = CheckpointManager::Create(dir, 2);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE((*m)->Latest().has_value());
  EXPECT_TRUE(absl::IsNotFound(LatestCheckpoint(dir).status()));
  EXPECT_TRUE(absl::IsNotFound((*m)->LoadLatestValid().status()));

  for (int64_t step : {100, 200, 300}) {
    auto p = (*m)->Save(step, Weights(step), {{"input", "pos"}});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(*p, absl::StrCat(dir, "/ckpt-", step));
  }
  EXPECT_EQ((*m)->checkpoints(), (std::vector<std::string>{dir + "/ckpt-200", dir + "/ckpt-300"}));
  EXPECT_EQ(*(*m)->Latest(), dir + "/ckpt-300");
  EXPECT_EQ(*LatestCheckpoint(dir), dir + "/ckpt-300");
  EXPECT_TRUE(FilesOf(dir, "ckpt-100").empty());
  EXPECT_EQ(*io::ReadFileToString(dir + "/checkpoint"),
            "model_checkpoint_path: \"ckpt-300\"\n"
            "all_model_checkpoint_paths: \"ckpt-200\"\n"
            "all_model_checkpoint_paths: \"ckpt-300\"\n");

  auto r = (*m)->LoadLatestValid();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(StepOf(**r), 300);
  EXPECT_EQ(*(*r)->GetMetadata("global_step"), "300");
  EXPECT_EQ(*(*r)->GetMetadata("input"), "pos");

  // A new manager (a restarted job) finds the checkpoints on disk.
  auto m2 = CheckpointManager::Create(dir, 2);
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ((*m2)->checkpoints(), (*m)->checkpoints());
  ASSERT_TRUE((*m2)->Save(400, Weights(400)).ok());
  EXPECT_EQ((*m2)->checkpoints(), (std::vector<std::string>{dir + "/ckpt-300", dir + "/ckpt-400"}));
}

TEST(CheckpointManagerTest, ZeroKeepsAllAndNegativeIsRejected) {
  const std::string dir = NewTempDir();
  EXPECT_TRUE(absl::IsInvalidArgument(CheckpointManager::Create(dir, -1).status()));
  auto m = CheckpointManager::Create(dir, 0);
  ASSERT_TRUE(m.ok());
  for (int64_t step = 1; step <= 5; ++step) ASSERT_TRUE((*m)->Save(step, Weights(step)).ok());
  EXPECT_EQ((*m)->checkpoints().size(), 5u);
  EXPECT_TRUE(absl::IsInvalidArgument((*m)->Save(-3, Weights(0)).status()));
}

TEST(CheckpointManagerTest, SavingAnExistingStepReplacesIt) {
  const std::string dir = NewTempDir();
  auto m = CheckpointManager::Create(dir, 3);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->Save(5, Weights(5)).ok());
  ASSERT_TRUE((*m)->Save(5, Weights(7)).ok());
  EXPECT_EQ((*m)->checkpoints().size(), 1u);
  auto r = (*m)->LoadLatestValid();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(StepOf(**r), 7);
  EXPECT_EQ(FilesOf(dir, "ckpt-5").size(), 2u);  // index + one data file
}

// The acceptance test: one flipped byte anywhere in the newest checkpoint
// makes it refused with DataLoss, and the previous one still loads.
TEST(CheckpointManagerTest, CorruptLatestFallsBackToPreviousGoodOne) {
  const std::string dir = NewTempDir();
  auto m = CheckpointManager::Create(dir, 3);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->Save(10, Weights(10)).ok());
  ASSERT_TRUE((*m)->Save(20, Weights(20)).ok());
  const std::vector<std::string> files = FilesOf(dir, "ckpt-20");
  ASSERT_EQ(files.size(), 2u);
  for (const std::string& path : files) {
    const std::string orig = *io::ReadFileToString(path);
    for (size_t pos = 0; pos < orig.size(); pos += 7) {
      FlipByte(path, pos);
      auto latest = CheckpointReader::Open(dir + "/ckpt-20");
      absl::Status s = latest.ok() ? (*latest)->VerifyAll() : latest.status();
      EXPECT_TRUE(absl::IsDataLoss(s)) << path << " @" << pos << ": " << s;
      std::vector<absl::Status> skipped;
      auto r = (*m)->LoadLatestValid(&skipped);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ((*r)->prefix(), dir + "/ckpt-10");
      EXPECT_EQ(StepOf(**r), 10);
      ASSERT_EQ(skipped.size(), 1u);
      EXPECT_TRUE(absl::IsDataLoss(skipped[0]));
      FlipByte(path, pos);  // flip back
    }
  }
  auto r = (*m)->LoadLatestValid();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(StepOf(**r), 20);

  // With every checkpoint damaged, the error says so.
  FlipByte(FilesOf(dir, "ckpt-10")[0], 3);
  FlipByte(dir + "/ckpt-20.index", 30);
  absl::Status s = (*m)->LoadLatestValid().status();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "ckpt-10")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "ckpt-20")) << s;
}

// Issue 23, defect 7: a checkpoint whose global_step disagrees with its
// name is refused like a corrupt one, and the previous one resumed.
TEST(CheckpointManagerTest, AGlobalStepThatDisagreesWithTheNameIsRefused) {
  const std::string dir = NewTempDir();
  auto m = CheckpointManager::Create(dir, 3);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->Save(10, Weights(10)).ok());
  ASSERT_TRUE((*m)->Save(20, Weights(20), {{"global_step", "99999999999"}}).ok());
  std::vector<absl::Status> skipped;
  auto r = (*m)->LoadLatestValid(&skipped);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->prefix(), dir + "/ckpt-10");
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_TRUE(absl::IsDataLoss(skipped[0])) << skipped[0];
  EXPECT_TRUE(absl::StrContains(skipped[0].message(),
                                "ckpt-20: its global_step '99999999999' disagrees with its name"))
      << skipped[0];
}

// Issue 23, defect 7: what a crash during a save or a rotation left behind
// goes at the next save; the kept checkpoints stay whole.
TEST(CheckpointManagerTest, ASaveRemovesWhatCrashedSavesAndRotationsLeft) {
  const std::string dir = NewTempDir();
  auto m = CheckpointManager::Create(dir, 2);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->Save(10, Weights(10)).ok());
  const std::vector<std::string> orphans = {
      "ckpt-5.data-0123456789abcdef",       // a rotation that deleted the index, then crashed
      "ckpt-15.data-0123456789abcdef.tmp",  // a save that crashed before its index
      "ckpt-10.index.tmp-77",               // a save of a kept step that crashed
      "checkpoint.tmp-42",                  // a pointer update that crashed
  };
  for (const std::string& n : orphans) {
    auto f = io::WritableFile::Create(io::JoinPath(dir, n));
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append("left behind").ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  auto again = CheckpointManager::Create(dir, 2);  // as after a restart
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->Save(20, Weights(20)).ok());
  for (const std::string& n : orphans) {
    EXPECT_FALSE(io::FileExists(io::JoinPath(dir, n))) << n << " was left";
  }
  for (int step : {10, 20}) {
    auto r = CheckpointReader::Open(absl::StrCat(dir, "/ckpt-", step));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE((*r)->VerifyAll().ok());
  }
}

TEST(CheckpointManagerTest, ConcurrentSavesAndReadsAreSerialized) {
  const std::string dir = NewTempDir();
  auto m = CheckpointManager::Create(dir, 2);
  ASSERT_TRUE(m.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        EXPECT_TRUE((*m)->Save(t * 100 + i, Weights(t * 100 + i)).ok());
        (*m)->Latest();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ((*m)->checkpoints(), (std::vector<std::string>{dir + "/ckpt-303", dir + "/ckpt-304"}));
}

// Every change a save makes to the directory failing in turn (creating,
// appending to, syncing, closing and renaming the data file and the index,
// the commit, the pointer file's atomic write, the rotation's deletes): the
// save reports the injected error naming the file, and a restarted job finds
// an intact checkpoint, the old one or (when the failure came after the
// commit) the new, and a pointer file naming an intact one; its next save
// leaves only what max_to_keep keeps.
TEST(CheckpointManagerTest, ASaveFailingAtAnyFileChangeLosesNothing) {
  testing::FaultyFileEnv env;
  int64_t changes = 0;
  {
    auto m = CheckpointManager::Create(NewTempDir(), 1, &env);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE((*m)->Save(1, Weights(1)).ok());
    env.FailChange(0);
    ASSERT_TRUE((*m)->Save(2, Weights(2)).ok());
    changes = env.changes();
  }
  ASSERT_GE(changes, 20);
  for (int64_t k = 1; k <= changes; ++k) {
    SCOPED_TRACE(absl::StrCat("change ", k, " of ", changes));
    const std::string dir = NewTempDir();
    env.FailChange(0);
    auto m = CheckpointManager::Create(dir, 1, &env);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE((*m)->Save(1, Weights(1)).ok());
    env.FailChange(k);
    absl::StatusOr<std::string> saved = (*m)->Save(2, Weights(2));
    ASSERT_TRUE(env.failed());
    ASSERT_FALSE(saved.ok());
    EXPECT_EQ(saved.status().code(), absl::StatusCode::kUnavailable) << saved.status();
    EXPECT_THAT(std::string(saved.status().message()), ::testing::HasSubstr("injected failure of"));
    EXPECT_THAT(std::string(saved.status().message()), ::testing::HasSubstr(dir));

    auto restarted = CheckpointManager::Create(dir, 1);  // the real files, no faults
    ASSERT_TRUE(restarted.ok()) << restarted.status();
    auto r = (*restarted)->LoadLatestValid();
    ASSERT_TRUE(r.ok()) << r.status();
    const int64_t step = StepOf(**r);
    EXPECT_TRUE(step == 1 || step == 2) << step;
    if (k == 1) {
      EXPECT_EQ(step, 1);
    }
    if (k == changes) {
      EXPECT_EQ(step, 2);
    }
    Tensor w;
    ASSERT_TRUE((*r)->Read("w", &w).ok());
    EXPECT_EQ(w.data<float>()[0], static_cast<float>(step));
    absl::StatusOr<std::string> named = LatestCheckpoint(dir);
    ASSERT_TRUE(named.ok()) << named.status();
    auto pointed = CheckpointReader::Open(*named);
    ASSERT_TRUE(pointed.ok()) << pointed.status();
    EXPECT_TRUE((*pointed)->VerifyAll().ok());

    ASSERT_TRUE((*restarted)->Save(3, Weights(3)).ok());
    auto names = io::ListDir(dir);
    ASSERT_TRUE(names.ok()) << names.status();
    for (const std::string& n : *names) {
      EXPECT_TRUE(n == CheckpointManager::kPointerFile || absl::StartsWith(n, "ckpt-3.")) << n;
    }
  }
}

}  // namespace
}  // namespace strata
