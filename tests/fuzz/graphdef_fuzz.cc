// GraphDef import (graph/graph_def_import.h) over every registered op, on
// arbitrary bytes read as a serialized GraphDef: a clear error or a Graph
// (every node's attrs checked, every shape inferred) that exports again,
// never a crash.
#include <cstddef>
#include <cstdint>

#include "graph/graph_def_import.h"
#include "proto/graph.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ::tensorflow::GraphDef def;
  if (!def.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto g = strata::ImportGraphDef(def);
  if (g.ok()) {
    ::tensorflow::GraphDef out;
    (*g)->ToGraphDef(&out);
  }
  return 0;
}
