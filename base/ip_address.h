// What kind of host a "host" string names, without resolving it.
//
//   IsIpAddress("10.0.0.2") == true; IsIpAddress("::1") == true;
//   IsIpAddress("node7.example") == false;
//   IsUnspecifiedAddress("0.0.0.0") == true  // also "::"
//
// Thread-safety: reentrant.
#ifndef STRATA_BASE_IP_ADDRESS_H_
#define STRATA_BASE_IP_ADDRESS_H_

#include <string>

namespace strata {

// An IPv4 or IPv6 literal (IPv6 without brackets).
bool IsIpAddress(const std::string& host);
// 0.0.0.0 or :: in any spelling: "every interface" to a listener.
bool IsUnspecifiedAddress(const std::string& host);

}  // namespace strata

#endif  // STRATA_BASE_IP_ADDRESS_H_
