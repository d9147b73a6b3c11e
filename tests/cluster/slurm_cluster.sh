#!/usr/bin/env bash
# Starts and stops a private, single-machine Slurm cluster for tests.
#
# Required Debian bookworm packages (Slurm 22.05, MUNGE 0.5.15):
#   apt-get install -y --no-install-recommends slurm-wlm munge
# On the development image this installed exactly: slurm-wlm slurmctld slurmd
#   slurm-client slurm-wlm-basic-plugins munge liblua5.1-0 (their libraries
#   libmunge2, libpmix2 and libhwloc15 were already present). The recommended
#   extra plugin packages (ipmi, rrd, hdf5, ...) are not needed.
#
# Usage:
#   slurm_cluster.sh check        exit 0 if the needed binaries are installed,
#                                 else print what is missing and exit 2.
#   slurm_cluster.sh start DIR    start munged, slurmctld and slurmd with all
#                                 their files under DIR; print shell commands
#                                 (export SLURM_CONF=...) for the caller to
#                                 eval; return once the node is idle.
#   slurm_cluster.sh stop DIR     stop everything started for DIR. Safe to run
#                                 twice and after a failed start.
#
# Typical use from a test (capture first: a bare eval "$(...)" would hide a
# failed start, since eval of an empty string succeeds):
#   trap 'tests/cluster/slurm_cluster.sh stop "$dir"' EXIT
#   env_lines=$(tests/cluster/slurm_cluster.sh start "$dir") || exit 1
#   eval "$env_lines"
#   srun -n 2 ./my_binary
#
# Nothing system-wide is touched: the cluster has its own MUNGE key and
# socket, its own TCP ports and its own slurm.conf, so it can coexist with a
# system Slurm/MUNGE and with other instances of itself.
#
# Knobs (environment):
#   SLURM_CLUSTER_CPUS     CPUs the node advertises (default: nproc). May be
#                          larger than the real count (config_overrides).
#   SLURM_CLUSTER_TIMEOUT  seconds to wait for the node to become idle (60).
#
# The daemons run as the invoking user (SlurmUser/SlurmdUser), so no root is
# needed as long as jobs are submitted by that same user; it has been tried
# as root and as an unprivileged user.

set -euo pipefail

readonly PROG="${0##*/}"
# The daemons live in sbin, which a test runner's PATH (Bazel: /bin:/usr/bin)
# may leave out.
export PATH="$PATH:/usr/sbin:/sbin"
# Every daemon we start carries this variable in its environment (slurmd passes
# it on to its slurmstepd children), so that "stop" can find stragglers that
# are not recorded in a pid file.
readonly MARKER_VAR="TEST_SLURM_CLUSTER_DIR"
# Unix socket paths must fit in sun_path (108 bytes). If DIR is longer than
# this, the sockets and the slurmd spool go to a short directory under /tmp,
# linked from DIR/short.
readonly MAX_DIR_LEN=60

log() { echo "$PROG: $*" >&2; }

usage() {
  echo "usage: $PROG check | start DIR | stop DIR" >&2
  exit 64
}

