// Device names in TensorFlow's grammar, parsed and formatted. A full name says
// where a device is and what it is:
//   /job:worker/replica:0/task:1/device:CPU:0
// Users and graphs often write a partial specification that several devices
// may match: "/cpu:0", "/gpu:1" (legacy forms), "/device:GPU:1",
// "/job:worker/task:1", "/device:CPU:*", or "" (anything).
//
//   absl::StatusOr<DeviceName> spec = DeviceName::Parse("/gpu:1");
//   spec->type;                                   // "GPU", spec->has_id, spec->id == 1
//   DeviceName full = DeviceName::Full("localhost", 0, 0, "CPU", 0);
//   full.ToString();                              // "/job:localhost/replica:0/task:0/device:CPU:0"
//   spec->Matches(full);                          // false: the type differs
//
// Device types are upper-cased ("cpu" and "CPU" are one type). Value type;
// no shared state.
#ifndef STRATA_RUNTIME_DEVICE_NAME_H_
#define STRATA_RUNTIME_DEVICE_NAME_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata {

struct DeviceName {
  bool has_job = false;
  std::string job;
  bool has_replica = false;
  int replica = 0;
  bool has_task = false;
  int task = 0;
  bool has_type = false;
  std::string type;  // "CPU", "GPU", ...
  bool has_id = false;  // false also for the wildcard "*"
  int id = 0;

  // Parses a full or partial name. Components may come in any order, each at
  // most once. InvalidArgument quoting the string and saying what is wrong.
  static absl::StatusOr<DeviceName> Parse(absl::string_view s);
  static DeviceName Full(std::string job, int replica, int task, std::string type, int id);

  // Every component is specified.
  bool IsFullySpecified() const { return has_job && has_replica && has_task && has_type && has_id; }
  // True if every component specified here equals `other`'s (unspecified ones
  // match anything; a component that `other` leaves unspecified does not
  // match a specified one).
  bool Matches(const DeviceName& other) const;
  // Fills this name's unspecified components from `defaults`.
  void MergeFrom(const DeviceName& defaults);

  // The canonical form: "/job:j/replica:r/task:t/device:TYPE:id", leaving out
  // unspecified components ("/device:GPU:*" for a type with a wildcard id).
  std::string ToString() const;

  bool operator==(const DeviceName& o) const;
  bool operator!=(const DeviceName& o) const { return !(*this == o); }
};

}  // namespace strata

#endif  // STRATA_RUNTIME_DEVICE_NAME_H_
