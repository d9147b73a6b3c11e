#include "tools/trainer_lib.h"

#define EIGEN_USE_THREADS
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/status.h"
#include "data/digits/find_digits.h"
#include "fit/checkpoint.h"
#include "fit/loop.h"
#include "fit/optimizers.h"
#include "fit/progress.h"
#include "fit/strategy_flags.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "runtime/checkpoint/checkpoint_manager.h"
#include "runtime/collective/flight_recorder.h"
#include "runtime/device_name.h"
#include "runtime/session.h"
#include "strategy/distributed_dataset.h"
#include "strategy/distributed_optimizer.h"
#include "strategy/multi_worker_mirrored_strategy.h"
#include "strategy/one_device_strategy.h"
#include "strategy/replica_context.h"
#include "strategy/strategy.h"
#include "tools/trainer_data.h"
#include "tools/trainer_graph.h"
#include "tools/trainer_ps.h"
#include "tools/trainer_sharding.h"
#include "train/data/auto_shard.h"
#include "train/learning_rate.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/optimizers.h"
#include "train/policy.h"
#include "train/variable.h"
#include "unsupported/Eigen/CXX11/ThreadPool"

namespace strata {
namespace trainer {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kMetaIterator[] = "input_iterator";
constexpr char kMetaConfig[] = "trainer_config";
constexpr char kStatsMean[] = "_trainer/feature_mean";
constexpr char kStatsStddev[] = "_trainer/feature_stddev";

// The intra-op threads of the session's (first) CPU device.
int IntraOpThreads(const DeviceMgr& devices) {
  const auto* cpu = dynamic_cast<const CpuDevice*>(devices.devices()[0]);
  return cpu != nullptr ? cpu->intra_op_threads() : 0;
}

void Log(FILE* log, bool quiet, const std::string& line) {
  if (log == nullptr || quiet) return;
  std::fprintf(log, "trainer: %s\n", line.c_str());
  std::fflush(log);
}

// What a checkpoint must agree with to be resumed by this run (not the
// strategy or the devices: a checkpoint moves between replica counts).
std::string ConfigFingerprint(const TrainerConfig& c, const std::string& data_name) {
  const std::string embedding =
      c.model == "embedding" ? absl::StrCat(",vocabulary=", c.vocabulary, ",dim=", c.embedding_dim,
                                            ",levels=", c.embedding_levels)
                             : "";
  return absl::StrCat(
      "model=", c.model,
      c.model == "mlp" ? absl::StrCat(",hidden=", absl::StrJoin(c.hidden, ",")) : "", embedding,
      ",data=", data_name, ",batch=", c.global_batch_size, ",optimizer=", c.optimizer);
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

// --pipeline_stages, --micro_batches, --pipeline_schedule.
absl::Status ValidatePipeline(const TrainerConfig& c) {
  auto bad = [](const std::string& flag, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
  };
  if (c.pipeline_stages < 1 || c.pipeline_stages > fit::kMaxCpuDevices) {
    return bad("pipeline_stages",
               absl::StrCat(c.pipeline_stages, " is not in [1, ", fit::kMaxCpuDevices, "]"));
  }
  if (c.micro_batches < 1) return bad("micro_batches", absl::StrCat(c.micro_batches, " is < 1"));
  if (c.pipeline_schedule != "1f1b" && c.pipeline_schedule != "gpipe") {
    return bad("pipeline_schedule", absl::StrCat("unknown schedule '", c.pipeline_schedule,
                                                 "'; expected 1f1b or gpipe"));
  }
  if (!Pipelined(c)) return absl::OkStatus();
  if (c.strategy == "mirrored") {
    if (c.num_cpu_devices < c.pipeline_stages || c.num_cpu_devices % c.pipeline_stages != 0) {
      return bad(
          "num_cpu_devices",
          absl::StrCat(c.num_cpu_devices, " CPU devices do not make a mesh of replicas of ",
                       c.pipeline_stages, " pipeline stages (a multiple of the stage count)"));
    }
    const int replicas = c.num_cpu_devices / c.pipeline_stages;
    if (c.global_batch_size % (replicas * c.micro_batches) != 0) {
      return bad("micro_batches", absl::StrCat(c.micro_batches, " on each of ", replicas,
                                               " replicas does not divide --global_batch_size=",
                                               c.global_batch_size));
    }
  } else if (c.strategy != "one_device" && c.strategy != "multi_worker_mirrored") {
    return bad("pipeline_stages",
               absl::StrCat("a pipeline runs under --strategy=one_device, mirrored or "
                            "multi_worker_mirrored, not ",
                            c.strategy));
  }
  if (!c.devices.empty()) {
    return bad("devices",
               "a pipeline's stages go on the CPU devices in order (--num_cpu_devices); "
               "--devices does not apply");
  }
  // (Across workers the mesh's devices are every worker's: RunTrainer
  // checks them once it knows the cluster.)
  if (c.strategy == "one_device" && c.num_cpu_devices > 0 &&
      c.num_cpu_devices < c.pipeline_stages) {
    return bad("num_cpu_devices", absl::StrCat(c.num_cpu_devices, " CPU devices for ",
                                               c.pipeline_stages, " pipeline stages (one each)"));
  }
  if (c.model == "embedding") {
    return bad("pipeline_stages",
               "--model=embedding (sparse updates) is not pipelined; use mlp or cnn");
  }
  if (c.dtype_policy != "float32") {
    return bad("pipeline_stages", absl::StrCat("--dtype_policy=", c.dtype_policy,
                                               " is not pipelined (loss scaling); use float32"));
  }
  if (c.global_batch_size % c.micro_batches != 0) {
    return bad("micro_batches",
               absl::StrCat(c.micro_batches,
                            " does not divide --global_batch_size=", c.global_batch_size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ParseHidden(const std::string& text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--hidden=", text, ": '", part, "' is not a positive integer (e.g. --hidden=128,64)"));
    }
    out.push_back(v);
  }
  return out;
}

absl::Status ValidateConfig(const TrainerConfig& c) {
  auto bad = [](const std::string& flag, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
  };
  if (c.model != "mlp" && c.model != "cnn" && c.model != "embedding") {
    return bad("model",
               absl::StrCat("unknown model '", c.model, "'; expected mlp, cnn or embedding"));
  }
  if (c.vocabulary < 1 || c.embedding_dim < 1 || c.embedding_levels < 2) {
    return bad("vocabulary",
               "--vocabulary and --embedding_dim must be >= 1, --embedding_levels >= 2");
  }
  if (c.optimizer != "sgd" && c.optimizer != "momentum" && c.optimizer != "adam" && c.optimizer != "adamw") {
    return bad("optimizer", absl::StrCat("unknown optimizer '", c.optimizer, "'; expected sgd, momentum, adam or adamw"));
  }
  if (c.lr_schedule != "constant" && c.lr_schedule != "exponential" && c.lr_schedule != "cosine") {
    return bad("lr_schedule", absl::StrCat("unknown schedule '", c.lr_schedule,
                                           "'; expected constant, exponential or cosine"));
  }
  for (int64_t h : c.hidden) {
    if (h < 1) return bad("hidden", absl::StrCat("layer size ", h, " is < 1"));
  }
  if (!(c.learning_rate >= 0) || !std::isfinite(c.learning_rate)) {
    return bad("learning_rate", absl::StrCat(c.learning_rate, " is not a positive number"));
  }
  if (!(c.momentum >= 0 && c.momentum < 1)) return bad("momentum", "must be in [0, 1)");
  if (!(c.weight_decay >= 0) || !std::isfinite(c.weight_decay)) return bad("weight_decay", "must be >= 0");
  if (!(c.clip_global_norm >= 0) || !std::isfinite(c.clip_global_norm)) {
    return bad("clip_global_norm", "must be >= 0 (0: no clipping)");
  }
  if (!(c.lr_decay_rate > 0 && c.lr_decay_rate <= 1)) return bad("lr_decay_rate", "must be in (0, 1]");
  if (c.lr_decay_steps < 0) return bad("lr_decay_steps", "must be >= 0");
  if (!(c.test_fraction >= 0 && c.test_fraction < 1)) {
    return bad("test_fraction", absl::StrCat(c.test_fraction, " is not in [0, 1)"));
  }
  if (c.global_batch_size < 1) return bad("global_batch_size", "must be >= 1");
  if (c.epochs < 0) return bad("epochs", "must be >= 0");
  if (c.steps < 0) return bad("steps", "must be >= 0");
  if (c.save_every_steps < 0) return bad("save_every_steps", "must be >= 0");
  if (c.max_to_keep < 0) return bad("max_to_keep", "must be >= 0 (0 keeps every checkpoint)");
  if (c.prefetch < 0) return bad("prefetch", "must be >= 0");
  if (c.log_every_steps < 0) return bad("log_every_steps", "must be >= 0");
  if (c.save_every_steps > 0 && c.checkpoint_dir.empty()) {
    return bad("save_every_steps", "needs --checkpoint_dir");
  }
  STRATA_RETURN_IF_ERROR(fit::ValidateStrategyConfig(c));
  STRATA_RETURN_IF_ERROR(ValidatePipeline(c));
  if (c.trace_steps < 1) return bad("trace_steps", "must be >= 1");
  if (c.tensorboard_update_steps < 0) return bad("tensorboard_update_steps", "must be >= 0");
  absl::StatusOr<data::AutoShardPolicy> sharding = data::ParseAutoShardPolicy(c.input_sharding);
  if (!sharding.ok() || *sharding == data::AutoShardPolicy::kOff) {
    return bad("input_sharding", absl::StrCat("unknown policy '", c.input_sharding,
                                              "'; expected auto, file or data"));
  }
  return ParseDataSpec(c.data).status();
}

// What the data phase decided: the input plan, the loaded data, the epoch
// and the configuration's fingerprint.
struct PreparedData {
  InputPlan plan;
  TrainerData data;
  UnevenEpoch uneven;
  int64_t local_batch = 0;
  bool join = false;            // uneven FILE shards, trained as PyTorch's Join
  bool keep_remainder = false;  // --drop_remainder=false
  bool weighted = false;
  int64_t steps_per_epoch = 0;
  Tensor mean, stddev;  // --standardize's statistics
  std::string fingerprint;
};

// 1. Data: load, split (fixed by the seed), measure the training split.
absl::Status PrepareData(const TrainerConfig& c, distribute::Strategy* strategy, FILE* log,
                         TrainerResult* result, PreparedData* p) {
  auto* multi_worker = dynamic_cast<distribute::MultiWorkerMirroredStrategy*>(strategy);
  STRATA_ASSIGN_OR_RETURN(SourceSpec spec, ParseDataSpec(c.data));
  std::string digits_path;
  if (spec.kind == SourceSpec::Kind::kDigits) {
    STRATA_ASSIGN_OR_RETURN(digits_path, FindDigitsCsv(c.digits_path, c.argv0));
  }
  // Several workers: FILE (each loads its share of the files) or DATA
  // (each loads everything and keeps its part of every global batch).
  STRATA_ASSIGN_OR_RETURN(p->plan, PlanInput(c, spec, *strategy));
  p->local_batch =
      p->plan.by_file() ? c.global_batch_size / p->plan.num_workers : c.global_batch_size;
  const std::vector<std::string>* files =
      p->plan.by_file() ? &p->plan.files : p->plan.all_files.empty() ? nullptr : &p->plan.all_files;
  STRATA_ASSIGN_OR_RETURN(p->data,
                          LoadTrainerData(spec, digits_path, c.test_fraction, static_cast<uint64_t>(c.seed),
                                          files, /*check_classes=*/!p->plan.by_file()));
  result->num_features = p->data.num_features;
  result->train_examples = p->data.train_x.dim_size(0);
  result->test_examples = p->data.test_x.dim_size(0);
  // FILE: every worker's example count; shards that are p->uneven (different
  // counts, or not a multiple of the batch) train as PyTorch's Join does:
  // every worker runs the longest shard's steps, weighted so that each
  // example counts once per epoch (UnevenEpoch).
  if (p->plan.by_file()) {
    std::vector<int64_t> shard_examples;
    STRATA_ASSIGN_OR_RETURN(std::tie(result->train_examples, result->test_examples),
                            CombineShards(strategy, p->plan, &p->data, &shard_examples));
    p->uneven = PlanUnevenEpoch(shard_examples, p->local_batch);
    p->join = !p->uneven.even();
  }
  // --drop_remainder=false: each epoch's last partial global batch trains
  // too (DATA, one worker); FILE shards never drop (p->join above).
  p->keep_remainder = !c.drop_remainder && !p->plan.by_file();
  p->weighted = p->join || p->keep_remainder;
  result->num_classes = p->data.num_classes;
  if (multi_worker != nullptr) {
    // One line per worker, even from quiet ones: which examples it reads.
    Log(log, false, absl::StrCat(
        multi_worker->task_name(), ": input sharding ", data::AutoShardPolicyName(p->plan.policy), " (",
        p->plan.why, "): ",
        p->plan.by_file()
            ? absl::StrCat("reads ", p->plan.files.size(), " of ", p->plan.all_files.size(), " files (",
                           BaseNames(p->plan.files), "), ", p->data.train_x.dim_size(0), " of the ",
                           result->train_examples, " training examples, in batches of ", p->local_batch,
                           " of each global batch of ", c.global_batch_size,
                           p->join ? absl::StrCat("; the shards are uneven (",
                                               absl::StrJoin(p->uneven.examples, ", "),
                                               " examples): every epoch is ", p->uneven.steps,
                                               " steps, each example once, this worker's last ",
                                               p->uneven.steps - (p->data.train_x.dim_size(0) + p->local_batch - 1) / p->local_batch,
                                               " without examples of its own")
                                : "")
            : absl::StrCat("reads all the data and keeps its part of every global batch of ",
                           c.global_batch_size)));
  }
  p->steps_per_epoch =
      p->join ? p->uneven.steps
           : (result->train_examples + (p->keep_remainder ? c.global_batch_size - 1 : 0)) / c.global_batch_size;
  const int64_t last_batch = result->train_examples % c.global_batch_size;
  const int lanes = c.micro_batches * c.pipeline_replicas;
  if (Pipelined(c) && p->keep_remainder && last_batch % lanes != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--micro_batches=", c.micro_batches, ": each epoch's last batch has ", last_batch,
        " of the ", result->train_examples, " training examples, which do not split into ", lanes,
        " micro-batches; pass --drop_remainder or a --global_batch_size that leaves a multiple"));
  }
  if (p->steps_per_epoch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--global_batch_size=", c.global_batch_size,
                                                   " is larger than the ", result->train_examples,
                                                   " training examples"));
  }
  const int64_t epochs = c.epochs > 0 ? c.epochs : 30;
  if (c.steps == 0 && epochs > std::numeric_limits<int64_t>::max() / p->steps_per_epoch) {
    return absl::InvalidArgumentError(absl::StrCat("--epochs=", c.epochs, " is too large"));
  }
  result->total_steps = c.steps > 0 ? c.steps : epochs * p->steps_per_epoch;
  if (c.standardize) {
    // FILE: every worker standardizes with the statistics of the cluster's
    // training examples, so the replicas see the same preprocessing.
    STRATA_ASSIGN_OR_RETURN(std::tie(p->mean, p->stddev),
                            p->plan.by_file() ? CombinedStats(strategy, p->data) : ComputeStats(p->data));
  }
  // A FILE run's input positions are per worker: its checkpoints resume
  // only a FILE run of as many workers.
  p->fingerprint = ConfigFingerprint(
      c, absl::StrCat(p->data.name, c.standardize ? "+standardized" : "",
                      p->plan.by_file() ? absl::StrCat(",input=FILE/", p->plan.num_workers) : "",
                      p->keep_remainder ? ",drop_remainder=false" : ""));

