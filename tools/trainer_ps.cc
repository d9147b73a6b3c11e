#include "tools/trainer_ps.h"

#include <algorithm>
#include <csignal>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/mutex.h"
#include "base/status.h"
#include "data/digits/find_digits.h"
#include "fit/checkpoint.h"
#include "fit/progress.h"
#include "runtime/coordination/grpc_server.h"
#include "runtime/rpc/worker_service.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/rpc_auth.h"
#include "strategy/cluster_coordinator.h"
#include "strategy/cluster_resolver.h"
#include "strategy/parameter_server_strategy.h"
#include "strategy/scheduler_resolvers.h"
#include "tools/trainer_data.h"
#include "tools/trainer_graph.h"
#include "train/partitioned_variable.h"

namespace strata {
namespace trainer {
namespace {

// The functions the roles serve: a worker's step, and the end of the job
// (args: the status code, its message as bytes) on workers and ps tasks.
constexpr char kStepFunction[] = "train_step";
constexpr char kEndFunction[] = "end_job";
constexpr char kReportFunction[] = "report_error";  // a task's error, to the chief
// A worker's input position (its iterator's state, as bytes), read by the
// chief for a checkpoint and given back when a run resumes from it.
constexpr char kInputStateFunction[] = "input_state";
constexpr char kRestoreInputFunction[] = "restore_input";
// The checkpoint's record of the workers' input positions.
constexpr char kMetaWorkerInputs[] = "worker_input_positions";

// The cluster as this role sees it.
struct PsCluster {
  std::string me, address;  // this task, "/job:ps/replica:0/task:1", and its address
  std::string job;
  int index = 0;
  std::string chief, chief_address;
  std::vector<RemoteTaskAddress> ps;
  std::vector<distribute::CoordinatedWorker> workers;
  std::optional<JobToken> token;
  std::optional<TlsConfig> tls;
};

void Say(FILE* log, const PsCluster& cl, const std::string& line) {
  if (log == nullptr) return;
  std::fprintf(log, "trainer %s: %s\n", cl.me.c_str(), line.c_str());
  std::fflush(log);
}

absl::StatusOr<PsCluster> ResolvePsCluster(const TrainerConfig& c) {
  STRATA_ASSIGN_OR_RETURN(ResolvedCluster resolved,
                          ResolveCluster(fit::ResolverOptionsFrom(c), ProcessEnvironment()));
  const ClusterSpec& spec = resolved.spec;
  const std::string why = "--strategy=parameter_server: the cluster has no ";
  if (!spec.has_job(kPsJob)) {
    return absl::InvalidArgumentError(
        why + "ps task (TF_CONFIG's \"ps\" job, tools/launch --num_ps): variables live there");
  }
  if (!spec.has_job(kChiefJob)) {
    return absl::InvalidArgumentError(
        why +
        "chief task (TF_CONFIG's \"chief\" job, tools/launch --num_chiefs=1): the "
        "coordinator runs there");
  }
  if (!spec.has_job(kWorkerJob)) {
    return absl::InvalidArgumentError(why + "worker task: the steps run there");
  }
  if (spec.task_type() != kPsJob && spec.task_type() != kChiefJob &&
      spec.task_type() != kWorkerJob) {
    return absl::InvalidArgumentError(
        absl::StrCat("--strategy=parameter_server: this task is ", spec.TaskPrefix(),
                     "; a parameter-server job has chief, worker and ps tasks"));
  }
  PsCluster cl;
  cl.me = spec.TaskPrefix();
  cl.address = spec.task_address();
  cl.job = spec.task_type();
  cl.index = spec.task_index();
  cl.chief = ClusterSpec::TaskPrefix(TaskId{kChiefJob, 0});
  STRATA_ASSIGN_OR_RETURN(cl.chief_address, spec.address(kChiefJob, 0));
  for (const auto& [i, address] : spec.jobs().at(kPsJob)) {
    const std::string task = ClusterSpec::TaskPrefix(TaskId{kPsJob, i});
    cl.ps.push_back({task, address, {task + "/device:CPU:0"}});
  }
  for (const auto& [i, address] : spec.jobs().at(kWorkerJob)) {
    cl.workers.push_back({ClusterSpec::TaskPrefix(TaskId{kWorkerJob, i}), address});
  }
  if (c.max_staleness == 0 && c.global_batch_size % static_cast<int64_t>(cl.workers.size()) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--global_batch_size: --max_staleness=0 trains in rounds, each worker on its "
                     "share of every "
                     "global batch; ",
                     c.global_batch_size, " does not split over ", cl.workers.size(), " workers"));
  }
  STRATA_ASSIGN_OR_RETURN(cl.token, ResolveJobToken(c.job_token_file, c.insecure_no_job_token));
  STRATA_ASSIGN_OR_RETURN(cl.tls, ResolveTls(c.tls_files));
  return cl;
}

// Runs `function` on the task at `address` once; its results, or the
// call's failure or the function's. `wait_for_ready`: wait (until the
// timeout) for a task that is not up yet, rather than fail at once.
absl::StatusOr<std::vector<Tensor>> CallFor(const PsCluster& cl, const std::string& address,
                                            const std::string& function,
                                            const std::vector<Tensor>& args, absl::Duration timeout,
                                            bool wait_for_ready = true) {
  auto stub = WorkerService::NewStub(DialTask(address, cl.tls, kWorkerMaxMessageBytes));
  RunFunctionRequest request;
  request.set_function(function);
  for (size_t i = 0; i < args.size(); ++i) {
    STRATA_RETURN_IF_ERROR(EncodeStepTensor(absl::StrCat(i), args[i], request.add_args()));
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx.set_wait_for_ready(wait_for_ready);
  if (cl.token.has_value()) SignRpc(*cl.token, "RunFunction", request, &ctx);
  RunFunctionResponse response;
  const grpc::Status s = stub->RunFunction(&ctx, request, &response);
  if (!s.ok()) return absl::UnavailableError(absl::StrCat(address, ": ", s.error_message()));
  if (response.code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(response.code()), response.message());
  }
  std::vector<Tensor> results;
  for (const StepTensor& t : response.results()) {
    STRATA_ASSIGN_OR_RETURN(Tensor v, DecodeStepTensor(t, CpuAllocator(), kWorkerMaxMessageBytes));
    results.push_back(std::move(v));
  }
  return results;
}

absl::Status Call(const PsCluster& cl, const std::string& address, const std::string& function,
                  const std::vector<Tensor>& args, absl::Duration timeout) {
  return CallFor(cl, address, function, args, timeout).status();
}

// Bytes as a uint8 tensor (a function's argument or result), and back.
Tensor BytesTensor(const std::string& bytes) {
  return Tensor::FromVector(std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

absl::StatusOr<std::string> TensorBytes(const std::vector<Tensor>& values,
                                        const std::string& what) {
  if (values.size() != 1 || values[0].dtype() != DT_UINT8 || values[0].dims() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is one uint8 vector"));
  }
  const auto* b = values[0].data<uint8_t>();
  return std::string(b, b + values[0].NumElements());
}

// The workers' input positions as one checkpoint string: per worker, its
// length, ':' and its bytes ("" for a worker whose position was not read:
// it starts its order anew).
std::string EncodePositions(const std::vector<std::string>& positions) {
  std::string out;
  for (const std::string& p : positions) absl::StrAppend(&out, p.size(), ":", p);
  return out;
}

absl::StatusOr<std::vector<std::string>> DecodePositions(absl::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t colon = text.find(':');
    size_t n = 0;
    if (colon == absl::string_view::npos || !absl::SimpleAtoi(text.substr(0, colon), &n) ||
        n > text.size() - colon - 1) {
      return absl::DataLossError(absl::StrCat("'", kMetaWorkerInputs, "' is garbled after ",
                                              out.size(), " workers' positions"));
    }
    out.emplace_back(text.substr(colon + 1, n));
    text.remove_prefix(colon + 1 + n);
  }
  return out;
}

// A status as a function's arguments (the job's end the chief tells the
// other tasks, an error a task reports to the chief), and back.
std::vector<Tensor> StatusArgs(const absl::Status& s) {
  const std::string m(s.message());
  return {Tensor::Scalar<int32_t>(static_cast<int32_t>(s.code())),
          Tensor::FromVector(std::vector<uint8_t>(m.begin(), m.end()))};
}

absl::Status StatusFromArgs(const std::vector<Tensor>& args) {
  if (args.size() != 2 || args[0].dtype() != DT_INT32 || args[1].dtype() != DT_UINT8) {
    return absl::InvalidArgumentError("a status is an int32 code and its message as uint8");
  }
  const auto* m = args[1].data<uint8_t>();
  return absl::Status(static_cast<absl::StatusCode>(*args[0].data<int32_t>()),
                      std::string(m, m + args[1].NumElements()));
}

// Errors other tasks reported to the chief (the first kept).
class Reports {
 public:
  WorkerFunction Function() {
    return [this](const std::vector<Tensor>& args) -> absl::StatusOr<std::vector<Tensor>> {
      const absl::Status s = StatusFromArgs(args);
      MutexLock l(&mu_);
      if (first_.ok() && !s.ok()) first_ = s;
      return std::vector<Tensor>{};
    };
  }
  absl::Status first() const {
    MutexLock l(&mu_);
    return first_;
  }

 private:
  mutable Mutex mu_;
  absl::Status first_ ABSL_GUARDED_BY(mu_);
};

// The end of the job as the chief sent it, and a wait for it.
class JobEnd {
 public:
  WorkerFunction Function() {
    return [this](const std::vector<Tensor>& args) -> absl::StatusOr<std::vector<Tensor>> {
      const absl::Status s = StatusFromArgs(args);
      MutexLock l(&mu_);
      ended_ = true;
      status_ = s;
      return std::vector<Tensor>{};
    };
  }
  // Whether Wait returned because of the chief (it ended the job, or it
  // was lost): a task's own errors are reported to the chief otherwise.
  bool about_the_chief() const {
    MutexLock l(&mu_);
    return about_the_chief_;
  }
  // Waits for the chief's end of the job, checking on the chief meanwhile:
  // the chief's status, or an error once it has been unreachable too long.
  absl::Status Wait(const TrainerConfig& c, const PsCluster& cl) {
    const absl::Time start = absl::Now();
    absl::Time last_contact = absl::InfinitePast();
    while (true) {
      {
        MutexLock l(&mu_);
        if (mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_; },
                                 absl::Milliseconds(500))) {
          about_the_chief_ = true;
          return status_.ok() ? status_
                              : AnnotateStatus(status_, absl::StrCat("the chief ended the job: "));
        }
      }
      if (Call(cl, cl.chief_address, "", {}, absl::Seconds(1)).ok()) last_contact = absl::Now();
      const absl::Time now = absl::Now();
      const bool never = last_contact == absl::InfinitePast() &&
                         now - start > absl::Seconds(c.startup_timeout_seconds);
      const bool lost = last_contact != absl::InfinitePast() &&
                        now - last_contact > absl::Seconds(c.heartbeat_timeout_seconds);
      if (never || lost) {
        MutexLock l(&mu_);
        about_the_chief_ = true;
      }
      if (never) {
        return absl::DeadlineExceededError(absl::StrCat("the chief ", cl.chief, " at ",
                                                        cl.chief_address, " never answered in ",
                                                        c.startup_timeout_seconds, " s"));
      }
      if (lost) {
        return absl::UnavailableError(absl::StrCat("lost the chief ", cl.chief, " at ",
                                                   cl.chief_address, ": no answer for ",
                                                   c.heartbeat_timeout_seconds, " s"));
      }
    }
  }

