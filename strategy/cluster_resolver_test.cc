#include "strategy/cluster_resolver.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/unknown_field_set.h"
#include "gtest/gtest.h"
#include "proto/cluster.pb.h"

// Expectations marked "TF:" are what TensorFlow 2's
// tf.distribute.cluster_resolver.TFConfigClusterResolver and
// multi_worker_util (is_chief, worker_count, id_in_cluster,
// _validate_cluster_spec) answered for the same TF_CONFIG; TensorFlow is not
// needed to run this test.

namespace strata {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Map fields serialize in hash order unless asked to be deterministic.
std::string Bytes(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

ClusterSpec MustParse(const std::string& tf_config) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpecFromTfConfig(tf_config);
  EXPECT_TRUE(spec.ok()) << tf_config << ": " << spec.status();
  return *std::move(spec);
}

void ExpectInvalid(const std::string& tf_config, const std::string& what) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpecFromTfConfig(tf_config);
  ASSERT_FALSE(spec.ok()) << tf_config;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(what)) << tf_config;
}

TEST(ClusterResolverTest, WorkersOnly) {
  ClusterSpec spec = MustParse(
      R"({"cluster": {"worker": ["w0:2222", "w1:2222"]}, "task": {"type": "worker", "index": 1}})");
  // TF: task_type worker, task_id 1, master() "w1:2222", rpc_layer None.
  EXPECT_EQ(spec.task_type(), "worker");
  EXPECT_EQ(spec.task_index(), 1);
  EXPECT_EQ(spec.task_address(), "w1:2222");
  EXPECT_EQ(spec.rpc_layer(), "grpc");
  EXPECT_THAT(spec.job_names(), ElementsAre("worker"));
  EXPECT_EQ(spec.num_tasks("worker"), 2);
  EXPECT_EQ(spec.num_tasks("ps"), 0);
  // TF: is_chief(worker 0) True, is_chief(worker 1) False, worker_count 2.
  EXPECT_EQ(spec.chief(), (TaskId{"worker", 0}));
  EXPECT_FALSE(spec.is_chief());
  EXPECT_EQ(spec.num_workers(), 2);
  EXPECT_EQ(spec.worker_id(), 1);
  EXPECT_EQ(spec.DeviceName("CPU", 0), "/job:worker/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(spec.DeviceName("gpu", 2), "/job:worker/replica:0/task:1/device:GPU:2");
  EXPECT_EQ(spec.TaskPrefix(), "/job:worker/replica:0/task:1");
  EXPECT_EQ(*spec.address("worker", 0), "w0:2222");
  EXPECT_EQ(spec.address("worker", 2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(spec.address("ps", 0).status().message()),
              HasSubstr("/job:ps/replica:0/task:0"));

  ClusterSpec w0 = MustParse(
      R"({"cluster": {"worker": ["w0:2222", "w1:2222"]}, "task": {"type": "worker", "index": 0}})");
  EXPECT_TRUE(w0.is_chief());
  EXPECT_EQ(w0.worker_id(), 0);
}

TEST(ClusterResolverTest, ChiefWorkersAndPs) {
  const std::string cluster =
      R"("cluster": {"chief": ["c:1"], "worker": ["w0:2", "w1:3"], "ps": ["p:4"]})";
  ClusterSpec ps = MustParse("{" + cluster + R"(, "task": {"type": "ps", "index": 0}})");
  // TF: master() "p:4"; worker_count(chief) 2 for {chief:1, worker:1}, here 3.
  EXPECT_EQ(ps.task_address(), "p:4");
  EXPECT_EQ(ps.chief(), (TaskId{"chief", 0}));
  EXPECT_FALSE(ps.is_chief());
  EXPECT_EQ(ps.num_workers(), 3);
  EXPECT_EQ(ps.worker_id(), -1);

  ClusterSpec chief = MustParse("{" + cluster + R"(, "task": {"type": "chief", "index": 0}})");
  // TF: is_chief(chief 0) True, id_in_cluster(chief 0) 0, (worker 0) 1.
  EXPECT_TRUE(chief.is_chief());
  EXPECT_EQ(chief.worker_id(), 0);
  ClusterSpec w0 = MustParse("{" + cluster + R"(, "task": {"type": "worker", "index": 0}})");
  EXPECT_FALSE(w0.is_chief());
  EXPECT_EQ(w0.worker_id(), 1);
  EXPECT_EQ(w0.DeviceName("CPU", 0), "/job:worker/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(ClusterSpec::DeviceName(TaskId{"chief", 0}, "CPU", 1),
            "/job:chief/replica:0/task:0/device:CPU:1");
}

TEST(ClusterResolverTest, ClusterDefMatchesTensorFlow) {
  ClusterSpec spec = MustParse(
      R"({"cluster": {"worker": ["a:1", "b:2"], "chief": ["c:1"]},
          "task": {"type": "chief", "index": 0}})");
  // TF: tf.train.ClusterSpec({"worker": ["a:1","b:2"], "chief": ["c:1"]})
  // .as_cluster_def() lists job chief {0: "c:1"} then worker {0: "a:1", 1: "b:2"}.
  tensorflow::ClusterDef def = spec.ToClusterDef();
  ASSERT_EQ(def.job_size(), 2);
  EXPECT_EQ(def.job(0).name(), "chief");
  EXPECT_EQ(def.job(0).tasks().at(0), "c:1");
  EXPECT_EQ(def.job(1).name(), "worker");
  ASSERT_EQ(def.job(1).tasks_size(), 2);
  EXPECT_EQ(def.job(1).tasks().at(0), "a:1");
  EXPECT_EQ(def.job(1).tasks().at(1), "b:2");

  tensorflow::ServerDef server = spec.ToServerDef();
  EXPECT_EQ(server.job_name(), "chief");
  EXPECT_EQ(server.task_index(), 0);
  EXPECT_EQ(server.replica(), 0);
  EXPECT_EQ(server.protocol(), "grpc");
  EXPECT_EQ(server.port(), 1);
  EXPECT_EQ(Bytes(server.cluster()), Bytes(def));

  // Field numbers as TensorFlow's: ServerDef.cluster 1, job_name 2,
  // task_index 3, protocol 5, port 6, replica 8; ClusterDef.job 1; JobDef
  // name 1, tasks 2 (map<int32, string>).
  const auto* d = tensorflow::ServerDef::descriptor();
  EXPECT_EQ(d->FindFieldByName("cluster")->number(), 1);
  EXPECT_EQ(d->FindFieldByName("job_name")->number(), 2);
  EXPECT_EQ(d->FindFieldByName("task_index")->number(), 3);
  EXPECT_EQ(d->FindFieldByName("protocol")->number(), 5);
  EXPECT_EQ(d->FindFieldByName("port")->number(), 6);
  EXPECT_EQ(d->FindFieldByName("replica")->number(), 8);
  EXPECT_EQ(tensorflow::ClusterDef::descriptor()->FindFieldByName("job")->number(), 1);
  EXPECT_EQ(tensorflow::JobDef::descriptor()->FindFieldByName("name")->number(), 1);
  EXPECT_EQ(tensorflow::JobDef::descriptor()->FindFieldByName("tasks")->number(), 2);
  // The bytes TensorFlow writes for JobDef{name: "w", tasks {1: "a:1"}}.
  tensorflow::JobDef job;
  job.set_name("w");
  (*job.mutable_tasks())[1] = "a:1";
  EXPECT_EQ(job.SerializeAsString(), std::string("\x0a\x01w\x12\x07\x08\x01\x12\x03"
                                                 "a:1",
                                                 12));
}

TEST(ClusterResolverTest, ParsesTensorFlowServerDefBytes) {
  // TF: ServerDef(job_name="worker", task_index=1, protocol="grpc", port=3,
  // cluster worker {0: "w0:2", 1: "w1:3"},
  // default_session_config {intra_op_parallelism_threads: 2}).SerializeToString().
  const std::string tf_bytes(
      "\n\x1e\n\x1c\n\x06worker\x12\x08\x08\x01\x12\x04w1:3\x12\x08\x08\x00\x12\x04w0:2"
      "\x12\x06worker\x18\x01\"\x02\x10\x02*\x04grpc0\x03",
      54);
  tensorflow::ServerDef def;
  ASSERT_TRUE(def.ParseFromString(tf_bytes));
  EXPECT_EQ(def.job_name(), "worker");
  EXPECT_EQ(def.task_index(), 1);
  EXPECT_EQ(def.protocol(), "grpc");
  EXPECT_EQ(def.port(), 3);
  ASSERT_EQ(def.cluster().job_size(), 1);
  EXPECT_EQ(def.cluster().job(0).tasks().at(0), "w0:2");
  EXPECT_EQ(def.cluster().job(0).tasks().at(1), "w1:3");
  // default_session_config (field 4) is kept as an unknown field.
  EXPECT_THAT(def.SerializeAsString(), HasSubstr(std::string("\"\x02\x10\x02", 4)));

  ClusterSpec spec = MustParse(
      R"({"cluster": {"worker": ["w0:2", "w1:3"]}, "task": {"type": "worker", "index": 1}})");
  tensorflow::ServerDef ours = spec.ToServerDef();
  def.GetReflection()->MutableUnknownFields(&def)->Clear();
  EXPECT_EQ(Bytes(ours), Bytes(def));
}

TEST(ClusterResolverTest, SparseJobsAsDict) {
  ClusterSpec spec = MustParse(
      R"({"cluster": {"worker": {"0": "w0:2", "2": "w2:2"}, "ps": {"1": "p1:2", "3": "p3:2"}},
          "task": {"type": "ps", "index": 3}})");
  // TF: cluster_spec().as_dict() {"worker": {0: ..., 2: ...}, ...}; master() "p3:2".
  EXPECT_THAT(spec.jobs().at("ps"), ElementsAre(Pair(1, "p1:2"), Pair(3, "p3:2")));
  EXPECT_EQ(spec.task_address(), "p3:2");
  EXPECT_EQ(spec.num_tasks("ps"), 2);
  EXPECT_EQ(spec.num_workers(), 2);
  EXPECT_EQ(spec.chief(), (TaskId{"worker", 0}));
  tensorflow::ClusterDef def = spec.ToClusterDef();
  EXPECT_EQ(def.job(0).name(), "ps");
  EXPECT_EQ(def.job(0).tasks().at(3), "p3:2");
  EXPECT_EQ(def.job(0).tasks().count(0), 0u);

  // TF: an index the sparse job lacks is out of range.
  ExpectInvalid(R"({"cluster": {"worker": {"0": "w0:2", "2": "w2:2"}},
                    "task": {"type": "worker", "index": 1}})",
                "index 1 is out of range: TF_CONFIG.cluster.worker has tasks 0, 2");
  // TF: int("a") fails.
  ExpectInvalid(R"({"cluster": {"worker": {"a": "w0:2"}}, "task": {"type": "worker", "index": 0}})",
                "TF_CONFIG.cluster.worker: task index \"a\" is not a non-negative integer");
  // TF: "must be a list or a dictionary from integers to strings".
  ExpectInvalid(R"({"cluster": {"worker": "w0:2"}, "task": {"type": "worker", "index": 0}})",
                "TF_CONFIG.cluster.worker: the tasks of a job must be a list");
  ExpectInvalid(R"({"cluster": {"worker": ["w0:2", 7]}, "task": {"type": "worker", "index": 0}})",
                "TF_CONFIG.cluster.worker[1]: expected a \"host:port\" string, got number");
}

