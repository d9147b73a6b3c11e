// Runs a GraphDef: feeds from .npy files, fetches written as .npy files (what
// TensorFlow's `saved_model_cli run --inputs x=x.npy --outdir` does for a
// SavedModel), for a frozen graph TensorFlow or Strata wrote.
//
//   run_graph --graph=model.pb --feed=x=x.npy --fetch=Identity --out_dir=out
//
// --graph: a binary GraphDef (or text, for a name ending in .pbtxt).
// --feed=NAME=FILE (repeatable): a tensor name ("x", "split:1") and a .npy file.
// --fetch=NAME (repeatable): written to OUT_DIR/NAME.npy with '/' and ':' as '_'.
// --target=NODE (repeatable): run for effect only.
// Prints one line per fetch. Exit status 2 for bad usage, 1 for anything
// else that fails (its message names the file, node or tensor).
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/file_io.h"
#include "base/status.h"
#include "google/protobuf/text_format.h"
#include "proto/graph.pb.h"
#include "runtime/session.h"
#include "tools/npy.h"

namespace strata {
namespace {

struct Args {
  std::string graph, out_dir;
  std::vector<std::pair<std::string, std::string>> feeds;
  std::vector<std::string> fetches, targets;
};

constexpr char kUsage[] =
    "usage: run_graph --graph=FILE.pb [--feed=NAME=FILE.npy ...] --fetch=NAME [--fetch=NAME ...] "
    "[--target=NODE ...] --out_dir=DIR";

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const std::string prefix = absl::StrCat(flag, "=");
      return absl::StartsWith(arg, prefix) ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("--graph")) {
      a.graph = v;
    } else if (const char* v = value("--out_dir")) {
      a.out_dir = v;
    } else if (const char* v = value("--fetch")) {
      a.fetches.push_back(v);
    } else if (const char* v = value("--target")) {
      a.targets.push_back(v);
    } else if (const char* v = value("--feed")) {
      const std::string f = v;
      const size_t eq = f.rfind('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == f.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--feed=", f, " is not NAME=FILE.npy"));
      }
      a.feeds.emplace_back(f.substr(0, eq), f.substr(eq + 1));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", arg, "'"));
    }
  }
  if (a.graph.empty()) return absl::InvalidArgumentError("--graph is required");
  if (a.fetches.empty() && a.targets.empty()) return absl::InvalidArgumentError("nothing to run: give --fetch or --target");
  if (!a.fetches.empty() && a.out_dir.empty()) return absl::InvalidArgumentError("--out_dir is required with --fetch");
  return a;
}

absl::StatusOr<::tensorflow::GraphDef> LoadGraph(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string bytes, io::ReadFileToString(path));
  ::tensorflow::GraphDef def;
  const bool ok = absl::EndsWith(path, ".pbtxt") ? google::protobuf::TextFormat::ParseFromString(bytes, &def)
                                                 : def.ParseFromString(bytes);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat(path, ": not a GraphDef"));
  return def;
}

absl::Status Run(const Args& a) {
  STRATA_ASSIGN_OR_RETURN(::tensorflow::GraphDef def, LoadGraph(a.graph));
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const auto& [name, file] : a.feeds) {
    STRATA_ASSIGN_OR_RETURN(std::string bytes, io::ReadFileToString(file));
    STRATA_ASSIGN_OR_RETURN(Tensor t, DecodeNpy(bytes, file));
    feeds.emplace_back(name, std::move(t));
  }
  auto session = Session::Create(def);
  if (!session.ok()) return AnnotateStatus(session.status(), absl::StrCat(a.graph, ": "));
  std::vector<Tensor> out;
  STRATA_RETURN_IF_ERROR((*session)->Run(feeds, a.fetches, a.targets, &out));
  if (!a.fetches.empty()) STRATA_RETURN_IF_ERROR(io::CreateDirs(a.out_dir));
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string path =
        io::JoinPath(a.out_dir, absl::StrCat(absl::StrReplaceAll(a.fetches[i], {{"/", "_"}, {":", "_"}}), ".npy"));
    auto bytes = EncodeNpy(out[i]);
    if (!bytes.ok()) return AnnotateStatus(bytes.status(), absl::StrCat("fetch ", a.fetches[i], ": "));
    STRATA_RETURN_IF_ERROR(io::WriteFileAtomically(path, *bytes));
    std::cout << a.fetches[i] << " -> " << path << " " << DataTypeString(out[i].dtype()) << " "
              << out[i].shape().DebugString() << "\n";
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  auto args = strata::ParseArgs(argc, argv);
  if (!args.ok()) {
    std::cerr << "run_graph: " << args.status().message() << "\n" << strata::kUsage << "\n";
    return 2;
  }
  absl::Status s = strata::Run(*args);
  if (!s.ok()) {
    std::cerr << "run_graph: " << s << "\n";
    return 1;
  }
  return 0;
}
