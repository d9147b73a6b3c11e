// NumPy's .npy format (version 1.0 to 3.0, little-endian, C order) to and
// from Tensors: what `numpy.save` writes and `numpy.load` reads.
//
//   STRATA_ASSIGN_OR_RETURN(Tensor x, DecodeNpy(bytes, "x.npy"));
//   std::string out = EncodeNpy(y);
//
// dtypes: float16/32/64, int8/16/32/64, uint8/16/32/64, bool. Anything
// else (big-endian data, Fortran order, object arrays, a header that does
// not parse, a data size that disagrees with the shape) is InvalidArgument
// naming `what` (the file). Memory is bounded by the input's size.
//
// Thread-safety: pure functions.
#ifndef STRATA_TOOLS_NPY_H_
#define STRATA_TOOLS_NPY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/tensor.h"

namespace strata {

absl::StatusOr<Tensor> DecodeNpy(absl::string_view bytes, const std::string& what);

// InvalidArgument for a dtype .npy cannot hold (bfloat16, resources).
absl::StatusOr<std::string> EncodeNpy(const Tensor& t);

}  // namespace strata

#endif  // STRATA_TOOLS_NPY_H_
