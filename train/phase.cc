#include "train/phase.h"

#include <utility>

namespace strata {
namespace train {
namespace {

thread_local bool training_phase = false;
thread_local const ReplicaInfo* current_replica = nullptr;

}  // namespace

TrainingPhase::TrainingPhase(bool training) : previous_(training_phase) { training_phase = training; }
TrainingPhase::~TrainingPhase() { training_phase = previous_; }

bool InTrainingPhase() { return training_phase; }

ReplicaScope::ReplicaScope(ReplicaInfo info) : info_(std::move(info)), previous_(current_replica) {
  current_replica = &info_;
}
ReplicaScope::~ReplicaScope() { current_replica = previous_; }

const ReplicaInfo& CurrentReplica() {
  static const ReplicaInfo kOnlyReplica;
  return current_replica == nullptr ? kOnlyReplica : *current_replica;
}

}  // namespace train
}  // namespace strata
