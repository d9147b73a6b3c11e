#include "strategy/cluster_resolver.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "runtime/device_name.h"

namespace strata {
namespace {

bool IsKnownJob(absl::string_view job) {
  return job == kChiefJob || job == kWorkerJob || job == kPsJob || job == kEvaluatorJob;
}

// Decimal digits only: TensorFlow int()s a sparse job's keys and the task
// index, which would also take " 1" or "+1"; we keep to what a person writes.
absl::StatusOr<int> ParseIndex(absl::string_view s, absl::string_view field) {
  int value = 0;
  bool digits = !s.empty() && s.size() <= 9;
  for (char c : s) digits = digits && absl::ascii_isdigit(static_cast<unsigned char>(c));
  if (!digits || !absl::SimpleAtoi(s, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": task index \"", s, "\" is not a non-negative integer"));
  }
  return value;
}

// Splits "host:port" ("[v6]:port" for IPv6) and checks both halves. Returns
// the port.
absl::StatusOr<int> CheckAddress(absl::string_view address, absl::string_view field) {
  absl::string_view host, port;
  if (!address.empty() && address[0] == '[') {
    size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": address \"", address, "\" is not \"[ipv6]:port\" (missing ']' or ':port')"));
    }
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": address \"", address, "\" has no port (expected \"host:port\")"));
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.find(':') != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": address \"", address,
                       "\" has more than one ':' (write IPv6 as \"[addr]:port\")"));
    }
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": address \"", address, "\" is missing the host"));
  }
  for (char c : host) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == '/') {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": address \"", address, "\" has a bad host \"", host, "\""));
    }
  }
  // The unspecified address means "every interface" to a listener and
  // nothing a peer can dial (Linux quietly takes it as this machine): each
  // task is reached at the address the cluster lists for it.
  if (host == "0.0.0.0" || host == "::" || host == "0:0:0:0:0:0:0:0") {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": address \"", address,
        "\" is the unspecified address (listen on every interface), which other tasks cannot "
        "dial; give the task's own host name or IP address"));
  }
  int port_value = 0;
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port) digits = digits && absl::ascii_isdigit(static_cast<unsigned char>(c));
  if (!digits || !absl::SimpleAtoi(port, &port_value) || port_value < 1 || port_value > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": address \"", address, "\" has a bad port \"", port, "\" (expected 1..65535)"));
  }
  return port_value;
}

std::string TaskField(absl::string_view prefix, absl::string_view job, int index) {
  return absl::StrCat(prefix, ".", job, "[", index, "]");
}

}  // namespace

absl::StatusOr<ClusterSpec::JobMap> ParseClusterJson(const JsonValue& cluster,
                                                     absl::string_view field) {
  if (!cluster.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(field,
                                                   ": expected an object of job -> addresses, got ",
                                                   JsonValue::KindName(cluster.kind())));
  }
  ClusterSpec::JobMap jobs;
  for (const auto& [job, tasks] : cluster.members()) {
    std::string job_field = absl::StrCat(field, ".", job);
    std::map<int, std::string>& out = jobs[job];
    if (tasks.is_array()) {
      for (size_t i = 0; i < tasks.items().size(); ++i) {
        const JsonValue& a = tasks.items()[i];
        if (!a.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat(job_field, "[", i,
                                                         "]: expected a \"host:port\" string, got ",
                                                         JsonValue::KindName(a.kind())));
        }
        out[static_cast<int>(i)] = a.string();
      }
    } else if (tasks.is_object()) {
      // Sparse job: {"1": "host:port", "3": "host:port"}, as TensorFlow takes it.
      for (const auto& [key, a] : tasks.members()) {
        absl::StatusOr<int> index = ParseIndex(key, job_field);
        if (!index.ok()) return index.status();
        if (!a.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat(job_field, "[", *index,
                                                         "]: expected a \"host:port\" string, got ",
                                                         JsonValue::KindName(a.kind())));
        }
        if (!out.emplace(*index, a.string()).second) {
          return absl::InvalidArgumentError(
              absl::StrCat(job_field, ": task index ", *index, " appears twice"));
        }
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          job_field,
          ": the tasks of a job must be a list of \"host:port\" or an object of index -> "
          "\"host:port\", got ",
          JsonValue::KindName(tasks.kind())));
    }
  }
  return jobs;
}

