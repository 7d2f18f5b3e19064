#!/usr/bin/env bash
# A single-node Slurm on this machine for tests (Debian's slurm-wlm: slurmctld + slurmd, with munge):
#   source tests/slurm/local_slurm.sh; slurm_start DIR [CPUS]; ...; slurm_stop
# slurm_start writes DIR/slurm.conf (the node is this host with CPUS slots, default 4, more than the cores
# through SlurmdParameters=config_overrides; no cgroups, no accounting; private ports, spool and state under
# DIR), starts munged (with its own socket under DIR), slurmctld and slurmd in the background, exports
# SLURM_CONF and waits up to 60 s for the node to be idle. slurm_stop cancels every job of this cluster, stops
# the three daemons it started (by their process ids) and waits for them. Returns 1 with a message when a
# step fails (the daemon's log is printed).
SLURM_PIDS=()

slurm_log_tail() {
  local f
  for f in "$SLURM_DIR"/*.log; do
    [[ -f $f ]] && { echo "--- $f"; tail -20 "$f"; } >&2
  done
}

slurm_start() {
  SLURM_DIR=$1
  local cpus=${2:-4} host
  host=$(hostname -s)
  mkdir -p "$SLURM_DIR"/{spool,state,munge}
  chmod 700 "$SLURM_DIR/munge"
  # munge: its own key, socket, pid and log, so that a munged already running is left alone.
  dd if=/dev/urandom of="$SLURM_DIR/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$SLURM_DIR/munge/munge.key"
  local sock=$SLURM_DIR/munge/munge.socket
  munged --force --key-file="$SLURM_DIR/munge/munge.key" --socket="$sock" \
    --pid-file="$SLURM_DIR/munge/munged.pid" --log-file="$SLURM_DIR/munged.log" \
    --seed-file="$SLURM_DIR/munge/munged.seed" || { echo "slurm: munged did not start" >&2; slurm_log_tail; return 1; }
  SLURM_PIDS+=("$(cat "$SLURM_DIR/munge/munged.pid")")
  cat >"$SLURM_DIR/slurm.conf" <<CONF
ClusterName=trnsimci
SlurmctldHost=$host
SlurmctldPort=17817
SlurmdPort=17818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MaxArraySize=1001
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=5
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  export SLURM_CONF=$SLURM_DIR/slurm.conf
  slurmctld -D -i -f "$SLURM_CONF" >>"$SLURM_DIR/slurmctld.log" 2>&1 &
  SLURM_PIDS+=($!)
  slurmd -D -f "$SLURM_CONF" >>"$SLURM_DIR/slurmd.log" 2>&1 &
  SLURM_PIDS+=($!)
  local i state
  for i in $(seq 1 120); do
    state=$(sinfo -h -n "$host" -o %T 2>/dev/null)
    [[ $state == idle* ]] && return 0
    sleep 0.5
  done
  echo "slurm: the node did not become idle within 60 s (state '$state')" >&2
  slurm_log_tail
  return 1
}

slurm_stop() {
  [[ -n ${SLURM_CONF:-} ]] && scancel --cluster=trnsimci -u "$(id -un)" >/dev/null 2>&1
  local p i
  for p in "${SLURM_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for i in $(seq 1 50); do
    local alive=0
    for p in "${SLURM_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && break
    sleep 0.2
  done
  for p in "${SLURM_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  SLURM_PIDS=()
}