 private:
  mutable Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool about_the_chief_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

absl::Status RunPs(const TrainerConfig& c, const PsCluster& cl, JobEnd& end, FILE* log) {
  distribute::ParameterServerTask::Options o;
  o.task = cl.me;
  o.address = cl.address;
  o.devices.intra_op_threads_per_device = c.intra_op_threads;
  o.job_token = cl.token;
  o.tls = cl.tls;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::ParameterServerTask> ps,
                          distribute::ParameterServerTask::Start(o));
  ps->service()->RegisterFunction(kEndFunction, end.Function());
  Say(log, cl, absl::StrCat("serving variables at ", ps->address()));
  const absl::Status s = end.Wait(c, cl);
  ps.reset();  // its server first: a call still in flight uses `end`
  return s;
}

// The data every role loads alike: the split fixed by the seed, the
// training split's statistics; the epoch and the run's steps.
struct PsData {
  TrainerData data;
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
};

absl::StatusOr<PsData> LoadPsData(const TrainerConfig& c) {
  STRATA_ASSIGN_OR_RETURN(SourceSpec spec, ParseDataSpec(c.data));
  std::string digits_path;
  if (spec.kind == SourceSpec::Kind::kDigits) {
    STRATA_ASSIGN_OR_RETURN(digits_path, FindDigitsCsv(c.digits_path, c.argv0));
  }
  PsData p;
  STRATA_ASSIGN_OR_RETURN(p.data, LoadTrainerData(spec, digits_path, c.test_fraction,
                                                  static_cast<uint64_t>(c.seed), nullptr, true));
  if (c.standardize) {
    STRATA_ASSIGN_OR_RETURN(auto stats, ComputeStats(p.data));
    STRATA_RETURN_IF_ERROR(StandardizeInPlace(&p.data, stats.first, stats.second));
  }
  p.steps_per_epoch = p.data.train_x.dim_size(0) / c.global_batch_size;
  if (p.steps_per_epoch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--global_batch_size=", c.global_batch_size, " is larger than the ",
                     p.data.train_x.dim_size(0), " training examples"));
  }
  p.total_steps = c.steps > 0 ? c.steps : (c.epochs > 0 ? c.epochs : 30) * p.steps_per_epoch;
  return p;
}

