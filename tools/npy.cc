#include "tools/npy.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace strata {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

const std::pair<const char*, DataType> kDescrs[] = {
    {"<f2", DT_HALF},   {"<f4", DT_FLOAT},  {"<f8", DT_DOUBLE}, {"|i1", DT_INT8},   {"<i2", DT_INT16},
    {"<i4", DT_INT32},  {"<i8", DT_INT64},  {"|u1", DT_UINT8},  {"<u2", DT_UINT16}, {"<u4", DT_UINT32},
    {"<u8", DT_UINT64}, {"|b1", DT_BOOL},
};

absl::Status Bad(const std::string& what, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": not a .npy file Strata reads: ", why));
}

// The value of `key` in the header dict: the text after "'key':" up to the
// next top-level ',' or '}' (a tuple's commas are inside parentheses).
absl::StatusOr<std::string> HeaderValue(absl::string_view header, const std::string& key, const std::string& what) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t p = header.find(quoted);
  if (p == absl::string_view::npos) return Bad(what, absl::StrCat("header has no ", quoted));
  p = header.find(':', p + quoted.size());
  if (p == absl::string_view::npos) return Bad(what, absl::StrCat("header has no value for ", quoted));
  size_t e = p + 1;
  int depth = 0;
  for (; e < header.size(); ++e) {
    const char c = header[e];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
    if (depth < 0) break;
  }
  if (e >= header.size() || depth != 0) return Bad(what, absl::StrCat("header's ", quoted, " does not end"));
  return std::string(absl::StripAsciiWhitespace(header.substr(p + 1, e - p - 1)));
}

absl::StatusOr<std::vector<int64_t>> ParseShape(const std::string& v, const std::string& what) {
  if (v.size() < 2 || v.front() != '(' || v.back() != ')') return Bad(what, absl::StrCat("shape ", v, " is not a tuple"));
  std::vector<int64_t> dims;
  for (absl::string_view part : absl::StrSplit(v.substr(1, v.size() - 2), ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    int64_t d;
    if (!absl::SimpleAtoi(part, &d) || d < 0) return Bad(what, absl::StrCat("shape ", v, " has a bad dim '", part, "'"));
    dims.push_back(d);
  }
  return dims;
}

}  // namespace

absl::StatusOr<Tensor> DecodeNpy(absl::string_view bytes, const std::string& what) {
  if (bytes.size() < kMagicLen + 4 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) {
    return Bad(what, "no \\x93NUMPY magic");
  }
  const int major = static_cast<unsigned char>(bytes[kMagicLen]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Bad(what, "truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    offset = 12;
  } else {
    return Bad(what, absl::StrCat("format version ", major, " is not 1, 2 or 3"));
  }
  if (header_len > bytes.size() - offset) return Bad(what, "truncated header");
  const absl::string_view header = bytes.substr(offset, header_len);
  const absl::string_view data = bytes.substr(offset + header_len);

  auto descr = HeaderValue(header, "descr", what);
  if (!descr.ok()) return descr.status();
  auto fortran = HeaderValue(header, "fortran_order", what);
  if (!fortran.ok()) return fortran.status();
  auto shape_text = HeaderValue(header, "shape", what);
  if (!shape_text.ok()) return shape_text.status();
  DataType dtype = DT_INVALID;
  for (const auto& [d, t] : kDescrs) {
    if (*descr == absl::StrCat("'", d, "'")) dtype = t;
  }
  if (*descr == "'<b1'") dtype = DT_BOOL;
  if (dtype == DT_INVALID) {
    return Bad(what, absl::StrCat("dtype ", *descr, " (Strata reads little-endian float16/32/64, int8-64, uint8-64, bool)"));
  }
  if (*fortran != "False") return Bad(what, absl::StrCat("fortran_order is ", *fortran, "; save a C-ordered array"));
  auto dims = ParseShape(*shape_text, what);
  if (!dims.ok()) return dims.status();
  const size_t elem = DataTypeSize(dtype);
  // The element count, bounded by what the file holds (no overflow, no
  // allocation larger than the input).
  uint64_t n = 1;
  bool empty = false;
  for (int64_t d : *dims) empty = empty || d == 0;
  for (int64_t d : *dims) {
    if (empty) {
      n = 0;
      break;
    }
    if (n > data.size() / static_cast<uint64_t>(d)) {
      return Bad(what, absl::StrCat("shape ", *shape_text, " needs more data than the file's ", data.size(), " bytes"));
    }
    n *= static_cast<uint64_t>(d);
  }
  if (n * elem != data.size()) {
    return Bad(what, absl::StrCat("shape ", *shape_text, " of ", *descr, " needs ", n * elem, " bytes of data, the file has ",
                                  data.size()));
  }
  auto shape = TensorShape::FromDims(*dims);
  if (!shape.ok()) return Bad(what, std::string(shape.status().message()));
  Tensor t(dtype, *shape);
  if (n > 0) std::memcpy(t.raw_data(), data.data(), data.size());
  return t;
}

absl::StatusOr<std::string> EncodeNpy(const Tensor& t) {
  const char* descr = nullptr;
  for (const auto& [d, dt] : kDescrs) {
    if (dt == t.dtype()) descr = d;
  }
  if (descr == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(".npy cannot hold dtype ", DataTypeString(t.dtype())));
  }
  std::string shape = "(";
  for (int i = 0; i < t.dims(); ++i) absl::StrAppend(&shape, t.dim_size(i), t.dims() == 1 ? "," : (i + 1 < t.dims() ? ", " : ""));
  shape += ")";
  std::string header = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces and a newline so that the data starts on a 64-byte boundary.
  const size_t unpadded = kMagicLen + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, kMagicLen);
  out.push_back('\x01');
  out.push_back('\x00');
  if (header.size() > std::numeric_limits<uint16_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("a .npy header of ", header.size(), " bytes is too long"));
  }
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(static_cast<const char*>(t.raw_data()), t.TotalBytes());
  return out;
}

}  // namespace strata
