// Checkpoint reading (runtime/checkpoint/checkpoint_reader.h) on arbitrary
// files: DataLoss naming the file, or tensors whose every byte was checked,
// never a crash or an allocation the files do not justify.
//
// Input: a 4-byte little-endian word whose low 31 bits are a length L, then
// L bytes of index payload (a CheckpointIndex, framed here with a correct
// magic, length and CRC, so that the fuzzer gets past the frame), then the
// data file's bytes. When the word's top bit is set and the payload parses,
// the data and tensor CRCs are made to match too, so that the checks behind
// them (ranges, dtypes, shapes, sizes) are reached.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "graph/tensor.h"
#include "proto/checkpoint.pb.h"
#include "runtime/checkpoint/checkpoint_format.h"
#include "runtime/checkpoint/checkpoint_reader.h"

namespace {

void WriteFile(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

std::string Frame(const std::string& payload) {
  std::string out(strata::checkpoint_format::kIndexMagic, 8);
  const uint64_t n = payload.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += payload;
  const uint32_t crc = strata::crc32c::Value(out.data(), out.size());
  out.append(reinterpret_cast<const char*>(&crc), 4);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t len;
  std::memcpy(&len, data, 4);
  const bool fix_crcs = (len & 0x80000000u) != 0;
  len &= 0x7fffffffu;
  const std::string rest(reinterpret_cast<const char*>(data) + 4, size - 4);
  if (len > rest.size()) len = static_cast<uint32_t>(rest.size());
  std::string payload = rest.substr(0, len);
  const std::string bytes = rest.substr(len);

  static const std::string dir = [] {
    const std::string d = absl::StrCat("/tmp/strata_ckpt_fuzz_", getpid());
    mkdir(d.c_str(), 0700);
    return d;
  }();
  const std::string prefix = dir + "/ckpt-1";
  std::string data_name = "ckpt-1.data-0";
  ::strata::proto::CheckpointIndex index;
  if (index.ParseFromString(payload)) {
    // The data file's name is the index's to give (a path outside the
    // directory is the reader's to refuse); write the bytes where it says
    // only when that is a plain name.
    if (!index.data_file().empty() && index.data_file().find('/') == std::string::npos &&
        index.data_file().size() < 200) {
      data_name = index.data_file();
    }
    if (fix_crcs) {
      index.set_data_crc32c(strata::crc32c::Value(bytes.data(), bytes.size()));
      for (auto& t : *index.mutable_tensors()) {
        if (t.offset() <= bytes.size() && t.size() <= bytes.size() - t.offset()) {
          t.set_crc32c(t.size() == 0 ? 0 : strata::crc32c::Value(bytes.data() + t.offset(), t.size()));
        }
      }
      payload = index.SerializeAsString();
    }
  }
  WriteFile(strata::checkpoint_format::IndexPath(prefix), Frame(payload));
  WriteFile(dir + "/" + data_name, bytes);
  auto reader = strata::CheckpointReader::Open(prefix);
  if (reader.ok()) {
    (void)(*reader)->VerifyAll();
    for (const auto& t : index.tensors()) {
      strata::Tensor out;
      (void)(*reader)->Read(t.name(), &out);
    }
  }
  std::remove((dir + "/" + data_name).c_str());
  return 0;
}