// --variable_partitioner over `num_ps` ps tasks; InvalidArgument naming the
// flag for a malformed one.
absl::StatusOr<train::Partitioner> ParsePartitioner(const std::string& text, int num_ps) {
  if (text.empty()) return train::Partitioner();
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  int64_t a = 0, b = num_ps;
  const bool fixed = parts[0] == "fixed" && parts.size() == 2;
  const bool min_size = parts[0] == "min_size" && (parts.size() == 2 || parts.size() == 3);
  if ((!fixed && !min_size) || !absl::SimpleAtoi(parts[1], &a) || a < 1 ||
      (parts.size() == 3 && (!absl::SimpleAtoi(parts[2], &b) || b < 1)) || a > (int64_t{1} << 40) ||
      b > 1 << 20) {
    return absl::InvalidArgumentError(
        absl::StrCat("--variable_partitioner='", text,
                     "': expected fixed:N or min_size:BYTES[:MAX] (positive)"));
  }
  if (fixed) return train::FixedShardsPartitioner(static_cast<int>(std::min<int64_t>(a, 1 << 20)));
  return train::MinSizePartitioner(a, static_cast<int>(b));
}

// This process's peak resident memory (VmHWM), or -1 where /proc says not.
int64_t PeakResidentBytes() {
  // /proc files have no size: read by line.
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    absl::string_view rest = line;
    int64_t kib = 0;
    if (absl::ConsumePrefix(&rest, "VmHWM:") &&
        absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(rest), " kB"), &kib)) {
      return kib * 1024;
    }
  }
  return -1;
}

