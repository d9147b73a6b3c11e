#include "train/data/transforms.h"

#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {
namespace data {
namespace {

absl::Status BadArg(absl::string_view op, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", why));
}

absl::Status CheckInput(absl::string_view op, const DatasetPtr& input) {
  if (input == nullptr) return BadArg(op, "null input dataset");
  return absl::OkStatus();
}

// A one-input transformation as a pipeline node.
DatasetNode Node(std::string op, DatasetPtr input,
                 std::function<absl::StatusOr<DatasetPtr>(const DatasetNode&)> rebuild) {
  DatasetNode node;
  node.op = std::move(op);
  node.inputs.push_back(std::move(input));
  node.rebuild = std::move(rebuild);
  return node;
}

// ---------------------------------------------------------------- Shuffle

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Fisher-Yates with a SplitMix64 stream seeded by (seed, epoch) and
// multiply-shift bounding: the same permutation on every platform (unlike
// std::uniform_int_distribution).
std::vector<int64_t> Permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  uint64_t state = Mix(seed) ^ Mix(static_cast<uint64_t>(epoch) + 0x5851F42D4C957F2Dull);
  for (int64_t i = n - 1; i > 0; --i) {
    state = Mix(state);
    const int64_t j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(state) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(p[i], p[j]);
  }
  return p;
}

class ShuffleDataset : public Dataset {
 public:
  ShuffleDataset(DatasetPtr input, uint64_t seed) : input_(std::move(input)), seed_(seed) {}
  int64_t Cardinality() const override { return input_->Cardinality(); }
  std::string DebugString() const override {
    return absl::StrCat("Shuffle(seed=", seed_, ")<-", input_->DebugString());
  }
  std::optional<DatasetNode> AsNode() const override {
    const uint64_t seed = seed_;
    return Node("Shuffle", input_, [seed](const DatasetNode& n) { return Shuffle(n.inputs[0], seed); });
  }

  class Iterator : public IteratorBase {
   public:
    Iterator(const ShuffleDataset* ds, int64_t epoch) : ds_(ds) { SetEpoch(epoch); }
    absl::Status GetNext(Example* out, bool* end_of_sequence) override {
      if (pos_ >= static_cast<int64_t>(perm_.size())) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      STRATA_RETURN_IF_ERROR(ds_->input_->Get(perm_[pos_], out));
      ++pos_;
      *end_of_sequence = false;
      return absl::OkStatus();
    }
    absl::Status Save(StateWriter* w) const override {
      w->WriteInt(epoch_);
      w->WriteInt(pos_);
      return absl::OkStatus();
    }
    absl::Status Restore(StateReader* r) override {
      int64_t epoch, pos;
      STRATA_RETURN_IF_ERROR(r->ReadIntInRange(0, INT64_MAX, "shuffle epoch", &epoch));
      STRATA_RETURN_IF_ERROR(r->ReadIntInRange(0, ds_->Cardinality(), "shuffle position", &pos));
      if (epoch != epoch_) SetEpoch(epoch);
      pos_ = pos;
      return absl::OkStatus();
    }

   private:
    void SetEpoch(int64_t epoch) {
      epoch_ = epoch;
      perm_ = Permutation(ds_->Cardinality(), ds_->seed_, epoch);
      pos_ = 0;
    }
    const ShuffleDataset* const ds_;
    int64_t epoch_ = 0;
    std::vector<int64_t> perm_;
    int64_t pos_ = 0;
  };

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(int64_t epoch) const override {
    return std::unique_ptr<IteratorBase>(new Iterator(this, epoch));
  }

