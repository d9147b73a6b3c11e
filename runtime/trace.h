// StepTracer: what ran, where and when, during the steps it is given to; and
// its Chrome trace (JSON for Perfetto / chrome://tracing).
//
//   StepTracer tracer;
//   RunOptions ro;
//   ro.tracer = &tracer;                       // nullptr (the default): no tracing
//   session->Run(ro, feeds, fetches, targets, &out, nullptr);
//   tracer.RecordSpan("step 12", t0, StepTracer::NowNanos());   // optional
//   absl::Status s = tracer.WriteChromeTrace("/tmp/trace.json");
//
// The executor records one event per kernel: node name, op, device, start
// and end (steady clock). A synchronous kernel's event is its Compute; an
// asynchronous kernel's (_Recv, the collectives) runs from ComputeAsync to
// its `done`, so a collective's event shows how long the step waited for it.
//
// The Chrome trace lays events out as TensorFlow's trace viewer does, one
// "process" (pid) per track:
//   - "steps": the spans given to RecordSpan (e.g. each traced step);
//   - one per device, in device order ("/job:../device:CPU:0" ...): the
//     device's kernels other than collectives;
//   - "collectives": every collective kernel (op name starting with
//     "Collective"), whatever its device (args.device names it).
// Within a track, events that overlap in time (kernels of one device run
// side by side on the inter-op pool; collectives of several replicas and
// buckets are in flight at once) go to separate rows (tids), each row
// holding events that do not overlap, as the format needs. Times are
// microseconds from the first event.
//
// Thread-safety: Record and RecordSpan may be called concurrently (kernels
// of several partitions finish at once); the readers take the same lock.
// Ownership: the tracer owns copies of everything it recorded; it must
// outlive the steps it is given to.
#ifndef STRATA_RUNTIME_TRACE_H_
#define STRATA_RUNTIME_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/mutex.h"

namespace strata {

struct TraceEvent {
  std::string name;        // node name, or the span's name
  std::string op;          // op type; "" for a span
  std::string device;      // full device name; "" for a span
  int64_t start_ns = 0;    // StepTracer::NowNanos() clock
  int64_t end_ns = 0;
  bool async = false;      // an asynchronous kernel: ComputeAsync to done
};

class StepTracer {
 public:
  StepTracer() = default;
  StepTracer(const StepTracer&) = delete;
  StepTracer& operator=(const StepTracer&) = delete;

  // A monotonic clock in nanoseconds (std::chrono::steady_clock).
  static int64_t NowNanos();

  // A kernel that ran on `device` from start_ns to end_ns.
  void Record(absl::string_view node, absl::string_view op, absl::string_view device,
              int64_t start_ns, int64_t end_ns, bool async);
  // A span of the "steps" track (not a kernel).
  void RecordSpan(absl::string_view name, int64_t start_ns, int64_t end_ns);

  // When set (before the step), the executor waits for the device after
  // each synchronous kernel (DeviceBase::Sync) before it records the
  // kernel's end: an event then spans the kernel's launch and its run on a
  // GPU, not only its launch. Slow; for finding the kernels that are slow on
  // the device, never for timing a step.
  void set_wait_for_device(bool wait) { wait_for_device_ = wait; }
  bool wait_for_device() const { return wait_for_device_; }

  // Copies of the events so far, in recording order.
  std::vector<TraceEvent> events() const;
  size_t num_events() const;

  // The Chrome trace of the events (see the file comment).
  std::string ToChromeTraceJson() const;
  // Writes it to `path`; InvalidArgument naming the path if it cannot be
  // written.
  absl::Status WriteChromeTrace(const std::string& path) const;

 private:
  bool wait_for_device_ = false;
  mutable Mutex mu_;
  std::vector<TraceEvent> events_ ABSL_GUARDED_BY(mu_);
};

// Ops traced on the "collectives" track: CollectiveReduceV2 and the others
// of graph/ops/collective_ops.h.
bool IsCollectiveOp(absl::string_view op);

}  // namespace strata

#endif  // STRATA_RUNTIME_TRACE_H_