// A client of the ps tasks (a worker or the chief) with the model built.
struct Client {
  PsData data;
  std::unique_ptr<distribute::ParameterServerStrategy> strategy;
  std::unique_ptr<TrainGraph> graph;
  std::unique_ptr<Session> session;
};

// How a client's graph is built: its input (its own order of the training
// split, or with `num_shards` > 1 its shard of every global batch) and,
// with `rounds_of` > 0, steps that accumulate gradients for one update per
// round of that many steps.
struct ClientInput {
  uint64_t seed = 0;
  int shard = 0, num_shards = 1;
  int rounds_of = 0;  // BuildGraph's accumulate_over
};

absl::StatusOr<std::unique_ptr<Client>> MakeClient(const TrainerConfig& c, const PsCluster& cl,
                                                   const ClientInput& in) {
  auto client = std::make_unique<Client>();
  STRATA_ASSIGN_OR_RETURN(client->data, LoadPsData(c));
  distribute::ParameterServerOptions o;
  o.worker_task = cl.me;
  o.ps_tasks = cl.ps;
  o.job_token = cl.token;
  o.tls = cl.tls;
  o.ps_timeout = absl::Seconds(c.heartbeat_timeout_seconds);
  STRATA_ASSIGN_OR_RETURN(o.variable_partitioner,
                          ParsePartitioner(c.variable_partitioner, static_cast<int>(cl.ps.size())));
  DeviceOptions machine;
  machine.intra_op_threads_per_device = c.intra_op_threads;
  STRATA_ASSIGN_OR_RETURN(client->strategy,
                          distribute::ParameterServerStrategy::Create(o, "/cpu:0", machine));
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr batches,
                          MakeTrainBatches(client->data.data, c.global_batch_size, in.seed,
                                           c.prefetch, 0, in.shard, in.num_shards));
  STRATA_ASSIGN_OR_RETURN(
      client->graph, BuildGraph(c, client->data.data, client->data.total_steps,
                                client->strategy.get(), std::move(batches),
                                /*per_worker_batches=*/true, /*weighted=*/false, in.rounds_of));
  SessionOptions so = client->strategy->session_options();
  so.inter_op_threads = std::max(1, c.inter_op_threads);
  so.cross_task_step_timeout = absl::Seconds(c.heartbeat_timeout_seconds * 6 + 60);
  STRATA_ASSIGN_OR_RETURN(client->session, Session::Create(client->graph->root, so));
  return client;
}