absl::StatusOr<ClusterSpec> ClusterSpec::Create(JobMap jobs, TaskId task, std::string rpc_layer,
                                                absl::string_view field_prefix) {
  // An empty job adds nothing (tf.train.ClusterSpec keeps it, with no tasks);
  // drop it so that an all-empty cluster reads as empty.
  for (auto it = jobs.begin(); it != jobs.end();) {
    it = it->second.empty() ? jobs.erase(it) : std::next(it);
  }
  if (jobs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_prefix, ": the cluster is empty (no job has a task)"));
  }
  absl::flat_hash_map<std::string, std::string> owner;  // address -> "job[i]"
  for (const auto& [job, tasks] : jobs) {
    if (!IsKnownJob(job)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field_prefix, ".", job, ": unknown job \"", job,
                       "\" (expected chief, worker, ps or evaluator)"));
    }
    if ((job == kChiefJob || job == kEvaluatorJob) && tasks.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(field_prefix, ".", job,
                                                     ": there must be at most one ", job,
                                                     " task, got ", tasks.size()));
    }
    for (const auto& [index, address] : tasks) {
      std::string field = TaskField(field_prefix, job, index);
      absl::Status s = CheckAddress(address, field).status();
      if (!s.ok()) return s;
      auto [it, inserted] = owner.emplace(address, absl::StrCat(job, "[", index, "]"));
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": address \"", address, "\" is also the address of ", it->second));
      }
    }
  }

  ClusterSpec spec;
  spec.jobs_ = std::move(jobs);
  spec.rpc_layer_ = rpc_layer.empty() ? "grpc" : std::move(rpc_layer);
  if (spec.has_job(kChiefJob)) {
    spec.chief_ = TaskId{kChiefJob, spec.jobs_.at(kChiefJob).begin()->first};
  } else if (spec.has_job(kWorkerJob) && spec.jobs_.at(kWorkerJob).count(0)) {
    spec.chief_ = TaskId{kWorkerJob, 0};
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        field_prefix, ": no chief (the cluster has no chief job and no worker task 0)"));
  }

  if (task.type.empty()) {
    return absl::InvalidArgumentError("task type is missing (chief, worker, ps or evaluator)");
  }
  if (!IsKnownJob(task.type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task type \"", task.type, "\" is unknown (expected chief, worker, ps or evaluator)"));
  }
  if (task.index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("task index ", task.index, " must be non-negative"));
  }
  auto job = spec.jobs_.find(task.type);
  if (job == spec.jobs_.end()) {
    // TensorFlow lets an evaluator run outside the cluster it evaluates.
    if (task.type != kEvaluatorJob) {
      return absl::InvalidArgumentError(
          absl::StrCat("task ", TaskPrefix(task), ": job \"", task.type, "\" is not in ",
                       field_prefix, " (jobs: ", absl::StrJoin(spec.job_names(), ", "), ")"));
    }
  } else {
    auto t = job->second.find(task.index);
    if (t == job->second.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task ", TaskPrefix(task), ": index ", task.index, " is out of range: ", field_prefix,
          ".", task.type, " has tasks ",
          absl::StrJoin(job->second, ", ",
                        [](std::string* out, const auto& kv) { absl::StrAppend(out, kv.first); })));
    }
    spec.task_address_ = t->second;
  }
  spec.task_ = std::move(task);
  return spec;
}

