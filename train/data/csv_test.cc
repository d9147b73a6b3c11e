#include "train/data/csv.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "train/data/test_util.h"
#include "train/data/transforms.h"

namespace strata {
namespace data {
namespace {

using testing::Drain;
using testing::Iter;
using testing::TempPath;

std::string WritePlain(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string WriteGzip(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  EXPECT_EQ(gzclose(f), Z_OK);
  return path;
}

absl::Status LoadError(const std::string& text) {
  return LoadCsv({WritePlain("bad.csv", text)}).status();
}

TEST(CsvTest, LoadsPlainAndGzipWithHeaderCrlfAndBlankLines) {
  const std::string text = "a, b ,label\r\n1,2.5,0\r\n\r\n-3, 4e1 ,2\r\n  \n5,6,1";
  for (const std::string& path : {WritePlain("t.csv", text), WriteGzip("t.csv.gz", text)}) {
    auto ds = LoadCsv({path});
    ASSERT_TRUE(ds.ok()) << ds.status();
    EXPECT_EQ((*ds)->Cardinality(), 3);
    Example e;
    ASSERT_TRUE((*ds)->Get(1, &e).ok());
    ASSERT_EQ(e.size(), 2u);
    EXPECT_EQ(e[0].dtype(), DT_FLOAT);
    EXPECT_EQ(e[0].shape(), TensorShape{2});
    EXPECT_EQ(e[0].data<float>()[0], -3.0f);
    EXPECT_EQ(e[0].data<float>()[1], 40.0f);
    EXPECT_EQ(e[1].dtype(), DT_INT32);
    EXPECT_EQ(e[1].shape(), TensorShape());
    EXPECT_EQ(*e[1].data<int32_t>(), 2);
  }
}

TEST(CsvTest, SeveralFilesConcatenateAndShardByFile) {
  const std::string a = WritePlain("a.csv", "1,0\n2,1\n");
  const std::string b = WriteGzip("b.csv.gz", "x,y\n3,0\n");
  const std::string c = WritePlain("c.csv", "4,1\n");
  auto ds = LoadCsv({a, b, c});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->Cardinality(), 4);
  Example e;
  ASSERT_TRUE((*ds)->Get(2, &e).ok());
  EXPECT_EQ(e[0].data<float>()[0], 3.0f);
  EXPECT_EQ(ShardFiles({a, b, c}, 2, 0), (std::vector<std::string>{a, c}));
  EXPECT_EQ(ShardFiles({a, b, c}, 2, 1), (std::vector<std::string>{b}));
  EXPECT_TRUE(ShardFiles({a, b, c}, 2, 2).empty());
  EXPECT_EQ((*LoadCsv(ShardFiles({a, b, c}, 2, 1)))->Cardinality(), 1);
}

TEST(CsvTest, BadRowsNameTheFileAndLine) {
  struct Case {
    std::string text;
    int line;
    std::string detail;
  } cases[] = {
      {"1,2,0\n3,4\n", 2, "expected 3 columns, found 2"},
      {"h1,h2\n1,0\n2,x\n", 3, "'x'"},
      {"1,2,0\n\n1,nan,0\n", 3, "not a finite number"},
      {"1,2,0.5\n", 1, "label"},
      {"1,2,1e12\n", 1, "label"},
      {"1,2,oops\n", 1, "label"},
      {"7\n", 1, "at least one feature"},
      {"1,2,0\n1,,0\n", 2, "column 2"},
  };
  for (const Case& c : cases) {
    absl::Status s = LoadError(c.text);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.text << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "bad.csv")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("line ", c.line))) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), c.detail)) << s;
  }
  // A column count that differs between files, or from the options.
  const std::string two = WritePlain("two.csv", "1,2,0\n");
  const std::string one = WritePlain("one.csv", "1,0\n");
  absl::Status s = LoadCsv({two, one}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(absl::StrContains(s.message(), "one.csv' line 1")) << s;
  CsvOptions o;
  o.num_features = 3;
  EXPECT_TRUE(absl::IsInvalidArgument(LoadCsv({two}, o).status()));
  // No examples at all.
  EXPECT_TRUE(absl::IsInvalidArgument(LoadError("a,b\n\n")));
  EXPECT_TRUE(absl::IsInvalidArgument(LoadCsv({}).status()));
}

