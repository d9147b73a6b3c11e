#include "kernels/kernel_runner.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/op_registry.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {

StandaloneCpuDevice::StandaloneCpuDevice(int intra_op_threads)
    : allocator_(std::make_unique<TrackingCpuAllocator>("test_cpu")),
      pool_(std::make_unique<Eigen::ThreadPool>(intra_op_threads)),
      eigen_device_(std::make_unique<Eigen::ThreadPoolDevice>(pool_.get(), intra_op_threads)) {}

StandaloneCpuDevice::~StandaloneCpuDevice() = default;

absl::StatusOr<std::vector<Tensor>> RunKernel(DeviceBase* device, const std::string& op,
                                              const std::vector<Tensor>& inputs,
                                              const std::map<std::string, AttrValue>& attrs) {
  std::vector<std::vector<Tensor>> lists;
  for (const Tensor& t : inputs) lists.push_back({t});
  // Ops whose single argument is a list take every input as that list.
  auto op_def = OpRegistry::Global()->LookUp(op);
  if (op_def.ok() && (*op_def)->inputs.size() == 1 &&
      (!(*op_def)->inputs[0].number_attr.empty() || !(*op_def)->inputs[0].type_list_attr.empty())) {
    lists = {inputs};
  }
  return RunKernelWithListInputs(device, op, lists, attrs);
}

absl::StatusOr<std::vector<Tensor>> RunKernelWithListInputs(
    DeviceBase* device, const std::string& op, const std::vector<std::vector<Tensor>>& inputs,
    const std::map<std::string, AttrValue>& attrs) {
  STRATA_ASSIGN_OR_RETURN(const OpDef* def, OpRegistry::Global()->LookUp(op));
  ::tensorflow::NodeDef node;
  node.set_name(absl::StrCat("test_", op));
  node.set_op(op);
  for (const auto& kv : attrs) (*node.mutable_attr())[kv.first] = kv.second;
  if (inputs.size() != def->inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("op ", op, " takes ", def->inputs.size(),
                                                   " input args, got ", inputs.size()));
  }
  auto& a = *node.mutable_attr();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ArgDef& arg = def->inputs[i];
    if (!arg.number_attr.empty() && !a.contains(arg.number_attr)) {
      a[arg.number_attr] = MakeAttr(static_cast<int64_t>(inputs[i].size()));
    }
    if (!arg.type_attr.empty() && !a.contains(arg.type_attr) && !inputs[i].empty()) {
      a[arg.type_attr] = MakeAttr(inputs[i][0].dtype());
    }
    if (!arg.type_list_attr.empty() && !a.contains(arg.type_list_attr)) {
      std::vector<DataType> types;
      for (const Tensor& t : inputs[i]) types.push_back(t.dtype());
      a[arg.type_list_attr] = MakeAttr(types);
    }
  }
  STRATA_RETURN_IF_ERROR(ValidateAndCompleteAttrs(*def, &node));
  std::vector<DataType> in_types, out_types;
  STRATA_RETURN_IF_ERROR(InOutTypesForNode(node, *def, &in_types, &out_types));
  std::vector<Tensor> flat;
  for (const auto& list : inputs) flat.insert(flat.end(), list.begin(), list.end());
  if (flat.size() != in_types.size()) {
    return absl::InvalidArgumentError(absl::StrCat("op ", op, " expects ", in_types.size(),
                                                   " input tensors, got ", flat.size()));
  }
  for (size_t i = 0; i < flat.size(); ++i) {
    if (flat[i].dtype() != in_types[i]) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " is ", DataTypeString(flat[i].dtype()),
                                                     ", op wants ", DataTypeString(in_types[i])));
    }
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel,
                          CreateOpKernel(device, node, *def, in_types, out_types));
  OpKernelContext::Params p;
  p.op_kernel = kernel.get();
  p.device = device;
  p.inputs = flat.data();
  OpKernelContext ctx(p);
  STRATA_RETURN_IF_ERROR(kernel->Compute(ctx));
  std::vector<Tensor> out(ctx.outputs().begin(), ctx.outputs().end());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].IsInitialized()) {
      return absl::InternalError(absl::StrCat("op ", op, " left output ", i, " unset"));
    }
  }
  return out;
}

}  // namespace strata