 private:
  const DatasetPtr input_;
  const uint64_t seed_;
};

// ------------------------------------------------------------------ Batch

// Stacks component-wise; InvalidArgument if the elements disagree.
absl::Status Stack(const std::vector<Example>& elems, Example* out) {
  const Example& first = elems[0];
  out->clear();
  for (size_t c = 0; c < first.size(); ++c) {
    DimVector dims = {static_cast<int64_t>(elems.size())};
    for (int64_t d : first[c].shape().dim_sizes()) dims.push_back(d);
    STRATA_ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    Tensor t(first[c].dtype(), shape);
    const size_t bytes = first[c].TotalBytes();
    for (size_t i = 0; i < elems.size(); ++i) {
      const Example& e = elems[i];
      if (e.size() != first.size() || e[c].dtype() != first[c].dtype() ||
          e[c].shape() != first[c].shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Batch: element ", i, " of a batch does not match element 0 in component ", c, ": ",
            e.size() != first.size() ? absl::StrCat(e.size(), " components vs ", first.size())
                                     : absl::StrCat(DataTypeString(e[c].dtype()), " ",
                                                    e[c].shape().DebugString(), " vs ",
                                                    DataTypeString(first[c].dtype()), " ",
                                                    first[c].shape().DebugString())));
      }
      if (bytes > 0) std::memcpy(static_cast<char*>(t.raw_data()) + i * bytes, e[c].raw_data(), bytes);
    }
    out->push_back(std::move(t));
  }
  return absl::OkStatus();
}

class BatchDataset : public Dataset {
 public:
  BatchDataset(DatasetPtr input, int64_t batch_size, bool drop)
      : input_(std::move(input)), batch_size_(batch_size), drop_(drop) {}
  int64_t Cardinality() const override {
    const int64_t n = input_->Cardinality();
    if (n < 0) return n;
    return drop_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
  }
  std::string DebugString() const override {
    return absl::StrCat("Batch(", batch_size_, drop_ ? ",drop" : "", ")<-", input_->DebugString());
  }
  std::optional<DatasetNode> AsNode() const override {
    const bool drop = drop_;
    DatasetNode node = Node("Batch", input_, [drop](const DatasetNode& n) {
      return Batch(n.inputs[0], n.batch_size, drop);
    });
    node.batch_size = batch_size_;
    return node;
  }

  class Iterator : public IteratorBase {
   public:
    Iterator(const BatchDataset* ds, std::unique_ptr<IteratorBase> in)
        : ds_(ds), in_(std::move(in)) {}
    absl::Status GetNext(Example* out, bool* end_of_sequence) override {
      std::vector<Example> elems;
      elems.reserve(static_cast<size_t>(ds_->batch_size_));
      while (static_cast<int64_t>(elems.size()) < ds_->batch_size_) {
        Example e;
        bool end = false;
        STRATA_RETURN_IF_ERROR(in_->GetNext(&e, &end));
        if (end) break;
        elems.push_back(std::move(e));
      }
      if (elems.empty() || (ds_->drop_ && static_cast<int64_t>(elems.size()) < ds_->batch_size_)) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      *end_of_sequence = false;
      return Stack(elems, out);
    }
    // A batch is assembled within one GetNext, so the input's position is
    // the whole state.
    absl::Status Save(StateWriter* w) const override { return in_->Save(w); }
    absl::Status Restore(StateReader* r) override { return in_->Restore(r); }

   private:
    const BatchDataset* const ds_;
    std::unique_ptr<IteratorBase> in_;
  };

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(int64_t epoch) const override {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input_->MakeIterator(epoch));
    return std::unique_ptr<IteratorBase>(new Iterator(this, std::move(in)));
  }

 private:
  const DatasetPtr input_;
  const int64_t batch_size_;
  const bool drop_;
};

// ----------------------------------------------------------------- Repeat

class RepeatDataset : public Dataset {
 public:
  RepeatDataset(DatasetPtr input, int64_t count) : input_(std::move(input)), count_(count) {}
  int64_t Cardinality() const override {
    const int64_t n = input_->Cardinality();
    if (count_ == 0 || n == 0) return 0;
    if (count_ < 0 || n == kInfiniteCardinality) return kInfiniteCardinality;
    if (n == kUnknownCardinality) return kUnknownCardinality;
    return n > INT64_MAX / count_ ? kUnknownCardinality : n * count_;
  }
  std::string DebugString() const override {
    return absl::StrCat("Repeat(", count_, ")<-", input_->DebugString());
  }
  std::optional<DatasetNode> AsNode() const override {
    const int64_t count = count_;
    return Node("Repeat", input_, [count](const DatasetNode& n) { return Repeat(n.inputs[0], count); });
  }

