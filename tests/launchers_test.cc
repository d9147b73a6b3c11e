// The trainer under the launchers and schedulers people run jobs with, each
// setting its own environment and nothing of Strata's (no TF_CONFIG):
//   - a torchrun-style environment (PyTorchJob: MASTER_ADDR, MASTER_PORT,
//     RANK, WORLD_SIZE) and the Kubeflow Trainer's PET_* variables;
//   - Open MPI's real `mpirun -np 2` (addresses exchanged through PMIx);
//   - TF_CONFIG as Kubeflow's TFJob writes it ("environment": "cloud");
// each trains the weights one process trains with the same global batch,
// and logs which resolver it took. An environment that contradicts itself
// fails at start-up naming the variables. (Slurm's srun has its own test,
// slurm_test.)
#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {

// The digits MLP, SGD, a global batch of 48.
std::vector<std::string> TrainFlags(int steps, const std::string& ckpt) {
  return {"--optimizer=sgd",
          "--hidden=32",
          absl::StrCat("--steps=", steps),
          "--global_batch_size=48",
          "--prefetch=0",
          "--quiet",
          "--intra_op_threads=1",
          "--startup_timeout=60",
          "--heartbeat_timeout=5",
          "--strategy=multi_worker_mirrored",
          absl::StrCat("--checkpoint_dir=", ckpt)};
}

std::string Checkpoint(const std::string& dir, int step) {
  return absl::StrCat(dir, "/ckpt-", step);
}

// The weights one process trains in `steps` steps (once per test binary).
const std::string& OneProcess(int steps) {
  static const std::string* dir = [steps] {
    auto* d = new std::string(TempDir("one_process"));
    std::vector<std::string> flags = TrainFlags(steps, *d);
    flags.erase(std::find(flags.begin(), flags.end(), "--strategy=multi_worker_mirrored"));
    Exit e = RunTrainer(flags, "one_process");
    EXPECT_EQ(e.code, 0) << Describe(e);
    return d;
  }();
  return *dir;
}

constexpr int kSteps = 20;

// Starts one trainer per environment, waits for all, and expects them to
// succeed, say `resolver` chose the cluster, and end on one process's
// weights.
void ExpectTrainsLikeOneProcess(const std::string& name,
                                const std::vector<std::vector<std::string>>& envs,
                                const std::string& resolver) {
  const std::string& one = OneProcess(kSteps);
  const std::string dir = TempDir(name);
  const std::string ckpt = TempDir(name + "_ckpt");
  std::vector<Process> tasks;
  for (size_t i = 0; i < envs.size(); ++i) {
    tasks.push_back(
        Spawn(TrainFlags(kSteps, ckpt), absl::StrCat(dir, "/stderr_", i, ".txt"), envs[i]));
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    Exit e = Wait(tasks[i]);
    EXPECT_EQ(e.code, 0) << "task " << i << " " << Describe(e);
    EXPECT_TRUE(absl::StrContains(e.err, absl::StrCat("cluster from ", resolver, " ")))
        << "task " << i << ":\n"
        << e.err;
  }
  if (::testing::Test::HasFailure()) return;
  EXPECT_GE(ExpectCloseTensors(Checkpoint(one, kSteps), Checkpoint(ckpt, kSteps), 1e-5), 0);
}

TEST(LaunchersTest, PyTorchJobEnvironmentTrainsTheWeightsOfOneProcess) {
  // As Kubeflow's PyTorchJob sets them for `python train.py`-style
  // entrypoints (no torchrun): rank 0 is the master.
  const int port = FreePorts(1)[0];
  std::vector<std::vector<std::string>> envs;
  for (int rank = 0; rank < 3; ++rank) {
    envs.push_back({"MASTER_ADDR=127.0.0.1", absl::StrCat("MASTER_PORT=", port),
                    absl::StrCat("RANK=", rank), "WORLD_SIZE=3", "PYTHONUNBUFFERED=1"});
  }
  ExpectTrainsLikeOneProcess("pytorchjob", envs, "torchrun");
}

TEST(LaunchersTest, KubeflowTrainerPetVariablesTrainTheWeightsOfOneProcess) {
  const int port = FreePorts(1)[0];
  std::vector<std::vector<std::string>> envs;
  for (int node = 0; node < 2; ++node) {
    envs.push_back({"PET_MASTER_ADDR=localhost", absl::StrCat("PET_MASTER_PORT=", port),
                    "PET_NNODES=2", absl::StrCat("PET_NODE_RANK=", node), "PET_NPROC_PER_NODE=1"});
  }
  ExpectTrainsLikeOneProcess("pet", envs, "torchrun");
}