TEST(ClusterResolverTest, Evaluator) {
  // TF: _validate_cluster_spec accepts an evaluator absent from the cluster;
  // worker_count(evaluator) is 1; master() fails (no such job).
  ClusterSpec outside = MustParse(
      R"({"cluster": {"chief": ["c:1"], "worker": ["w0:2"]}, "task": {"type": "evaluator", "index": 0}})");
  EXPECT_EQ(outside.task_address(), "");
  EXPECT_EQ(outside.num_workers(), 1);
  EXPECT_EQ(outside.worker_id(), -1);
  EXPECT_FALSE(outside.is_chief());
  EXPECT_EQ(outside.ToServerDef().port(), 0);

  ClusterSpec inside = MustParse(
      R"({"cluster": {"chief": ["c:1"], "worker": ["w0:2"], "evaluator": ["e:1"]},
          "task": {"type": "evaluator", "index": 0}})");
  EXPECT_EQ(inside.task_address(), "e:1");
  EXPECT_EQ(inside.num_workers(), 1);
  EXPECT_EQ(inside.DeviceName("CPU", 0), "/job:evaluator/replica:0/task:0/device:CPU:0");
  // TF: "There must be at most one 'evaluator' job."
  ExpectInvalid(R"({"cluster": {"worker": ["w:1"], "evaluator": ["e:1", "e:2"]},
                    "task": {"type": "evaluator", "index": 0}})",
                "TF_CONFIG.cluster.evaluator: there must be at most one evaluator task, got 2");
}

