#include "train/data/csv.h"

#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/quote.h"
#include "base/status.h"
#include "train/data/sources.h"

namespace strata {
namespace data {
namespace {

std::string FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Reads a whole file through zlib, which passes plain files through
// unchanged and inflates gzip ones (several concatenated members too).
// Regular files only: a device (/dev/zero) never ends and a FIFO without a
// writer blocks forever. Opened without blocking, checked by fstat on the
// descriptor zlib then reads (no window to swap the file), and read up to
// `max_bytes` after inflation, so that a gzip bomb cannot exhaust memory.
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path, int64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open CSV file '", path, "'"));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat CSV file '", path, "'"));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        "CSV file '", path, "' is ", FileKind(st.st_mode),
        "; only regular files are read (a device or FIFO may never end)"));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  gzFile f = gzdopen(fd, "rb");  // owns fd from here on
  if (f == nullptr) {
    ::close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("cannot open CSV file '", path, "': out of memory"));
  }
  gzbuffer(f, 1 << 17);
  std::string out;
  char buf[1 << 16];
  while (true) {
    const int n = gzread(f, buf, sizeof(buf));
    if (n > 0) {
      if (static_cast<int64_t>(out.size()) + n > max_bytes) {
        gzclose(f);
        return absl::InvalidArgumentError(absl::StrCat(
            "CSV file '", path, "' holds more than ", max_bytes,
            " bytes (after decompression); CsvOptions::max_file_bytes bounds what is loaded"));
      }
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;
    int code = 0;
    const char* msg = gzerror(f, &code);
    std::string what = msg != nullptr ? msg : "unknown error";
    if (code == Z_ERRNO) what = std::strerror(errno);
    gzclose(f);
    return absl::DataLossError(absl::StrCat("cannot read CSV file '", path, "': ", what));
  }
  // gzread returns 0 at a truncated gzip stream's end too; gzerror tells.
  int code = Z_OK;
  const char* msg = gzerror(f, &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    std::string what = msg != nullptr ? msg : "unknown error";
    gzclose(f);
    return absl::DataLossError(absl::StrCat("CSV file '", path, "' is corrupt: ", what));
  }
  gzclose(f);
  return out;
}

bool ParseFinite(absl::string_view field, double* v) {
  return absl::SimpleAtod(field, v) && std::isfinite(*v);
}

struct Parsed {
  int64_t num_cols = 0;  // 0 until the first data row
  std::vector<float> features;
  std::vector<int32_t> labels;
};

absl::Status ParseFile(const std::string& path, absl::string_view text, int64_t max_line_bytes,
                       Parsed* p) {
  int64_t line_no = 0;
  bool first_line = true;
  std::vector<absl::string_view> fields;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    auto bad = [&](auto&&... why) {
      return absl::InvalidArgumentError(absl::StrCat("CSV file '", path, "' line ", line_no, ": ", why...));
    };
    if (static_cast<int64_t>(line.size()) > max_line_bytes) {
      return bad("longer than ", max_line_bytes, " bytes (", line.size(),
                 "; CsvOptions::max_line_bytes): ", QuoteForMessage(line));
    }
    line = absl::StripAsciiWhitespace(line);  // also drops a CR
    if (line.empty()) continue;
    fields = absl::StrSplit(line, ',');
    for (auto& f : fields) f = absl::StripAsciiWhitespace(f);
    const bool header_candidate = first_line;
    first_line = false;
    if (header_candidate) {
      bool any_number = false;
      double v;
      for (auto f : fields) any_number |= absl::SimpleAtod(f, &v);
      if (!any_number) continue;  // a header line
    }
    const int64_t n = static_cast<int64_t>(fields.size());
    if (n < 2) return bad("need at least one feature and a label, found ", n, " column(s)");
    if (p->num_cols == 0) p->num_cols = n;
    if (n != p->num_cols) return bad("expected ", p->num_cols, " columns, found ", n);
    for (int64_t c = 0; c + 1 < n; ++c) {
      double v;
      if (!ParseFinite(fields[c], &v) || std::fabs(v) > 3.4e38) {
        return bad("column ", c + 1, " (", QuoteForMessage(fields[c]), ") is not a finite number");
      }
      p->features.push_back(static_cast<float>(v));
    }
    double label;
    if (!ParseFinite(fields[n - 1], &label) || label != std::floor(label) || label < INT32_MIN ||
        label > INT32_MAX) {
      return bad("label (column ", n, ") ", QuoteForMessage(fields[n - 1]), " is not an int32 integer");
    }
    p->labels.push_back(static_cast<int32_t>(label));
  }
  return absl::OkStatus();
}

