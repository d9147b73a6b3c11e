// The CSV loader (train/data/csv.h) on arbitrary file contents, plain or
// gzip: an error naming the file or a dataset of the rows, never a crash;
// bounded options, so that a bomb stops at the bound.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "train/data/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = absl::StrCat("/tmp/strata_csv_fuzz_", getpid(), ".csv");
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  strata::data::CsvOptions options;
  options.max_file_bytes = 1 << 20;
  options.max_line_bytes = 1 << 16;
  auto ds = strata::data::LoadCsv({path}, options);
  if (ds.ok()) {
    const auto* rows = dynamic_cast<const strata::data::RandomAccessDataset*>(ds->get());
    strata::data::Example e;
    if (rows != nullptr && rows->Cardinality() > 0) (void)rows->Get(rows->Cardinality() - 1, &e);
  }
  return 0;
}
