// PmixAllGather (scheduler_resolvers.h): the processes mpirun started
// exchange one string each through PMIx (put, fence collecting the data,
// get), with libpmix loaded at run time so that binaries need it only
// where they use it.
#include <dlfcn.h>
#include <pmix.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "strategy/scheduler_resolvers.h"

namespace strata {
namespace {

constexpr char kLibrary[] = "libpmix.so.2";
constexpr char kKey[] = "strata.address";

struct Pmix {
  decltype(&::PMIx_Init) init = nullptr;
  decltype(&::PMIx_Finalize) finalize = nullptr;
  decltype(&::PMIx_Put) put = nullptr;
  decltype(&::PMIx_Commit) commit = nullptr;
  decltype(&::PMIx_Fence) fence = nullptr;
  decltype(&::PMIx_Get) get = nullptr;
  decltype(&::PMIx_Error_string) error_string = nullptr;
  decltype(&::PMIx_Value_destruct) value_destruct = nullptr;
};

// Loads the library once (kept loaded: its progress thread may outlive
// the exchange until Finalize returns).
absl::StatusOr<const Pmix*> LoadPmix() {
  static absl::Mutex mu;
  static Pmix* loaded = nullptr;
  absl::MutexLock lock(&mu);
  if (loaded != nullptr) return loaded;
  // RTLD_GLOBAL: the library's plugins resolve its symbols.
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "the PMIx library ", kLibrary, " could not be loaded (", why == nullptr ? "" : why,
        "); install it (Debian: libpmix2), or set MASTER_ADDR and MASTER_PORT so that rank 0 is "
        "found there"));
  }
  auto* p = new Pmix;
  bool ok = true;
  auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    ok = ok && fn != nullptr;
  };
  bind(p->init, "PMIx_Init");
  bind(p->finalize, "PMIx_Finalize");
  bind(p->put, "PMIx_Put");
  bind(p->commit, "PMIx_Commit");
  bind(p->fence, "PMIx_Fence");
  bind(p->get, "PMIx_Get");
  bind(p->error_string, "PMIx_Error_string");
  bind(p->value_destruct, "PMIx_Value_destruct");
  if (!ok) {
    delete p;
    return absl::FailedPreconditionError(
        absl::StrCat(kLibrary, " lacks a PMIx 4 function (PMIx_Init ... PMIx_Value_destruct)"));
  }
  loaded = p;
  return loaded;
}

void FreeValue(const Pmix& p, pmix_value_t* v) {
  if (v == nullptr) return;
  p.value_destruct(v);
  std::free(v);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PmixAllGather(const std::string& mine,
                                                       absl::Duration timeout) {
  if (std::getenv("PMIX_RANK") == nullptr || std::getenv("PMIX_NAMESPACE") == nullptr) {
    return absl::FailedPreconditionError(
        "PMIX_RANK and PMIX_NAMESPACE are not set: this process was not started by a PMIx "
        "process manager (Open MPI's mpirun, srun --mpi=pmix); set MASTER_ADDR and MASTER_PORT "
        "so that rank 0 is found there");
  }
  absl::StatusOr<const Pmix*> loaded = LoadPmix();
  if (!loaded.ok()) return loaded.status();
  const Pmix& p = **loaded;
  auto failed = [&p](const char* what, pmix_status_t rc) {
    return absl::UnavailableError(absl::StrCat("PMIx ", what, ": ", p.error_string(rc)));
  };
  pmix_proc_t me;
  std::memset(&me, 0, sizeof(me));
  if (pmix_status_t rc = p.init(&me, nullptr, 0); rc != PMIX_SUCCESS) return failed("init", rc);
  absl::StatusOr<std::vector<std::string>> out = std::vector<std::string>();
  pmix_proc_t all;
  std::memset(&all, 0, sizeof(all));
  std::memcpy(all.nspace, me.nspace, sizeof(all.nspace));
  all.rank = PMIX_RANK_WILDCARD;
  int seconds = static_cast<int>(absl::ToInt64Seconds(timeout));
  if (seconds < 1) seconds = 1;
  pmix_info_t info[2];
  std::memset(info, 0, sizeof(info));
  std::strncpy(info[0].key, PMIX_COLLECT_DATA, PMIX_MAX_KEYLEN);
  info[0].value.type = PMIX_BOOL;
  info[0].value.data.flag = true;
  std::strncpy(info[1].key, PMIX_TIMEOUT, PMIX_MAX_KEYLEN);
  info[1].value.type = PMIX_INT;
  info[1].value.data.integer = seconds;

  pmix_value_t value;
  std::memset(&value, 0, sizeof(value));
  value.type = PMIX_STRING;
  value.data.string = const_cast<char*>(mine.c_str());
  pmix_value_t* size = nullptr;
  if (pmix_status_t rc = p.put(PMIX_GLOBAL, kKey, &value); rc != PMIX_SUCCESS) {
    out = failed("put", rc);
  } else if (rc = p.commit(); rc != PMIX_SUCCESS) {
    out = failed("commit", rc);
  } else if (rc = p.fence(&all, 1, info, 2); rc != PMIX_SUCCESS) {
    out = failed(rc == PMIX_ERR_TIMEOUT ? "fence (not every rank arrived in time)" : "fence", rc);
  } else if (rc = p.get(&all, PMIX_JOB_SIZE, nullptr, 0, &size);
             rc != PMIX_SUCCESS || size == nullptr || size->type != PMIX_UINT32) {
    out = failed("job size", rc);
  } else {
    for (uint32_t r = 0; r < size->data.uint32 && out.ok(); ++r) {
      pmix_proc_t peer = all;
      peer.rank = r;
      pmix_value_t* v = nullptr;
      rc = p.get(&peer, kKey, &info[1], 1, &v);
      if (rc != PMIX_SUCCESS || v == nullptr || v->type != PMIX_STRING ||
          v->data.string == nullptr) {
        out = absl::UnavailableError(
            absl::StrCat("PMIx get of rank ", r, "'s address: ", p.error_string(rc)));
      } else {
        out->push_back(v->data.string);
      }
      FreeValue(p, v);
    }
  }
  FreeValue(p, size);
  p.finalize(nullptr, 0);
  return out;
}

}  // namespace strata
