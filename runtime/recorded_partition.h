// RecordedPartition: a GPU partition of a step recorded once and replayed
// each step (whole-step CUDA graphs), so the host launches one graph instead
// of a kernel per node. The session makes one for every partition on a
// device that records (Device::CanRecordSteps) where the partition allows it.
//
// What runs. The partition's _Recv nodes become _DeviceArg and its _Send
// nodes _DeviceRetval (core_ops.cc), so that the partition's own work has
// fixed inputs and outputs. A step receives the inputs itself, then:
//   - the first time a signature (the inputs' dtypes and shapes) is seen, the
//     partition runs kernel by kernel ("eager"), as it would unrecorded,
//     which also lets kernels make their lazy state;
//   - the second time, it is recorded on the device's StepRecording
//     (runtime/device.h) with buffers the recording owns, then replayed;
//   - afterwards each step copies its inputs into those buffers, replays, and
//     copies the outputs out before sending them.
// A new signature is recorded the same way (up to kMaxRecordings of them; a
// replay never runs with another signature's shapes). Before each replay the
// variables the partition uses must still hold the buffers they held when
// recorded; one that got another (a restored checkpoint, another plan's
// assignment) makes the step record again.
//
// What cannot be recorded runs eagerly, and stats().not_recorded says why
// (the latest reason):
//   - a step with a conditional (a Switch in any partition);
//   - a kernel that is not capture-safe (OpKernel::IsCaptureSafe: collectives,
//     host synchronisation, host-side state);
//   - a host-memory input (int32) that changes from step to step read on the
//     host (OpKernel::ReadsHostInputOnDevice);
//   - values that leave the partition and come back within the step (the
//     partition would have to pause for them);
//   - a failure while recording (named), for that signature.
// Recorded kernels do not check values on the host on replayed steps: an
// out-of-range label gives a NaN loss row, as TensorFlow's GPU kernel does,
// where the eager step reports an error.
//
// Variable updates happen after every read of the variable's old value in
// the step (control edges added to the recorded graph), so updates are in
// place, as replays need.
//
// Thread-safety: RunAsync may be called concurrently; one step at a time
// records or replays, others run eagerly meanwhile. Ownership: owns its
// executors and recordings; the device must outlive it.
#ifndef STRATA_RUNTIME_RECORDED_PARTITION_H_
#define STRATA_RUNTIME_RECORDED_PARTITION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "graph/graph.h"
#include "runtime/device.h"
#include "runtime/executor.h"

namespace strata {

struct RecordingStats {
  int64_t recorded = 0;  // recordings made
  int64_t replayed = 0;  // steps run by replaying a recording
  int64_t eager = 0;     // steps run kernel by kernel
  std::string not_recorded;  // why something was not recorded, latest; "" if nothing
};

class RecordedPartition {
 public:
  static constexpr int kMaxRecordings = 4;

  // For `partition` (one of the step's `partitions`, on `device`): nullptr
  // with `*why_not` set where it cannot be recorded (see above); an error if
  // its kernels cannot be made (as Executor::Create).
  static absl::StatusOr<std::unique_ptr<RecordedPartition>> Create(
      const Graph& partition, Device* device, const std::vector<const Graph*>& partitions,
      std::string* why_not);
  ~RecordedPartition();
  RecordedPartition(const RecordedPartition&) = delete;
  RecordedPartition& operator=(const RecordedPartition&) = delete;

  // As Executor::RunAsync (args.rendezvous carries the inputs and outputs).
  void RunAsync(const Executor::Args& args, Executor::DoneCallback done);

  RecordingStats stats() const;

 private:
  struct Boundary {
    std::string key;  // the rendezvous key of the _Recv or _Send it replaces
    DataType dtype;
  };
  struct Recording;
  struct Step;

  RecordedPartition(Device* device, std::unique_ptr<Graph> graph);
  void Continue(std::shared_ptr<Step> step);
  void RunEager(std::shared_ptr<Step> step, bool release);
  // Records for `r` (with the step's inputs); false with the reason in
  // r->failed if it could not.
  bool Record(Recording* r, const Step& step);
  absl::Status Replay(Recording* r, Step* step);
  // Sends the outputs and ends the step.
  void Finish(std::shared_ptr<Step> step, absl::Status s, bool release);
  // The variables the partition names that exist now, with their buffers.
  struct VarBuffer {
    std::string name;
    uint64_t id;
    std::shared_ptr<ResourceBase> resource;
    const void* data;
  };
  std::vector<VarBuffer> VarBuffers() const;
  // Whether each of `vars` is still its device's variable and holds the
  // same buffer: a lookup by id each, not a listing of every resource.
  bool Unchanged(const std::vector<VarBuffer>& vars) const;
  void SetNotRecorded(const std::string& why);

  Device* const device_;
  const std::unique_ptr<Graph> graph_;  // _DeviceArg/_DeviceRetval in place of _Recv/_Send
  std::unique_ptr<Executor> eager_;
  std::vector<Boundary> inputs_, outputs_;
  std::vector<std::pair<std::string, std::string>> vars_;  // (container, name) of its VarHandleOps

  mutable Mutex mu_;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // a step is recording or replaying
  absl::flat_hash_map<std::string, std::unique_ptr<Recording>> recordings_ ABSL_GUARDED_BY(mu_);
  RecordingStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_RECORDED_PARTITION_H_
