#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_io.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_format.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "runtime/checkpoint/checkpoint_writer.h"

namespace strata {
namespace {

using Named = std::vector<std::pair<std::string, Tensor>>;

std::string NewTempDir() { return io::MakeTempDir("ckpt").value(); }

Named SampleTensors(float bias = 0) {
  return {
      {"dense/kernel", Tensor::FromVector<float>({1, 2, 3, 4, 5, 6.5f + bias}, TensorShape{2, 3})},
      {"dense/bias", Tensor::FromVector<float>({bias, -1})},
      {"counts", Tensor::FromVector<int32_t>({7, 8, 9, 10, 11})},
      {"scale", Tensor::Scalar<double>(0.25)},
      {"mask", Tensor::FromVector<bool>({true, false, true})},
      {"empty", Tensor(DT_FLOAT, TensorShape{0, 4})},
  };
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

// Reads every tensor and the metadata; OK only if all reads succeed.
absl::Status LoadAll(const std::string& prefix, std::map<std::string, Tensor>* tensors,
                     std::map<std::string, std::string>* metadata) {
  auto r = CheckpointReader::Open(prefix);
  if (!r.ok()) return r.status();
  for (const auto& [name, info] : (*r)->tensors()) {
    absl::Status s = (*r)->Read(name, &(*tensors)[name]);
    if (!s.ok()) return s;
  }
  *metadata = (*r)->metadata();
  return absl::OkStatus();
}

void ExpectLoadsExactly(const std::string& prefix, const Named& want,
                        const std::map<std::string, std::string>& want_md) {
  std::map<std::string, Tensor> got;
  std::map<std::string, std::string> md;
  ASSERT_TRUE(LoadAll(prefix, &got, &md).ok());
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) EXPECT_TRUE(SameTensor(got[name], t)) << name;
  EXPECT_EQ(md, want_md);
}

std::string DataFile(const std::string& dir, const std::string& base) {
  auto names = io::ListDir(dir);
  EXPECT_TRUE(names.ok());
  std::string found;
  for (const auto& n : *names) {
    if (absl::StartsWith(n, base + ".data-") && !absl::EndsWith(n, ".tmp")) {
      EXPECT_TRUE(found.empty()) << "two data files: " << found << ", " << n;
      found = n;
    }
  }
  return io::JoinPath(dir, found);
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  auto f = io::WritableFile::Create(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append(bytes).ok());
  ASSERT_TRUE((*f)->Close().ok());
}

TEST(CheckpointTest, RoundTripsTensorsAndMetadata) {
  const std::string prefix = NewTempDir() + "/sub/dir/ckpt-1";  // directories are created
  const std::map<std::string, std::string> md = {{"global_step", "1"}, {"input", "\x01\x02state"}};
  ASSERT_TRUE(SaveCheckpoint(prefix, SampleTensors(), md).ok());
  ExpectLoadsExactly(prefix, SampleTensors(), md);

  auto r = CheckpointReader::Open(prefix);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& infos = (*r)->tensors();
  ASSERT_EQ(infos.size(), 6u);
  EXPECT_EQ(infos.at("dense/kernel").dtype, DT_FLOAT);
  EXPECT_EQ(infos.at("dense/kernel").shape, (TensorShape{2, 3}));
  EXPECT_EQ(infos.at("scale").shape, TensorShape());
  EXPECT_EQ(*(*r)->GetMetadata("global_step"), "1");
  EXPECT_TRUE(absl::IsNotFound((*r)->GetMetadata("nope").status()));
  EXPECT_TRUE((*r)->VerifyAll().ok());

  // Tensors are aligned in the data file.
  auto bytes = io::ReadFileToString(prefix + ".index");
  ASSERT_TRUE(bytes.ok());
  auto index = checkpoint_format::DecodeIndex(*bytes, "x", "ckpt-1");
  ASSERT_TRUE(index.ok()) << index.status();
  for (const auto& e : index->tensors()) EXPECT_EQ(e.offset() % checkpoint_format::kDataAlignment, 0u);
}

TEST(CheckpointTest, ErrorsNameTheTensor) {
  const std::string prefix = NewTempDir() + "/ckpt";
  ASSERT_TRUE(SaveCheckpoint(prefix, SampleTensors(), {}).ok());
  auto r = CheckpointReader::Open(prefix);
  ASSERT_TRUE(r.ok());
  Tensor t;
  absl::Status s = (*r)->Read("missing", &t);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "missing"));

  std::map<std::string, Tensor> out = {{"keep", Tensor::Scalar<float>(1)}};
  s = (*r)->RestoreInto({{"dense/kernel", {DT_FLOAT, TensorShape{3, 2}}}}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "dense/kernel")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "[2,3]")) << s;
  s = (*r)->RestoreInto({{"counts", {DT_INT64, TensorShape{5}}}}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "counts")) << s;
  s = (*r)->RestoreInto({{"dense/bias", {DT_FLOAT, TensorShape{2}}}, {"gone", {DT_FLOAT, {}}}}, &out);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_EQ(out.size(), 1u) << "a failed restore must not write its output";

  ASSERT_TRUE((*r)->RestoreInto({{"dense/bias", {DT_FLOAT, TensorShape{2}}},
                                 {"counts", {DT_INT32, TensorShape{5}}}},
                                &out)
                  .ok());
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(out["counts"].data<int32_t>()[4], 11);

  EXPECT_TRUE(absl::IsNotFound(CheckpointReader::Open(prefix + "-nope").status()));
}

