// Sharded checkpoints: several writers' shards, one committed index.
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "proto/checkpoint.pb.h"
#include "runtime/checkpoint/checkpoint_format.h"
#include "runtime/checkpoint/checkpoint_manager.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "runtime/checkpoint/checkpoint_writer.h"

namespace strata {
namespace {

namespace fmt = checkpoint_format;

std::vector<std::string> Files(const std::string& dir) { return io::ListDir(dir).value(); }

std::vector<float> Iota(int n, float from) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

// "m" (float [3, 5]) over three shards (elements 0-3, 4-11, 12-14) and "v"
// (float [7]) over two of them (0-1 in the first, 2-6 in the third), as
// three processes holding consecutive blocks would write them; `salt`
// changes every value.
struct Sharded {
  std::string prefix;
  CheckpointShards shards;
  std::vector<std::pair<std::string, Tensor>> whole;
};

std::vector<TensorPiece> Pieces(int shard, float salt) {
  auto piece = [&](const std::string& name, int64_t offset, int n) {
    return TensorPiece{name, offset,
                       Tensor::FromVector<float>(Iota(n, 100 * (name == "v") + offset + salt))};
  };
  switch (shard) {
    case 0:
      return {piece("m", 0, 4), piece("v", 0, 2)};
    case 1:
      return {piece("m", 4, 8)};
    default:
      return {piece("m", 12, 3), piece("v", 2, 5)};
  }
}

Sharded WriteSharded(const std::string& dir, const std::string& base, float salt,
                     const std::string& save_id) {
  Sharded s;
  s.prefix = io::JoinPath(dir, base);
  s.shards.tensors = {{"m", DT_FLOAT, TensorShape{3, 5}}, {"v", DT_FLOAT, TensorShape{7}}};
  for (int p = 0; p < 3; ++p) {
    const std::string shard = ShardPrefix(s.prefix, absl::StrCat(p, "-", save_id));
    EXPECT_TRUE(SaveCheckpointShard(shard, Pieces(p, salt)).ok());
    s.shards.prefixes.push_back(shard);
  }
  s.whole = {{"w", Tensor::FromVector<int32_t>({1, 2, 3})}};
  return s;
}

void ExpectValues(const CheckpointReader& r, float salt) {
  Tensor m, v, w;
  ASSERT_TRUE(r.Read("m", &m).ok());
  ASSERT_TRUE(r.Read("v", &v).ok());
  ASSERT_TRUE(r.Read("w", &w).ok());
  ASSERT_EQ(m.shape(), (TensorShape{3, 5}));
  ASSERT_EQ(v.shape(), (TensorShape{7}));
  for (int i = 0; i < 15; ++i) EXPECT_EQ(m.data<float>()[i], i + salt) << i;
  for (int i = 0; i < 7; ++i) EXPECT_EQ(v.data<float>()[i], 100 + i + salt) << i;
  EXPECT_EQ(w.data<int32_t>()[2], 3);
}

TEST(ShardedCheckpointTest, ReadsSlicedTensorsWholeAndVerifiesEveryShard) {
  const std::string dir = io::MakeTempDir("sharded").value();
  Sharded s = WriteSharded(dir, "ckpt-5", 0.5f, "a");
  ASSERT_TRUE(SaveCheckpoint(s.prefix, s.whole, {{"k", "v"}}, s.shards).ok());
  auto r = CheckpointReader::Open(s.prefix);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->shard_prefixes(), s.shards.prefixes);
  EXPECT_EQ((*r)->tensors().size(), 3u);
  EXPECT_EQ((*r)->tensors().at("m").shape, (TensorShape{3, 5}));
  EXPECT_TRUE((*r)->VerifyAll().ok());
  ExpectValues(**r, 0.5f);
  std::map<std::string, Tensor> restored;
  EXPECT_TRUE((*r)->RestoreInto({{"m", {DT_FLOAT, TensorShape{3, 5}}}}, &restored).ok());
  EXPECT_EQ(restored.at("m").data<float>()[14], 14.5f);

