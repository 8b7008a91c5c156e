#!/bin/sh
# The batch script of an attempt's (or an evaluation's) Slurm job under
# provision.kind slurm, filled in by the provisioner for each job and
# submitted with --gres=gpu:<type>:<n>, --time and the job name
# mlrb:<run>:a<attempt>. It runs a worker for this job alone: its host id
# is known before the job starts (the run leases on its queue meanwhile),
# its devices are the ones Slurm gave the job, it serves only its own
# queue and provisions nothing. The job inherits the submitting worker's
# environment (MLRB_* config: temporal.address, storage). scancel sends
# SIGTERM, on which the worker hands its attempt back with a checkpoint.
exec env MLRB_HOST_ID={{q .HostID}} MLRB_HOST_GPU_DEVICES="${CUDA_VISIBLE_DEVICES:-}" MLRB_HOST_GPU_TYPE={{q .GPUType}} \
  MLRB_HOST_MAX_AGENTS=1 MLRB_HOST_WORK_DIR={{q .WorkDir}} MLRB_HOST_DEDICATED=true MLRB_PROVISION_KIND=static \
  {{.Worker}}
