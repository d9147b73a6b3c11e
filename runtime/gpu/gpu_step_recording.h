// GpuStepRecording: a GpuDevice's StepRecording (runtime/device.h), a CUDA
// graph. Its kernels run on a stream of the recording's own (with a cuBLAS
// handle bound to it) and allocate from RecordingArenas over the device's
// allocators (runtime/recording_arena.h), so the buffers a replay uses are
// never given to anything else.
//
//   Begin   cudaStreamBeginCapture on the recording's stream (relaxed mode:
//           other threads keep using the device meanwhile);
//   End     cudaStreamEndCapture and cudaGraphInstantiate;
//   Replay  an event joins the recording's stream behind the device's
//           compute stream, cudaGraphLaunch, and the compute stream behind
//           the graph: stream order on both sides, no host wait;
//   CopyIn  device memory: a copy on the compute stream; host memory (int32):
//           a host copy once the last replay has finished reading it;
//   CopyOut a copy into the device's own allocator on the compute stream.
//
// Only built with --config=cuda. Thread-safety: as StepRecording.
// Ownership: owns the stream, handle, events, graph and arenas; the
// GpuDevice must outlive it.
#ifndef STRATA_RUNTIME_GPU_GPU_STEP_RECORDING_H_
#define STRATA_RUNTIME_GPU_GPU_STEP_RECORDING_H_

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/device.h"

namespace strata {

class GpuDevice;

absl::StatusOr<std::unique_ptr<StepRecording>> NewGpuStepRecording(GpuDevice* device);

}  // namespace strata

#endif  // STRATA_RUNTIME_GPU_GPU_STEP_RECORDING_H_