TEST(CheckpointTest, RejectsBadInputsToSave) {
  const std::string dir = NewTempDir();
  EXPECT_TRUE(absl::IsInvalidArgument(SaveCheckpoint(dir + "/c", {{"", Tensor::Scalar<float>(1)}}, {})));
  absl::Status s = SaveCheckpoint(
      dir + "/c", {{"a", Tensor::Scalar<float>(1)}, {"a", Tensor::Scalar<float>(2)}}, {});
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(absl::StrContains(s.message(), "'a'"));
  s = SaveCheckpoint(dir + "/c", {{"u", Tensor()}}, {});
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(absl::StrContains(s.message(), "'u'"));
  EXPECT_TRUE(absl::IsInvalidArgument(SaveCheckpoint(dir + "/", {}, {})));
  EXPECT_FALSE(io::FileExists(dir + "/c.index"));
}

TEST(CheckpointTest, TruncatedOrMissingDataIsDataLossNamingFileAndTensor) {
  const std::string dir = NewTempDir();
  const std::string prefix = dir + "/ckpt";
  ASSERT_TRUE(SaveCheckpoint(prefix, SampleTensors(), {}).ok());
  const std::string data = DataFile(dir, "ckpt");
  auto bytes = io::ReadFileToString(data);
  ASSERT_TRUE(bytes.ok());
  WriteBytes(data, bytes->substr(0, bytes->size() - 3));
  auto r = CheckpointReader::Open(prefix);
  ASSERT_TRUE(r.ok());
  // The last tensor in the file (sorted by name) is "scale".
  Tensor t;
  absl::Status s = (*r)->Read("scale", &t);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "scale")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), data)) << s;
  EXPECT_TRUE((*r)->Read("counts", &t).ok());  // untouched tensors still read
  EXPECT_TRUE(absl::IsDataLoss((*r)->VerifyAll()));

  ASSERT_TRUE(io::DeleteFile(data).ok());
  s = CheckpointReader::Open(prefix).status();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "missing")) << s;
}

// Flips every byte of both files in turn: each load either fails with
// DataLoss / InvalidArgument or returns exactly the saved data, and a full
// verification fails for every flip.
TEST(CheckpointTest, EverySingleByteCorruptionIsCaughtOrHarmless) {
  const std::string dir = NewTempDir();
  const std::string prefix = dir + "/ckpt";
  const Named want = SampleTensors();
  const std::map<std::string, std::string> md = {{"global_step", "42"}};
  ASSERT_TRUE(SaveCheckpoint(prefix, want, md).ok());
  const std::string index = prefix + ".index";
  const std::string data = DataFile(dir, "ckpt");

  // Byte ranges of the tensors, from the intact index.
  auto ibytes = io::ReadFileToString(index);
  ASSERT_TRUE(ibytes.ok());
  auto decoded = checkpoint_format::DecodeIndex(*ibytes, index, "ckpt");
  ASSERT_TRUE(decoded.ok());
  auto in_tensor = [&](uint64_t pos) {
    for (const auto& e : decoded->tensors()) {
      if (pos >= e.offset() && pos < e.offset() + e.size()) return true;
    }
    return false;
  };

  for (const std::string& path : {index, data}) {
    auto orig = io::ReadFileToString(path);
    ASSERT_TRUE(orig.ok());
    int harmless = 0;
    for (size_t pos = 0; pos < orig->size(); ++pos) {
      for (int mask : {0x01, 0x80, 0xFF}) {
        std::string bad = *orig;
        bad[pos] = static_cast<char>(bad[pos] ^ mask);
        WriteBytes(path, bad);
        std::map<std::string, Tensor> got;
        std::map<std::string, std::string> got_md;
        absl::Status s = LoadAll(prefix, &got, &got_md);
        if (s.ok()) {
          ++harmless;
          EXPECT_EQ(path, data) << "an index flip at " << pos << " was not detected";
          EXPECT_FALSE(in_tensor(pos)) << "a flip inside a tensor at " << pos << " was not detected";
          for (const auto& [name, t] : want) EXPECT_TRUE(SameTensor(got[name], t)) << name;
          EXPECT_EQ(got_md, md);
        } else {
          EXPECT_TRUE(absl::IsDataLoss(s) || absl::IsInvalidArgument(s)) << pos << ": " << s;
        }
        auto r = CheckpointReader::Open(prefix);
        absl::Status full = r.ok() ? (*r)->VerifyAll() : r.status();
        EXPECT_TRUE(absl::IsDataLoss(full)) << path << " flip at " << pos << ": " << full;
      }
    }
    WriteBytes(path, *orig);
    if (path == data) {
      EXPECT_GT(harmless, 0) << "expected some padding in the data file";
    }
  }
  ExpectLoadsExactly(prefix, want, md);
}

