#!/bin/bash
# The user data of an attempt's EC2 instance under provision.kind ec2,
# filled in by the provisioner. The image (provision.ec2.ami) carries the
# worker and its config (temporal.address, storage). The worker runs
# under the instance id (from IMDSv2), serves only its own queue, and
# watches the metadata service for spot notices, on which it hands its
# attempt back before the instance goes. Whatever ends this script (the
# worker's exit, a failed metadata read), the instance shuts down, which
# terminates it (InstanceInitiatedShutdownBehavior): a host whose worker
# is gone never bills idle.
set -euo pipefail
trap 'shutdown -h now' EXIT
T=$(curl -sf --retry 5 -X PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
ID=$(curl -sf --retry 5 -H "X-aws-ec2-metadata-token: $T" http://169.254.169.254/latest/meta-data/instance-id)
export MLRB_HOST_ID="$ID" MLRB_HOST_DEDICATED=true MLRB_HOST_PREEMPTION=ec2-spot MLRB_PROVISION_KIND=static
export MLRB_HOST_GPU_TYPE={{q .GPUType}} MLRB_HOST_GPU_DEVICES={{q .Devices}} MLRB_HOST_MAX_AGENTS=1 MLRB_HOST_RUNTIME=docker
{{.Worker}}