  // A byte flipped in a shard's data: the whole-file check names that file;
  // the read of the tensor using it too.
  const std::string victim = s.shards.prefixes[2];
  std::string data_file;
  for (const std::string& n : Files(dir)) {
    if (absl::StartsWith(n, io::BaseName(victim) + ".data-")) data_file = io::JoinPath(dir, n);
  }
  ASSERT_FALSE(data_file.empty());
  std::string bytes = *io::ReadFileToString(data_file);
  bytes[bytes.size() - 3] ^= 0x10;
  ASSERT_TRUE(io::WriteFileAtomically(data_file, bytes).ok());
  r = CheckpointReader::Open(s.prefix);
  ASSERT_TRUE(r.ok());
  absl::Status verify = (*r)->VerifyAll();
  EXPECT_TRUE(absl::IsDataLoss(verify) && absl::StrContains(verify.message(), data_file)) << verify;
  Tensor v;
  absl::Status read = (*r)->Read("v", &v);
  EXPECT_TRUE(absl::IsDataLoss(read) && absl::StrContains(read.message(), "'v'")) << read;
}

TEST(ShardedCheckpointTest, ReadsAnyRangeOfElementsFromSlicesOrAWholeTensor) {
  const std::string dir = io::MakeTempDir("sharded_ranges").value();
  Sharded s = WriteSharded(dir, "ckpt-5", 0.5f, "a");
  s.whole.push_back({"big", Tensor::FromVector<float>(Iota(300000, 7))});  // over 1 MiB
  ASSERT_TRUE(SaveCheckpoint(s.prefix, s.whole, {}, s.shards).ok());
  auto r = CheckpointReader::Open(s.prefix);
  ASSERT_TRUE(r.ok()) << r.status();
  // Every range of "m" (slices 0-3, 4-11, 12-14) and of "w" (unsliced).
  for (int first = 0; first <= 15; ++first) {
    for (int count = 0; first + count <= 15; ++count) {
      Tensor t;
      ASSERT_TRUE((*r)->ReadElements("m", first, count, &t).ok()) << first << " " << count;
      ASSERT_EQ(t.shape(), (TensorShape{count}));
      for (int i = 0; i < count; ++i)
        EXPECT_EQ(t.data<float>()[i], first + i + 0.5f) << first << " " << i;
    }
  }
  Tensor t;
  ASSERT_TRUE((*r)->ReadElements("w", 1, 2, &t).ok());
  EXPECT_EQ(t.data<int32_t>()[0], 2);
  EXPECT_EQ(t.data<int32_t>()[1], 3);
  // A range across the 1 MiB chunks the whole tensor streams through.
  ASSERT_TRUE((*r)->ReadElements("big", 262140, 10, &t).ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(t.data<float>()[i], 262147 + i) << i;
  for (auto [first, count] :
       {std::pair<int64_t, int64_t>{-1, 2}, {14, 2}, {0, 16}, {16, 0}, {3, -1}}) {
    absl::Status bad = (*r)->ReadElements("m", first, count, &t);
    EXPECT_TRUE(absl::IsInvalidArgument(bad) && absl::StrContains(bad.message(), "'m'")) << bad;
  }
  EXPECT_TRUE(absl::IsNotFound((*r)->ReadElements("nope", 0, 1, &t)));
  // Verified whole first, a read takes just the range's bytes: the same.
  ASSERT_TRUE((*r)->VerifyAll().ok());
  ASSERT_TRUE((*r)->verified());
  ASSERT_TRUE((*r)->ReadElements("big", 262140, 10, &t).ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(t.data<float>()[i], 262147 + i) << i;
  ASSERT_TRUE((*r)->ReadElements("m", 2, 12, &t).ok());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(t.data<float>()[i], 2 + i + 0.5f) << i;

  // A byte flipped in the third shard: a range that reads none of that
  // shard is unaffected; one that reads any of its slice, even elements
  // other than the flipped one, is DataLoss naming the tensor.
  std::string data_file;
  for (const std::string& n : Files(dir)) {
    if (absl::StartsWith(n, io::BaseName(s.shards.prefixes[2]) + ".data-"))
      data_file = io::JoinPath(dir, n);
  }
  ASSERT_FALSE(data_file.empty());
  std::string bytes = *io::ReadFileToString(data_file);
  bytes[bytes.size() - 3] ^= 0x10;
  ASSERT_TRUE(io::WriteFileAtomically(data_file, bytes).ok());
  r = CheckpointReader::Open(s.prefix);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)->ReadElements("m", 0, 12, &t).ok());
  EXPECT_TRUE((*r)->ReadElements("v", 0, 2, &t).ok());
  absl::Status corrupt = (*r)->ReadElements("v", 2, 1, &t);
  EXPECT_TRUE(absl::IsDataLoss(corrupt) && absl::StrContains(corrupt.message(), "'v'")) << corrupt;
}

TEST(ShardedCheckpointTest, AMissingShardOrOneOfAnotherSaveIsDataLossNamingIt) {
  const std::string dir = io::MakeTempDir("sharded").value();
  Sharded s = WriteSharded(dir, "ckpt-5", 0, "a");
  ASSERT_TRUE(SaveCheckpoint(s.prefix, s.whole, {}, s.shards).ok());

  // Shard 1 replaced by another save's shard under the same name (same
  // tensors, other values): refused by its index's CRC.
  ASSERT_TRUE(SaveCheckpointShard(s.shards.prefixes[1], Pieces(1, 9)).ok());
  auto r = CheckpointReader::Open(s.prefix);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), s.shards.prefixes[1])) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "another save")) << r.status();

  // Shard 2 gone.
  s = WriteSharded(dir, "ckpt-6", 0, "b");
  ASSERT_TRUE(SaveCheckpoint(s.prefix, s.whole, {}, s.shards).ok());
  ASSERT_TRUE(DeleteCheckpoint(s.shards.prefixes[2]).ok());
  r = CheckpointReader::Open(s.prefix);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), s.shards.prefixes[2]) &&
              absl::StrContains(r.status().message(), "missing"))
      << r.status();
}