TEST(CsvTest, MissingFileAndCorruptGzip) {
  absl::Status s = LoadCsv({TempPath("does-not-exist.csv")}).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "does-not-exist.csv")) << s;

  std::string rows;
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&rows, i, ",", i * 3, ",", i % 5, "\n");
  const std::string gz = WriteGzip("cut.csv.gz", rows);
  std::ifstream in(gz, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = WritePlain("cut2.csv.gz", bytes.substr(0, bytes.size() / 2));
  s = LoadCsv({cut}).status();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "cut2.csv.gz")) << s;
  // A corrupted deflate stream (CRC or data error).
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x55;
  s = LoadCsv({WritePlain("flip.csv.gz", flipped)}).status();
  EXPECT_FALSE(s.ok());
}

// Issue 23, defect 5: what is not a bounded regular file is refused, never
// read forever or into unbounded memory, and a culprit is quoted briefly.
TEST(CsvTest, DevicesFifosDirectoriesAndOversizedInputAreRefused) {
  for (const char* dev : {"/dev/zero", "/dev/urandom"}) {
    absl::Status s = LoadCsv({dev}).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "a character device")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), dev)) << s;
  }
  // A FIFO that no process writes: opening it must not block.
  const std::string fifo = TempPath("nowriter.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::Status s = LoadCsv({fifo}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "a FIFO")) << s;
  unlink(fifo.c_str());
  s = LoadCsv({::testing::TempDir()}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "a directory")) << s;

  // A gzip bomb: 64 MiB of zeros compress to ~64 KiB; the bound stops the
  // inflation, naming the file and the option.
  CsvOptions small;
  small.max_file_bytes = 1 << 20;
  s = LoadCsv({WriteGzip("bomb.csv.gz", std::string(64 << 20, '0'))}, small).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "bomb.csv.gz")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "max_file_bytes")) << s;

  // A 200 MB field: refused by the line bound, quoted in 80 characters.
  std::string huge = "1,";
  huge.append(200 << 20, '7');
  huge += ",0\n";
  s = LoadError(huge);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "line 1: longer than 1048576 bytes")) << s;
  EXPECT_LT(s.message().size(), 400u);
  // Escape sequences in a bad field come out escaped.
  s = LoadError("1,\x1b[31mred\x07,0\n");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "'\\x1b[31mred\\x07'")) << s;
  EXPECT_FALSE(absl::StrContains(s.message(), "\x1b")) << s;
  CsvOptions zero;
  zero.max_line_bytes = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(LoadCsv({WritePlain("ok.csv", "1,0\n")}, zero).status()));
}

// The bundled digits set (data/digits): 1797 examples of 64 pixels, 0..16,
// labels 0..9.
TEST(CsvTest, LoadsTheBundledDigits) {
  auto ds = LoadCsv({"data/digits/digits.csv.gz"});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->Cardinality(), 1797);
  std::map<int32_t, int> per_label;
  float lo = 1e9f, hi = -1e9f;
  auto it = Iter(*ds);
  for (const Example& e : Drain(it.get())) {
    ASSERT_EQ(e[0].shape(), TensorShape{64});
    for (float v : e[0].span<float>()) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    ++per_label[*e[1].data<int32_t>()];
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 16.0f);
  ASSERT_EQ(per_label.size(), 10u);
  EXPECT_EQ(per_label.begin()->first, 0);
  EXPECT_EQ(per_label.rbegin()->first, 9);
  for (const auto& [label, n] : per_label) EXPECT_GE(n, 170) << label;  // roughly balanced
  // The first row of the file is a 0.
  Example first;
  ASSERT_TRUE((*ds)->Get(0, &first).ok());
  EXPECT_EQ(*first[1].data<int32_t>(), 0);
  EXPECT_EQ(first[0].data<float>()[2], 5.0f);
}

}  // namespace
}  // namespace data
}  // namespace strata
