// FusedBatchNormV3 and FusedBatchNormGradV3, TensorFlow's names, inputs,
// outputs and attrs:
//
//   FusedBatchNormV3(x: T, scale: U, offset: U, mean: U, variance: U;
//                    attrs epsilon = 1e-4, exponential_avg_factor = 1,
//                    data_format = "NHWC", is_training = true)
//     -> y, batch_mean, batch_variance, reserve_space_1, reserve_space_2, reserve_space_3
//   FusedBatchNormGradV3(y_backprop: T, x: T, scale: U, reserve_space_1: U,
//                        reserve_space_2: U, reserve_space_3: U; attrs epsilon,
//                        data_format, is_training)
//     -> x_backprop, scale_backprop, offset_backprop, reserve_space_4, reserve_space_5
//
// Per channel c (the last dim for NHWC/NDHWC, dim 1 for NCHW/NCDHW):
//   training:  y = scale (x - m) / sqrt(v + epsilon) + offset, with m and v
//              the batch's mean and (biased) variance over every other dim;
//              batch_mean = (1 - f) mean + f m and batch_variance =
//              (1 - f) variance + f v n / (n - 1) (f the
//              exponential_avg_factor; mean and variance may be empty when
//              f is 1): the moving averages a layer stores back.
//   inference: y from the given mean and variance; batch_mean and
//              batch_variance are them.
// reserve_space_1/2 hold the statistics y used (mean, biased variance), for
// the gradient op; reserve_space_3 is empty.
//
// Strata also takes T = U = double (the numeric gradient check needs it;
// TensorFlow's gradient op takes a float scale, Strata's a U one); the CPU
// kernels serve T = U = float and double.
//
// Thread-safety: registrations are static; builders follow Scope's contract.
#ifndef STRATA_GRAPH_OPS_BATCH_NORM_H_
#define STRATA_GRAPH_OPS_BATCH_NORM_H_

#include <string>

#include "graph/scope.h"

namespace strata {
namespace ops {

struct FusedBatchNormV3Outputs {
  Output y, batch_mean, batch_variance, reserve_space_1, reserve_space_2, reserve_space_3;
};
struct FusedBatchNormAttrs {
  float epsilon = 1e-4f;
  float exponential_avg_factor = 1.0f;
  std::string data_format = "NHWC";
  bool is_training = true;
};
FusedBatchNormV3Outputs FusedBatchNormV3(const Scope& scope, Output x, Output scale, Output offset, Output mean,
                                         Output variance, const FusedBatchNormAttrs& attrs = {});

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_OPS_BATCH_NORM_H_