  return absl::OkStatus();
}

// Where a run resumes: the checkpoint and the input's position in it.
struct ResumePoint {
  std::unique_ptr<CheckpointReader> reader;  // null: a fresh start
  std::string iterator_state;
};

// 2. The newest intact checkpoint, if any (corrupt newer ones are
// skipped), checked against this run's configuration and data.
absl::Status FindResumePoint(const TrainerConfig& c, const PreparedData& p, FILE* log,
                             TrainerResult* result, ResumePoint* r) {
  std::unique_ptr<CheckpointManager> manager;
  std::unique_ptr<CheckpointReader>& reader = r->reader;
  if (!c.checkpoint_dir.empty()) {
    STRATA_ASSIGN_OR_RETURN(manager, CheckpointManager::Create(c.checkpoint_dir, c.max_to_keep));
    std::vector<absl::Status> skipped;
    absl::StatusOr<std::unique_ptr<CheckpointReader>> latest = manager->LoadLatestValid(&skipped);
    for (const absl::Status& s : skipped) Log(log, false, absl::StrCat("skipping checkpoint: ", s.ToString()));
    if (latest.ok()) {
      reader = *std::move(latest);
    } else if (latest.status().code() != absl::StatusCode::kNotFound) {
      return AnnotateStatus(latest.status(), absl::StrCat("--checkpoint_dir=", c.checkpoint_dir, ": "));
    }
  }
  if (reader != nullptr) {
    const std::string where = absl::StrCat("checkpoint ", reader->prefix(), ": ");
    STRATA_ASSIGN_OR_RETURN(std::string written_by, fit::ReadTrackedString(*reader, kMetaConfig));
    if (written_by != p.fingerprint) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, "was written by a run with ", written_by, "; this run has ", p.fingerprint,
          ". Use another --checkpoint_dir"));
    }
    STRATA_ASSIGN_OR_RETURN(std::string step_text, reader->GetMetadata(CheckpointManager::kMetadataGlobalStep));
    if (!absl::SimpleAtoi(step_text, &result->start_step) || result->start_step < 0) {
      return absl::DataLossError(absl::StrCat(where, "global_step '", step_text, "' is not a step"));
    }
    STRATA_ASSIGN_OR_RETURN(r->iterator_state, fit::ReadTrackedString(*reader, kMetaIterator));
    if (c.standardize) {
      // The statistics are a function of the p.data and the split; different
      // ones p.mean the p.data changed under the checkpoint.
      std::map<std::string, Tensor> saved;
      const TensorShape f{p.data.num_features};
      STRATA_RETURN_IF_ERROR(reader->RestoreInto(
          {{kStatsMean, {DT_FLOAT, f}}, {kStatsStddev, {DT_FLOAT, f}}}, &saved));
      if (!SameBytes(saved[kStatsMean], p.mean) || !SameBytes(saved[kStatsStddev], p.stddev)) {
        return absl::FailedPreconditionError(absl::StrCat(
            where, "the training data's feature statistics differ from the checkpoint's: --data ",
            c.data, " changed since it was written"));
      }
    }
    result->resumed_from = reader->prefix();
  }
  return absl::OkStatus();
}

