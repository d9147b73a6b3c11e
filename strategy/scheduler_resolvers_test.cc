#include "strategy/scheduler_resolvers.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "strategy/slurm_hostlist.h"

namespace strata {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Hosts(const std::string& list) {
  absl::StatusOr<std::vector<std::string>> h = ExpandHostlist(list);
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? *h : std::vector<std::string>{};
}

TEST(SlurmHostlistTest, ExpandsRangesListsAndProducts) {
  EXPECT_THAT(Hosts("n1"), ElementsAre("n1"));
  EXPECT_THAT(Hosts("n[1-2],m5"), ElementsAre("n1", "n2", "m5"));
  EXPECT_THAT(Hosts("gpu[01-03,7]"), ElementsAre("gpu01", "gpu02", "gpu03", "gpu7"));
  EXPECT_THAT(Hosts("gpu[08-10]"), ElementsAre("gpu08", "gpu09", "gpu10"));
  EXPECT_THAT(Hosts("r[1-2]n[1,3]"), ElementsAre("r1n1", "r1n3", "r2n1", "r2n3"));
  EXPECT_THAT(Hosts("a,b[3],c-d.example"), ElementsAre("a", "b3", "c-d.example"));
}

TEST(SlurmHostlistTest, BadListsAreRefusedNamingThem) {
  for (const char* bad : {"", "n[1-2", "n1-2]", "n[2-1]", "n[a-b]", "n[1-]", "n[[1]]", "a,,b", "a,",
                          "n[1-99999999]", "n [1]"}) {
    absl::StatusOr<std::vector<std::string>> h = ExpandHostlist(bad);
    EXPECT_FALSE(h.ok()) << bad;
    EXPECT_THAT(h.status().message(), HasSubstr(absl::StrCat("\"", bad, "\""))) << bad;
  }
  // A product past the cap is refused, not materialised.
  absl::StatusOr<std::vector<std::string>> big = ExpandHostlist("a[1-1000]b[1-1000]");
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("more than"));
}

TEST(SlurmHostlistTest, TasksPerNode) {
  EXPECT_THAT(*ExpandTasksPerNode("2(x3),1"), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(*ExpandTasksPerNode("4"), ElementsAre(4));
  for (const char* bad : {"", "0", "2(x0)", "2(3)", "2(x3", "x", "2,,1", "-1", "2(x99999999)"}) {
    EXPECT_FALSE(ExpandTasksPerNode(bad).ok()) << bad;
  }
}

ResolvedCluster Resolve(std::map<std::string, std::string> env,
                        const std::string& resolver = "auto") {
  ResolverOptions o;
  o.resolver = resolver;
  absl::StatusOr<ResolvedCluster> r = ResolveCluster(o, MapEnvironment(std::move(env)));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) std::abort();
  return *r;
}

absl::Status ResolveError(std::map<std::string, std::string> env,
                          const std::string& resolver = "auto", ResolverOptions o = {}) {
  o.resolver = resolver;
  absl::StatusOr<ResolvedCluster> r = ResolveCluster(o, MapEnvironment(std::move(env)));
  EXPECT_FALSE(r.ok()) << r->Describe();
  return r.ok() ? absl::OkStatus() : r.status();
}