  class Iterator : public IteratorBase {
   public:
    Iterator(const RepeatDataset* ds, int64_t outer_epoch) : ds_(ds), outer_epoch_(outer_epoch) {}
    absl::Status GetNext(Example* out, bool* end_of_sequence) override {
      while (true) {
        if (ds_->count_ >= 0 && pass_ >= ds_->count_) {
          *end_of_sequence = true;
          return absl::OkStatus();
        }
        if (in_ == nullptr) {
          STRATA_ASSIGN_OR_RETURN(in_, ds_->input_->MakeIterator(InputEpoch(pass_)));
          pass_has_elements_ = false;
        }
        bool end = false;
        STRATA_RETURN_IF_ERROR(in_->GetNext(out, &end));
        if (!end) {
          pass_has_elements_ = true;
          *end_of_sequence = false;
          return absl::OkStatus();
        }
        in_.reset();
        if (!pass_has_elements_) {  // empty input: stop instead of spinning
          pass_ = ds_->count_ >= 0 ? ds_->count_ : pass_;
          *end_of_sequence = true;
          return absl::OkStatus();
        }
        ++pass_;
      }
    }
    absl::Status Save(StateWriter* w) const override {
      w->WriteInt(pass_);
      w->WriteInt(in_ != nullptr ? 1 : 0);
      w->WriteInt(pass_has_elements_ ? 1 : 0);
      if (in_ != nullptr) return in_->Save(w);
      return absl::OkStatus();
    }
    absl::Status Restore(StateReader* r) override {
      int64_t pass, has_in, has_elems;
      STRATA_RETURN_IF_ERROR(r->ReadIntInRange(0, INT64_MAX, "repeat pass", &pass));
      STRATA_RETURN_IF_ERROR(r->ReadIntInRange(0, 1, "repeat flag", &has_in));
      STRATA_RETURN_IF_ERROR(r->ReadIntInRange(0, 1, "repeat flag", &has_elems));
      std::unique_ptr<IteratorBase> in;
      if (has_in) {
        STRATA_ASSIGN_OR_RETURN(in, ds_->input_->MakeIterator(InputEpoch(pass)));
        STRATA_RETURN_IF_ERROR(in->Restore(r));
      }
      pass_ = pass;
      in_ = std::move(in);
      pass_has_elements_ = has_elems != 0;
      return absl::OkStatus();
    }

   private:
    // Nested repeats number their input's passes globally, so every pass of
    // the innermost input is a distinct epoch.
    int64_t InputEpoch(int64_t pass) const {
      return ds_->count_ > 0 ? outer_epoch_ * ds_->count_ + pass : pass;
    }
    const RepeatDataset* const ds_;
    const int64_t outer_epoch_;
    int64_t pass_ = 0;
    bool pass_has_elements_ = false;
    std::unique_ptr<IteratorBase> in_;
  };

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(int64_t epoch) const override {
    return std::unique_ptr<IteratorBase>(new Iterator(this, epoch));
  }

 private:
  const DatasetPtr input_;
  const int64_t count_;
};

// ------------------------------------------------- Take / Skip / Shard

// The elements at positions offset + k * stride (k < limit) of the input:
// Take(n) is (0, 1, n), Skip(n) is (n, 1, inf), Shard(n, i) is (i, n, inf).
// Random access if the input is; otherwise it streams and discards.
class SelectDataset : public Dataset {
 public:
  SelectDataset(DatasetPtr input, std::string op, int64_t offset, int64_t stride, int64_t limit,
                std::string what)
      : input_(std::move(input)), op_(std::move(op)), offset_(offset), stride_(stride),
        limit_(limit), what_(std::move(what)) {}

