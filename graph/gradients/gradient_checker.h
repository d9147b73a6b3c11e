// Test helper: compares the symbolic gradient of a scalar double loss with
// central finite differences, element by element.
//
//   Scope root = Scope::NewRootScope();
//   Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
//   Output loss = ops::Sum(root, ops::Square(root, x), ops::Const(root, 0));
//   absl::StatusOr<double> err = testing::MaxGradientError(root, {x}, {x_value}, loss, {});
//
// For each input element: symbolic = the fetched AddSymbolicGradients
// result; numeric = (f(x + h) - f(x - h)) / 2h with every other input held
// at its value. The error of an element is |symbolic - numeric| / max(1,
// |symbolic|, |numeric|); the first element over `tolerance` fails with a
// message naming the input, the element and both values.
//
// Thread-safety: builds and runs on the caller's thread. Ownership: the
// scope's graph gains the gradient nodes; the session is local to the call.
#ifndef STRATA_GRAPH_GRADIENTS_GRADIENT_CHECKER_H_
#define STRATA_GRAPH_GRADIENTS_GRADIENT_CHECKER_H_

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/gradients/gradients.h"
#include "graph/scope.h"
#include "graph/tensor.h"
#include "runtime/session.h"

namespace strata {
namespace testing {

struct GradientCheckOptions {
  double step = 1e-6;       // h
  double tolerance = 1e-6;  // relative, see above
};

inline absl::StatusOr<double> MaxGradientError(const Scope& root, const OutputList& xs,
                                               const std::vector<Tensor>& x_values,
                                               const Output& loss,
                                               const GradientCheckOptions& options) {
  if (xs.size() != x_values.size()) return absl::InvalidArgumentError("one value per input");
  OutputList grads;
  STRATA_RETURN_IF_ERROR(AddSymbolicGradients(root, {loss}, xs, &grads));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root));

  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0; i < xs.size(); ++i) feeds.emplace_back(xs[i].name(), x_values[i]);
  std::vector<std::string> grad_names;
  std::vector<size_t> grad_of;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].ok()) continue;
    grad_names.push_back(grads[i].name());
    grad_of.push_back(i);
  }
  std::vector<Tensor> symbolic;
  STRATA_RETURN_IF_ERROR(session->Run(feeds, grad_names, {}, &symbolic));

  auto loss_at = [&](std::vector<std::pair<std::string, Tensor>>& f) -> absl::StatusOr<double> {
    std::vector<Tensor> out;
    STRATA_RETURN_IF_ERROR(session->Run(f, {loss.name()}, {}, &out));
    return *out[0].data<double>();
  };

  double max_error = 0;
  for (size_t k = 0; k < grad_of.size(); ++k) {
    const size_t i = grad_of[k];
    const Tensor& sym = symbolic[k];
    if (sym.dtype() != DT_DOUBLE || sym.shape() != x_values[i].shape()) {
      return absl::InternalError(absl::StrCat("gradient of ", xs[i].name(), " is ",
                                              sym.DebugString(0), ", input is ",
                                              x_values[i].DebugString(0)));
    }
    for (int64_t j = 0; j < x_values[i].NumElements(); ++j) {
      auto perturbed = feeds;
      Tensor x = x_values[i].DeepCopy();
      perturbed[i].second = x;
      const double x0 = x.data<double>()[j];
      x.data<double>()[j] = x0 + options.step;
      STRATA_ASSIGN_OR_RETURN(double up, loss_at(perturbed));
      x.data<double>()[j] = x0 - options.step;
      STRATA_ASSIGN_OR_RETURN(double down, loss_at(perturbed));
      const double numeric = (up - down) / (2 * options.step);
      const double s = sym.data<double>()[j];
      const double err = std::abs(s - numeric) / std::max({1.0, std::abs(s), std::abs(numeric)});
      if (!(err <= options.tolerance)) {  // also catches NaN
        return absl::InternalError(absl::StrCat("d loss / d ", xs[i].name(), "[", j,
                                                "]: symbolic ", s, ", numeric ", numeric,
                                                " (relative error ", err, ")"));
      }
      max_error = std::max(max_error, err);
    }
  }
  return max_error;
}

}  // namespace testing
}  // namespace strata

#endif  // STRATA_GRAPH_GRADIENTS_GRADIENT_CHECKER_H_
