// CheckpointReader: reads a checkpoint written by SaveCheckpoint, verifying
// every byte it uses (format in checkpoint_format.h).
//
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> r,
//                           CheckpointReader::Open("/tmp/run/ckpt-100"));
//   for (const auto& [name, info] : r->tensors()) { ... info.dtype, info.shape ... }
//   Tensor w;
//   STRATA_RETURN_IF_ERROR(r->Read("dense/kernel", &w));        // CRC-checked
//   std::map<std::string, Tensor> values;
//   STRATA_RETURN_IF_ERROR(r->RestoreInto(
//       {{"dense/kernel", {DT_FLOAT, TensorShape{784, 10}}}}, &values));
//
// A sharded checkpoint (checkpoint_format.h) opens its shards too and reads
// a sliced tensor as one tensor, assembled from its slices.
//
// Errors: NotFound when there is no checkpoint at the prefix or no tensor of
// that name; DataLoss naming the file (and the tensor) for a corrupt or
// truncated index or data file, and naming the shard for a shard that is
// missing, corrupt, another save's or without a slice the index names; InvalidArgument naming the tensor when
// RestoreInto's expected dtype or shape differs from the checkpoint's.
// Corrupt input never crashes the reader.
//
// Thread-safety: after Open the reader is immutable; Read, VerifyAll and
// RestoreInto may run concurrently. Ownership: the reader keeps the data
// file open; tensors it returns are independent of it.
#ifndef STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_READER_H_
#define STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_READER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {
namespace io {
class RandomAccessFile;
}  // namespace io
namespace proto {
class CheckpointIndex;
}  // namespace proto

class CheckpointReader {
 public:
  struct TensorInfo {
    DataType dtype = DT_INVALID;
    TensorShape shape;
  };

  // Reads and validates the index and opens the data file.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(const std::string& prefix);
  ~CheckpointReader();

  const std::string& prefix() const { return prefix_; }
  // The shards' prefixes, in the index's order (none for an unsharded one).
  std::vector<std::string> shard_prefixes() const;
  // The CRC32C the index file ends with (what a sharded index records of
  // its shards).
  uint32_t index_crc() const { return index_crc_; }
  // Every tensor's dtype and shape, by name.
  const std::map<std::string, TensorInfo>& tensors() const { return infos_; }
  bool Contains(const std::string& name) const { return infos_.count(name) > 0; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // NotFound naming the key if absent.
  absl::StatusOr<std::string> GetMetadata(const std::string& key) const;

  // Reads one tensor into fresh host memory, checking its CRC32C.
  absl::Status Read(const std::string& name, Tensor* out) const;

  // Reads elements [first, first + count) of tensor `name`, flattened, into
  // a fresh 1-D tensor, holding no more of the tensor than those and a 1 MiB
  // buffer (a large variable restored a block of rows at a time). After
  // VerifyAll passed it reads just their bytes (every byte was checked
  // then); before, the bytes around them (the whole tensor, or the slices
  // that overlap the range) stream through their CRC32C check.
  // InvalidArgument naming the tensor for a range outside it.
  absl::Status ReadElements(const std::string& name, int64_t first, int64_t count,
                            Tensor* out) const;

  // Checks the data file's size and its whole-file CRC32C (padding
  // included) in one sequential pass, and each shard's: OK means every byte
  // of the checkpoint is as written (the indexes were checked by Open);
  // DataLoss naming the file otherwise.
  absl::Status VerifyAll() const;
  bool verified() const { return verified_.load(std::memory_order_acquire); }

  // Checks that every expected tensor exists with exactly that dtype and
  // shape, then reads them all. `out` is only written if everything
  // succeeds (name -> tensor), so a failed restore changes nothing.
  absl::Status RestoreInto(const std::map<std::string, TensorInfo>& expected,
                           std::map<std::string, Tensor>* out) const;

 private:
  struct Slice {
    int shard = 0;
    uint64_t element_offset = 0;
    uint64_t num_elements = 0;
  };
  struct Entry {
    TensorInfo info;
    uint64_t offset = 0;
    uint64_t size = 0;
    uint32_t crc = 0;
    std::vector<Slice> slices;  // non-empty: the elements are in shards_
  };
  CheckpointReader() = default;
  // Opens the shards `index` names and checks the slices against them.
  absl::Status OpenShards(const ::strata::proto::CheckpointIndex& index);
  // DataLoss naming the file if `e`'s bytes (or its slices') lie beyond
  // the end of their file: checked before allocating for them.
  absl::Status CheckExtent(const std::string& name, const Entry& e) const;
  // Reads `e`'s bytes (of the data file, or of its slices) into `dst`.
  absl::Status ReadBytes(const std::string& name, const Entry& e, char* dst) const;
  // Copies bytes [begin, end) of unsliced `e` into `dst`, streaming all of
  // its bytes through the CRC32C check.
  absl::Status ReadByteRange(const std::string& name, const Entry& e, uint64_t begin, uint64_t end,
                             char* dst) const;
  // DataLoss: tensor `name`'s bytes have CRC32C `crc`, not `e`'s.
  absl::Status Corrupt(const std::string& name, const Entry& e, uint32_t crc) const;

  std::string prefix_;
  std::string data_path_;
  uint64_t data_size_ = 0;  // as the index records it
  uint32_t data_crc_ = 0;   // CRC32C of the whole data file
  std::unique_ptr<io::RandomAccessFile> data_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, TensorInfo> infos_;
  std::map<std::string, std::string> metadata_;
  uint32_t index_crc_ = 0;
  std::vector<std::unique_ptr<CheckpointReader>> shards_;
  mutable std::atomic<bool> verified_{false};  // VerifyAll passed
};

}  // namespace strata

#endif  // STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_READER_H_