  int64_t Cardinality() const override {
    const int64_t n = input_->Cardinality();
    if (n == kInfiniteCardinality) return limit_ >= 0 ? limit_ : kInfiniteCardinality;
    if (n == kUnknownCardinality) return kUnknownCardinality;
    const int64_t avail = n > offset_ ? (n - offset_ + stride_ - 1) / stride_ : 0;
    return limit_ >= 0 ? std::min(avail, limit_) : avail;
  }
  bool RandomAccess() const override { return input_->RandomAccess(); }
  absl::Status Get(int64_t index, Example* out) const override {
    if (!input_->RandomAccess()) return Dataset::Get(index, out);
    if (index < 0 || index >= Cardinality()) {
      return absl::OutOfRangeError(absl::StrCat("index ", index, " outside ", DebugString()));
    }
    return input_->Get(offset_ + index * stride_, out);
  }
  std::string DebugString() const override { return absl::StrCat(what_, "<-", input_->DebugString()); }
  std::optional<DatasetNode> AsNode() const override {
    return Node(op_, input_, [op = op_, offset = offset_, stride = stride_, limit = limit_,
                              what = what_](const DatasetNode& n) -> absl::StatusOr<DatasetPtr> {
      STRATA_RETURN_IF_ERROR(CheckInput(op, n.inputs[0]));
      return DatasetPtr(std::make_shared<SelectDataset>(n.inputs[0], op, offset, stride, limit, what));
    });
  }

  class StreamIterator : public IteratorBase {
   public:
    StreamIterator(const SelectDataset* ds, std::unique_ptr<IteratorBase> in)
        : ds_(ds), in_(std::move(in)) {}
    absl::Status GetNext(Example* out, bool* end_of_sequence) override {
      if (ds_->limit_ >= 0 && taken_ >= ds_->limit_) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      while (true) {
        bool end = false;
        STRATA_RETURN_IF_ERROR(in_->GetNext(out, &end));
        if (end) {
          *end_of_sequence = true;
          return absl::OkStatus();
        }
        const int64_t pos = seen_++;
        if (pos >= ds_->offset_ && (pos - ds_->offset_) % ds_->stride_ == 0) {
          ++taken_;
          *end_of_sequence = false;
          return absl::OkStatus();
        }
      }
    }
    absl::Status Save(StateWriter* w) const override {
      w->WriteInt(seen_);
      w->WriteInt(taken_);
      return in_->Save(w);
    }
    absl::Status Restore(StateReader* r) override {
      STRATA_RETURN_IF_ERROR(r->ReadIntInRange(0, INT64_MAX, "position", &seen_));
      STRATA_RETURN_IF_ERROR(r->ReadIntInRange(0, INT64_MAX, "count", &taken_));
      return in_->Restore(r);
    }

   private:
    const SelectDataset* const ds_;
    std::unique_ptr<IteratorBase> in_;
    int64_t seen_ = 0;
    int64_t taken_ = 0;
  };

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(int64_t epoch) const override {
    if (input_->RandomAccess()) return MakeRandomAccessIterator(this);
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input_->MakeIterator(epoch));
    return std::unique_ptr<IteratorBase>(new StreamIterator(this, std::move(in)));
  }

 private:
  const DatasetPtr input_;
  const std::string op_;  // "Take", "Skip" or "Shard"
  const int64_t offset_, stride_, limit_;
  const std::string what_;
};

// ------------------------------------------------------------------- Map

class MapDataset : public Dataset {
 public:
  MapDataset(DatasetPtr input, MapFn fn, std::string name)
      : input_(std::move(input)), fn_(std::move(fn)), name_(std::move(name)) {}
  int64_t Cardinality() const override { return input_->Cardinality(); }
  bool RandomAccess() const override { return input_->RandomAccess(); }
  absl::Status Get(int64_t index, Example* out) const override {
    STRATA_RETURN_IF_ERROR(input_->Get(index, out));
    return Apply(out);
  }
  std::string DebugString() const override {
    return absl::StrCat("Map(", name_, ")<-", input_->DebugString());
  }
  std::optional<DatasetNode> AsNode() const override {
    return Node("Map", input_, [fn = fn_, name = name_](const DatasetNode& n) {
      return Map(n.inputs[0], fn, name);
    });
  }

  class Iterator : public IteratorBase {
   public:
    Iterator(const MapDataset* ds, std::unique_ptr<IteratorBase> in) : ds_(ds), in_(std::move(in)) {}
    absl::Status GetNext(Example* out, bool* end_of_sequence) override {
      STRATA_RETURN_IF_ERROR(in_->GetNext(out, end_of_sequence));
      if (*end_of_sequence) return absl::OkStatus();
      return ds_->Apply(out);
    }
    absl::Status Save(StateWriter* w) const override { return in_->Save(w); }
    absl::Status Restore(StateReader* r) override { return in_->Restore(r); }

