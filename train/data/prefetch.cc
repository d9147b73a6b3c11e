// Prefetch: a producer thread per iterator keeps up to buffer_size elements
// ready. Its saved state is the input's position as of the last element the
// consumer took, so elements computed ahead but not consumed are simply
// recomputed after a restore: the producer records the input's state after
// each element it buffers.
//
// std::mutex rather than absl::Mutex: Debian's prebuilt abseil carries no
// ThreadSanitizer instrumentation, and pthread-based locks keep
// --config=tsan meaningful.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status.h"
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
  std::optional<DatasetNode> AsNode() const override {
    DatasetNode node;
    node.op = "Prefetch";
    node.inputs.push_back(input_);
    node.rebuild = [buffer_size = buffer_size_](const DatasetNode& n) {
      return Prefetch(n.inputs[0], buffer_size);
    };
    return node;
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
      std::lock_guard<std::mutex> l(mu_);
      consumed_state_ = w.data();
      StartProducerLocked();
      return absl::OkStatus();
    }

    absl::Status GetNext(Example* out, bool* end_of_sequence) override {
      std::unique_lock<std::mutex> l(mu_);
      if (!sticky_.ok()) return sticky_;
      if (finished_) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      ready_.wait(l, [this] { return !buffer_.empty(); });
      Slot s = std::move(buffer_.front());
      buffer_.pop_front();
      space_.notify_one();
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
      std::lock_guard<std::mutex> l(mu_);
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
      std::lock_guard<std::mutex> l(mu_);
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

    void StartProducerLocked() {  // mu_ held
      cancelled_ = false;
      producer_ = std::thread([this] { Produce(); });
    }

    void StopProducer() {  // mu_ not held
      {
        std::lock_guard<std::mutex> l(mu_);
        cancelled_ = true;
        space_.notify_all();
      }
      if (producer_.joinable()) producer_.join();
    }

    void Produce() {
      while (true) {
        {
          std::unique_lock<std::mutex> l(mu_);
          space_.wait(l, [this] { return cancelled_ || buffer_.size() < buffer_size_; });
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
        std::lock_guard<std::mutex> l(mu_);
        if (cancelled_) return;
        buffer_.push_back(std::move(s));
        ready_.notify_one();
        if (last) return;
      }
    }

    // The input iterator: owned by the producer thread while it runs, by
    // Restore while it does not.
    std::unique_ptr<IteratorBase> in_;
    const size_t buffer_size_;
    std::thread producer_;  // started/joined only by the consumer's thread

    mutable std::mutex mu_;
    std::condition_variable ready_;  // buffer_ became non-empty
    std::condition_variable space_;  // buffer_ has room, or cancelled_
    // Guarded by mu_.
    std::deque<Slot> buffer_;
    bool cancelled_ = false;
    bool finished_ = false;
    absl::Status sticky_;
    std::string consumed_state_;
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