TEST(LaunchersTest, TfJobEnvironmentTrainsTheWeightsOfOneProcess) {
  // TFJob's TF_CONFIG names services; here "localhost" stands for them.
  const std::vector<int> ports = FreePorts(2);
  const std::string cluster =
      absl::StrCat(R"({"worker": ["localhost:)", ports[0], R"(", "localhost:)", ports[1], R"("]})");
  std::vector<std::vector<std::string>> envs;
  for (int i = 0; i < 2; ++i) {
    envs.push_back({absl::StrCat(R"(TF_CONFIG={"cluster": )", cluster,
                                 R"(, "task": {"type": "worker", "index": )", i,
                                 R"(}, "environment": "cloud"})")});
  }
  ExpectTrainsLikeOneProcess("tfjob", envs, "kubeflow_tfjob");
}

bool Executable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && (st.st_mode & S_IXUSR);
}

TEST(LaunchersTest, MpirunTrainsTheWeightsOfOneProcess) {
  const std::string mpirun = "/usr/bin/mpirun";
  if (!Executable(mpirun)) GTEST_SKIP() << "Open MPI's mpirun is not installed (openmpi-bin)";
  const std::string& one = OneProcess(kSteps);
  const std::string dir = TempDir("mpirun");
  const std::string ckpt = TempDir("mpirun_ckpt");
  // mpirun starts the ranks with this environment (job token included);
  // nothing of Strata's is passed.
  std::vector<std::string> args = {
      "--allow-run-as-root",   "--oversubscribe", "--bind-to", "none", "-np", "2",
      Runfile("tools/trainer")};
  for (const std::string& f : TrainFlags(kSteps, ckpt)) args.push_back(f);
  args.push_back(absl::StrCat("--digits_path=", Runfile("data/digits/digits.csv.gz")));
  Process p = SpawnProgram(mpirun, args, dir + "/stderr.txt", {JobTokenEnv()});
  Exit e = Wait(p);
  ASSERT_EQ(e.code, 0) << Describe(e);
  EXPECT_TRUE(absl::StrContains(e.err, "cluster from mpi (OMPI_COMM_WORLD_RANK=1")) << e.err;
  EXPECT_TRUE(absl::StrContains(e.err, "addresses exchanged through PMIx")) << e.err;
  EXPECT_GE(ExpectCloseTensors(Checkpoint(one, kSteps), Checkpoint(ckpt, kSteps), 1e-5), 0);
}

TEST(LaunchersTest, ContradictoryEnvironmentsFailAtStartUpNamingTheVariables) {
  const std::string dir = TempDir("contradictory");
  struct Case {
    std::vector<std::string> env;
    std::vector<std::string> args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", "RANK=2", "WORLD_SIZE=2"}, {}, "RANK=2"},
      {{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=port", "RANK=0", "WORLD_SIZE=2"},
       {},
       "MASTER_PORT=\"port\""},
      {{"SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_NODELIST=n[1-2",
        "SLURM_STEP_TASKS_PER_NODE=1(x2)"},
       {},
       "SLURM_STEP_NODELIST"},
      {{"SLURM_PROCID=1", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_NODELIST=n[1-2]",
        "SLURM_STEP_TASKS_PER_NODE=1(x2)", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2"},
       {"--cluster_resolver=slurm"},
       "OMPI_COMM_WORLD_RANK=0"},
      {{}, {"--cluster_resolver=slurm"}, "SLURM_STEP_NUM_TASKS"},
      {{}, {"--cluster_resolver=pbs"}, "--cluster_resolver"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<std::string> args = {"--strategy=multi_worker_mirrored", "--steps=1", "--quiet",
                                     "--startup_timeout=20"};
    args.insert(args.end(), cases[i].args.begin(), cases[i].args.end());
    Exit e = Wait(Spawn(args, absl::StrCat(dir, "/stderr_", i, ".txt"), cases[i].env));
    EXPECT_EQ(e.code, 1) << i << " " << Describe(e);
    EXPECT_TRUE(absl::StrContains(e.err, cases[i].expect))
        << "case " << i << ": expected '" << cases[i].expect << "' in:\n"
        << e.err;
  }
}

}  // namespace
}  // namespace testing
}  // namespace strata
