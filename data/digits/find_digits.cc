#include "data/digits/find_digits.h"

#include "data/find_data.h"

namespace strata {

absl::StatusOr<std::string> FindDigitsCsv(const std::string& explicit_path, const std::string& argv0) {
  return FindDataFile("data/digits/digits.csv.gz", "digits_path", explicit_path, argv0);
}

}  // namespace strata
