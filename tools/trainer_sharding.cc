#include "tools/trainer_sharding.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "graph/scope.h"
#include "runtime/session.h"
#include "train/data/csv.h"

namespace strata {
namespace trainer {

// A small graph and session of its own: replica 0 feeds `local`, the other
// local replicas zeros, and Strategy::Reduce adds them up across workers.
absl::StatusOr<std::vector<double>> SumAcrossWorkers(distribute::Strategy* s,
                                                     const std::vector<double>& local) {
  if (s->num_workers() == 1) return local;
  const int64_t n = static_cast<int64_t>(local.size());
  Scope root = Scope::NewRootScope();
  std::vector<Output> per;
  for (int r = 0; r < s->num_local_replicas(); ++r) {
    per.push_back(ops::Placeholder(root.WithOpName(absl::StrCat("local_values/replica_", r))
                                       .WithDevice(s->devices()[r]),
                                   DT_DOUBLE, PartialTensorShape({n})));
  }
  STRATA_ASSIGN_OR_RETURN(Output total, s->Reduce(root.NewSubScope("sum_across_workers"),
                                                  distribute::ReduceOp::kSum,
                                                  distribute::PerReplica(per)));
  STRATA_RETURN_IF_ERROR(root.status());
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root, s->session_options()));
  Tensor mine(DT_DOUBLE, TensorShape{n}), zeros(DT_DOUBLE, TensorShape{n});
  for (int64_t i = 0; i < n; ++i) {
    mine.data<double>()[i] = local[i];
    zeros.data<double>()[i] = 0;
  }
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (int r = 0; r < s->num_local_replicas(); ++r) feeds.emplace_back(per[r].name(), r == 0 ? mine : zeros);
  std::vector<Tensor> out;
  STRATA_RETURN_IF_ERROR(session->Run(feeds, {total.name()}, {}, &out));
  return std::vector<double>(out[0].data<double>(), out[0].data<double>() + n);
}

std::string BaseNames(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const std::string& p : paths) {
    const size_t slash = p.rfind('/');
    names.push_back(slash == std::string::npos ? p : p.substr(slash + 1));
  }
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<InputPlan> PlanInput(const TrainerConfig& c, const SourceSpec& spec,
                                    const distribute::Strategy& s) {
  InputPlan plan;
  plan.num_workers = s.num_workers();
  plan.worker = s.worker_index();
  if (spec.kind == SourceSpec::Kind::kCsv) {
    STRATA_ASSIGN_OR_RETURN(plan.all_files, ExpandCsvPaths(spec));
  }
  STRATA_ASSIGN_OR_RETURN(data::AutoShardPolicy requested, data::ParseAutoShardPolicy(c.input_sharding));
  absl::StatusOr<data::AutoShardPolicy> policy = data::ResolveAutoShardPolicy(
      requested, static_cast<int64_t>(plan.all_files.size()), plan.num_workers);
  if (!policy.ok()) {
    return AnnotateStatus(policy.status(), absl::StrCat("--input_sharding=", c.input_sharding,
                                                        " with --data=", c.data, ": "));
  }
  plan.policy = *policy;
  const std::string n_files = absl::StrCat(plan.all_files.size(), " file(s) for ", plan.num_workers, " workers");
  if (plan.by_file()) {
    plan.files = data::ShardFiles(plan.all_files, plan.num_workers, plan.worker);
    plan.why = requested == data::AutoShardPolicy::kAuto ? absl::StrCat("auto: ", n_files)
                                                         : "--input_sharding=file";
  } else if (requested == data::AutoShardPolicy::kData) {
    plan.why = "--input_sharding=data";
  } else {
    plan.why = spec.kind == SourceSpec::Kind::kCsv
                   ? absl::StrCat("auto: only ", n_files)
                   : absl::StrCat("auto: --data=", c.data, " is not a list of files");
  }
  return plan;
}

