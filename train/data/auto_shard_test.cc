// AutoShard: FILE gives every worker a disjoint share of the examples that
// together cover the epoch, in per-worker batches; AUTO falls back to DATA
// where FILE does not apply; the batch rewrite's errors; transformations
// around the source are kept; sharded iterators save and restore.
#include "train/data/auto_shard.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "train/data/csv.h"
#include "train/data/test_util.h"
#include "train/data/transforms.h"

namespace strata {
namespace data {
namespace {

using testing::Drain;
using testing::Iter;
using testing::TempPath;

// `sizes.size()` CSV files; file f holds the next sizes[f] example ids as
// (feature = id, label = id % 3). Returns the paths; *total the id count.
std::vector<std::string> WriteFiles(const std::string& prefix, const std::vector<int>& sizes,
                                    int* total = nullptr) {
  std::vector<std::string> paths;
  int id = 0;
  for (size_t f = 0; f < sizes.size(); ++f) {
    const std::string path = TempPath(absl::StrCat(prefix, "_", f, ".csv"));
    std::ofstream out(path);
    out << "id,label\n";
    for (int i = 0; i < sizes[f]; ++i, ++id) out << id << "," << id % 3 << "\n";
    paths.push_back(path);
  }
  if (total != nullptr) *total = id;
  return paths;
}

// The example ids (component 0, float) of every element of a finite dataset,
// and the batch sizes seen.
std::vector<int> Ids(const DatasetPtr& ds, std::vector<int64_t>* batch_sizes = nullptr) {
  std::vector<int> ids;
  auto it = Iter(ds);
  for (const Example& e : Drain(it.get())) {
    const Tensor& x = e.at(0);
    if (batch_sizes != nullptr) batch_sizes->push_back(x.dim_size(0));
    for (int64_t i = 0; i < x.NumElements(); ++i) ids.push_back(static_cast<int>(x.data<float>()[i]));
  }
  return ids;
}

DatasetPtr CsvPipeline(const std::vector<std::string>& files, int64_t batch, bool drop = false) {
  DatasetPtr ds = *LoadCsv(files);
  ds = *Shuffle(ds, 11);
  return *Batch(ds, batch, drop);
}

TEST(AutoShardTest, FileShardingIsDisjointAndCompleteForTwoThreeAndFourWorkers) {
  for (int workers : {2, 3, 4}) {
    for (int num_files : {workers, workers + 1, 2 * workers + 1, 7}) {
      if (num_files < workers) continue;
      SCOPED_TRACE(absl::StrCat(workers, " workers, ", num_files, " files"));
      std::vector<int> sizes;
      for (int f = 0; f < num_files; ++f) sizes.push_back(5 + 3 * f);  // uneven files
      int total = 0;
      const std::vector<std::string> files =
          WriteFiles(absl::StrCat("cover_", workers, "_", num_files), sizes, &total);
      // Two passes: every pass (reshuffled) is an epoch that must be covered.
      DatasetPtr global = *Repeat(CsvPipeline(files, 12), 2);
      std::map<int, int> seen;  // id -> worker
      std::map<int, int> times;
      for (int w = 0; w < workers; ++w) {
        absl::StatusOr<AutoShardResult> r = AutoShard(global, workers, w);
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_EQ(r->policy, AutoShardPolicy::kFile) << r->reason;
        EXPECT_EQ(r->files, ShardFiles(files, workers, w));
        EXPECT_TRUE(absl::StrContains(r->dataset->DebugString(), absl::StrCat("Batch(", 12 / workers, ")")))
            << r->dataset->DebugString();
        // The ids this worker's files hold.
        std::set<int> own;
        int first = 0;
        for (int f = 0; f < num_files; ++f) {
          if (f % workers == w) {
            for (int i = 0; i < sizes[f]; ++i) own.insert(first + i);
          }
          first += sizes[f];
        }
        std::vector<int64_t> batch_sizes;
        for (int id : Ids(r->dataset, &batch_sizes)) {
          EXPECT_TRUE(own.count(id)) << "worker " << w << " read id " << id << " of another's file";
          auto [it, fresh] = seen.emplace(id, w);
          EXPECT_EQ(it->second, w) << "id " << id << " read by workers " << it->second << " and " << w;
          ++times[id];
        }
        // Per-worker batches: full ones of 12 / workers, a smaller last one per pass.
        int partial = 0;
        for (int64_t b : batch_sizes) {
          EXPECT_LE(b, 12 / workers);
          partial += b < 12 / workers;
        }
        EXPECT_LE(partial, 2);
      }
      EXPECT_EQ(static_cast<int>(times.size()), total);  // complete
      for (const auto& [id, n] : times) EXPECT_EQ(n, 2) << "id " << id;
    }
  }
}

TEST(AutoShardTest, FewerFilesThanWorkersFallsBackToData) {
  const std::vector<std::string> files = WriteFiles("few", {10, 10});
  DatasetPtr global = CsvPipeline(files, 12);
  absl::StatusOr<AutoShardResult> r = AutoShard(global, 3, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->policy, AutoShardPolicy::kData);
  EXPECT_EQ(r->dataset, global);  // unchanged: every worker reads every global batch
  EXPECT_TRUE(absl::StrContains(r->reason, "2 file(s), fewer than the 3 workers")) << r->reason;
  EXPECT_TRUE(r->files.empty());

  absl::StatusOr<AutoShardResult> forced = AutoShard(global, 3, 1, AutoShardPolicy::kFile);
  EXPECT_EQ(forced.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(forced.status().message(), "fewer than the 3 workers"))
      << forced.status();
  // Forcing DATA keeps the pipeline even where FILE would apply.
  absl::StatusOr<AutoShardResult> data = AutoShard(global, 2, 0, AutoShardPolicy::kData);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->policy, AutoShardPolicy::kData);
  EXPECT_EQ(data->dataset, global);
}

TEST(AutoShardTest, SourcesThatAreNotFilesAndPipelinesWithoutBatchGetData) {
  DatasetPtr tensors = *Batch(*Shuffle(testing::Range(40), 3), 8);
  absl::StatusOr<AutoShardResult> r = AutoShard(tensors, 2, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->policy, AutoShardPolicy::kData);
  EXPECT_TRUE(absl::StrContains(r->reason, "is not a file source")) << r->reason;
  EXPECT_EQ(AutoShard(tensors, 2, 0, AutoShardPolicy::kFile).status().code(),
            absl::StatusCode::kInvalidArgument);

  const std::vector<std::string> files = WriteFiles("nobatch", {4, 4});
  DatasetPtr unbatched = *Shuffle(*LoadCsv(files), 1);
  r = AutoShard(unbatched, 2, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->policy, AutoShardPolicy::kData);
  EXPECT_TRUE(absl::StrContains(r->reason, "no Batch")) << r->reason;
}

TEST(AutoShardTest, GlobalBatchThatDoesNotSplitOverTheWorkersIsAnError) {
  const std::vector<std::string> files = WriteFiles("uneven", {6, 6, 6});
  for (AutoShardPolicy p : {AutoShardPolicy::kAuto, AutoShardPolicy::kFile, AutoShardPolicy::kOff}) {
    absl::StatusOr<AutoShardResult> r = AutoShard(CsvPipeline(files, 10), 3, 0, p);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << AutoShardPolicyName(p);
    EXPECT_TRUE(absl::StrContains(r.status().message(), "global batch of 10")) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "3 workers")) << r.status();
  }
}

