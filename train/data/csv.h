// CSV sources: numeric CSV files, plain or gzip-compressed (detected from
// the content), loaded into memory as a random-access dataset of
// (features float32 [d], label int32 []) with the label in the last column.
//
//   STRATA_ASSIGN_OR_RETURN(DatasetPtr ds, LoadCsv({"data/digits/digits.csv.gz"}));
//   // 1797 examples: float [64], int32 []
//   // Multi-worker, shard by file: each worker loads its own files.
//   STRATA_ASSIGN_OR_RETURN(DatasetPtr mine,
//                           LoadCsv(ShardFiles(all_files, num_workers, worker_index)));
//   // Or let AutoShard (auto_shard.h) rewrite a whole pipeline over LoadCsv:
//   // the dataset remembers its files and options, and loads another share.
//
// Format: one example per line, comma-separated numbers (whitespace around
// fields and CRLF line ends are fine, blank lines are skipped). The first
// line of each file is a header, and skipped, if none of its fields is a
// number. Every row must have the same number of columns (>= 2), every
// feature must be a finite number and the label an integer in int32 range.
// Only regular files are read (a device such as /dev/zero or a FIFO is
// refused, never read forever); a file larger than max_file_bytes after
// decompression, or a line longer than max_line_bytes, is an error.
// Errors: NotFound for a missing file; InvalidArgument naming the file and
// the 1-based line number for a bad row, quoting at most 80 characters of
// the culprit with control characters escaped (base/quote.h); DataLoss for
// a corrupt gzip stream.
//
// Thread-safety: LoadCsv is a pure function; the dataset is immutable.
#ifndef STRATA_TRAIN_DATA_CSV_H_
#define STRATA_TRAIN_DATA_CSV_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/data/dataset.h"

namespace strata {
namespace data {

struct CsvOptions {
  // Expected number of feature columns (the label column excluded); 0 takes
  // it from the first data row.
  int64_t num_features = 0;
  // Bounds on untrusted input: bytes per file after decompression (a gzip
  // bomb stops here), bytes per line.
  int64_t max_file_bytes = int64_t{4} << 30;
  int64_t max_line_bytes = int64_t{1} << 20;
};

// Loads the files in order (InvalidArgument if `files` is empty or the
// files hold no examples).
absl::StatusOr<DatasetPtr> LoadCsv(const std::vector<std::string>& files,
                                   const CsvOptions& options = {});

// files[i] for i % num_shards == index: a worker's share of the files.
// Empty if the arguments are out of range (index outside [0, num_shards)).
std::vector<std::string> ShardFiles(const std::vector<std::string>& files, int64_t num_shards,
                                    int64_t index);

}  // namespace data
}  // namespace strata

#endif  // STRATA_TRAIN_DATA_CSV_H_