// A worker's service, hosted at its address.
struct Serving {
  std::unique_ptr<DeviceMgr> devices;
  std::unique_ptr<WorkerServiceImpl> service;
  std::unique_ptr<GrpcServer> server;
};

absl::StatusOr<Serving> Serve(const PsCluster& cl) {
  Serving s;
  DeviceOptions d;
  d.job = cl.job;
  d.task = cl.index;
  d.intra_op_threads_per_device = 1;
  STRATA_ASSIGN_OR_RETURN(s.devices, CreateCpuDeviceMgr(d));
  WorkerServiceOptions wo;
  wo.task = cl.me;
  wo.devices = s.devices.get();
  wo.job_token = cl.token;
  STRATA_ASSIGN_OR_RETURN(s.service, WorkerServiceImpl::Create(wo));
  GrpcServerOptions so;
  so.address = cl.address;
  so.services = {s.service.get()};
  so.job_token = cl.token;
  so.tls = cl.tls;
  STRATA_ASSIGN_OR_RETURN(s.server, GrpcServer::Start(so));
  return s;
}

absl::Status RunWorker(const TrainerConfig& c, const PsCluster& cl, JobEnd& end, FILE* log) {
  ClientInput in;
  if (c.max_staleness == 0) {
    // Rounds: this worker's part of every global batch, as a synchronous
    // worker reads it, and its gradients accumulated for the round.
    in.seed = static_cast<uint64_t>(c.seed);
    in.shard = cl.index;
    in.num_shards = static_cast<int>(cl.workers.size());
    in.rounds_of = in.num_shards;
  } else {
    // Each worker's own order of the training split.
    in.seed = static_cast<uint64_t>(c.seed) + 7919 * static_cast<uint64_t>(cl.index + 1);
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, MakeClient(c, cl, in));
  STRATA_ASSIGN_OR_RETURN(Serving serving, Serve(cl));
  TrainGraph& g = *client->graph;
  const DataType dt = g.loss_and_flag.node()->output_type(g.loss_and_flag.index());
  Mutex step_mu;  // one step at a time: the iterator is this worker's
  int64_t steps = 0;
  serving.service->RegisterFunction(
      kStepFunction, [&](const std::vector<Tensor>&) -> absl::StatusOr<std::vector<Tensor>> {
        MutexLock l(&step_mu);
        std::vector<std::pair<std::string, Tensor>> feeds;
        bool end = false;
        STRATA_RETURN_IF_ERROR(g.input->GetNext(&feeds, &end));
        if (end) return absl::OutOfRangeError("the input ended");
        for (const std::string& f : g.preempt_feeds) {
          feeds.emplace_back(f, dt == DT_DOUBLE ? Tensor::FromVector(std::vector<double>(3, 0))
                                                : Tensor::FromVector(std::vector<float>(3, 0)));
        }
        std::vector<Tensor> out;
        STRATA_RETURN_IF_ERROR(
            client->session->Run(feeds, {g.loss_and_flag.name()}, {g.train_op->name()}, &out));
        if (++steps == c.crash_at_step) std::raise(SIGKILL);  // testing: a crash mid-closure
        return out;
      });
  serving.service->RegisterFunction(
      kInputStateFunction, [&](const std::vector<Tensor>&) -> absl::StatusOr<std::vector<Tensor>> {
        MutexLock l(&step_mu);
        STRATA_ASSIGN_OR_RETURN(std::string state, g.input->SaveState());
        return std::vector<Tensor>{BytesTensor(state)};
      });
  serving.service->RegisterFunction(
      kRestoreInputFunction,
      [&](const std::vector<Tensor>& args) -> absl::StatusOr<std::vector<Tensor>> {
        STRATA_ASSIGN_OR_RETURN(std::string state, TensorBytes(args, "an input position"));
        MutexLock l(&step_mu);
        absl::Status s = g.input->RestoreState(state);
        if (!s.ok()) {
          return AnnotateStatus(s,
                                absl::StrCat(cl.me,
                                             ": its input position (resume with the same --seed, "
                                             "--global_batch_size and --prefetch): "));
        }
        return std::vector<Tensor>{};
      });
  serving.service->RegisterFunction(kEndFunction, end.Function());
  Say(log, cl,
      absl::StrCat("serving steps at ", serving.server->address(), " (variables on ", cl.ps.size(),
                   " ps tasks)"));
  const absl::Status s = end.Wait(c, cl);
  // The server first: a step still running (one the chief gave up on)
  // uses the session, the iterator and the step's mutex.
  serving.server.reset();
  return s;
}