TEST(ClusterResolverTest, RpcLayerAndUnknownKeys) {
  // TF: rpc_layer "grpc+verbs"; unknown keys ("foo", "environment") ignored.
  ClusterSpec spec = MustParse(
      R"({"cluster": {"worker": ["w0:2"]}, "task": {"type": "worker", "index": 0},
          "rpc_layer": "grpc+verbs", "foo": 1, "environment": "cloud"})");
  EXPECT_EQ(spec.rpc_layer(), "grpc+verbs");
  EXPECT_EQ(spec.ToServerDef().protocol(), "grpc+verbs");
  // TF: rpc_layer null is the default.
  EXPECT_EQ(MustParse(R"({"cluster": {"worker": ["w0:2"]}, "task": {"type": "worker", "index": 0},
                          "rpc_layer": null})")
                .rpc_layer(),
            "grpc");
  ExpectInvalid(R"({"cluster": {"worker": ["w0:2"]}, "task": {"type": "worker", "index": 0},
                    "rpc_layer": 3})",
                "TF_CONFIG.rpc_layer: expected a string");
}

TEST(ClusterResolverTest, TaskIndexForms) {
  const std::string cluster = R"("cluster": {"worker": ["w0:2", "w1:2"]})";
  // TF: int("1") and int(1.0) are 1.
  EXPECT_EQ(
      MustParse("{" + cluster + R"(, "task": {"type": "worker", "index": "1"}})").task_index(), 1);
  EXPECT_EQ(
      MustParse("{" + cluster + R"(, "task": {"type": "worker", "index": 1.0}})").task_index(), 1);
  ExpectInvalid("{" + cluster + R"(, "task": {"type": "worker", "index": 1.5}})",
                "TF_CONFIG.task.index: expected a non-negative integer");
  ExpectInvalid("{" + cluster + R"(, "task": {"type": "worker", "index": -1}})",
                "task index -1 must be non-negative");
  // Issue 23: -0 is not silently task 0.
  ExpectInvalid("{" + cluster + R"(, "task": {"type": "worker", "index": -0}})",
                "TF_CONFIG.task.index: expected a non-negative integer");
  ExpectInvalid("{" + cluster + R"(, "task": {"type": "worker", "index": "-0"}})",
                "is not a non-negative integer");
  ExpectInvalid("{" + cluster + R"(, "task": {"type": "worker"}})",
                "TF_CONFIG.task.index: missing");
  ExpectInvalid("{" + cluster + R"(, "task": {"index": 0}})", "TF_CONFIG.task.type: missing");
  ExpectInvalid("{" + cluster + "}", "TF_CONFIG.task: missing");
}