TEST(AutoShardTest, TransformationsAroundTheSourceAreKept) {
  const std::vector<std::string> files = WriteFiles("around", {8, 8, 8, 8});
  DatasetPtr ds = *LoadCsv(files);
  ds = *Map(ds, [](Example* e) {
    (*e)[0].data<float>()[0] += 1000;  // marks that the map ran
    return absl::OkStatus();
  }, "plus1000");
  ds = *Skip(ds, 1);                // the worker's examples: skips one of its own
  ds = *Shard(ds, 1, 0);
  ds = *Shuffle(ds, 5);
  ds = *Batch(ds, 4, /*drop_remainder=*/true);
  ds = *Repeat(ds);
  ds = *Take(ds, 5);                // above the Batch: 5 per-worker batches
  ds = *Prefetch(ds, 2);
  for (int w = 0; w < 2; ++w) {
    absl::StatusOr<AutoShardResult> r = AutoShard(ds, 2, w);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->policy, AutoShardPolicy::kFile);
    const std::string d = r->dataset->DebugString();
    for (const char* kept : {"Prefetch", "Take(5)", "Repeat(-1)", "Batch(2,drop)", "Shuffle(seed=5)",
                             "Shard(1,0)", "Skip(1)", "Map(plus1000)"}) {
      EXPECT_TRUE(absl::StrContains(d, kept)) << kept << " missing from " << d;
    }
    std::vector<int64_t> sizes;
    const std::vector<int> ids = Ids(r->dataset, &sizes);
    EXPECT_EQ(sizes, std::vector<int64_t>(5, 2));
    for (int id : ids) {
      ASSERT_GE(id, 1000);
      const int file = (id - 1000) / 8;
      EXPECT_EQ(file % 2, w) << "id " << id - 1000;
    }
  }
  // The original pipeline is untouched.
  EXPECT_TRUE(absl::StrContains(ds->DebugString(), "Batch(4,drop)"));
}