// Every worker makes the same checks on the same sums, so they all fail
// alike.
absl::StatusOr<std::pair<int64_t, int64_t>> CombineShards(distribute::Strategy* s, const InputPlan& plan,
                                                          TrainerData* d, std::vector<int64_t>* per_worker) {
  constexpr int kFields = 5;  // files seen, features, classes, train, test
  std::vector<double> census(static_cast<size_t>(kFields * plan.num_workers), 0.0);
  double* mine = census.data() + kFields * plan.worker;
  mine[0] = static_cast<double>(plan.all_files.size());
  mine[1] = static_cast<double>(d->num_features);
  mine[2] = static_cast<double>(d->num_classes);
  mine[3] = static_cast<double>(d->train_x.dim_size(0));
  mine[4] = static_cast<double>(d->test_x.dim_size(0));
  STRATA_ASSIGN_OR_RETURN(census, SumAcrossWorkers(s, census));
  int64_t classes = 0, train = 0, test = 0;
  for (int w = 0; w < plan.num_workers; ++w) {
    const double* v = census.data() + kFields * w;
    const std::string who = absl::StrCat("worker ", w, " (files ",
                                         BaseNames(data::ShardFiles(plan.all_files, plan.num_workers, w)), ")");
    if (static_cast<size_t>(v[0]) != plan.all_files.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--data: worker ", w, " sees ", v[0], " files, worker ", plan.worker, " ",
          plan.all_files.size(), "; every worker must see the same files"));
    }
    if (static_cast<int64_t>(v[1]) != d->num_features) {
      return absl::InvalidArgumentError(absl::StrCat("--data: ", who, " has ", v[1],
                                                     " features, worker ", plan.worker, "'s ",
                                                     d->num_features));
    }
    if (static_cast<int64_t>(v[3]) < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data: ", who, " holds no training examples; use fewer workers or more files"));
    }
    if (per_worker != nullptr) per_worker->push_back(static_cast<int64_t>(v[3]));
    classes = std::max(classes, static_cast<int64_t>(v[2]));
    train += static_cast<int64_t>(v[3]);
    test += static_cast<int64_t>(v[4]);
  }
  if (classes < 2) {
    return absl::InvalidArgumentError(
        "--data: every label is 0 on every worker; a classifier needs at least 2 classes");
  }
  d->num_classes = classes;
  return std::make_pair(train, test);
}

// Two passes (sums, then sums of squared deviations from the cluster's
// mean), in double, as ComputeStats's one-process Welford pass.
absl::StatusOr<std::pair<Tensor, Tensor>> CombinedStats(distribute::Strategy* s, const TrainerData& d) {
  std::vector<double> sums = FeatureSums(d);
  sums.push_back(static_cast<double>(d.train_x.dim_size(0)));
  STRATA_ASSIGN_OR_RETURN(sums, SumAcrossWorkers(s, sums));
  const double count = sums.back();
  sums.pop_back();
  std::vector<double> mean(sums.size());
  for (size_t j = 0; j < sums.size(); ++j) mean[j] = sums[j] / count;
  STRATA_ASSIGN_OR_RETURN(std::vector<double> dev, SumAcrossWorkers(s, SquaredDeviationSums(d, mean)));
  return std::make_pair(MeanFromSums(sums, count), StddevFromSums(dev, count));
}

UnevenEpoch PlanUnevenEpoch(const std::vector<int64_t>& examples, int64_t batch) {
  UnevenEpoch e;
  e.examples = examples;
  e.batch = batch;
  for (int64_t n : examples) e.steps = std::max(e.steps, (n + batch - 1) / batch);
  return e;
}

int64_t UnevenEpoch::Examples(int worker, int64_t step) const {
  if (steps <= 0) return 0;
  const int64_t s = step % steps;
  return std::clamp<int64_t>(examples[static_cast<size_t>(worker)] - s * batch, 0, batch);
}

int64_t UnevenEpoch::TotalExamples(int64_t step) const {
  int64_t k = 0;
  for (size_t w = 0; w < examples.size(); ++w) k += Examples(static_cast<int>(w), step);
  return k;
}

bool UnevenEpoch::even() const {
  for (int64_t n : examples) {
    if (n != examples[0] || n % batch != 0) return false;
  }
  return true;
}

}  // namespace trainer
}  // namespace strata