TEST(ShardedCheckpointTest, ASaveRefusesShardsThatDoNotCoverTheTensorsOnce) {
  const std::string dir = io::MakeTempDir("sharded").value();
  const std::string prefix = io::JoinPath(dir, "ckpt-1");
  Sharded s = WriteSharded(dir, "ckpt-1", 0, "a");
  auto expect_refused = [&](const CheckpointShards& shards, const std::string& says) {
    absl::Status st = SaveCheckpoint(prefix, s.whole, {}, shards);
    EXPECT_FALSE(st.ok());
    EXPECT_TRUE(absl::StrContains(st.message(), says)) << st;
    EXPECT_FALSE(io::FileExists(fmt::IndexPath(prefix)));  // nothing committed
  };
  // A shard left out: a gap in "m" (elements 4-11).
  CheckpointShards gap = s.shards;
  gap.prefixes.erase(gap.prefixes.begin() + 1);
  expect_refused(gap, "tensor 'm' once: none holds element 4");
  // A shard given twice: elements held twice.
  CheckpointShards twice = s.shards;
  twice.prefixes.push_back(s.shards.prefixes[0]);
  expect_refused(twice, "two hold element 0");
  // A shard holding a tensor that is not sliced.
  CheckpointShards unknown = s.shards;
  unknown.tensors.pop_back();
  expect_refused(unknown, "holds 'v', which is not a sliced tensor");
  // A shard of another checkpoint.
  CheckpointShards other = s.shards;
  other.prefixes[0] = ShardPrefix(io::JoinPath(dir, "ckpt-2"), "x");
  expect_refused(other, "is not a shard prefix of");
  // A sliced tensor whose shape the pieces do not fill.
  CheckpointShards bigger = s.shards;
  bigger.tensors[1].shape = TensorShape{8};
  expect_refused(bigger, "hold 7 of the 8 elements of tensor 'v'");
}