// 4. The library's loop (fit/loop.h): the session, the restore, the steps,
// the saves on the chief, the reports; then the test set.
absl::Status RunLoop(const TrainerConfig& c, distribute::Strategy* strategy, const PreparedData& p,
                     TrainGraph* g, std::unique_ptr<CheckpointReader> reader, FILE* log,
                     const fit::LoopHooks::AcrossWorkers* across, TrainerResult* result) {
  fit::FitOptions o;
  o.global_batch_size = c.global_batch_size;
  o.steps = result->total_steps;
  o.checkpoint_dir = c.checkpoint_dir;
  o.save_every_steps = c.save_every_steps;
  o.max_to_keep = c.max_to_keep;
  o.metrics_out = c.metrics_out;
  o.log_every_steps = c.log_every_steps;
  o.quiet = c.quiet;
  o.log = log;
  o.trace_out = c.trace_out;
  o.trace_steps = c.trace_steps;
  o.trace_warmup_steps = kTraceWarmupSteps;
  o.inter_op_threads = c.inter_op_threads;
  o.tensorboard_dir = c.tensorboard_dir;
  o.tensorboard_update_steps = c.tensorboard_update_steps;
  fit::StepGraph step;
  step.root = &g->root;
  step.input = g->input.get();
  step.loss_and_flag = g->loss_and_flag;
  step.preempt_feeds = g->preempt_feeds;
  step.train_op = g->train_op;
  step.learning_rate = g->optimizer->applied_learning_rate();
  step.init = g->init;
  step.checkpoint = g->checkpoint.get();
  fit::LoopHooks hooks;
  hooks.steps_per_epoch = p.steps_per_epoch;
  hooks.log_prefix = "trainer";
  hooks.nonfinite_hint = "try a smaller --learning_rate";
  if (across != nullptr) hooks.across_workers = *across;
  hooks.final_logs = [g, &p, result, strategy](Session* session) -> absl::StatusOr<fit::Logs> {
    STRATA_ASSIGN_OR_RETURN(std::vector<double> eval, EvaluateSums(session, *g, p.data));
    if (p.plan.by_file()) {
      // Every worker's test examples: the same figures on every worker.
      STRATA_ASSIGN_OR_RETURN(eval, SumAcrossWorkers(strategy, eval));
    }
    if (eval[2] > 0) {
      result->test_loss = eval[0] / eval[2];
      result->test_accuracy = eval[1] / eval[2];
    }
    const double none = std::numeric_limits<double>::quiet_NaN();  // written as null
    return fit::Logs{{"test_accuracy", result->test_examples > 0 ? result->test_accuracy : none},
                     {"test_loss", result->test_examples > 0 ? result->test_loss : none},
                     {"test_examples", static_cast<double>(result->test_examples)}};
  };
  if (c.crash_at_step > 0 || c.hang_at_step > 0) {
    hooks.after_step = [crash = c.crash_at_step, hang = c.hang_at_step](int64_t step) {
      if (step == crash) std::raise(SIGKILL);
      if (step == hang) {
        FlightRecorder::Process().SetActivity("hanging (--hang_at_step)");
        std::fprintf(stderr, "trainer: hanging after step %lld (--hang_at_step)\n",
                     static_cast<long long>(step));
        absl::SleepFor(absl::Hours(24));
      }
    };
  }
  if (g->pipeline_step.train_op != nullptr) {
    // Each traced step's pipeline items on their stages' tracks.
    hooks.traced_step = [g](StepTracer* tracer, size_t first_event) {
      distribute::RecordPipelineItems(g->pipeline_step, tracer, first_event);
    };
  }
  fit::FitResult fr;
  fr.total_steps = result->total_steps;
  fit::TrainLoop loop(strategy, step, o, std::move(hooks), &fr);
  STRATA_RETURN_IF_ERROR(loop.StartFrom(std::move(reader)));
  Log(log, c.quiet,
      absl::StrCat(across != nullptr
                       ? "multi_worker_mirrored (a pipeline across the workers in one graph)"
                   : c.pipeline_replicas > 1 ? "mirrored (a pipeline mesh in one graph)"
                                             : c.strategy,
                   " on ", absl::StrJoin(result->devices, ", "), " (", fit::NumCpuDevices(c),
                   " CPU device", fit::NumCpuDevices(c) > 1 ? "s" : "", ", ",
                   IntraOpThreads(loop.session()->device_mgr()), " intra-op thread(s) each, ",
                   loop.inter_op_threads() > 0
                       ? absl::StrCat(loop.inter_op_threads(), " inter-op thread(s))")
                       : "ops inline)"));
  result->inter_op_threads = loop.inter_op_threads();
  Log(log, c.quiet, absl::StrCat(c.model, " with ", g->model->num_parameters(), " parameters; ",
                                 result->train_examples, " training and ", result->test_examples,
                                 " test examples, ", p.data.num_features, " features, ",
                                 p.data.num_classes, " classes; ", result->total_steps, " steps of ",
                                 c.global_batch_size));
  if (!g->pipeline.empty()) Log(log, c.quiet, g->pipeline);
  STRATA_RETURN_IF_ERROR(loop.Run());
  result->final_step = fr.final_step;
  result->train_seconds = fr.train_seconds;
  result->examples_per_sec = fr.examples_per_sec;
  result->final_checkpoint = fr.final_checkpoint;
  result->traced_steps = fr.traced_steps;
  result->preempted = fr.preempted;
  if (result->test_examples > 0 && !result->preempted) {
    Log(log, c.quiet, absl::StrCat("step ", result->final_step, ": test accuracy ", fit::JsonNumber(result->test_accuracy),
                                   ", test loss ", fit::JsonNumber(result->test_loss), " (", result->test_examples,
                                   " examples); ", fit::JsonNumber(result->examples_per_sec), " examples/s"));
  }
  return absl::OkStatus();
}

