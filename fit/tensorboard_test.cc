#include "fit/tensorboard.h"

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "base/file_io.h"
#include "gtest/gtest.h"

namespace strata {
namespace fit {
namespace {

std::string TempDir() {
  absl::StatusOr<std::string> d = io::MakeTempDir("tensorboard_test");
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

// The one file a writer made in `dir`.
std::string OnlyFile(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = io::ListDir(dir);
  EXPECT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(names->size(), 1u);
  return names->empty() ? "" : io::JoinPath(dir, (*names)[0]);
}

TEST(TensorBoardTest, MaskedCrcMatchesTensorFlows) {
  // Values from TensorBoard's own record writer (masked_crc32c).
  EXPECT_EQ(MaskedCrc32c(""), 0xa282ead8u);
  EXPECT_EQ(MaskedCrc32c("123456789"), 0xc78ab0e5u);
}

TEST(TensorBoardTest, RecordBytesMatchTensorBoardsWriter) {
  tensorflow::Event e;
  e.set_wall_time(1.5);
  e.set_step(7);
  tensorflow::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag("loss");
  v->set_simple_value(0.25f);
  // TensorBoard's RecordWriter framing the same Event.
  EXPECT_EQ(absl::BytesToHexString(TfRecord(e.SerializeAsString())),
            "1a00000000000000129bd82d09000000000000f83f10072a0d0a0b0a046c6f7373150000803ec9d07b8d");
}

TEST(TensorBoardTest, WritesAndReadsBack) {
  const std::string dir = TempDir();
  absl::StatusOr<std::unique_ptr<EventFileWriter>> w = EventFileWriter::Create(dir);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(absl::StrContains((*w)->path(), "events.out.tfevents.")) << (*w)->path();
  for (int step = 1; step <= 3; ++step) {
    ASSERT_TRUE((*w)->AddScalars(step, {{"a", step * 0.5}, {"b", -step}}).ok());
  }
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_FALSE((*w)->AddScalars(4, {{"a", 1}}).ok());  // closed
  absl::StatusOr<std::vector<tensorflow::Event>> events = ReadEventFile(OnlyFile(dir));
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ((*events)[0].file_version(), "brain.Event:2");
  EXPECT_GT((*events)[0].wall_time(), 1.7e9);
  for (int step = 1; step <= 3; ++step) {
    const tensorflow::Event& e = (*events)[step];
    EXPECT_EQ(e.step(), step);
    ASSERT_EQ(e.summary().value_size(), 2);
    EXPECT_EQ(e.summary().value(0).tag(), "a");
    EXPECT_FLOAT_EQ(e.summary().value(0).simple_value(), step * 0.5f);
    EXPECT_EQ(e.summary().value(1).tag(), "b");
    EXPECT_FLOAT_EQ(e.summary().value(1).simple_value(), -step);
  }
}

TEST(TensorBoardTest, EveryCorruptionIsDataLossNamingTheFile) {
  const std::string dir = TempDir();
  {
    absl::StatusOr<std::unique_ptr<EventFileWriter>> w = EventFileWriter::Create(dir);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->AddScalars(1, {{"loss", 0.5}}).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  const std::string path = OnlyFile(dir);
  const std::string good = *io::ReadFileToString(path);
  const std::string bad_path = io::JoinPath(dir, "bad");
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bytes = good;
    bytes[i] ^= 0x10;
    ASSERT_TRUE(io::WriteFileAtomically(bad_path, bytes).ok());
    absl::StatusOr<std::vector<tensorflow::Event>> r = ReadEventFile(bad_path);
    ASSERT_FALSE(r.ok()) << "byte " << i;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), bad_path)) << r.status();
  }
  for (size_t n = 1; n < good.size(); ++n) {
    ASSERT_TRUE(io::WriteFileAtomically(bad_path, good.substr(0, n)).ok());
    absl::StatusOr<std::vector<tensorflow::Event>> r = ReadEventFile(bad_path);
    // A cut exactly between records is a shorter valid file.
    if (r.ok()) {
      EXPECT_EQ(r->size(), 1u) << "cut at " << n;
      continue;
    }
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  }
}

TEST(TensorBoardTest, KerasLayoutAndTags) {
  const std::string dir = TempDir();
  absl::StatusOr<std::unique_ptr<TensorBoardWriter>> tb = TensorBoardWriter::Create(dir);
  ASSERT_TRUE(tb.ok()) << tb.status();
  ASSERT_TRUE((*tb)->Step(5, {{"loss", 0.7}, {"learning_rate", 0.01}}).ok());
  EXPECT_FALSE(io::FileExists(io::JoinPath(dir, "validation")));  // nothing to validate yet
  ASSERT_TRUE((*tb)->Epoch(1, {{"loss", 0.6}}, {{"val_loss", 0.65}, {"val_accuracy", 0.9}}).ok());
  ASSERT_TRUE((*tb)->Close().ok());

  absl::StatusOr<std::vector<tensorflow::Event>> train = ReadEventFile(OnlyFile(io::JoinPath(dir, "train")));
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_EQ(train->size(), 3u);
  EXPECT_EQ((*train)[1].step(), 5);
  ASSERT_EQ((*train)[1].summary().value_size(), 2);
  EXPECT_EQ((*train)[1].summary().value(0).tag(), "batch_learning_rate");
  EXPECT_EQ((*train)[1].summary().value(1).tag(), "batch_loss");
  EXPECT_EQ((*train)[2].step(), 0);  // epoch 1, plotted at 0 as Keras does
  EXPECT_EQ((*train)[2].summary().value(0).tag(), "epoch_loss");

  absl::StatusOr<std::vector<tensorflow::Event>> val = ReadEventFile(OnlyFile(io::JoinPath(dir, "validation")));
  ASSERT_TRUE(val.ok()) << val.status();
  ASSERT_EQ(val->size(), 2u);
  ASSERT_EQ((*val)[1].summary().value_size(), 2);
  EXPECT_EQ((*val)[1].summary().value(0).tag(), "epoch_accuracy");
  EXPECT_FLOAT_EQ((*val)[1].summary().value(0).simple_value(), 0.9f);
  EXPECT_EQ((*val)[1].summary().value(1).tag(), "epoch_loss");
}

TEST(TensorBoardTest, EachWriterMakesItsOwnFile) {
  const std::string dir = TempDir();
  auto a = EventFileWriter::Create(dir);
  auto b = EventFileWriter::Create(dir);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->path(), (*b)->path());
}

TEST(TensorBoardTest, UnusableDirectoryNamesThePath) {
  const std::string dir = TempDir();
  const std::string file = io::JoinPath(dir, "a_file");
  ASSERT_TRUE(io::WriteFileAtomically(file, "x").ok());
  absl::StatusOr<std::unique_ptr<TensorBoardWriter>> tb = TensorBoardWriter::Create(io::JoinPath(file, "tb"));
  ASSERT_FALSE(tb.ok());
  EXPECT_TRUE(absl::StrContains(tb.status().message(), file)) << tb.status();
  EXPECT_FALSE(TensorBoardWriter::Create("").ok());
  EXPECT_EQ(ReadEventFile(io::JoinPath(dir, "absent")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace fit
}  // namespace strata
