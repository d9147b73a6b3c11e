// Prefetch: a producer thread per iterator keeps up to buffer_size elements
// ready. Its saved state is the input's position as of the last element the
// consumer took, so elements computed ahead but not consumed are simply
// recomputed after a restore: the producer records the input's state after
// each element it buffers.
#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "graph/status.h"
#include "train/data/transforms.h"

namespace strata {
namespace data {
namespace {

class PrefetchDataset : public Dataset {
 public:
  PrefetchDataset(DatasetPtr input, int64_t buffer_size)
      : input_(std::move(input)), buffer_size_(buffer_size) {}
  int64_t Cardinality() const override { return input_->Cardinality(); }
  std::string DebugString() const override {
    // The buffer size does not change the sequence, so it is not part of the
    // pipeline's identity: state saved with prefetch 2 restores with 8.
    return absl::StrCat("Prefetch<-", input_->DebugString());
  }

  class Iterator : public IteratorBase {
   public:
    Iterator(std::unique_ptr<IteratorBase> in, int64_t buffer_size)
        : in_(std::move(in)), buffer_size_(static_cast<size_t>(buffer_size)) {}
    ~Iterator() override { StopProducer(); }

    // Records the input's start position and starts the producer.
    absl::Status Start() {
      StateWriter w;
      STRATA_RETURN_IF_ERROR(in_->Save(&w));
      absl::MutexLock l(&mu_);
      consumed_state_ = w.data();
      StartProducerLocked();
      return absl::OkStatus();
    }

    absl::Status GetNext(Example* out, bool* end_of_sequence) override {
      absl::MutexLock l(&mu_);
      if (!sticky_.ok()) return sticky_;
      if (finished_) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      while (buffer_.empty()) ready_.Wait(&mu_);
      Slot s = std::move(buffer_.front());
      buffer_.pop_front();
      space_.Signal();
      if (!s.status.ok()) {
        sticky_ = s.status;
        return sticky_;
      }
      consumed_state_ = std::move(s.state_after);
      if (s.end) {
        finished_ = true;
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      *out = std::move(s.element);
      *end_of_sequence = false;
      return absl::OkStatus();
    }

    absl::Status Save(StateWriter* w) const override {
      absl::MutexLock l(&mu_);
      if (!sticky_.ok()) {
        return AnnotateStatus(sticky_, "Prefetch: cannot save after the input failed: ");
      }
      w->WriteBytes(consumed_state_);
      return absl::OkStatus();
    }

    absl::Status Restore(StateReader* r) override {
      std::string state;
      STRATA_RETURN_IF_ERROR(r->ReadBytes(&state));
      StopProducer();  // the producer owns in_ while it runs
      StateReader sub(state);
      absl::Status s = in_->Restore(&sub);
      if (s.ok() && !sub.AtEnd()) {
        s = absl::InvalidArgumentError("iterator state is malformed: Prefetch has trailing bytes");
      }
      absl::MutexLock l(&mu_);
      buffer_.clear();
      finished_ = false;
      if (!s.ok()) {
        sticky_ = s;
        return s;
      }
      sticky_ = absl::OkStatus();
      consumed_state_ = std::move(state);
      StartProducerLocked();
      return absl::OkStatus();
    }

   private:
    struct Slot {
      absl::Status status;
      Example element;
      bool end = false;
      std::string state_after;  // the input's position after this element
    };

    void StartProducerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      cancelled_ = false;
      producer_ = std::thread([this] { Produce(); });
    }

    void StopProducer() ABSL_LOCKS_EXCLUDED(mu_) {
      {
        absl::MutexLock l(&mu_);
        cancelled_ = true;
        space_.SignalAll();
      }
      if (producer_.joinable()) producer_.join();
    }

    void Produce() {
      while (true) {
        {
          absl::MutexLock l(&mu_);
          while (!cancelled_ && buffer_.size() >= buffer_size_) space_.Wait(&mu_);
          if (cancelled_) return;
        }
        // Outside the lock: only this thread touches in_ while it runs.
        Slot s;
        s.status = in_->GetNext(&s.element, &s.end);
        if (s.status.ok()) {
          StateWriter w;
          s.status = in_->Save(&w);
          s.state_after = w.data();
        }
        const bool last = s.end || !s.status.ok();
        absl::MutexLock l(&mu_);
        if (cancelled_) return;
        buffer_.push_back(std::move(s));
        ready_.Signal();
        if (last) return;
      }
    }

    // The input iterator: owned by the producer thread while it runs, by
    // Restore while it does not.
    std::unique_ptr<IteratorBase> in_;
    const size_t buffer_size_;
    std::thread producer_;  // started/joined only by the consumer's thread

    mutable absl::Mutex mu_;
    absl::CondVar ready_;  // buffer_ became non-empty
    absl::CondVar space_;  // buffer_ has room, or cancelled_
    std::deque<Slot> buffer_ ABSL_GUARDED_BY(mu_);
    bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
    bool finished_ ABSL_GUARDED_BY(mu_) = false;
    absl::Status sticky_ ABSL_GUARDED_BY(mu_);
    std::string consumed_state_ ABSL_GUARDED_BY(mu_);
  };

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(int64_t epoch) const override {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input_->MakeIterator(epoch));
    auto it = std::make_unique<Iterator>(std::move(in), buffer_size_);
    STRATA_RETURN_IF_ERROR(it->Start());
    return std::unique_ptr<IteratorBase>(std::move(it));
  }

 private:
  const DatasetPtr input_;
  const int64_t buffer_size_;
};

}  // namespace

absl::StatusOr<DatasetPtr> Prefetch(DatasetPtr input, int64_t buffer_size) {
  if (input == nullptr) return absl::InvalidArgumentError("Prefetch: null input dataset");
  if (buffer_size < 1 || buffer_size > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Prefetch: buffer_size must be in [1, 2^20], got ", buffer_size));
  }
  return DatasetPtr(std::make_shared<PrefetchDataset>(std::move(input), buffer_size));
}

}  // namespace data
}  // namespace strata
