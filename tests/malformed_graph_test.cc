// Every GraphDef in tests/testdata/malformed/ is broken in one way, described
// by its header:
//   # expect: <substring of the error>      (one or more)
//   # node: <name of the node the error must name>   (optional)
// Import must fail with such an error, never crash, abort or hang. A second
// test feeds byte-level corruptions of valid TensorFlow GraphDefs to the
// importer, which must return (OK or not) for every one.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "graph/graph_def_import.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kCorpus[] = "tests/testdata/malformed";

std::string ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct CorpusEntry {
  std::string file;
  std::vector<std::string> expect;
  std::string node;
  std::string text;
};

std::vector<CorpusEntry> LoadCorpus() {
  std::vector<CorpusEntry> out;
  for (const auto& entry : fs::directory_iterator(kCorpus)) {
    if (entry.path().extension() != ".pbtxt") continue;
    CorpusEntry c;
    c.file = entry.path().filename().string();
    c.text = ReadFile(entry.path());
    std::istringstream lines(c.text);
    std::string line;
    while (std::getline(lines, line)) {
      absl::string_view l = line;
      if (absl::ConsumePrefix(&l, "# expect: ")) c.expect.emplace_back(l);
      if (absl::ConsumePrefix(&l, "# node: ")) c.node = std::string(l);
    }
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(),
            [](const CorpusEntry& a, const CorpusEntry& b) { return a.file < b.file; });
  return out;
}

TEST(MalformedGraphTest, EveryCorpusFileFailsWithItsError) {
  const std::vector<CorpusEntry> corpus = LoadCorpus();
  // One file per defect class of graph/graph_def_import.h; losing files
  // (a bad glob, a bad runfiles path) must not pass silently.
  ASSERT_GE(corpus.size(), 35u);
  for (const CorpusEntry& c : corpus) {
    SCOPED_TRACE(c.file);
    ASSERT_FALSE(c.expect.empty()) << "no '# expect:' header";
    ::tensorflow::GraphDef def;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(c.text, &def))
        << "not a text-format GraphDef";
    auto g = ImportGraphDef(def);
    ASSERT_FALSE(g.ok()) << "imported without error";
    const std::string msg(g.status().message());
    for (const std::string& e : c.expect) EXPECT_THAT(msg, HasSubstr(e));
    if (!c.node.empty()) {
      EXPECT_THAT(msg, HasSubstr("'" + c.node + "'"));
    }
    EXPECT_NE(g.status().code(), absl::StatusCode::kInternal) << msg;
  }
}

// Deterministic corruptions of the TensorFlow GraphDefs: every byte position
// overwritten with a few values, and truncations. Most no longer parse; the
// ones that do must import or fail cleanly.
TEST(MalformedGraphTest, CorruptedTensorFlowGraphsNeverCrash) {
  int parsed = 0, imported = 0;
  for (const char* name : {"control_deps", "array_ops", "nn_ops", "batch_norm", "keras_embedding"}) {
    const std::string bytes =
        ReadFile(fs::path("tests/testdata/tf_interop") / (std::string(name) + ".pb"));
    ASSERT_FALSE(bytes.empty()) << name;
    auto try_bytes = [&](const std::string& b) {
      ::tensorflow::GraphDef def;
      if (!def.ParseFromString(b)) return;
      ++parsed;
      imported += ImportGraphDef(def).ok() ? 1 : 0;
    };
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (unsigned char v : {0x00, 0x01, 0x7f, 0xff}) {
        std::string b = bytes;
        b[i] = static_cast<char>(v);
        try_bytes(b);
      }
    }
    for (size_t len = 0; len < bytes.size(); len += 7) try_bytes(bytes.substr(0, len));
  }
  // The loop must have exercised the importer, not just the parser.
  EXPECT_GT(parsed, 1000);
  EXPECT_GT(imported, 0);
}

}  // namespace
}  // namespace strata
