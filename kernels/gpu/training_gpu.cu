// Optimizer updates: one thread per element in a grid-stride loop; each
// thread reads the scalar hyperparameters once (they stay in cache).
#include "kernels/gpu/training_gpu.h"

namespace strata {
namespace gpu {
namespace {

constexpr int kThreads = 256;

inline int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? b : 65535 * 8);
}

#define GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{blockDim.x} * gridDim.x)

template <typename T>
__global__ void GradientDescentKernel(T* var, const T* alpha, const T* delta, int64_t n) {
  const T a = *alpha;
  GRID_LOOP(i, n) { var[i] -= delta[i] * a; }
}

template <typename T>
__global__ void MomentumKernel(T* var, T* accum, const T* lr_p, const T* grad, const T* momentum_p, int64_t n,
                               bool nesterov) {
  const T lr = *lr_p, momentum = *momentum_p;
  GRID_LOOP(i, n) {
    const T g = grad[i];
    const T a = accum[i] * momentum + g;
    accum[i] = a;
    var[i] -= nesterov ? g * lr + a * momentum * lr : a * lr;
  }
}

template <typename T>
__global__ void AdamKernel(T* var, T* m, T* v, const T* b1p, const T* b2p, const T* lr_p, const T* beta1_p,
                           const T* beta2_p, const T* eps_p, const T* grad, int64_t n, bool nesterov) {
  const T beta1 = *beta1_p, beta2 = *beta2_p, eps = *eps_p;
  const T alpha = *lr_p * sqrt(T(1) - *b2p) / (T(1) - *b1p);
  GRID_LOOP(i, n) {
    const T g = grad[i];
    const T mm = m[i] + (g - m[i]) * (T(1) - beta1);
    const T vv = v[i] + (g * g - v[i]) * (T(1) - beta2);
    m[i] = mm;
    v[i] = vv;
    const T step = nesterov ? (g * (T(1) - beta1) + beta1 * mm) : mm;
    var[i] -= (step * alpha) / (sqrt(vv) + eps);
  }
}

}  // namespace

cudaError_t LaunchApplyGradientDescent(ElemType t, void* var, const void* alpha, const void* delta, int64_t n,
                                       cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  if (t == ElemType::kFloat) {
    GradientDescentKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<float*>(var), static_cast<const float*>(alpha),
                                                          static_cast<const float*>(delta), n);
  } else if (t == ElemType::kDouble) {
    GradientDescentKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<double*>(var), static_cast<const double*>(alpha),
                                                          static_cast<const double*>(delta), n);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
static void Momentum(void* var, void* accum, const void* lr, const void* grad, const void* momentum, int64_t n,
                     bool nesterov, cudaStream_t s) {
  MomentumKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<T*>(var), static_cast<T*>(accum),
                                                static_cast<const T*>(lr), static_cast<const T*>(grad),
                                                static_cast<const T*>(momentum), n, nesterov);
}

cudaError_t LaunchApplyMomentum(ElemType t, void* var, void* accum, const void* lr, const void* grad,
                                const void* momentum, int64_t n, bool nesterov, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  if (t == ElemType::kFloat) {
    Momentum<float>(var, accum, lr, grad, momentum, n, nesterov, s);
  } else if (t == ElemType::kDouble) {
    Momentum<double>(var, accum, lr, grad, momentum, n, nesterov, s);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
static void Adam(void* var, void* m, void* v, const void* b1p, const void* b2p, const void* lr, const void* beta1,
                 const void* beta2, const void* eps, const void* grad, int64_t n, bool nesterov, cudaStream_t s) {
  AdamKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<T*>(var), static_cast<T*>(m), static_cast<T*>(v),
                                            static_cast<const T*>(b1p), static_cast<const T*>(b2p),
                                            static_cast<const T*>(lr), static_cast<const T*>(beta1),
                                            static_cast<const T*>(beta2), static_cast<const T*>(eps),
                                            static_cast<const T*>(grad), n, nesterov);
}

cudaError_t LaunchApplyAdam(ElemType t, void* var, void* m, void* v, const void* beta1_power,
                            const void* beta2_power, const void* lr, const void* beta1, const void* beta2,
                            const void* epsilon, const void* grad, int64_t n, bool nesterov, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  if (t == ElemType::kFloat) {
    Adam<float>(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, n, nesterov, s);
  } else if (t == ElemType::kDouble) {
    Adam<double>(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, n, nesterov, s);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace strata