// Every task up (a worker not up yet would count as lost); a task that
// fails to start reports why, and the job fails with it at once.
absl::Status WaitForTasks(const TrainerConfig& c, const PsCluster& cl, const Reports& reports) {
  const absl::Time deadline = absl::Now() + absl::Seconds(c.startup_timeout_seconds);
  std::vector<std::pair<std::string, std::string>> tasks;  // task, address
  for (const RemoteTaskAddress& ps : cl.ps) tasks.push_back({ps.task, ps.address});
  for (const auto& w : cl.workers) tasks.push_back({w.task, w.address});
  for (const auto& [task, address] : tasks) {
    while (true) {
      STRATA_RETURN_IF_ERROR(reports.first());
      const absl::Status up = Call(cl, address, "", {}, absl::Seconds(1));
      if (up.ok()) break;
      if (absl::Now() > deadline) {
        return AnnotateStatus(
            up, absl::StrCat(task, " did not start within ", c.startup_timeout_seconds, " s: "));
      }
    }
  }
  return absl::OkStatus();
}

// The workers' input positions in the chief's checkpoints: read from each
// worker when saving (between epochs: no step is running), given back to
// each when resuming, so that a resumed run's workers go on with the
// batches they would have read next (a worker that could not be reached
// when saving, or beyond the saved count when resuming with more, starts
// its order anew).
absl::Status TrackWorkerInputs(const PsCluster& cl, TrainGraph& g, FILE* log) {
  auto save = [&cl, log]() -> absl::StatusOr<std::string> {
    std::vector<std::string> positions;
    for (const auto& w : cl.workers) {
      absl::StatusOr<std::vector<Tensor>> out = CallFor(
          cl, w.address, kInputStateFunction, {}, absl::Seconds(10), /*wait_for_ready=*/false);
      absl::StatusOr<std::string> state =
          out.ok() ? TensorBytes(*out, absl::StrCat(w.task, "'s input position")) : out.status();
      if (!state.ok()) {
        Say(log, cl,
            absl::StrCat("checkpoint: ", w.task,
                         "'s input position not saved (it will start its "
                         "order anew): ",
                         state.status().message()));
      }
      positions.push_back(state.ok() ? *state : "");
    }
    return EncodePositions(positions);
  };
  auto restore = [&cl, log](const std::string& text) -> absl::Status {
    STRATA_ASSIGN_OR_RETURN(std::vector<std::string> positions, DecodePositions(text));
    int restored = 0;
    for (size_t i = 0; i < cl.workers.size() && i < positions.size(); ++i) {
      if (positions[i].empty()) continue;
      STRATA_RETURN_IF_ERROR(Call(cl, cl.workers[i].address, kRestoreInputFunction,
                                  {BytesTensor(positions[i])}, absl::Seconds(30)));
      ++restored;
    }
    Say(log, cl,
        absl::StrCat("input positions restored on ", restored, " of ", cl.workers.size(),
                     " workers (", positions.size(), " saved)"));
    return absl::OkStatus();
  };
  return g.checkpoint->TrackString(kMetaWorkerInputs, save, restore);
}

