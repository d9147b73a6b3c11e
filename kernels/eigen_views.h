// Eigen views of Tensors for CPU kernels: flat, matrix and N-d maps over a
// Tensor's buffer (no copy), plus the scalar types kernels iterate over.
//
//   auto x = Flat<float>(ctx.input(0));          // Eigen::TensorMap, rank 1
//   auto y = Flat<float>(*out);
//   y.device(ctx.eigen_cpu_device()) = x.cwiseMax(0.f);
#ifndef STRATA_KERNELS_EIGEN_VIEWS_H_
#define STRATA_KERNELS_EIGEN_VIEWS_H_

#define EIGEN_USE_THREADS
#include "graph/tensor.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace strata {

template <typename T, int NDIMS = 1>
using TensorMapT =
    Eigen::TensorMap<Eigen::Tensor<T, NDIMS, Eigen::RowMajor, Eigen::DenseIndex>, Eigen::Aligned>;
template <typename T, int NDIMS = 1>
using ConstTensorMapT =
    Eigen::TensorMap<Eigen::Tensor<const T, NDIMS, Eigen::RowMajor, Eigen::DenseIndex>,
                     Eigen::Aligned>;

template <typename T>
TensorMapT<T, 1> Flat(Tensor& t) {
  return TensorMapT<T, 1>(t.data<T>(), t.NumElements());
}
template <typename T>
ConstTensorMapT<T, 1> Flat(const Tensor& t) {
  return ConstTensorMapT<T, 1>(t.data<T>(), t.NumElements());
}

// The tensor seen with NDIMS dims: the given shape padded with leading 1s, or
// with its leading dims collapsed into the first. Requires t.dims() <= NDIMS or
// the collapse to make sense for the caller.
template <typename T, int NDIMS>
Eigen::DSizes<Eigen::DenseIndex, NDIMS> ShapeAsDims(const Tensor& t) {
  Eigen::DSizes<Eigen::DenseIndex, NDIMS> d;
  const int r = t.dims();
  for (int i = 0; i < NDIMS; ++i) {
    const int src = r - NDIMS + i;
    d[i] = src >= 0 ? t.dim_size(src) : 1;
  }
  if (r > NDIMS) {
    for (int i = 0; i < r - NDIMS; ++i) d[0] *= t.dim_size(i);
  }
  return d;
}

template <typename T, int NDIMS>
TensorMapT<T, NDIMS> Shaped(Tensor& t) {
  return TensorMapT<T, NDIMS>(t.data<T>(), ShapeAsDims<T, NDIMS>(t));
}
template <typename T, int NDIMS>
ConstTensorMapT<T, NDIMS> Shaped(const Tensor& t) {
  return ConstTensorMapT<T, NDIMS>(t.data<T>(), ShapeAsDims<T, NDIMS>(t));
}

template <typename T>
TensorMapT<T, 2> Matrix(Tensor& t) {
  return Shaped<T, 2>(t);
}
template <typename T>
ConstTensorMapT<T, 2> Matrix(const Tensor& t) {
  return Shaped<T, 2>(t);
}

}  // namespace strata

#endif  // STRATA_KERNELS_EIGEN_VIEWS_H_
