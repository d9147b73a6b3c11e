// The run-queue delay (time runnable but not running: the kernel waited to
// give it a CPU, /proc/thread-self/schedstat's second field) of the threads
// that do a process's steps, summed. A process whose cores are shared with
// other work (a hog, another job, a cgroup quota) shows it on whichever of
// its threads the work passes through: the step's caller, the executor's,
// the collectives' lanes and transports. Each such thread counts itself
// once, at its start; the sum covers the threads counted so far, those
// that have exited included, so it never goes back.
//
//   CountThisThreadsRunQueueDelay();           // in a thread's loop, cheap
//   double before = CountedRunQueueSeconds();  // one pread per counted thread
//   ...
//   double waited = CountedRunQueueSeconds() - before;
//
// 0 where /proc is not mounted or schedstats are off.
//
// Thread-safety: both functions from any thread.
#ifndef STRATA_BASE_RUN_QUEUE_H_
#define STRATA_BASE_RUN_QUEUE_H_

namespace strata {

// Counts the calling thread in CountedRunQueueSeconds from now on (its
// delay before this call included). Idempotent: after the first call in a
// thread, a thread-local check.
void CountThisThreadsRunQueueDelay();

// Seconds the counted threads have waited for a CPU, in all.
double CountedRunQueueSeconds();

}  // namespace strata

#endif  // STRATA_BASE_RUN_QUEUE_H_