# ---------------------------------------------------------------------------
# check: are the components installed?
# ---------------------------------------------------------------------------
cmd_check() {
  local missing=() b
  for b in munged munge slurmctld slurmd slurmstepd srun sinfo scontrol squeue scancel; do
    command -v "$b" >/dev/null 2>&1 || missing+=("$b")
  done
  if ((${#missing[@]})); then
    echo "Slurm test cluster unavailable: missing ${missing[*]}" \
         "(apt-get install -y --no-install-recommends slurm-wlm munge)"
    exit 2
  fi
}

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

# Canonical absolute path of an existing directory.
abs_dir() { (cd "$1" && pwd -P); }

# True if the process exists and is not a zombie. Containers often have a
# PID 1 that never reaps orphans, so "kill -0" alone would report dead
# daemons as alive forever.
alive() {
  local pid=$1 state
  [[ -r /proc/$pid/stat ]] || return 1
  state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [[ -n $state && $state != Z && $state != X ]]
}

# Print two distinct TCP ports that were free a moment ago. The kernel picks
# them (bind to port 0) when python3 works; otherwise try random ports that
# nothing listens on.
pick_ports() {
  if python3 - <<'EOF' 2>/dev/null; then return 0; fi
import socket
socks = []
for _ in range(2):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
  local used ports=() p
  used=$(ss -Htln 2>/dev/null | awk '{print $4}' | sed 's/.*://' || true)
  while ((${#ports[@]} < 2)); do
    p=$((20000 + RANDOM % 30000))
    grep -qx "$p" <<<"$used" && continue
    [[ " ${ports[*]-} " == *" $p "* ]] && continue
    ports+=("$p")
  done
  echo "${ports[@]}"
}

# Print the last lines of every log under DIR to stderr.
dump_logs() {
  local dir=$1 f
  for f in "$dir"/log/*; do
    [[ -s $f ]] || continue
    echo "----- tail of $f -----" >&2
    tail -n 25 "$f" >&2
  done
}

# Start a daemon in the foreground mode of its own, in the background of this
# script, with output going to DIR/log/NAME.out, and record its pid in
# DIR/pids/NAME.pid. Foreground mode means the pid we record is the daemon's.
# stdin/stdout/stderr are detached so that a caller's $(...) does not wait
# for the daemons.
launch() {
  local dir=$1 name=$2
  shift 2
  env "$MARKER_VAR=$dir" SLURM_CONF="$dir/slurm.conf" "$@" \
    </dev/null >>"$dir/log/$name.out" 2>&1 &
  echo $! >"$dir/pids/$name.pid"
}

# Wait up to $3 seconds for command "$4..." to succeed, failing early if the
# daemon named $2 has died or a port is taken. $1 is the cluster dir.
wait_for() {
  local dir=$1 name=$2 secs=$3
  shift 3
  local deadline=$((SECONDS + secs)) pid
  pid=$(cat "$dir/pids/$name.pid")
  # A probe may hang for MessageTimeout if something else answers on the port.
  until timeout 3 "$@" >/dev/null 2>&1; do
    alive "$pid" || { log "$name exited during startup"; return 1; }
    # The daemons keep retrying a busy port for a while; give up at once.
    if grep -qs "Address already in use" "$dir"/log/*; then
      log "$name: port already in use"
      return 1
    fi
    ((SECONDS < deadline)) || { log "timed out after ${secs}s waiting for $name"; return 1; }
    sleep 0.2
  done
}

# ---------------------------------------------------------------------------
# start
# ---------------------------------------------------------------------------

write_slurm_conf() {
  local dir=$1 short=$2 node=$3 cpus=$4 ctld_port=$5 slurmd_port=$6
  local user
  user=$(id -un)
  cat >"$dir/slurm.conf" <<EOF
# Generated by $PROG for a private test cluster. Do not edit.
ClusterName=testcluster
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user

# Authentication through our own munged (not the system one).
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$short/munge/munge.socket

# All state, spool, pid and log files live under the private directory.
StateSaveLocation=$dir/state
SlurmdSpoolDir=$short/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/plugstack.conf
MailProg=/bin/true

# No cgroups, accounting or interconnect: these need a systemd/cgroup setup
# that containers usually lack, and tests do not need them.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none

# Quick scheduling and quick cleanup, for short-lived test jobs.
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=2
InactiveLimit=0
MinJobAge=30
Waittime=0
# Reject jobs that can never fit (e.g. srun -n 3 on 2 CPUs without
# --overcommit) instead of queueing them forever.
EnforcePartLimits=ALL

# Trust the node description below even if slurmd detects fewer resources,
# so that the node may advertise more CPUs than the machine has.
SlurmdParameters=config_overrides
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$node CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
  : >"$dir/plugstack.conf"
}

# One attempt at starting the daemons. Returns 1 on failure, leaving the
# cleanup to the caller.
start_once() {
  local dir=$1 short=$2 node=$3 cpus=$4 timeout=$5
  local ports ctld_port slurmd_port
  ports=$(pick_ports)
  read -r ctld_port slurmd_port <<<"$ports"
  write_slurm_conf "$dir" "$short" "$node" "$cpus" "$ctld_port" "$slurmd_port"

  # MUNGE: private key, socket, pid, log and seed files.
  local m=$short/munge
  if [[ ! -s $m/munge.key ]]; then
    if command -v mungekey >/dev/null; then
      mungekey --create --keyfile="$m/munge.key"
    else
      dd if=/dev/urandom of="$m/munge.key" bs=1024 count=1 status=none
    fi
    chmod 0400 "$m/munge.key"
  fi
  launch "$dir" munged munged --foreground --force \
    --socket="$m/munge.socket" --key-file="$m/munge.key" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$m/munged.seed"
  # Ready when a credential round-trips through the socket.
  # shellcheck disable=SC2016  # $1 is expanded by the inner bash.
  wait_for "$dir" munged 10 \
    bash -c 'munge -n -S "$1" | unmunge -S "$1"' _ "$m/munge.socket" || return 1

  # slurmctld (-D: foreground, -i: ignore saved state; the dir is fresh).
  launch "$dir" slurmctld slurmctld -D -i -f "$dir/slurm.conf"
  wait_for "$dir" slurmctld "$timeout" scontrol ping || return 1

  # slurmd for this machine's node.
  launch "$dir" slurmd slurmd -D -f "$dir/slurm.conf" -N "$node"
  # shellcheck disable=SC2016  # $1 is expanded by the inner bash.
  wait_for "$dir" slurmd "$timeout" \
    bash -c '[[ $(sinfo -h -n "$1" -o %T) == idle ]]' _ "$node" || return 1
}

cmd_start() {
  local dir
  dir=$(abs_dir "$1")
  local node cpus timeout short
  node=$(hostname -s)
  cpus=${SLURM_CLUSTER_CPUS:-$(nproc)}
  timeout=${SLURM_CLUSTER_TIMEOUT:-60}

  # Variables describing an enclosing Slurm job (if the tests run inside
  # one) would make srun attach to that job; drop them here and tell the
  # caller to drop them too.
  local v unsets=()
  for v in $(compgen -e); do
    [[ $v == SLURM_* && $v != SLURM_CONF ]] || continue
    unsets+=("$v")
    unset "$v"
  done
  export SLURM_CONF=$dir/slurm.conf

  umask 077  # munged refuses group/world-writable directories.
  mkdir -p "$dir"/{state,run,log,pids}
  if ((${#dir} > MAX_DIR_LEN)); then
    [[ -L $dir/short ]] || ln -s "$(mktemp -d /tmp/slurm-cluster.XXXXXX)" "$dir/short"
    short=$(readlink "$dir/short")
  else
    short=$dir
  fi
  mkdir -p "$short"/{munge,spool}

  # Retry with new ports if another process grabbed ours in the meantime.
  local attempt started=0 t0=$SECONDS
  for attempt in 1 2 3; do
    if start_once "$dir" "$short" "$node" "$cpus" "$timeout"; then
      started=1
      break
    fi
    if grep -qs "Address already in use" "$dir"/log/slurm*; then
      log "port conflict, retrying (attempt $attempt)"
      stop_daemons "$dir"
      rm -f "$dir"/log/* "$dir"/run/*
      rm -rf "${dir:?}/state"/* "${short:?}/spool"/*
      continue
    fi
    break
  done
  if ((!started)); then
    log "failed to start the Slurm test cluster in $dir"
    dump_logs "$dir"
    cmd_stop "$dir" || true
    exit 1
  fi
  log "cluster up on node $node in $((SECONDS - t0))s"

  for v in ${unsets[@]+"${unsets[@]}"}; do echo "unset $v"; done
  printf 'export SLURM_CONF=%q\n' "$dir/slurm.conf"
}

# ---------------------------------------------------------------------------
# stop
# ---------------------------------------------------------------------------

# Pids of all processes whose environment carries our marker for DIR.
marked_pids() {
  local dir=$1 f pid
  for f in /proc/[0-9]*/environ; do
    pid=${f#/proc/}
    pid=${pid%/environ}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    # environ is NUL-separated; unreadable or vanished processes are skipped.
    if grep -qzxF "$MARKER_VAR=$dir" "$f" 2>/dev/null; then
      echo "$pid"
    fi
  done
}

# Pids of all live descendants of the given pids (the tasks of job steps).
descendants() {
  local -A kids=()
  local stat pid ppid
  for stat in /proc/[0-9]*/stat; do
    read -r pid ppid < <(sed 's/^\([0-9]*\) .*) [A-Za-z] \([0-9]*\) .*/\1 \2/' "$stat" 2>/dev/null) || continue
    kids[$ppid]+=" $pid"
  done
  local queue=("$@") out=()
  while ((${#queue[@]})); do
    pid=${queue[0]}
    queue=("${queue[@]:1}")
    for ppid in ${kids[$pid]-}; do
      out+=("$ppid")
      queue+=("$ppid")
    done
  done
  echo "${out[@]-}"
}

# Signal the daemons (pid files first, then anything marked), wait for them
# to exit, SIGKILL whatever remains after a few seconds.
stop_daemons() {
  local dir=$1 pids=() f pid
  for f in "$dir"/pids/*.pid; do
    [[ -f $f ]] || continue
    pid=$(cat "$f")
    [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" && pids+=("$pid")
  done
  for pid in $(marked_pids "$dir"); do pids+=("$pid"); done
  ((${#pids[@]})) || { rm -f "$dir"/pids/*.pid; return 0; }
  # Include job tasks forked by slurmstepd; drop duplicates.
  for pid in $(descendants "${pids[@]}"); do pids+=("$pid"); done
  mapfile -t pids < <(printf '%s\n' "${pids[@]}" | sort -un)

  # Stop slurmd/slurmstepd before slurmctld and munged so that nothing
  # complains about lost authentication on the way down.
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local deadline=$((SECONDS + 5)) left
  while :; do
    left=()
    for pid in "${pids[@]}"; do alive "$pid" && left+=("$pid"); done
    ((${#left[@]})) || break
    if ((SECONDS >= deadline)); then
      log "killing unresponsive processes: ${left[*]}"
      kill -KILL "${left[@]}" 2>/dev/null || true
      sleep 0.2
      break
    fi
    sleep 0.1
  done
  rm -f "$dir"/pids/*.pid
}

cmd_stop() {
  local dir
  [[ -d $1 ]] || return 0  # Never started (or already removed).
  dir=$(abs_dir "$1")
  # Cancel running jobs first so that their tasks are cleaned up by Slurm.
  if [[ -f $dir/slurm.conf && -f $dir/pids/slurmctld.pid ]] &&
     alive "$(cat "$dir/pids/slurmctld.pid")"; then
    SLURM_CONF=$dir/slurm.conf timeout 5 scancel --quiet --user="$(id -un)" \
      >/dev/null 2>&1 || true
  fi
  stop_daemons "$dir"
  # Remove the short socket directory if one was made for a long DIR.
  if [[ -L $dir/short ]]; then
    local short
    short=$(readlink "$dir/short")
    [[ $short == /tmp/slurm-cluster.* ]] && rm -rf "$short"
    rm -f "$dir/short"
  fi
}

# ---------------------------------------------------------------------------
case "${1-}" in
  check) (($# == 1)) || usage; cmd_check ;;
  start) (($# == 2)) || usage; cmd_check >&2; cmd_start "$2" ;;
  stop)  (($# == 2)) || usage; cmd_stop "$2" ;;
  *) usage ;;
esac