   private:
    const MapDataset* const ds_;
    std::unique_ptr<IteratorBase> in_;
  };

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(int64_t epoch) const override {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input_->MakeIterator(epoch));
    return std::unique_ptr<IteratorBase>(new Iterator(this, std::move(in)));
  }

 private:
  absl::Status Apply(Example* e) const {
    absl::Status s = fn_(e);
    return AnnotateStatus(s, absl::StrCat("Map(", name_, "): "));
  }
  const DatasetPtr input_;
  const MapFn fn_;
  const std::string name_;
};

}  // namespace

absl::StatusOr<DatasetPtr> Shuffle(DatasetPtr input, uint64_t seed) {
  STRATA_RETURN_IF_ERROR(CheckInput("Shuffle", input));
  if (!input->RandomAccess() || input->Cardinality() < 0) {
    return BadArg("Shuffle", absl::StrCat("needs a finite random-access input (a source, or Map/Take/"
                                          "Skip/Shard of one: shuffle before Batch and Repeat); got ",
                                          input->DebugString()));
  }
  return DatasetPtr(std::make_shared<ShuffleDataset>(std::move(input), seed));
}

absl::StatusOr<DatasetPtr> Batch(DatasetPtr input, int64_t batch_size, bool drop_remainder) {
  STRATA_RETURN_IF_ERROR(CheckInput("Batch", input));
  if (batch_size < 1) return BadArg("Batch", absl::StrCat("batch_size must be >= 1, got ", batch_size));
  return DatasetPtr(std::make_shared<BatchDataset>(std::move(input), batch_size, drop_remainder));
}

absl::StatusOr<DatasetPtr> Repeat(DatasetPtr input, int64_t count) {
  STRATA_RETURN_IF_ERROR(CheckInput("Repeat", input));
  if (count < kInfiniteCardinality) {
    return BadArg("Repeat", absl::StrCat("count must be >= 0 or -1 (forever), got ", count));
  }
  return DatasetPtr(std::make_shared<RepeatDataset>(std::move(input), count));
}

absl::StatusOr<DatasetPtr> Take(DatasetPtr input, int64_t count) {
  STRATA_RETURN_IF_ERROR(CheckInput("Take", input));
  if (count < 0) return BadArg("Take", absl::StrCat("count must be >= 0, got ", count));
  return DatasetPtr(
      std::make_shared<SelectDataset>(std::move(input), "Take", 0, 1, count, absl::StrCat("Take(", count, ")")));
}

absl::StatusOr<DatasetPtr> Skip(DatasetPtr input, int64_t count) {
  STRATA_RETURN_IF_ERROR(CheckInput("Skip", input));
  if (count < 0) return BadArg("Skip", absl::StrCat("count must be >= 0, got ", count));
  return DatasetPtr(
      std::make_shared<SelectDataset>(std::move(input), "Skip", count, 1, -1, absl::StrCat("Skip(", count, ")")));
}

absl::StatusOr<DatasetPtr> Shard(DatasetPtr input, int64_t num_shards, int64_t index) {
  STRATA_RETURN_IF_ERROR(CheckInput("Shard", input));
  if (num_shards < 1 || index < 0 || index >= num_shards) {
    return BadArg("Shard", absl::StrCat("need 0 <= index < num_shards, got index ", index,
                                        " of ", num_shards));
  }
  return DatasetPtr(std::make_shared<SelectDataset>(
      std::move(input), "Shard", index, num_shards, -1, absl::StrCat("Shard(", num_shards, ",", index, ")")));
}

absl::StatusOr<DatasetPtr> Map(DatasetPtr input, MapFn fn, std::string name) {
  STRATA_RETURN_IF_ERROR(CheckInput("Map", input));
  if (!fn) return BadArg("Map", "null function");
  if (name.empty()) return BadArg("Map", "the function needs a name (it identifies saved state)");
  return DatasetPtr(std::make_shared<MapDataset>(std::move(input), std::move(fn), std::move(name)));
}

}  // namespace data
}  // namespace strata
