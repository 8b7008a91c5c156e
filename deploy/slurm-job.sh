#!/bin/sh
# The batch script of an attempt's (or an evaluation's) Slurm job under
# provision.kind slurm, filled in by the provisioner for each job and
# submitted with --gres=gpu:<type>:<n>, --time and the job name
# mlrb:<run>:a<attempt>. It runs a worker for this job alone: its host id
# is known before the job starts (the run leases on its queue meanwhile),
# its devices are the ones Slurm gave the job, it serves only its own
# queue and provisions nothing. sbatch exports the submitting worker's
# MLRB_* settings by name (temporal.address, storage), never ALL; its
# credentials come from a file only this user reads, so that no Slurm
# record holds them. The file stays while the job is queued (a requeued
# job runs this script again and needs it) and the provisioner removes it
# once the job has left the queue. scancel sends
# SIGTERM, on which the worker hands its attempt back with a checkpoint;
# the job's work dir (a restored workspace) goes with the job.
set -a
. {{q .Credentials}}
set +a
trap 'rm -rf {{q .WorkDir}}' EXIT
trap 'kill -TERM "$worker" 2>/dev/null' TERM INT
env MLRB_HOST_ID={{q .HostID}} MLRB_HOST_GPU_DEVICES="${CUDA_VISIBLE_DEVICES:-}" MLRB_HOST_GPU_TYPE={{q .GPUType}} \
  MLRB_HOST_MAX_AGENTS=1 MLRB_HOST_WORK_DIR={{q .WorkDir}} MLRB_HOST_DEDICATED=true MLRB_PROVISION_KIND=static \
  {{.Worker}} &
worker=$!
# wait returns early when a trapped signal arrives: wait again for the
# worker's own exit (its hand-back).
wait "$worker"
wait "$worker"