absl::StatusOr<ClusterSpec> ClusterSpec::CreateRendezvous(int num_workers, int rank,
                                                          const std::string& chief_address,
                                                          absl::string_view source) {
  if (num_workers < 1 || num_workers > kMaxRendezvousWorkers) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the cluster size ", num_workers,
                                                   " is not in [1, ", kMaxRendezvousWorkers, "]"));
  }
  if (rank < 0 || rank >= num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": rank ", rank, " is out of range for a cluster of ", num_workers,
                     " tasks (expected 0..", num_workers - 1, ")"));
  }
  STRATA_RETURN_IF_ERROR(
      CheckAddress(chief_address, absl::StrCat(source, ": the chief (rank 0)")).status());
  ClusterSpec spec;
  std::map<int, std::string>& workers = spec.jobs_[kWorkerJob];
  workers[0] = chief_address;
  for (int i = 1; i < num_workers; ++i) workers[i] = "";
  spec.rpc_layer_ = "grpc";
  spec.chief_ = TaskId{kWorkerJob, 0};
  spec.task_ = TaskId{kWorkerJob, rank};
  spec.task_address_ = workers[rank];
  spec.rendezvous_ = true;
  return spec;
}

std::vector<std::string> ClusterSpec::job_names() const {
  std::vector<std::string> names;
  for (const auto& [job, tasks] : jobs_) names.push_back(job);
  return names;
}

int ClusterSpec::num_tasks(absl::string_view job) const {
  auto it = jobs_.find(std::string(job));
  return it == jobs_.end() ? 0 : static_cast<int>(it->second.size());
}

absl::StatusOr<std::string> ClusterSpec::address(absl::string_view job, int index) const {
  auto it = jobs_.find(std::string(job));
  if (it != jobs_.end()) {
    auto t = it->second.find(index);
    if (t != it->second.end()) return t->second;
  }
  return absl::NotFoundError(
      absl::StrCat("no task ", TaskPrefix(TaskId{std::string(job), index}), " in the cluster"));
}

int ClusterSpec::num_workers() const {
  if (task_.type == kEvaluatorJob) return 1;
  return num_tasks(kChiefJob) + num_tasks(kWorkerJob);
}

int ClusterSpec::worker_id() const {
  if (task_.type == kChiefJob) return 0;
  if (task_.type == kWorkerJob) return task_.index + (has_job(kChiefJob) ? 1 : 0);
  return -1;
}

std::string ClusterSpec::TaskPrefix() const { return TaskPrefix(task_); }

std::string ClusterSpec::TaskPrefix(const TaskId& task) {
  return absl::StrCat("/job:", task.type, "/replica:0/task:", task.index);
}

std::string ClusterSpec::DeviceName(absl::string_view device_type, int device_id) const {
  return DeviceName(task_, device_type, device_id);
}

std::string ClusterSpec::DeviceName(const TaskId& task, absl::string_view device_type,
                                    int device_id) {
  return strata::DeviceName::Full(task.type, 0, task.index, absl::AsciiStrToUpper(device_type),
                                  device_id)
      .ToString();
}

tensorflow::ClusterDef ClusterSpec::ToClusterDef() const {
  tensorflow::ClusterDef def;
  for (const auto& [job, tasks] : jobs_) {  // std::map: sorted by name
    tensorflow::JobDef* j = def.add_job();
    j->set_name(job);
    for (const auto& [index, address] : tasks) (*j->mutable_tasks())[index] = address;
  }
  return def;
}

tensorflow::ServerDef ClusterSpec::ToServerDef() const {
  tensorflow::ServerDef def;
  *def.mutable_cluster() = ToClusterDef();
  def.set_job_name(task_.type);
  def.set_task_index(task_.index);
  def.set_replica(0);
  def.set_protocol(rpc_layer_);
  if (!task_address_.empty()) {
    // Create checked the address; its port parses.
    def.set_port(*CheckAddress(task_address_, "task"));
  }
  return def;
}