std::map<std::string, std::string> SlurmEnv(int rank) {
  // Seven tasks on n1, n2, n3 (two each) and m5 (one), as srun -n 7 sets them.
  std::map<int, int> local = {{0, 0}, {1, 1}, {2, 0}, {3, 1}, {4, 0}, {5, 1}, {6, 0}};
  return {{"SLURM_PROCID", absl::StrCat(rank)},
          {"SLURM_STEP_NUM_TASKS", "7"},
          {"SLURM_STEP_NODELIST", "n[1-3],m5"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
          {"SLURM_LOCALID", absl::StrCat(local[rank])}};
}

TEST(SlurmResolverTest, PlacesTasksOnNodesInOrderWithPortsFromTheBase) {
  ResolvedCluster r = Resolve(SlurmEnv(3));
  EXPECT_EQ(r.resolver, "slurm");
  EXPECT_EQ(r.spec.task_type(), "worker");
  EXPECT_EQ(r.spec.task_index(), 3);
  EXPECT_EQ(r.spec.num_workers(), 7);
  EXPECT_TRUE(r.spec.is_chief() == false);
  EXPECT_EQ(r.spec.task_address(), "n2:8889");
  EXPECT_EQ(*r.spec.address("worker", 0), "n1:8888");
  EXPECT_EQ(*r.spec.address("worker", 4), "n3:8888");
  EXPECT_EQ(*r.spec.address("worker", 6), "m5:8888");
  EXPECT_FALSE(r.cuda_visible_devices.has_value());
  EXPECT_THAT(r.Describe(), HasSubstr("SLURM_PROCID=3"));

  ResolverOptions o;
  o.slurm_port_base = 30000;
  absl::StatusOr<ResolvedCluster> based = ResolveCluster(o, MapEnvironment(SlurmEnv(5)));
  ASSERT_TRUE(based.ok()) << based.status();
  EXPECT_EQ(based->spec.task_address(), "n3:30001");
}

TEST(SlurmResolverTest, SplitsTheNodesGpusBetweenItsTasks) {
  auto env = SlurmEnv(3);
  env["CUDA_VISIBLE_DEVICES"] = "0,1,2,3";
  EXPECT_EQ(Resolve(env).cuda_visible_devices, "2,3");
  env["SLURM_PROCID"] = "2";
  env["SLURM_LOCALID"] = "0";
  EXPECT_EQ(Resolve(env).cuda_visible_devices, "0,1");
  // Slurm bound them per task already: left alone.
  env["SLURM_GPUS_PER_TASK"] = "2";
  EXPECT_FALSE(Resolve(env).cuda_visible_devices.has_value());
  // Fewer GPUs than tasks, or an uneven split: left alone.
  env.erase("SLURM_GPUS_PER_TASK");
  env["CUDA_VISIBLE_DEVICES"] = "0,1,2";
  EXPECT_FALSE(Resolve(env).cuda_visible_devices.has_value());
}

TEST(SlurmResolverTest, InconsistentVariablesAreNamed) {
  auto env = SlurmEnv(3);
  env["SLURM_LOCALID"] = "0";
  EXPECT_THAT(ResolveError(env).message(), HasSubstr("SLURM_LOCALID=0"));
  env = SlurmEnv(3);
  env["SLURM_STEP_NUM_TASKS"] = "8";
  EXPECT_THAT(ResolveError(env).message(), HasSubstr("adds up to 7 tasks"));
  env = SlurmEnv(1);
  env["SLURM_PROCID"] = "7";
  EXPECT_THAT(ResolveError(env).message(), HasSubstr("SLURM_PROCID=7"));
  env = SlurmEnv(1);
  env["SLURM_STEP_NODELIST"] = "n[1-3";
  EXPECT_THAT(ResolveError(env).message(), HasSubstr("SLURM_STEP_NODELIST"));
  env = SlurmEnv(1);
  env["SLURM_STEP_NODELIST"] = "n[1-2]";
  EXPECT_THAT(ResolveError(env).message(), HasSubstr("names 2 nodes"));
  env = SlurmEnv(1);
  env.erase("SLURM_STEP_TASKS_PER_NODE");
  EXPECT_THAT(ResolveError(env).message(), HasSubstr("SLURM_STEP_TASKS_PER_NODE (unset)"));
  env = SlurmEnv(1);
  env["SLURM_PROCID"] = "one";
  EXPECT_THAT(ResolveError(env).message(), HasSubstr("SLURM_PROCID=\"one\""));
}

TEST(TorchrunResolverTest, RankZeroHostsTheChiefAtTheMasterAddress) {
  ResolvedCluster r = Resolve(
      {{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "2"}, {"WORLD_SIZE", "3"}});
  EXPECT_EQ(r.resolver, "torchrun");
  EXPECT_TRUE(r.spec.addresses_from_rendezvous());
  EXPECT_EQ(r.spec.num_workers(), 3);
  EXPECT_EQ(r.spec.worker_id(), 2);
  EXPECT_EQ(*r.spec.address("worker", 0), "10.0.0.1:29500");
  EXPECT_EQ(r.spec.task_address(), "");

  ResolvedCluster chief = Resolve(
      {{"MASTER_ADDR", "::1"}, {"MASTER_PORT", "29500"}, {"RANK", "0"}, {"WORLD_SIZE", "3"}});
  EXPECT_TRUE(chief.spec.is_chief());
  EXPECT_EQ(chief.spec.task_address(), "[::1]:29500");

  // Under torchrun its agent's store holds MASTER_PORT.
  ResolvedCluster agent = Resolve({{"MASTER_ADDR", "h"},
                                   {"MASTER_PORT", "29500"},
                                   {"RANK", "0"},
                                   {"WORLD_SIZE", "2"},
                                   {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(agent.spec.task_address(), "h:29501");
}

TEST(TorchrunResolverTest, KubeflowTrainerPetVariables) {
  ResolvedCluster r = Resolve({{"PET_MASTER_ADDR", "job-node-0-0.job"},
                               {"PET_MASTER_PORT", "29400"},
                               {"PET_NNODES", "3"},
                               {"PET_NODE_RANK", "1"},
                               {"PET_NPROC_PER_NODE", "1"}});
  EXPECT_EQ(r.spec.worker_id(), 1);
  EXPECT_EQ(r.spec.num_workers(), 3);
  EXPECT_EQ(*r.spec.address("worker", 0), "job-node-0-0.job:29400");
  // Several processes per node need LOCAL_RANK.
  std::map<std::string, std::string> env = {{"PET_MASTER_ADDR", "m"},
                                            {"PET_MASTER_PORT", "29400"},
                                            {"PET_NNODES", "2"},
                                            {"PET_NODE_RANK", "1"},
                                            {"PET_NPROC_PER_NODE", "4"}};
  EXPECT_THAT(ResolveError(env).message(), HasSubstr("LOCAL_RANK"));
  env["LOCAL_RANK"] = "3";
  EXPECT_EQ(Resolve(env).spec.worker_id(), 7);
}

TEST(TorchrunResolverTest, BadVariablesAreNamed) {
  EXPECT_THAT(
      ResolveError(
          {{"MASTER_ADDR", "m"}, {"MASTER_PORT", "29500"}, {"RANK", "2"}, {"WORLD_SIZE", "2"}})
          .message(),
      HasSubstr("RANK=2, WORLD_SIZE=2"));
  EXPECT_THAT(
      ResolveError(
          {{"MASTER_ADDR", "m"}, {"MASTER_PORT", "99999"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}})
          .message(),
      HasSubstr("MASTER_PORT=\"99999\""));
  EXPECT_THAT(
      ResolveError({{"MASTER_ADDR", "m"}, {"MASTER_PORT", "1"}, {"RANK", "0"}, {"WORLD_SIZE", "0"}})
          .message(),
      HasSubstr("WORLD_SIZE=\"0\""));
}

std::map<std::string, std::string> MpiEnv(int rank, int size, int local_size) {
  return {{"OMPI_COMM_WORLD_RANK", absl::StrCat(rank)},
          {"OMPI_COMM_WORLD_SIZE", absl::StrCat(size)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", absl::StrCat(local_size)},
          {"PMIX_HOSTNAME", "node7"}};
}

TEST(MpiResolverTest, RanksExchangeTheirAddresses) {
  ResolverOptions o;
  std::string sent;
  o.free_port = [](const std::string&) -> absl::StatusOr<int> { return 5001; };
  o.all_gather = [&](const std::string& mine) -> absl::StatusOr<std::vector<std::string>> {
    sent = mine;
    return std::vector<std::string>{"127.0.0.1:5000", mine};
  };
  absl::StatusOr<ResolvedCluster> r = ResolveCluster(o, MapEnvironment(MpiEnv(1, 2, 2)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(sent, "127.0.0.1:5001");  // one node: loopback
  EXPECT_EQ(r->resolver, "mpi");
  EXPECT_FALSE(r->spec.addresses_from_rendezvous());
  EXPECT_EQ(r->spec.worker_id(), 1);
  EXPECT_EQ(*r->spec.address("worker", 0), "127.0.0.1:5000");

  // Across nodes: the node's name.
  o.all_gather = [&](const std::string& mine) -> absl::StatusOr<std::vector<std::string>> {
    sent = mine;
    return std::vector<std::string>{"node1:6000", mine, "node9:6000"};
  };
  r = ResolveCluster(o, MapEnvironment(MpiEnv(1, 3, 1)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(sent, "node7:5001");

  // An exchange that does not match this rank's view is refused.
  o.all_gather = [](const std::string&) -> absl::StatusOr<std::vector<std::string>> {
    return std::vector<std::string>{"a:1"};
  };
  r = ResolveCluster(o, MapEnvironment(MpiEnv(1, 2, 2)));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("OMPI_COMM_WORLD_RANK=1"));
}

TEST(MpiResolverTest, WithoutPmixItSaysWhatToSet) {
  // This test's process was not started by mpirun: no PMIX_RANK.
  ResolverOptions o;
  o.free_port = [](const std::string&) -> absl::StatusOr<int> { return 5001; };
  absl::Status s = ResolveError(MpiEnv(0, 2, 2), "auto", o);
  EXPECT_THAT(s.message(), HasSubstr("PMIX_RANK"));
  EXPECT_THAT(s.message(), HasSubstr("MASTER_ADDR"));
  // With MASTER_ADDR and MASTER_PORT, rank 0 is found there.
  auto env = MpiEnv(1, 2, 2);
  env["MASTER_ADDR"] = "head";
  env["MASTER_PORT"] = "7000";
  ResolvedCluster r = Resolve(env, "mpi");
  EXPECT_TRUE(r.spec.addresses_from_rendezvous());
  EXPECT_EQ(*r.spec.address("worker", 0), "head:7000");
}

TEST(TfConfigResolverTest, KubeflowTfJobListensOnEveryInterface) {
  const std::string cluster =
      R"("cluster": {"worker": ["job-worker-0.ns.svc:2222", "job-worker-1.ns.svc:2222"]},
         "task": {"type": "worker", "index": 1})";
  ResolvedCluster plain = Resolve({{"TF_CONFIG", absl::StrCat("{", cluster, "}")}});
  EXPECT_EQ(plain.resolver, "tf_config");
  EXPECT_FALSE(plain.listen_on_all_interfaces);
  ResolvedCluster tfjob =
      Resolve({{"TF_CONFIG", absl::StrCat("{", cluster, R"(, "environment": "cloud"})")}});
  EXPECT_EQ(tfjob.resolver, "kubeflow_tfjob");
  EXPECT_TRUE(tfjob.listen_on_all_interfaces);
  EXPECT_EQ(tfjob.spec.task_address(), "job-worker-1.ns.svc:2222");
  EXPECT_THAT(tfjob.Describe(), HasSubstr("every interface"));
}

TEST(AutoResolverTest, TakesTheInnermostSetting) {
  const std::string tf_config =
      R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}})";
  auto slurm = SlurmEnv(0);
  auto with = [&](std::map<std::string, std::string> extra) {
    auto env = slurm;
    env.insert(extra.begin(), extra.end());
    return env;
  };
  EXPECT_EQ(Resolve(slurm).resolver, "slurm");
  EXPECT_EQ(Resolve(with({{"TF_CONFIG", tf_config}})).resolver, "tf_config");
  EXPECT_EQ(Resolve(with({{"MASTER_ADDR", "m"},
                          {"MASTER_PORT", "1"},
                          {"RANK", "1"},
                          {"WORLD_SIZE", "2"},
                          {"OMPI_COMM_WORLD_RANK", "0"},
                          {"OMPI_COMM_WORLD_SIZE", "2"}}))
                .resolver,
            "torchrun");
  // Flags beat the environment.
  ResolverOptions o;
  o.cluster_spec = R"({"worker": ["x:1"]})";
  o.task_type = "worker";
  o.task_index = "0";
  absl::StatusOr<ResolvedCluster> f = ResolveCluster(o, MapEnvironment(with({})));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->resolver, "flags");
  // Nothing at all: says what would do.
  absl::Status none = ResolveError({});
  EXPECT_THAT(none.message(), HasSubstr("TF_CONFIG is not set"));
  EXPECT_THAT(none.message(), HasSubstr("SLURM_PROCID"));
}

TEST(ForcedResolverTest, DisagreeingSchedulersAreNamedBoth) {
  auto env = SlurmEnv(1);
  env["OMPI_COMM_WORLD_RANK"] = "0";
  env["OMPI_COMM_WORLD_SIZE"] = "7";
  absl::Status s = ResolveError(env, "slurm");
  EXPECT_THAT(s.message(), HasSubstr("SLURM_PROCID=1"));
  EXPECT_THAT(s.message(), HasSubstr("OMPI_COMM_WORLD_RANK=0"));
  // Agreeing views are fine.
  env["OMPI_COMM_WORLD_RANK"] = "1";
  EXPECT_EQ(Resolve(env, "slurm").spec.worker_id(), 1);
  // A forced resolver without its variables names them.
  EXPECT_THAT(ResolveError({}, "slurm").message(), HasSubstr("SLURM_STEP_NUM_TASKS"));
  EXPECT_THAT(ResolveError({}, "torchrun").message(), HasSubstr("MASTER_ADDR"));
  EXPECT_THAT(ResolveError({}, "mpi").message(), HasSubstr("OMPI_COMM_WORLD_SIZE"));
  EXPECT_THAT(ResolveError({}, "tf_config").message(), HasSubstr("TF_CONFIG is not set"));
  EXPECT_THAT(ResolveError({}, "pbs").message(), HasSubstr("auto, flags"));
}

}  // namespace
}  // namespace strata