// The run, once the strategy exists (RunTrainer below adds the cluster's
// part for multi-worker runs). `across`: the session spanning the workers
// of a pipeline across them (null: the strategy's).
absl::StatusOr<TrainerResult> Train(const TrainerConfig& c, distribute::Strategy* strategy,
                                    FILE* log,
                                    const fit::LoopHooks::AcrossWorkers* across = nullptr) {
  TrainerResult result;
  const int replicas = strategy->num_replicas_in_sync();
  if (c.global_batch_size % replicas != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--global_batch_size: ", c.global_batch_size, " does not split evenly over the ", replicas,
        " replicas of --strategy=", c.strategy,
        " (each replica takes an equal share of every global batch); use a multiple of ", replicas));
  }
  if (!c.trace_out.empty()) {
    // Found unwritable now rather than after the run (each worker writes
    // its own, fit/loop.h).
    const std::string mine = strategy->worker_index() == 0 ? c.trace_out
                                                            : fit::WorkerPath(c.trace_out, strategy->worker_index());
    FILE* f = std::fopen(mine.c_str(), "w");
    if (f == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("--trace_out=", mine,
                                                     ": cannot open for writing: ", std::strerror(errno)));
    }
    std::fclose(f);
  }

  PreparedData p;
  STRATA_RETURN_IF_ERROR(PrepareData(c, strategy, log, &result, &p));
  ResumePoint resume;
  STRATA_RETURN_IF_ERROR(FindResumePoint(c, p, log, &result, &resume));
  if (c.standardize) STRATA_RETURN_IF_ERROR(StandardizeInPlace(&p.data, p.mean, p.stddev));
  TrainerData& data = p.data;
  const InputPlan& plan = p.plan;
  std::unique_ptr<CheckpointReader>& reader = resume.reader;

  // 3. Graph (with the input pipeline) and session; variables from the
  // initializers or the checkpoint, the input at the checkpoint's position.
  // FILE: each worker's sequence is its own, and the checkpoint holds the
  // chief's position only; every worker's input is a pure function of the
  // step (one batch per step), so each starts at the checkpoint's step.
  // DATA over several workers: each worker gathers only its part of every
  // global batch (the rows its replicas take), not the whole batch to keep
  // a part; the positions, and so the checkpoints' input states, are the
  // global pipeline's.
  const bool by_example = !plan.by_file() && plan.num_workers > 1;
  data::DatasetPtr batches;
  if (p.join) {
    STRATA_ASSIGN_OR_RETURN(batches, MakeUnevenTrainBatches(data, p.local_batch, p.uneven.steps,
                                                            static_cast<uint64_t>(c.seed), c.prefetch,
                                                            result.start_step, p.uneven.examples));
  } else {
    STRATA_ASSIGN_OR_RETURN(batches,
                            MakeTrainBatches(data, p.local_batch, static_cast<uint64_t>(c.seed), c.prefetch,
                                             plan.by_file() ? result.start_step : 0,
                                             by_example ? plan.worker : 0,
                                             by_example ? plan.num_workers : 1, p.keep_remainder,
                                             strategy->num_local_replicas()));
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<TrainGraph> g,
                          BuildGraph(c, data, result.total_steps, strategy, std::move(batches),
                                     plan.by_file() || by_example, p.weighted));
  result.devices = g->strategy->devices();
  if (reader != nullptr && !plan.by_file()) {
    absl::Status s = g->input->RestoreState(resume.iterator_state);
    if (!s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint ", reader->prefix(),
                                                        ": cannot restore the input position (resume with the same --data, --seed, "
                                                        "--global_batch_size and --prefetch): ", s.message()));
    }
  }
  // What a checkpoint holds beyond the variables. The input's position is
  // restored above (before the session; for FILE sharding it is a function
  // of the step), the configuration's p.fingerprint and the feature
  // statistics were checked before the data was standardized: their
  // restores have nothing left to do.
  auto already_restored_string = [](const std::string&) { return absl::OkStatus(); };
  auto already_restored_tensor = [](const Tensor&) { return absl::OkStatus(); };
  STRATA_RETURN_IF_ERROR(g->checkpoint->TrackString(
      kMetaIterator,
      [&g]() { return g->input->SaveState(); },
      already_restored_string));
  STRATA_RETURN_IF_ERROR(g->checkpoint->TrackString(
      kMetaConfig, [&p]() -> absl::StatusOr<std::string> { return p.fingerprint; },
      already_restored_string));
  if (c.standardize) {
    const TensorShape f{data.num_features};
    STRATA_RETURN_IF_ERROR(g->checkpoint->TrackTensor(
        kStatsMean, DT_FLOAT, f, [&p]() -> absl::StatusOr<Tensor> { return p.mean; }, already_restored_tensor));
    STRATA_RETURN_IF_ERROR(g->checkpoint->TrackTensor(
        kStatsStddev, DT_FLOAT, f, [&p]() -> absl::StatusOr<Tensor> { return p.stddev; },
        already_restored_tensor));
  }
  STRATA_RETURN_IF_ERROR(RunLoop(c, strategy, p, g.get(), std::move(reader), log, across, &result));
  return result;
}