absl::StatusOr<ClusterSpec> ClusterSpecFromTfConfig(absl::string_view tf_config) {
  absl::StatusOr<JsonValue> root = ParseJson(tf_config);
  if (!root.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", root.status().message()));
  }
  if (!root->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: expected a JSON object, got ", JsonValue::KindName(root->kind())));
  }
  const JsonValue* cluster = root->Find("cluster");
  if (cluster == nullptr || cluster->is_null()) {
    return absl::InvalidArgumentError("TF_CONFIG.cluster: missing (the cluster is empty)");
  }
  absl::StatusOr<ClusterSpec::JobMap> jobs = ParseClusterJson(*cluster, "TF_CONFIG.cluster");
  if (!jobs.ok()) return jobs.status();

  const JsonValue* task = root->Find("task");
  if (task == nullptr || !task->is_object()) {
    return absl::InvalidArgumentError(
        "TF_CONFIG.task: missing or not an object (expected {\"type\": ..., \"index\": ...})");
  }
  TaskId id;
  const JsonValue* type = task->Find("type");
  if (type == nullptr || !type->is_string()) {
    return absl::InvalidArgumentError("TF_CONFIG.task.type: missing or not a string");
  }
  id.type = type->string();
  const JsonValue* index = task->Find("index");
  if (index == nullptr) {
    return absl::InvalidArgumentError("TF_CONFIG.task.index: missing");
  }
  if (index->is_string()) {
    // TensorFlow int()s the index, so "1" works there too.
    absl::StatusOr<int> i = ParseIndex(index->string(), "TF_CONFIG.task.index");
    if (!i.ok()) return i.status();
    id.index = *i;
  } else if (index->is_number() && index->number() == std::floor(index->number()) &&
             std::fabs(index->number()) < 1e9 &&
             !(index->number() == 0 && std::signbit(index->number()))) {
    // 1 and 1.0 (TensorFlow's int(1.0) is 1); Create rejects negatives.
    id.index = static_cast<int>(index->number());
  } else {
    return absl::InvalidArgumentError("TF_CONFIG.task.index: expected a non-negative integer");
  }

  std::string rpc_layer;
  const JsonValue* rpc = root->Find("rpc_layer");
  if (rpc != nullptr && !rpc->is_null()) {
    if (!rpc->is_string()) {
      return absl::InvalidArgumentError("TF_CONFIG.rpc_layer: expected a string such as \"grpc\"");
    }
    rpc_layer = rpc->string();
  }
  return ClusterSpec::Create(*std::move(jobs), std::move(id), std::move(rpc_layer),
                             "TF_CONFIG.cluster");
}

absl::StatusOr<ClusterSpec> ClusterSpecFromEnvironment() {
  const char* tf_config = std::getenv("TF_CONFIG");
  if (tf_config == nullptr || *tf_config == '\0') {
    return absl::InvalidArgumentError(
        "TF_CONFIG is not set: multi-worker training needs the cluster (see docs/cluster.md)");
  }
  return ClusterSpecFromTfConfig(tf_config);
}

absl::StatusOr<ClusterSpec> ClusterSpecFromFlags(absl::string_view cluster_spec,
                                                 absl::string_view task_type,
                                                 absl::string_view task_index) {
  absl::StatusOr<JsonValue> root = ParseJson(cluster_spec);
  if (!root.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--cluster_spec: ", root.status().message()));
  }
  absl::StatusOr<ClusterSpec::JobMap> jobs = ParseClusterJson(*root, "--cluster_spec");
  if (!jobs.ok()) return jobs.status();
  if (task_type.empty()) {
    return absl::InvalidArgumentError("--task_type: missing (chief, worker, ps or evaluator)");
  }
  absl::StatusOr<int> index = ParseIndex(task_index, "--task_index");
  if (!index.ok()) return index.status();
  return ClusterSpec::Create(*std::move(jobs), TaskId{std::string(task_type), *index}, "grpc",
                             "--cluster_spec");
}

}  // namespace strata