TEST(ClusterResolverTest, BadJsonNamesPosition) {
  // TF (Python json): "Expecting property name enclosed in double quotes:
  // line 1 column 2 (char 1)".
  ExpectInvalid(
      "{bad json",
      "TF_CONFIG: JSON: expected '\"' starting an object key at line 1 column 2 (offset 1)");
  ExpectInvalid("[1]", "TF_CONFIG: expected a JSON object, got array");
}

TEST(ClusterResolverTest, UnknownTaskTypeAndJob) {
  // TF: "Unrecognized task_type: foo, valid task types are: ('chief', 'worker', 'evaluator', 'ps',
  // None)".
  ExpectInvalid(R"({"cluster": {"worker": ["w0:2"]}, "task": {"type": "foo", "index": 0}})",
                "task type \"foo\" is unknown");
  // TF: "Disallowed task type found in cluster spec."
  ExpectInvalid(
      R"({"cluster": {"worker": ["w0:2"], "trainer": ["t:1"]}, "task": {"type": "worker", "index": 0}})",
      "TF_CONFIG.cluster.trainer: unknown job \"trainer\"");
}

TEST(ClusterResolverTest, IndexOutOfRangeAndTaskNotInCluster) {
  // TF: "The `task_id` 5 exceeds the maximum id of worker."
  ExpectInvalid(R"({"cluster": {"worker": ["w0:2"]}, "task": {"type": "worker", "index": 5}})",
                "task /job:worker/replica:0/task:5: index 5 is out of range: "
                "TF_CONFIG.cluster.worker has tasks 0");
  // TF: "`task_type` 'chief' not found in cluster_spec."
  ExpectInvalid(R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "chief", "index": 0}})",
                "job \"chief\" is not in TF_CONFIG.cluster (jobs: worker)");
}

