#include "base/ip_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

namespace strata {

bool IsIpAddress(const std::string& host) {
  in_addr a4;
  in6_addr a6;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

bool IsUnspecifiedAddress(const std::string& host) {
  in_addr a4{};
  in6_addr a6{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return a4.s_addr == INADDR_ANY;
  return inet_pton(AF_INET6, host.c_str(), &a6) == 1 && IN6_IS_ADDR_UNSPECIFIED(&a6);
}

}  // namespace strata