TEST(CheckpointTest, CrashAtAnyStageLeavesOldOrNewCheckpoint) {
  using internal::SaveStage;
  for (SaveStage stop : {SaveStage::kDataWritten, SaveStage::kDataRenamed, SaveStage::kIndexWritten,
                         SaveStage::kCommitted}) {
    const std::string dir = NewTempDir();
    const std::string prefix = dir + "/ckpt";
    // First save into an empty directory, interrupted.
    absl::Status s = internal::SaveCheckpointUntil(prefix, SampleTensors(), {}, {}, stop);
    EXPECT_TRUE(absl::IsAborted(s)) << s;
    if (stop == SaveStage::kCommitted) {
      ExpectLoadsExactly(prefix, SampleTensors(), {});
    } else {
      EXPECT_TRUE(absl::IsNotFound(CheckpointReader::Open(prefix).status()));
    }
    // An intact old checkpoint, then an interrupted overwrite.
    ASSERT_TRUE(SaveCheckpoint(prefix, SampleTensors(1), {{"v", "old"}}).ok());
    s = internal::SaveCheckpointUntil(prefix, SampleTensors(2), {{"v", "new"}}, {}, stop);
    EXPECT_TRUE(absl::IsAborted(s)) << s;
    if (stop == SaveStage::kCommitted) {
      ExpectLoadsExactly(prefix, SampleTensors(2), {{"v", "new"}});
    } else {
      ExpectLoadsExactly(prefix, SampleTensors(1), {{"v", "old"}});
    }
    // The next save cleans up whatever the crash left: exactly two files.
    ASSERT_TRUE(SaveCheckpoint(prefix, SampleTensors(3), {}).ok());
    ExpectLoadsExactly(prefix, SampleTensors(3), {});
    auto names = io::ListDir(dir);
    ASSERT_TRUE(names.ok());
    EXPECT_EQ(names->size(), 2u) << absl::StrJoin(*names, ", ");
  }
}

// Saves `big` over `prefix` in a child process whose writes past `limit`
// bytes of a file fail (RLIMIT_FSIZE: EFBIG, as on a full disk); the save
// must fail naming the checkpoint (the child exits 0) rather than succeed
// or crash (1, with the status on stderr).
void SaveIntoAFullDiskInAChild(const std::string& prefix, const Named& big, rlim_t limit) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    const rlimit r{limit, limit};
    if (setrlimit(RLIMIT_FSIZE, &r) != 0) _exit(2);
    absl::Status s = SaveCheckpoint(prefix, big, {{"v", "big"}});
    const bool named = absl::StrContains(s.message(), prefix);
    if (s.ok() || !named) {
      std::fprintf(stderr, "save into a full disk: %s\n", s.ToString().c_str());
      _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the saving child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the save did not fail naming the checkpoint";
}

// A disk that fills during a save: the save fails naming the checkpoint,
// the old checkpoint still loads, the failed save leaves no file behind,
// and the next save with room succeeds.
TEST(CheckpointTest, ADiskThatFillsDuringASaveLosesNothing) {
  Named big = SampleTensors(1);
  Tensor large(DT_FLOAT, TensorShape{1 << 18});  // 1 MiB
  for (int64_t i = 0; i < large.NumElements(); ++i) large.data<float>()[i] = 0.5f * i;
  big.push_back({"large", large});
  // Full early in the data file, and at its last bytes.
  for (rlim_t limit : {rlim_t{64} << 10, (rlim_t{1} << 20) - 1}) {
    SCOPED_TRACE(absl::StrCat("file size limit ", limit));
    const std::string dir = NewTempDir();
    const std::string prefix = dir + "/ckpt";
    ASSERT_TRUE(SaveCheckpoint(prefix, SampleTensors(2), {{"v", "old"}}).ok());
    auto before = io::ListDir(dir);
    ASSERT_TRUE(before.ok());
    SaveIntoAFullDiskInAChild(prefix, big, limit);
    ExpectLoadsExactly(prefix, SampleTensors(2), {{"v", "old"}});
    auto after = io::ListDir(dir);
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(absl::StrJoin(*after, ", "), absl::StrJoin(*before, ", "));
    // With room again, the next save succeeds.
    ASSERT_TRUE(SaveCheckpoint(prefix, big, {{"v", "big"}}).ok());
    ExpectLoadsExactly(prefix, big, {{"v", "big"}});
  }
}

TEST(CheckpointTest, DeleteCheckpointRemovesItsFilesOnly) {
  const std::string dir = NewTempDir();
  ASSERT_TRUE(SaveCheckpoint(dir + "/ckpt-1", SampleTensors(), {}).ok());
  ASSERT_TRUE(SaveCheckpoint(dir + "/ckpt-10", SampleTensors(), {}).ok());
  ASSERT_TRUE(DeleteCheckpoint(dir + "/ckpt-1").ok());
  EXPECT_TRUE(absl::IsNotFound(CheckpointReader::Open(dir + "/ckpt-1").status()));
  ExpectLoadsExactly(dir + "/ckpt-10", SampleTensors(), {});
  auto names = io::ListDir(dir);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 2u);
}

}  // namespace
}  // namespace strata
