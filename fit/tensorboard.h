// TensorBoard event files: a run's scalars written so that
// `tensorboard --logdir DIR` (from PyPI) plots a Strata run beside a Keras
// one. The files are TensorFlow's: a sequence of TFRecords (a little-endian
// uint64 length, the masked CRC32C of those 8 bytes, the data, the masked
// CRC32C of the data), each holding one serialized tensorflow.Event
// (proto/event.proto), the first carrying file_version "brain.Event:2".
//
//   STRATA_ASSIGN_OR_RETURN(auto tb, fit::TensorBoardWriter::Create("/tmp/run/tb"));
//   tb->Step(step, {{"loss", 0.41}, {"learning_rate", 1e-3}});     // train/: batch_loss, ...
//   tb->Epoch(epoch, {{"loss", 0.4}}, {{"val_loss", 0.5}});        // train/ and validation/: epoch_loss
//   STRATA_RETURN_IF_ERROR(tb->Close());
//
// Layout and tags are Keras's TensorBoard callback's: DIR/train holds the
// training scalars ("batch_<name>" at global steps, "epoch_<name>" at
// epoch - 1, as Keras plots epoch 1 at 0), DIR/validation (made with the first validation
// scalar) the validation ones ("val_loss" is written as "epoch_loss" there). Each writer makes a new file
// (events.out.tfevents.<seconds>.<host>.<pid>.<n>), so a resumed run adds
// one beside the first run's and TensorBoard shows both in order.
//
// Records are buffered and written at most a second apart, on Flush and on
// Close; a crash loses at most that second. Errors (a directory that cannot
// be made, a failed write) are Statuses naming the file.
//
// Thread-safety: one thread per writer. Ownership: a writer owns its file.
#ifndef STRATA_FIT_TENSORBOARD_H_
#define STRATA_FIT_TENSORBOARD_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/file_io.h"
#include "proto/event.pb.h"

namespace strata {
namespace fit {

// TFRecord's checksum: the CRC32C of `data`, rotated right by 15 bits plus
// 0xa282ead8 (so that a CRC of data holding CRCs is not degenerate).
uint32_t MaskedCrc32c(absl::string_view data);

// `data` framed as one TFRecord.
std::string TfRecord(absl::string_view data);

// Every Event of an event file, in order; DataLoss naming the file and the
// byte offset for a bad length, a checksum mismatch, a truncated record or
// an unparsable event.
absl::StatusOr<std::vector<tensorflow::Event>> ReadEventFile(const std::string& path);

class EventFileWriter {
 public:
  // Makes `dir` (and its parents) and a new event file in it.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(const std::string& dir);
  ~EventFileWriter();  // writes what is buffered, errors ignored: call Close
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // One Event holding one scalar per (tag, value), at `step`.
  absl::Status AddScalars(int64_t step, const std::map<std::string, double>& values);
  absl::Status Write(const tensorflow::Event& event);
  absl::Status Flush();
  absl::Status Close();
  const std::string& path() const { return file_->path(); }

 private:
  explicit EventFileWriter(std::unique_ptr<io::WritableFile> file) : file_(std::move(file)) {}
  std::unique_ptr<io::WritableFile> file_;
  std::string pending_;
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
  bool closed_ = false;
};

// A training run's two event files (DIR/train, DIR/validation), with
// Keras's tags.
class TensorBoardWriter {
 public:
  static absl::StatusOr<std::unique_ptr<TensorBoardWriter>> Create(const std::string& dir);

  // Training scalars at a global step: "<name>" -> "batch_<name>".
  absl::Status Step(int64_t step, const std::map<std::string, double>& logs);
  // At the end of epoch `epoch` (from 1; written at step epoch - 1): each train "<name>" -> "epoch_<name>" in
  // train/, each "val_<name>" -> "epoch_<name>" in validation/ (names
  // without "val_" in `validation` are written as given). Then flushes.
  absl::Status Epoch(int64_t epoch, const std::map<std::string, double>& train,
                     const std::map<std::string, double>& validation);
  absl::Status Flush();
  absl::Status Close();

 private:
  TensorBoardWriter(std::string dir, std::unique_ptr<EventFileWriter> train)
      : dir_(std::move(dir)), train_(std::move(train)) {}
  const std::string dir_;
  const std::unique_ptr<EventFileWriter> train_;
  std::unique_ptr<EventFileWriter> validation_;  // made with the first validation scalar
};

}  // namespace fit
}  // namespace strata

#endif  // STRATA_FIT_TENSORBOARD_H_
