// Launchers for the optimizer updates on the GPU (training_gpu.cu): one
// elementwise pass over var and its slots. Hyperparameters are scalars in
// device memory (they are graph tensors of the variable's dtype), read by
// the kernel, so nothing is copied to the host. float and double.
//
//   LaunchApplyAdam(ElemType::kFloat, var, m, v, beta1_power, beta2_power, lr, beta1, beta2,
//                   epsilon, grad, n, /*nesterov=*/false, stream);
//
// Formulas are TensorFlow's (and the CPU kernels'): see training_kernels.cc.
// Thread-safety: reentrant. Ownership: pointers borrowed until the stream
// reaches the kernel.
#ifndef STRATA_KERNELS_GPU_TRAINING_GPU_H_
#define STRATA_KERNELS_GPU_TRAINING_GPU_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gpu/elem_type.h"

namespace strata {
namespace gpu {

// var -= alpha * delta
cudaError_t LaunchApplyGradientDescent(ElemType t, void* var, const void* alpha, const void* delta, int64_t n,
                                       cudaStream_t stream);

// accum = accum * momentum + grad; var -= lr * accum (Nesterov:
// var -= grad * lr + accum * momentum * lr).
cudaError_t LaunchApplyMomentum(ElemType t, void* var, void* accum, const void* lr, const void* grad,
                                const void* momentum, int64_t n, bool nesterov, cudaStream_t stream);

// m += (g - m)(1 - beta1); v += (g² - v)(1 - beta2);
// var -= alpha m / (sqrt(v) + epsilon), alpha = lr sqrt(1 - beta2_power) / (1 - beta1_power)
// (Nesterov: (g (1 - beta1) + beta1 m) in place of m).
cudaError_t LaunchApplyAdam(ElemType t, void* var, void* m, void* v, const void* beta1_power,
                            const void* beta2_power, const void* lr, const void* beta1, const void* beta2,
                            const void* epsilon, const void* grad, int64_t n, bool nesterov, cudaStream_t stream);

}  // namespace gpu
}  // namespace strata

#endif  // STRATA_KERNELS_GPU_TRAINING_GPU_H_