// Sets the global dtype policy for one run and puts the previous one back.
class PolicyForRun {
 public:
  explicit PolicyForRun(const train::Policy& p) : previous_(train::GlobalPolicy()) { train::SetGlobalPolicy(p); }
  ~PolicyForRun() { train::SetGlobalPolicy(previous_); }

 private:
  const train::Policy previous_;
};

// The mesh of a pipeline across the workers: every worker's CPU devices in
// worker order, one graph on a strategy of one replica (on the chief's
// first device, the same on every worker) whose session spans the workers.
// Sets c->pipeline_replicas and c->pipeline_devices.
absl::StatusOr<std::unique_ptr<distribute::Strategy>> PipelineAcrossWorkers(
    const distribute::MultiWorkerMirroredStrategy& cluster, TrainerConfig* c,
    fit::LoopHooks::AcrossWorkers* across) {
  const std::vector<std::string> tasks = cluster.worker_task_names();
  const int local = fit::NumCpuDevices(*c), workers = static_cast<int>(tasks.size());
  const int devices = local * workers, stages = c->pipeline_stages;
  if (devices % stages != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pipeline_stages=", stages, ": ", workers, " workers x ", local,
        " CPU devices (--num_cpu_devices) are ", devices,
        " devices, which do not make replicas of the pipeline (a multiple of the stage count)"));
  }
  c->pipeline_replicas = devices / stages;
  if (c->global_batch_size % (c->pipeline_replicas * c->micro_batches) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--micro_batches=", c->micro_batches, " on each of ", c->pipeline_replicas,
                     " replicas does not divide --global_batch_size=", c->global_batch_size));
  }
  for (const std::string& task : tasks) {
    for (int d = 0; d < local; ++d)
      c->pipeline_devices.push_back(absl::StrCat(task, "/device:CPU:", d));
  }
  STRATA_ASSIGN_OR_RETURN(across->session, cluster.session_options_across_workers());
  across->worker_index = cluster.worker_index();
  // The chief's machine, as every worker names it ("/job:worker/replica:0/task:0").
  STRATA_ASSIGN_OR_RETURN(DeviceName chief_task, DeviceName::Parse(tasks[0]));
  DeviceOptions chief = cluster.machine();
  chief.job = chief_task.job;
  chief.task = chief_task.task;
  c->strategy = "one_device";
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::OneDeviceStrategy> graph,
                          distribute::OneDeviceStrategy::Create("/cpu:0", chief));
  return std::unique_ptr<distribute::Strategy>(std::move(graph));
}