// The chief's run: init, closures an epoch at a time, evaluation.
absl::StatusOr<TrainerResult> Coordinate(const TrainerConfig& c, const PsCluster& cl,
                                         Client& client, const Reports& reports, FILE* log) {
  TrainerResult result;
  const PsData& d = client.data;
  result.total_steps = d.total_steps;
  result.num_features = d.data.num_features;
  result.num_classes = d.data.num_classes;
  result.train_examples = d.data.train_x.dim_size(0);
  result.test_examples = d.data.test_x.dim_size(0);
  result.devices = client.strategy->devices();
  STRATA_RETURN_IF_ERROR(WaitForTasks(c, cl, reports));
  TrainGraph& g = *client.graph;
  // The variables from the newest intact checkpoint (written with any
  // number of ps tasks: variables are saved by name), else initialized.
  std::unique_ptr<fit::CheckpointManager> manager;
  int64_t done = 0;
  if (!c.checkpoint_dir.empty()) STRATA_RETURN_IF_ERROR(TrackWorkerInputs(cl, g, log));
  if (c.checkpoint_dir.empty()) {
    STRATA_RETURN_IF_ERROR(client.session->Run({}, {}, {g.init->name()}, nullptr));
  } else {
    STRATA_ASSIGN_OR_RETURN(manager, fit::CheckpointManager::Create(
                                         g.checkpoint.get(), c.checkpoint_dir, c.max_to_keep));
    STRATA_ASSIGN_OR_RETURN(fit::Restored restored,
                            manager->RestoreOrInitialize(client.session.get(), g.init));
    for (const absl::Status& s : restored.skipped) Say(log, cl, std::string(s.message()));
    done = result.start_step = restored.step;
    result.resumed_from = restored.prefix;
    if (!restored.prefix.empty()) {
      Say(log, cl, absl::StrCat("resumed from ", restored.prefix, " at step ", restored.step));
    }
  }
  // Saved only between epochs, after Join: no step is running, so every ps
  // task's variables are of one step.
  int64_t saved = done;
  auto save = [&]() -> absl::Status {
    if (manager == nullptr || saved == done) return absl::OkStatus();
    STRATA_ASSIGN_OR_RETURN(result.final_checkpoint, manager->Save(client.session.get(), done));
    saved = done;
    return absl::OkStatus();
  };
  distribute::ClusterCoordinatorOptions co;
  co.workers = cl.workers;
  co.job_token = cl.token;
  co.tls = cl.tls;
  co.max_staleness = c.max_staleness;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::ClusterCoordinator> coordinator,
                          distribute::ClusterCoordinator::Create(co));
  const absl::Time start = absl::Now();
  for (int64_t epoch = done / d.steps_per_epoch + 1; done < d.total_steps; ++epoch) {
    const int64_t n = std::min(d.steps_per_epoch - done % d.steps_per_epoch, d.total_steps - done);
    std::vector<std::shared_ptr<distribute::RemoteValue>> losses;
    if (g.apply_op == nullptr) {
      for (int64_t i = 0; i < n; ++i) losses.push_back(coordinator->Schedule(kStepFunction));
      STRATA_RETURN_IF_ERROR(coordinator->Join());
    } else {
      // Rounds (--max_staleness=0): a step on every worker (the bound lets
      // each take one), then the chief applies their mean gradient once.
      for (int64_t r = 0; r < n; ++r) {
        for (size_t w = 0; w < cl.workers.size(); ++w) {
          losses.push_back(coordinator->Schedule(kStepFunction));
        }
        STRATA_RETURN_IF_ERROR(coordinator->Join());
        STRATA_RETURN_IF_ERROR(client.session->Run({}, {}, {g.apply_op->name()}, nullptr));
      }
    }
    done += n;
    double loss_sum = 0;
    for (const auto& v : losses) {
      STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> out, v->Fetch());
      loss_sum += out[0].dtype() == DT_DOUBLE ? out[0].data<double>()[0] : out[0].data<float>()[0];
    }
    loss_sum *= static_cast<double>(n) / static_cast<double>(losses.size());
    STRATA_ASSIGN_OR_RETURN(std::vector<double> eval,
                            EvaluateSums(client.session.get(), g, d.data));
    result.test_accuracy = eval[2] > 0 ? eval[1] / eval[2] : -1;
    result.test_loss = eval[2] > 0 ? eval[0] / eval[2] : -1;
    if (!c.quiet) {
      Say(log, cl,
          absl::StrCat("epoch ", epoch, " (step ", done, "): loss ",
                       fit::JsonNumber(loss_sum / static_cast<double>(n)), ", test accuracy ",
                       fit::JsonNumber(result.test_accuracy), "; ",
                       coordinator->num_available_workers(), " of ", cl.workers.size(),
                       " workers up, ", coordinator->num_rescheduled(), " steps rescheduled"));
    }
    if (c.save_every_steps > 0 && done - saved >= c.save_every_steps)
      STRATA_RETURN_IF_ERROR(save());
  }
  STRATA_RETURN_IF_ERROR(save());
  result.final_step = d.total_steps;
  if (!c.quiet) {
    Say(log, cl,
        absl::StrCat("steps per worker: ",
                     absl::StrJoin(coordinator->finished_per_worker(), ", ")));
  }
  result.train_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result.examples_per_sec =
      result.train_seconds > 0
          ? static_cast<double>((d.total_steps - result.start_step) * c.global_batch_size) /
                result.train_seconds
          : 0;
  return result;
}