TEST(ClusterResolverTest, TwoChiefs) {
  // TF: "There must be at most one 'chief' job."
  ExpectInvalid(R"({"cluster": {"chief": ["c:1", "c2:1"]}, "task": {"type": "chief", "index": 0}})",
                "TF_CONFIG.cluster.chief: there must be at most one chief task, got 2");
}

TEST(ClusterResolverTest, EmptyCluster) {
  // TF: an empty TF_CONFIG gives an empty ClusterSpec; a strategy then has no
  // cluster. We fail at start-up instead.
  ExpectInvalid("{}", "TF_CONFIG.cluster: missing");
  ExpectInvalid(R"({"cluster": {}, "task": {"type": "worker", "index": 0}})",
                "TF_CONFIG.cluster: the cluster is empty");
  ExpectInvalid(R"({"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}})",
                "TF_CONFIG.cluster: the cluster is empty");
  ExpectInvalid(R"({"cluster": {"ps": ["p:1"]}, "task": {"type": "ps", "index": 0}})",
                "TF_CONFIG.cluster: no chief");
}

TEST(ClusterResolverTest, BadAddresses) {
  auto config = [](const std::string& addresses) {
    return R"({"cluster": {"worker": [)" + addresses +
           R"(]}, "task": {"type": "worker", "index": 0}})";
  };
  // TF accepts all of these (and fails only when connecting); we check them.
  ExpectInvalid(config(R"("w0:2", "w0:2")"),
                "TF_CONFIG.cluster.worker[1]: address \"w0:2\" is also the address of worker[0]");
  ExpectInvalid(config(R"("w0:abc")"),
                "TF_CONFIG.cluster.worker[0]: address \"w0:abc\" has a bad port \"abc\"");
  ExpectInvalid(config(R"("w0:0")"), "has a bad port \"0\" (expected 1..65535)");
  ExpectInvalid(config(R"("w0:65536")"), "has a bad port \"65536\"");
  ExpectInvalid(config(R"("w0:-1")"), "has a bad port \"-1\"");
  ExpectInvalid(config(R"("w0:")"), "has a bad port \"\"");
  ExpectInvalid(config(R"("w0")"), "address \"w0\" has no port");
  ExpectInvalid(config(R"(":2222")"),
                "TF_CONFIG.cluster.worker[0]: address \":2222\" is missing the host");
  ExpectInvalid(config(R"("a b:1")"), "has a bad host \"a b\"");
  ExpectInvalid(config(R"("::1:2")"), "write IPv6 as \"[addr]:port\"");
  ExpectInvalid(config(R"("[::1:2")"), "missing ']' or ':port'");
  // Issue 23: the unspecified address is not one a peer can dial.
  for (const char* any : {R"("0.0.0.0:2222")", R"("[::]:2222")"}) {
    ExpectInvalid(config(any), "is the unspecified address");
  }
  // Across jobs too.
  ExpectInvalid(
      R"({"cluster": {"chief": ["h:1"], "worker": ["h:1"]}, "task": {"type": "chief", "index": 0}})",
      "TF_CONFIG.cluster.worker[0]: address \"h:1\" is also the address of chief[0]");

  ClusterSpec ok = MustParse(config(R"("[::1]:65535", "10.0.0.1:1")"));
  EXPECT_EQ(ok.ToServerDef().port(), 65535);
}

TEST(ClusterResolverTest, FlagsGiveTheSameSpec) {
  const std::string cluster = R"({"chief": ["c:1"], "worker": ["w0:2", "w1:3"], "ps": ["p:4"]})";
  absl::StatusOr<ClusterSpec> flags = ClusterSpecFromFlags(cluster, "worker", "1");
  ASSERT_TRUE(flags.ok()) << flags.status();
  ClusterSpec env =
      MustParse(R"({"cluster": )" + cluster + R"(, "task": {"type": "worker", "index": 1}})");
  EXPECT_EQ(Bytes(flags->ToServerDef()), Bytes(env.ToServerDef()));
  EXPECT_EQ(flags->jobs(), env.jobs());
  EXPECT_EQ(flags->worker_id(), 2);
  EXPECT_EQ(flags->DeviceName("CPU", 0), "/job:worker/replica:0/task:1/device:CPU:0");

  auto invalid = [](absl::string_view c, absl::string_view type, absl::string_view index,
                    const std::string& what) {
    absl::StatusOr<ClusterSpec> s = ClusterSpecFromFlags(c, type, index);
    ASSERT_FALSE(s.ok()) << c << " " << type << " " << index;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(what));
  };
  invalid("{\"worker\": [\"w:1\",]}", "worker", "0",
          "--cluster_spec: JSON: unexpected character ']' at line 1 column 19 (offset 18)");
  invalid(cluster, "worker", "x", "--task_index: task index \"x\" is not a non-negative integer");
  invalid(cluster, "worker", "", "--task_index");
  invalid(cluster, "", "0", "--task_type: missing");
  invalid(cluster, "master", "0", "task type \"master\" is unknown");
  invalid(cluster, "worker", "2", "index 2 is out of range: --cluster_spec.worker has tasks 0, 1");
  invalid(R"({"worker": ["w:1"]})", "ps", "0", "job \"ps\" is not in --cluster_spec");
  invalid(R"({"worker": ["w:99999"]})", "worker", "0",
          "--cluster_spec.worker[0]: address \"w:99999\" has a bad port");
  invalid("{}", "worker", "0", "--cluster_spec: the cluster is empty");
  invalid("[]", "worker", "0", "--cluster_spec: expected an object of job -> addresses, got array");
}

TEST(ClusterResolverTest, FromEnvironment) {
  unsetenv("TF_CONFIG");
  absl::StatusOr<ClusterSpec> unset = ClusterSpecFromEnvironment();
  EXPECT_EQ(unset.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unset.status().message()), HasSubstr("TF_CONFIG is not set"));
  setenv("TF_CONFIG",
         R"({"cluster": {"worker": ["w0:2"]}, "task": {"type": "worker", "index": 0}})", 1);
  absl::StatusOr<ClusterSpec> set = ClusterSpecFromEnvironment();
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->is_chief());
  unsetenv("TF_CONFIG");
}

}  // namespace
}  // namespace strata
