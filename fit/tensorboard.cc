#include "fit/tensorboard.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "base/status.h"

namespace strata {
namespace fit {
namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8u;
constexpr size_t kHeaderBytes = 12;  // length (8) + its masked CRC (4)
constexpr size_t kFooterBytes = 4;
constexpr size_t kFlushBytes = 1 << 16;
constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 30;

void PutFixed64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutFixed32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetFixed(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

// A name no other writer of this process (or, through the pid, of another
// process started in the same second) uses.
std::string NewFileName() {
  static std::atomic<int> counter{0};
  const int64_t seconds = static_cast<int64_t>(WallTime());
  return absl::StrCat("events.out.tfevents.", seconds, ".", HostName(), ".", getpid(), ".", counter++);
}

}  // namespace

uint32_t MaskedCrc32c(absl::string_view data) {
  const uint32_t crc = crc32c::Value(data.data(), data.size());
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string TfRecord(absl::string_view data) {
  std::string out;
  out.reserve(kHeaderBytes + data.size() + kFooterBytes);
  PutFixed64(&out, data.size());
  PutFixed32(&out, MaskedCrc32c(out));
  out.append(data.data(), data.size());
  PutFixed32(&out, MaskedCrc32c(data));
  return out;
}

absl::StatusOr<std::vector<tensorflow::Event>> ReadEventFile(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string bytes, io::ReadFileToString(path));
  std::vector<tensorflow::Event> events;
  size_t pos = 0;
  auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat("event file ", path, ": record at byte ", pos, ": ", why));
  };
  while (pos < bytes.size()) {
    if (bytes.size() - pos < kHeaderBytes) return bad("truncated length");
    const uint64_t n = GetFixed(bytes.data() + pos, 8);
    if (MaskedCrc32c(absl::string_view(bytes.data() + pos, 8)) != GetFixed(bytes.data() + pos + 8, 4)) {
      return bad("length checksum mismatch");
    }
    if (n > kMaxRecordBytes || bytes.size() - pos - kHeaderBytes < n + kFooterBytes) {
      return bad(absl::StrCat("length ", n, " runs past the end of the file"));
    }
    const absl::string_view data(bytes.data() + pos + kHeaderBytes, n);
    if (MaskedCrc32c(data) != GetFixed(data.data() + n, 4)) return bad("data checksum mismatch");
    tensorflow::Event event;
    if (!event.ParseFromArray(data.data(), static_cast<int>(n))) return bad("not an Event");
    events.push_back(std::move(event));
    pos += kHeaderBytes + n + kFooterBytes;
  }
  return events;
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(const std::string& dir) {
  STRATA_RETURN_IF_ERROR(io::CreateDirs(dir));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<io::WritableFile> file,
                          io::WritableFile::Create(io::JoinPath(dir, NewFileName())));
  std::unique_ptr<EventFileWriter> w(new EventFileWriter(std::move(file)));
  tensorflow::Event version;
  version.set_wall_time(WallTime());
  version.set_file_version("brain.Event:2");
  STRATA_RETURN_IF_ERROR(w->Write(version));
  STRATA_RETURN_IF_ERROR(w->Flush());
  return w;
}

EventFileWriter::~EventFileWriter() {
  if (!closed_) Close().IgnoreError();
}

absl::Status EventFileWriter::AddScalars(int64_t step, const std::map<std::string, double>& values) {
  tensorflow::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  for (const auto& [tag, value] : values) {
    tensorflow::Summary::Value* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  return Write(event);
}

absl::Status EventFileWriter::Write(const tensorflow::Event& event) {
  if (closed_) return absl::FailedPreconditionError(absl::StrCat("event file ", path(), ": already closed"));
  pending_ += TfRecord(event.SerializeAsString());
  const auto now = std::chrono::steady_clock::now();
  if (pending_.size() >= kFlushBytes || now - last_flush_ >= std::chrono::seconds(1)) return Flush();
  return absl::OkStatus();
}

absl::Status EventFileWriter::Flush() {
  last_flush_ = std::chrono::steady_clock::now();
  if (pending_.empty()) return absl::OkStatus();
  absl::Status s = file_->Append(pending_);
  pending_.clear();
  return s;
}

absl::Status EventFileWriter::Close() {
  if (closed_) return absl::OkStatus();
  absl::Status s = Flush();
  closed_ = true;
  s.Update(file_->Close());
  return s;
}

absl::StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::Create(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("TensorBoardWriter: no directory");
  absl::StatusOr<std::unique_ptr<EventFileWriter>> train = EventFileWriter::Create(io::JoinPath(dir, "train"));
  if (!train.ok()) return AnnotateStatus(train.status(), "TensorBoard directory: ");
  return std::unique_ptr<TensorBoardWriter>(new TensorBoardWriter(dir, *std::move(train)));
}

absl::Status TensorBoardWriter::Step(int64_t step, const std::map<std::string, double>& logs) {
  std::map<std::string, double> tagged;
  for (const auto& [name, value] : logs) tagged[absl::StrCat("batch_", name)] = value;
  return train_->AddScalars(step, tagged);
}

absl::Status TensorBoardWriter::Epoch(int64_t epoch, const std::map<std::string, double>& train,
                                      const std::map<std::string, double>& validation) {
  std::map<std::string, double> tagged;
  for (const auto& [name, value] : train) tagged[absl::StrCat("epoch_", name)] = value;
  STRATA_RETURN_IF_ERROR(train_->AddScalars(epoch - 1, tagged));
  STRATA_RETURN_IF_ERROR(train_->Flush());
  if (validation.empty()) return absl::OkStatus();
  if (validation_ == nullptr) {
    absl::StatusOr<std::unique_ptr<EventFileWriter>> v = EventFileWriter::Create(io::JoinPath(dir_, "validation"));
    if (!v.ok()) return AnnotateStatus(v.status(), "TensorBoard directory: ");
    validation_ = *std::move(v);
  }
  tagged.clear();
  for (const auto& [name, value] : validation) {
    const absl::string_view bare = absl::StartsWith(name, "val_") ? absl::string_view(name).substr(4) : name;
    tagged[absl::StrCat("epoch_", bare)] = value;
  }
  STRATA_RETURN_IF_ERROR(validation_->AddScalars(epoch - 1, tagged));
  return validation_->Flush();
}

absl::Status TensorBoardWriter::Flush() {
  absl::Status s = train_->Flush();
  if (validation_ != nullptr) s.Update(validation_->Flush());
  return s;
}

absl::Status TensorBoardWriter::Close() {
  absl::Status s = train_->Close();
  if (validation_ != nullptr) s.Update(validation_->Close());
  return s;
}

}  // namespace fit
}  // namespace strata
