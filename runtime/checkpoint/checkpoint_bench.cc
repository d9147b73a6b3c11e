// Checkpoint I/O throughput: CRC32C (SSE4.2 vs table), save (with fsyncs)
// and verified read of a model-sized set of tensors. Not a test; run by
// hand: bazel run //runtime/checkpoint:checkpoint_bench
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "benchmark/benchmark.h"
#include "graph/tensor.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "runtime/checkpoint/checkpoint_writer.h"

namespace strata {
namespace {

void BM_Crc32cHardware(benchmark::State& state) {
  std::string buf(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) benchmark::DoNotOptimize(crc32c::Value(buf.data(), buf.size()));
  state.SetBytesProcessed(state.iterations() * state.range(0));
  state.SetLabel(crc32c::HardwareAccelerated() ? "sse4.2" : "table (no sse4.2)");
}
BENCHMARK(BM_Crc32cHardware)->Arg(4096)->Arg(1 << 20);

void BM_Crc32cTable(benchmark::State& state) {
  std::string buf(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) benchmark::DoNotOptimize(crc32c::ExtendPortable(0, buf.data(), buf.size()));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Crc32cTable)->Arg(4096)->Arg(1 << 20);

// Eight float tensors of range(0) MiB in all.
std::vector<std::pair<std::string, Tensor>> Model(int64_t mib) {
  std::vector<std::pair<std::string, Tensor>> out;
  const int64_t per = mib * (1 << 20) / 4 / 8;
  for (int i = 0; i < 8; ++i) {
    Tensor t(DT_FLOAT, TensorShape{per});
    for (int64_t j = 0; j < per; ++j) t.data<float>()[j] = static_cast<float>(j % 97) * 0.5f;
    out.emplace_back(absl::StrCat("layer", i, "/kernel"), t);
  }
  return out;
}

std::string Prefix() {
  const char* base = std::getenv("TEST_TMPDIR");
  return absl::StrCat(base != nullptr ? base : "/tmp", "/strata_ckpt_bench/ckpt");
}

void BM_Save(benchmark::State& state) {
  auto model = Model(state.range(0));
  for (auto _ : state) {
    if (!SaveCheckpoint(Prefix(), model, {{"global_step", "1"}}).ok()) state.SkipWithError("save");
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * (1 << 20));
  DeleteCheckpoint(Prefix()).IgnoreError();
}
BENCHMARK(BM_Save)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_VerifyAndRead(benchmark::State& state) {
  auto model = Model(state.range(0));
  if (!SaveCheckpoint(Prefix(), model, {}).ok()) state.SkipWithError("save");
  for (auto _ : state) {
    auto r = CheckpointReader::Open(Prefix());
    if (!r.ok() || !(*r)->VerifyAll().ok()) state.SkipWithError("verify");
    for (const auto& [name, t] : model) {
      Tensor out;
      if (!(*r)->Read(name, &out).ok()) state.SkipWithError("read");
    }
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * (1 << 20));
  DeleteCheckpoint(Prefix()).IgnoreError();
}
BENCHMARK(BM_VerifyAndRead)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace strata