TEST(AutoShardTest, OffRebatchesWithoutSharding) {
  const std::vector<std::string> files = WriteFiles("off", {6, 6});
  DatasetPtr global = CsvPipeline(files, 4);
  for (int w = 0; w < 2; ++w) {
    absl::StatusOr<AutoShardResult> r = AutoShard(global, 2, w, AutoShardPolicy::kOff);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->policy, AutoShardPolicy::kOff);
    std::vector<int64_t> sizes;
    std::vector<int> ids = Ids(r->dataset, &sizes);
    std::sort(ids.begin(), ids.end());
    std::vector<int> all(12);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(ids, all);  // every worker reads every example
    EXPECT_EQ(sizes, std::vector<int64_t>(6, 2));
  }
  EXPECT_EQ(AutoShard(*Shuffle(*LoadCsv(files), 1), 2, 0, AutoShardPolicy::kOff).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AutoShardTest, OneWorkerChangesNothing) {
  const std::vector<std::string> files = WriteFiles("one", {3, 3});
  DatasetPtr global = CsvPipeline(files, 4);
  absl::StatusOr<AutoShardResult> r = AutoShard(global, 1, 0, AutoShardPolicy::kFile);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->policy, AutoShardPolicy::kOff);
  EXPECT_EQ(r->dataset, global);
}

TEST(AutoShardTest, BadArgumentsAreErrors) {
  const std::vector<std::string> files = WriteFiles("bad", {3, 3});
  DatasetPtr global = CsvPipeline(files, 4);
  EXPECT_EQ(AutoShard(nullptr, 2, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AutoShard(global, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AutoShard(global, 2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AutoShard(global, 2, -1).status().code(), absl::StatusCode::kInvalidArgument);
  // A worker whose share of the files no longer matches (here: rewritten
  // with another column count since the pipeline was made) fails naming it.
  const std::vector<std::string> changing = WriteFiles("changing", {3, 3});
  DatasetPtr before = CsvPipeline(changing, 4);
  std::ofstream(changing[1]) << "1,2,0\n";
  absl::StatusOr<AutoShardResult> r = AutoShard(before, 2, 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), changing[1])) << r.status();
}

TEST(AutoShardTest, PolicyNamesAndResolution) {
  for (AutoShardPolicy p : {AutoShardPolicy::kOff, AutoShardPolicy::kAuto, AutoShardPolicy::kFile,
                            AutoShardPolicy::kData}) {
    absl::StatusOr<AutoShardPolicy> parsed = ParseAutoShardPolicy(AutoShardPolicyName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(*ParseAutoShardPolicy("file"), AutoShardPolicy::kFile);
  EXPECT_EQ(ParseAutoShardPolicy("files").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ResolveAutoShardPolicy(AutoShardPolicy::kAuto, 4, 2), AutoShardPolicy::kFile);
  EXPECT_EQ(*ResolveAutoShardPolicy(AutoShardPolicy::kAuto, 2, 2), AutoShardPolicy::kFile);
  EXPECT_EQ(*ResolveAutoShardPolicy(AutoShardPolicy::kAuto, 1, 2), AutoShardPolicy::kData);
  EXPECT_EQ(*ResolveAutoShardPolicy(AutoShardPolicy::kAuto, 0, 2), AutoShardPolicy::kData);
  EXPECT_EQ(*ResolveAutoShardPolicy(AutoShardPolicy::kFile, 9, 1), AutoShardPolicy::kOff);
  EXPECT_EQ(*ResolveAutoShardPolicy(AutoShardPolicy::kData, 9, 3), AutoShardPolicy::kData);
  EXPECT_EQ(ResolveAutoShardPolicy(AutoShardPolicy::kFile, 2, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AutoShardTest, ShardedIteratorSavesAndRestores) {
  const std::vector<std::string> files = WriteFiles("state", {7, 9, 5, 8});
  auto pipeline = [&] {
    DatasetPtr ds = CsvPipeline(files, 6, /*drop=*/true);
    ds = *Repeat(ds);
    return *Prefetch(ds, 2);
  };
  for (int w = 0; w < 2; ++w) {
    auto it = Iter(AutoShard(pipeline(), 2, w)->dataset);
    Drain(it.get(), 7);  // into the second pass of the worker's files
    absl::StatusOr<std::string> state = it->SaveState();
    ASSERT_TRUE(state.ok()) << state.status();
    const std::vector<Example> expected = Drain(it.get(), 6);
    // A fresh process: the same pipeline, rewritten again, then restored.
    auto again = Iter(AutoShard(pipeline(), 2, w)->dataset);
    ASSERT_TRUE(again->RestoreState(*state).ok());
    const std::vector<Example> got = Drain(again.get(), 6);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(testing::SameExample(got[i], expected[i])) << i;
    // Another worker's state is another pipeline's: refused, not misread.
    auto other = Iter(AutoShard(pipeline(), 2, 1 - w)->dataset);
    absl::Status s = other->RestoreState(*state);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "different pipeline")) << s;
  }
}

}  // namespace
}  // namespace data
}  // namespace strata
