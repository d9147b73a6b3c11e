// The kernel registry, keyed by (op, device type, dtype constraints). Kernels
// register themselves statically beside their code (alwayslink libraries);
// the executor finds them here, never by name in code.
//
//   STRATA_REGISTER_KERNEL(
//       KernelBuilder("MatMul").Device(kDeviceCpu).TypeConstraint<float>("T"),
//       MatMulOp<float>);
//
//   absl::StatusOr<std::unique_ptr<OpKernel>> k =
//       CreateOpKernel(device, node.def(), node.op_def(), node.input_types(), node.output_types());
//
// Thread-safety: registration happens during static initialization; lookups
// afterwards may run concurrently.
#ifndef STRATA_KERNELS_KERNEL_REGISTRY_H_
#define STRATA_KERNELS_KERNEL_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/op_kernel.h"

namespace strata {

struct KernelDef {
  std::string op;
  std::string device_type;
  // Each (attr, dtype) must match the node's attr.
  std::vector<std::pair<std::string, DataType>> type_constraints;
};

using KernelFactory = std::function<std::unique_ptr<OpKernel>(OpKernelConstruction&)>;

class KernelBuilder {
 public:
  explicit KernelBuilder(std::string op) { def_.op = std::move(op); }
  KernelBuilder& Device(const std::string& type) {
    def_.device_type = type;
    return *this;
  }
  KernelBuilder& TypeConstraint(const std::string& attr, DataType dt) {
    def_.type_constraints.emplace_back(attr, dt);
    return *this;
  }
  template <typename T>
  KernelBuilder& TypeConstraint(const std::string& attr) {
    return TypeConstraint(attr, DataTypeToEnum<T>::value);
  }
  const KernelDef& def() const { return def_; }

 private:
  KernelDef def_;
};

void RegisterKernel(const KernelDef& def, KernelFactory factory);

// The kernel for a node on a device: NotFound naming the op, the device type
// and the node's type attrs if none is registered; the constructor's error
// (naming the node) if it fails.
absl::StatusOr<std::unique_ptr<OpKernel>> CreateOpKernel(DeviceBase* device,
                                                         const ::tensorflow::NodeDef& def,
                                                         const OpDef& op,
                                                         const std::vector<DataType>& input_types,
                                                         const std::vector<DataType>& output_types);

// True if some kernel of `device_type` matches the node (used by placement).
bool HasKernel(const std::string& device_type, const ::tensorflow::NodeDef& def);

// Every registered (op, device type) pair's kernel defs, for tests and tools.
std::vector<KernelDef> RegisteredKernels();

namespace kernel_registration {
struct Registrar {
  Registrar(const KernelBuilder& b, KernelFactory f) { RegisterKernel(b.def(), std::move(f)); }
};
}  // namespace kernel_registration

#define STRATA_REGISTER_KERNEL(builder, ...) \
  STRATA_REGISTER_KERNEL_UNIQ_(__COUNTER__, builder, __VA_ARGS__)
#define STRATA_REGISTER_KERNEL_UNIQ_(ctr, builder, ...) \
  STRATA_REGISTER_KERNEL_UNIQ2_(ctr, builder, __VA_ARGS__)
#define STRATA_REGISTER_KERNEL_UNIQ2_(ctr, builder, ...)                                  \
  static ::strata::kernel_registration::Registrar strata_kernel_registrar_##ctr          \
      __attribute__((unused)) = ::strata::kernel_registration::Registrar(                 \
          builder, [](::strata::OpKernelConstruction& c) -> std::unique_ptr<::strata::OpKernel> { \
            return std::make_unique<__VA_ARGS__>(c);                                      \
          })

}  // namespace strata

#endif  // STRATA_KERNELS_KERNEL_REGISTRY_H_