absl::StatusOr<TrainerResult> RunTrainer(const TrainerConfig& config, FILE* log) {
  STRATA_RETURN_IF_ERROR(ValidateConfig(config));
  absl::StatusOr<train::Policy> policy = train::PolicyFromName(config.dtype_policy);
  if (!policy.ok()) return absl::InvalidArgumentError(absl::StrCat("--dtype_policy: ", policy.status().message()));
  const PolicyForRun policy_for_run(*policy);
  if (config.strategy == "parameter_server") return RunParameterServerRole(config, log);
  // The devices (and the cluster) first: a bad --devices or TF_CONFIG fails
  // before the data is loaded. A pipeline's stages each get a CPU device.
  TrainerConfig with_stages = config;
  const bool across_workers = Pipelined(config) && config.strategy == "multi_worker_mirrored";
  if (Pipelined(config) && !across_workers) {
    // A mesh: one graph over every replica's stages (the one_device
    // strategy's session sees all the CPU devices).
    if (config.strategy == "mirrored") {
      with_stages.pipeline_replicas = config.num_cpu_devices / config.pipeline_stages;
    }
    with_stages.strategy = "one_device";
    with_stages.num_cpu_devices = std::max(config.num_cpu_devices, config.pipeline_stages);
  }
  with_stages.steps_span_workers = across_workers;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::Strategy> strategy,
                          fit::MakeStrategy(with_stages));
  auto* multi_worker = dynamic_cast<distribute::MultiWorkerMirroredStrategy*>(strategy.get());
  if (multi_worker == nullptr) return Train(with_stages, strategy.get(), log);

  TrainerConfig c = config;
  if (!multi_worker->is_chief()) {
    // Every worker gets the same flags from the launcher: one writer each,
    // but every worker's trace (a straggler shows only in its own), as
    // trace.worker1.json beside the chief's trace.json.
    c.metrics_out.clear();
    c.quiet = true;  // the chief reports progress; errors still reach stderr
  }
  // The cluster's error fails this worker's collectives, so the step in
  // flight returns it; should anything else keep the run from returning,
  // the process still ends a few seconds later, naming the error.
  auto finished = std::make_shared<std::atomic<bool>>(false);
  const std::string task = multi_worker->task_name();
  multi_worker->OnClusterError([finished, task](absl::Status error) {
    std::thread([finished, task, error] {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      if (finished->load()) return;
      std::fprintf(stderr, "trainer %s: error: %s (the run did not stop within 3 s; exiting)\n",
                   task.c_str(), error.ToString().c_str());
      std::fflush(stderr);
      _exit(1);
    }).detach();
  });
  // A pipeline across the workers runs its graph on a strategy of its own.
  fit::LoopHooks::AcrossWorkers across;
  absl::StatusOr<std::unique_ptr<distribute::Strategy>> pipeline =
      across_workers ? PipelineAcrossWorkers(*multi_worker, &c, &across)
                     : absl::StatusOr<std::unique_ptr<distribute::Strategy>>(nullptr);
  absl::StatusOr<TrainerResult> r = !pipeline.ok()
                                        ? absl::StatusOr<TrainerResult>(pipeline.status())
                                    : across_workers ? Train(c, pipeline->get(), log, &across)
                                                     : Train(c, strategy.get(), log);
  if (!r.ok()) {
    r = fit::ReportWorkerError(strategy.get(), r.status());
  } else {
    const absl::Status shutdown = multi_worker->Shutdown();
    if (!shutdown.ok()) r = AnnotateStatus(shutdown, absl::StrCat(task, ": shutdown: "));
  }
  // The caller prints the error only once this returns: the teardown
  // (threads joined, transport closed) stays under the exit watchdog, so a
  // teardown that hangs still ends the process naming the error.
  if (pipeline.ok()) pipeline->reset();
  across.session = SessionOptions();
  strategy.reset();
  finished->store(true);
  return r;
}

}  // namespace trainer
}  // namespace strata
