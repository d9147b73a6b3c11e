// What kind of host a "host" string names, without resolving it.
//
//   IsIpAddress("10.0.0.2") == true; IsIpAddress("::1") == true;
//   IsIpAddress("node7.example") == false;
//   IsUnspecifiedAddress("0.0.0.0") == true  // also "::"
//   LocalAddressToward("10.0.0.1", 2222)  -> "10.0.0.7" (this host's address
//                                           on the route there; no packet sent)
//
// Thread-safety: reentrant.
#ifndef STRATA_BASE_IP_ADDRESS_H_
#define STRATA_BASE_IP_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"

namespace strata {

// An IPv4 or IPv6 literal (IPv6 without brackets).
bool IsIpAddress(const std::string& host);
// 0.0.0.0 or :: in any spelling: "every interface" to a listener.
bool IsUnspecifiedAddress(const std::string& host);
// The local IP address a connection to host:port would leave from (a UDP
// socket connected there, no packet sent): the address peers on that side
// reach this host at. "127.0.0.1" toward loopback. Unavailable naming the
// host when it does not resolve or has no route.
absl::StatusOr<std::string> LocalAddressToward(const std::string& host, int port);

}  // namespace strata

#endif  // STRATA_BASE_IP_ADDRESS_H_