TEST(ShardedCheckpointTest, ACraftedIndexCannotNameFilesOutsideTheCheckpoint) {
  const std::string dir = io::MakeTempDir("sharded").value();
  Sharded s = WriteSharded(dir, "ckpt-5", 0, "a");
  ASSERT_TRUE(SaveCheckpoint(s.prefix, s.whole, {}, s.shards).ok());
  const std::string path = fmt::IndexPath(s.prefix);
  const std::string good = *io::ReadFileToString(path);
  auto rewrite = [&](auto edit, const std::string& says) {
    proto::CheckpointIndex index = *fmt::DecodeIndex(good, path, "ckpt-5");
    edit(&index);
    ASSERT_TRUE(io::WriteFileAtomically(path, fmt::EncodeIndex(index)).ok());
    auto r = CheckpointReader::Open(s.prefix);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), says)) << r.status();
  };
  rewrite([](proto::CheckpointIndex* i) { i->mutable_shards(0)->set_prefix("../ckpt-5.shard-x"); },
          "does not start with 'ckpt-5.shard-'");
  rewrite(
      [](proto::CheckpointIndex* i) {
        i->mutable_shards(0)->set_prefix("ckpt-5.shard-0-a/../../x");
      },
      "does not start with");
  rewrite([](proto::CheckpointIndex* i) { i->set_version(fmt::kVersion); }, "names shards");
  rewrite(
      [](proto::CheckpointIndex* i) {
        for (auto& t : *i->mutable_tensors()) {
          if (t.name() == "m") t.mutable_slices(1)->set_element_offset(5);
        }
      },
      "do not cover its 15 elements once");
  rewrite(
      [](proto::CheckpointIndex* i) {
        for (auto& t : *i->mutable_tensors()) {
          if (t.name() == "v") t.mutable_slices(0)->set_shard(7);
        }
      },
      "has a slice in shard 7 of 3");
  rewrite(
      [](proto::CheckpointIndex* i) {
        for (auto& t : *i->mutable_tensors()) {
          if (t.name() == "v") t.mutable_slices(0)->set_shard(1);  // shard 1 has no "v"
        }
      },
      "lacks the slice of tensor 'v'");
}

TEST(ShardedCheckpointTest, ReplacingASavedStepKeepsTheOldShardsUntilTheNewIndexCommits) {
  const std::string dir = io::MakeTempDir("sharded").value();
  Sharded old_save = WriteSharded(dir, "ckpt-5", 0, "old");
  ASSERT_TRUE(SaveCheckpoint(old_save.prefix, old_save.whole, {}, old_save.shards).ok());
  using internal::SaveStage;
  for (SaveStage stop : {SaveStage::kDataWritten, SaveStage::kDataRenamed, SaveStage::kIndexWritten,
                         SaveStage::kCommitted, SaveStage::kDone}) {
    SCOPED_TRACE(static_cast<int>(stop));
    Sharded new_save = WriteSharded(dir, "ckpt-5", 1, absl::StrCat("new", static_cast<int>(stop)));
    (void)internal::SaveCheckpointUntil(new_save.prefix, new_save.whole, {}, new_save.shards, stop);
    auto r = CheckpointReader::Open(new_save.prefix);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE((*r)->VerifyAll().ok());
    const bool committed = stop >= SaveStage::kCommitted;
    ExpectValues(**r, committed ? 1 : 0);
    if (stop == SaveStage::kDone) {
      // Only the new save's shards are left.
      for (const std::string& n : Files(dir)) {
        if (!absl::StrContains(n, ".shard-")) continue;
        bool ours = false;
        for (const std::string& p : new_save.shards.prefixes)
          ours |= absl::StartsWith(n, io::BaseName(p) + ".");
        EXPECT_TRUE(ours) << n;
      }
    }
    if (committed) {  // the next stage starts from an old save again
      old_save = WriteSharded(dir, "ckpt-5", 0, absl::StrCat("old", static_cast<int>(stop)));
      ASSERT_TRUE(SaveCheckpoint(old_save.prefix, old_save.whole, {}, old_save.shards).ok());
    }
  }
}

TEST(ShardedCheckpointTest, TheManagerDeletesTheShardsOfTheCheckpointsItRotatesOut) {
  const std::string dir = io::MakeTempDir("sharded").value();
  auto m = CheckpointManager::Create(dir, 1);
  ASSERT_TRUE(m.ok());
  for (int step : {10, 20}) {
    CheckpointShards shards;
    shards.tensors = {{"m", DT_FLOAT, TensorShape{2}}};
    for (int p = 0; p < 2; ++p) {
      const std::string shard = (*m)->ShardPrefix(step, absl::StrCat(p));
      ASSERT_TRUE(
          SaveCheckpointShard(shard, {{"m", p, Tensor::FromVector<float>({float(step + p)})}})
              .ok());
      shards.prefixes.push_back(shard);
    }
    ASSERT_TRUE((*m)->Save(step, {}, {}, shards).ok());
  }
  for (const std::string& n : Files(dir)) EXPECT_FALSE(absl::StartsWith(n, "ckpt-10")) << n;
  auto r = (*m)->LoadLatestValid();
  ASSERT_TRUE(r.ok()) << r.status();
  Tensor t;
  ASSERT_TRUE((*r)->Read("m", &t).ok());
  EXPECT_EQ(t.data<float>()[1], 21);
}

}  // namespace
}  // namespace strata