absl::StatusOr<TrainerResult> RunChief(const TrainerConfig& c, const PsCluster& cl, FILE* log) {
  // Answers the other tasks' checks on it while the job runs, and takes
  // their reports of failing to start.
  Reports reports;
  STRATA_ASSIGN_OR_RETURN(Serving serving, Serve(cl));
  serving.service->RegisterFunction(kReportFunction, reports.Function());
  absl::StatusOr<TrainerResult> r;
  ClientInput in;
  in.seed = static_cast<uint64_t>(c.seed);
  if (c.max_staleness == 0) in.rounds_of = static_cast<int>(cl.workers.size());
  absl::StatusOr<std::unique_ptr<Client>> client = MakeClient(c, cl, in);
  if (client.ok()) {
    r = Coordinate(c, cl, **client, reports, log);
  } else {
    r = client.status();
  }
  // Every other task's part ends with the chief's outcome (a lost task
  // does not answer; the others go on ending).
  // All at once, each given the heartbeat timeout: a frozen task (one that
  // holds its connections open but answers nothing) delays the others'
  // ends by no more than that.
  const std::vector<Tensor> args = StatusArgs(r.status());
  std::vector<std::string> addresses;
  for (const auto& w : cl.workers) addresses.push_back(w.address);
  for (const auto& p : cl.ps) addresses.push_back(p.address);
  std::vector<std::thread> ends;
  for (const std::string& address : addresses) {
    ends.emplace_back([&cl, &args, &c, address] {
      (void)Call(cl, address, kEndFunction, args,
                 absl::Seconds(std::min<double>(5, c.heartbeat_timeout_seconds)));
    });
  }
  for (std::thread& t : ends) t.join();
  if (r.ok() && !c.quiet) {
    Say(log, cl,
        absl::StrCat("done: ", r->final_step, " steps on ", cl.workers.size(),
                     " workers, test accuracy ", fit::JsonNumber(r->test_accuracy), ", ",
                     fit::JsonNumber(r->examples_per_sec), " examples/s"));
  }
  return r;
}

}  // namespace

absl::StatusOr<TrainerResult> RunParameterServerRole(const TrainerConfig& config, FILE* log) {
  STRATA_ASSIGN_OR_RETURN(PsCluster cl, ResolvePsCluster(config));
  if (cl.job == kChiefJob) {
    absl::StatusOr<TrainerResult> r = RunChief(config, cl, log);
    if (!config.quiet)
      Say(log, cl, absl::StrCat("peak resident memory ", PeakResidentBytes(), " bytes"));
    if (!r.ok()) return AnnotateStatus(r.status(), absl::StrCat(cl.me, ": "));
    return r;
  }
  JobEnd end;  // outlives the role's server
  absl::Status s = cl.job == kPsJob ? RunPs(config, cl, end, log) : RunWorker(config, cl, end, log);
  if (!config.quiet)
    Say(log, cl, absl::StrCat("peak resident memory ", PeakResidentBytes(), " bytes"));
  if (s.ok()) return TrainerResult();
  s = AnnotateStatus(s, absl::StrCat(cl.me, ": "));
  // This task's own failure (not the chief's end of the job): the chief
  // hears of it now rather than after its start-up timeout.
  if (!end.about_the_chief()) {
    (void)Call(cl, cl.chief_address, kReportFunction, StatusArgs(s), absl::Seconds(5));
  }
  return s;
}

}  // namespace trainer
}  // namespace strata
