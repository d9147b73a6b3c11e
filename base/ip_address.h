// What kind of host a "host" string names, without resolving it.
//
//   IsIpAddress("10.0.0.2") == true; IsIpAddress("::1") == true;
//   IsIpAddress("node7.example") == false;
//   IsUnspecifiedAddress("0.0.0.0") == true  // also "::"
//   LocalAddressToward("10.0.0.1", 2222)  -> "10.0.0.7" (this host's address
//                                           on the route there; no packet sent)
//   PickFreePorts("127.0.0.1", 3)         -> three distinct free ports
//
// Thread-safety: reentrant.
#ifndef STRATA_BASE_IP_ADDRESS_H_
#define STRATA_BASE_IP_ADDRESS_H_

#include <string>
#include <vector>

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
// `n` distinct TCP ports of `host` (an IP literal) that were free a moment
// ago: n sockets bound to port 0 at once (so the kernel picks distinct
// ports; a port closed at once could be handed out twice), then closed. A
// process may take one before its user binds it. InvalidArgument for a host
// that is not an IP literal; Unavailable naming the host when it cannot be
// bound there (not an address of this machine).
absl::StatusOr<std::vector<int>> PickFreePorts(const std::string& host, int n);

}  // namespace strata

#endif  // STRATA_BASE_IP_ADDRESS_H_