// The loaded tensors plus what a pipeline rewrite needs to load another
// share of the files (auto_shard.h): the files and the options.
class CsvDataset : public RandomAccessDataset {
 public:
  CsvDataset(DatasetPtr tensors, std::vector<std::string> files, CsvOptions options)
      : tensors_(std::move(tensors)), files_(std::move(files)), options_(options) {}
  int64_t Cardinality() const override { return tensors_->Cardinality(); }
  absl::Status Get(int64_t index, Example* out) const override { return tensors_->Get(index, out); }
  std::string DebugString() const override { return tensors_->DebugString(); }
  std::optional<DatasetNode> AsNode() const override {
    DatasetNode node;
    node.op = "Csv";
    node.files = files_;
    // Another share must have these files' columns: a worker whose files
    // differ fails naming the file instead of building another model.
    node.rebuild = [options = options_](const DatasetNode& n) { return LoadCsv(n.files, options); };
    return node;
  }

 private:
  const DatasetPtr tensors_;
  const std::vector<std::string> files_;
  const CsvOptions options_;
};

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

absl::StatusOr<DatasetPtr> LoadCsv(const std::vector<std::string>& files, const CsvOptions& options) {
  if (files.empty()) return absl::InvalidArgumentError("LoadCsv: no files");
  if (options.num_features < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoadCsv: num_features must be >= 0, got ", options.num_features));
  }
  if (options.max_file_bytes < 1 || options.max_line_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LoadCsv: max_file_bytes and max_line_bytes must be >= 1, got ", options.max_file_bytes,
        " and ", options.max_line_bytes));
  }
  Parsed p;
  if (options.num_features > 0) p.num_cols = options.num_features + 1;
  std::vector<std::string> names;
  for (const std::string& path : files) {
    STRATA_ASSIGN_OR_RETURN(std::string text, ReadMaybeGzip(path, options.max_file_bytes));
    STRATA_RETURN_IF_ERROR(ParseFile(path, text, options.max_line_bytes, &p));
    names.push_back(BaseName(path));
  }
  const int64_t n = static_cast<int64_t>(p.labels.size());
  if (n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoadCsv: no examples in ", absl::StrJoin(files, ", ")));
  }
  const int64_t d = p.num_cols - 1;
  Tensor x(DT_FLOAT, TensorShape{n, d});
  std::memcpy(x.raw_data(), p.features.data(), p.features.size() * sizeof(float));
  Tensor y = Tensor::FromVector<int32_t>(p.labels);
  // The name (and so saved iterator state) depends on the files' names and
  // sizes, not on where they were read from.
  STRATA_ASSIGN_OR_RETURN(
      DatasetPtr tensors,
      FromTensors({std::move(x), std::move(y)},
                  absl::StrCat("Csv(", absl::StrJoin(names, ","), ";n=", n, ",d=", d, ")")));
  CsvOptions fixed = options;
  fixed.num_features = d;
  return DatasetPtr(std::make_shared<CsvDataset>(std::move(tensors), files, fixed));
}

std::vector<std::string> ShardFiles(const std::vector<std::string>& files, int64_t num_shards,
                                    int64_t index) {
  std::vector<std::string> out;
  if (num_shards < 1 || index < 0 || index >= num_shards) return out;
  for (size_t i = static_cast<size_t>(index); i < files.size(); i += static_cast<size_t>(num_shards)) {
    out.push_back(files[i]);
  }
  return out;
}

}  // namespace data
}  // namespace strata
