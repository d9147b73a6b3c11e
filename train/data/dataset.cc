#include "train/data/dataset.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"

namespace strata {
namespace data {
namespace {

constexpr char kStateMagic[] = "SDI1";

// FNV-1a: a hash that is the same in every build and process.
uint64_t Fingerprint(absl::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

absl::Status BadState(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("iterator state is malformed: ", why));
}

class RandomAccessIterator : public IteratorBase {
 public:
  explicit RandomAccessIterator(const Dataset* ds) : ds_(ds), size_(ds->Cardinality()) {}

  absl::Status GetNext(Example* out, bool* end_of_sequence) override {
    if (pos_ >= size_) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    STRATA_RETURN_IF_ERROR(ds_->Get(pos_, out));
    ++pos_;
    *end_of_sequence = false;
    return absl::OkStatus();
  }
  absl::Status Save(StateWriter* w) const override {
    w->WriteInt(pos_);
    return absl::OkStatus();
  }
  absl::Status Restore(StateReader* r) override {
    return r->ReadIntInRange(0, size_, "position", &pos_);
  }

 private:
  const Dataset* const ds_;
  const int64_t size_;
  int64_t pos_ = 0;
};

}  // namespace

void StateWriter::WriteInt(int64_t v) {
  // Zigzag + varint: small positions take a byte or two.
  uint64_t u = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (u >= 0x80) {
    buf_.push_back(static_cast<char>(u | 0x80));
    u >>= 7;
  }
  buf_.push_back(static_cast<char>(u));
}

void StateWriter::WriteBytes(absl::string_view s) {
  WriteInt(static_cast<int64_t>(s.size()));
  buf_.append(s.data(), s.size());
}

absl::Status StateReader::ReadInt(int64_t* v) {
  uint64_t u = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= data_.size()) return BadState("truncated");
    const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
    u |= uint64_t{b & 0x7Fu} << shift;
    if ((b & 0x80) == 0) {
      *v = static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
      return absl::OkStatus();
    }
  }
  return BadState("integer too long");
}

absl::Status StateReader::ReadIntInRange(int64_t lo, int64_t hi, absl::string_view what,
                                         int64_t* v) {
  int64_t x;
  STRATA_RETURN_IF_ERROR(ReadInt(&x));
  if (x < lo || x > hi) {
    return BadState(absl::StrCat(what, " ", x, " is outside [", lo, ", ", hi, "]"));
  }
  *v = x;
  return absl::OkStatus();
}

absl::Status StateReader::ReadBytes(std::string* s) {
  int64_t n;
  STRATA_RETURN_IF_ERROR(ReadInt(&n));
  if (n < 0 || static_cast<uint64_t>(n) > data_.size() - pos_) return BadState("truncated string");
  s->assign(data_.data() + pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return absl::OkStatus();
}

absl::Status Dataset::Get(int64_t index, Example* out) const {
  return absl::FailedPreconditionError(
      absl::StrCat("dataset ", DebugString(), " has no random access"));
}

absl::StatusOr<std::unique_ptr<IteratorBase>> RandomAccessDataset::MakeIterator(
    int64_t epoch) const {
  return MakeRandomAccessIterator(this);
}

std::unique_ptr<IteratorBase> MakeRandomAccessIterator(const Dataset* ds) {
  return std::make_unique<RandomAccessIterator>(ds);
}

absl::StatusOr<std::unique_ptr<DatasetIterator>> DatasetIterator::Create(DatasetPtr dataset) {
  if (dataset == nullptr) return absl::InvalidArgumentError("DatasetIterator: null dataset");
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> it, dataset->MakeIterator(0));
  return std::unique_ptr<DatasetIterator>(new DatasetIterator(std::move(dataset), std::move(it)));
}

absl::Status DatasetIterator::GetNext(Example* out, bool* end_of_sequence) {
  out->clear();
  return impl_->GetNext(out, end_of_sequence);
}

absl::StatusOr<std::string> DatasetIterator::SaveState() const {
  StateWriter w;
  STRATA_RETURN_IF_ERROR(impl_->Save(&w));
  std::string out(kStateMagic);
  const uint64_t fp = Fingerprint(dataset_->DebugString());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((fp >> (8 * i)) & 0xFF));
  out += w.data();
  return out;
}

absl::Status DatasetIterator::RestoreState(absl::string_view state) {
  const size_t header = sizeof(kStateMagic) - 1 + 8;
  if (state.size() < header || state.substr(0, sizeof(kStateMagic) - 1) != kStateMagic) {
    return BadState("not an iterator state (bad magic)");
  }
  uint64_t fp = 0;
  for (int i = 0; i < 8; ++i) {
    fp |= uint64_t{static_cast<uint8_t>(state[sizeof(kStateMagic) - 1 + i])} << (8 * i);
  }
  if (fp != Fingerprint(dataset_->DebugString())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "iterator state was saved from a different pipeline than ", dataset_->DebugString()));
  }
  // Restore into a fresh iterator and swap it in only on success, so a bad
  // state leaves this iterator where it was.
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> fresh, dataset_->MakeIterator(0));
  StateReader r(state.substr(header));
  STRATA_RETURN_IF_ERROR(fresh->Restore(&r));
  if (!r.AtEnd()) return BadState("trailing bytes");
  impl_ = std::move(fresh);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Example>> CollectAll(const DatasetPtr& dataset) {
  if (dataset->Cardinality() == kInfiniteCardinality) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot collect the infinite dataset ", dataset->DebugString()));
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<DatasetIterator> it, DatasetIterator::Create(dataset));
  std::vector<Example> all;
  while (true) {
    Example e;
    bool end = false;
    STRATA_RETURN_IF_ERROR(it->GetNext(&e, &end));
    if (end) break;
    all.push_back(std::move(e));
  }
  return all;
}

}  // namespace data
}  // namespace strata
