#include "base/ip_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

absl::StatusOr<std::string> LocalAddressToward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const std::string service = absl::StrCat(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("host \"", host, "\" does not resolve: ", gai_strerror(rc)));
  }
  absl::StatusOr<std::string> out =
      absl::UnavailableError(absl::StrCat("no route to host \"", host, "\""));
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    char text[INET6_ADDRSTRLEN] = {};
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* addr =
          local.ss_family == AF_INET6
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
      if (inet_ntop(local.ss_family, addr, text, sizeof(text)) != nullptr) {
        out = std::string(text);
        close(fd);
        break;
      }
    }
    close(fd);
  }
  freeaddrinfo(res);
  return out;
}

absl::StatusOr<std::vector<int>> PickFreePorts(const std::string& host, int n) {
  sockaddr_storage addr = {};
  socklen_t len = 0;
  auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, host.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    len = sizeof(*a4);
  } else if (inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    len = sizeof(*a6);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("\"", host, "\" is not a numeric IP address"));
  }
  // All sockets stay bound until every port is known, so the ports differ.
  std::vector<int> fds;
  std::vector<int> ports;
  absl::Status status;
  for (int i = 0; i < n && status.ok(); ++i) {
    const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      status = absl::ResourceExhaustedError(absl::StrCat("socket: ", std::strerror(errno)));
      break;
    }
    fds.push_back(fd);
    sockaddr_storage bound = addr;
    socklen_t bound_len = len;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
      status = absl::UnavailableError(absl::StrCat("cannot bind a port on ", host, ": ",
                                                   std::strerror(errno),
                                                   " (is --host an address of this machine?)"));
      break;
    }
    ports.push_back(ntohs(addr.ss_family == AF_INET
                              ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                              : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port));
  }
  for (int fd : fds) close(fd);
  if (!status.ok()) return status;
  return ports;
}

}  // namespace strata
