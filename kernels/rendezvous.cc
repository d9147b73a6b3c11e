#include "kernels/rendezvous.h"

#include "absl/strings/str_cat.h"

namespace strata {

std::string Rendezvous::CreateKey(const std::string& src_device, uint64_t src_incarnation,
                                  const std::string& dst_device, const std::string& tensor_name) {
  return absl::StrCat(src_device, ";", absl::Hex(src_incarnation), ";", dst_device, ";",
                      tensor_name);
}

}  // namespace strata
