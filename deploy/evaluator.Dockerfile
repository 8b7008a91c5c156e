# The evaluator image of the real tasks (their evaluation.image):
# lm-evaluation-harness and what it runs, pinned, on a CUDA PyTorch base,
# with every dataset the tasks read cached in the image. The catalog's
# task names and metric keys are checked against this lm-eval version's
# own task configs (internal/scoring/lmeval/testdata/lm-eval-0.4.12-tasks.json,
# TestCatalogMatchesThePinnedLMEval): super-glue-lm-eval-v1 is a tag
# whose RTE task is sglue_rte; mmlu and blimp are groups with an
# aggregate acc.
#
#   docker build -f deploy/evaluator.Dockerfile -t mlrb-evaluator:lm-eval-0.4.12 deploy
#
# Build it where PyPI, the Hugging Face hub and Docker Hub are reachable,
# push it to the registry the GPU hosts pull from, and keep the tag: a run
# records the digest it was scored with. The build ends with a smoke
# evaluation (mlrb-lmeval-smoke): a broken pin fails the build, not the
# first real evaluation.
#
# Pins, and why:
# - lm_eval 0.4.12: 0.4.11's BLiMP template loads the dataset "blimp",
#   which no longer resolves on the hub; 0.4.12 loads nyu-mll/blimp.
# - transformers 4.57.1: since 0.4.9.2 lm-eval passes dtype= to
#   from_pretrained, which transformers reads only from 4.56 on (older
#   ones hand it to the model's constructor, and every load fails).
# - accelerate 1.10.1, peft 0.17.0: the hf extra leaves them unpinned.
# - datasets 3.6.0: the last release that still runs a dataset's loading
#   script (HF_DATASETS_TRUST_REMOTE_CODE below), in case aps/super_glue
#   still has one; 4.x refuses scripts outright.
# - torch 2.10 or later: torch.load before it can run code from a crafted
#   file even with weights_only (CVE-2025-32434 below 2.6, CVE-2026-24747
#   below 2.10). The tasks load safetensors only, remote code off, in any
#   case (their --model_args).
# - Every package pinned (lmeval/constraints.txt, PIP_CONSTRAINT): two
#   builds install the same versions; the image records what it has
#   (/opt/mlrb/pip-freeze.txt) and names any package that floats.
# - PEP 668: the base's Python (3.12 from apt since pytorch 2.10) is
#   marked externally managed; pip installs beside the base's torch
#   (PIP_BREAK_SYSTEM_PACKAGES), which the constraints hold at 2.10.0.
# - The tasks' controls (lmeval/controls.txt: phi-2, GPT-2, Flan-T5-base
#   at their commits, and a seeded from-scratch GPT-2) are built in
#   under /opt/mlrb/controls, so a model that breaks the evaluator is
#   told from a broken evaluator offline, on a task's first run.
FROM pytorch/pytorch:2.10.0-cuda12.8-cudnn9-runtime
ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_CONSTRAINT=/opt/mlrb/constraints.txt PIP_NO_CACHE_DIR=1
COPY lmeval/constraints.txt /opt/mlrb/constraints.txt
RUN pip install \
      "lm_eval[hf]==0.4.12" \
      "transformers==4.57.1" \
      "accelerate==1.10.1" \
      "peft==0.17.0" \
      "datasets==3.6.0" \
      "sentencepiece==0.2.0"
COPY controls/mlrb-pinned /usr/local/bin/
RUN mlrb-pinned /opt/mlrb/constraints.txt /opt/mlrb/pip-freeze.txt
# The datasets' cache lives in the image, readable and writable by any
# uid (container.user may not be root); evaluations run offline from it,
# so a run's score names a fixed snapshot of its test data.
ENV HF_HOME=/opt/hf HF_DATASETS_TRUST_REMOTE_CODE=1
COPY controls/mlrb-controls lmeval/controls.txt /opt/mlrb/
RUN python3 /opt/mlrb/mlrb-controls /opt/mlrb/controls.txt && chmod -R a+rX /opt/mlrb
COPY lmeval/mlrb-eval-lmeval lmeval/mlrb-lmeval-smoke lmeval/mlrb-peak-memory /usr/local/bin/
# The smoke evaluation, the build's last step: a tiny randomly
# initialised causal LM, two items per task of every task the catalog
# runs (which fills the cache), and the catalog's metric keys read back
# from the results file.
RUN mlrb-lmeval-smoke /opt/smoke && rm -rf /opt/smoke && chmod -R a+rwX /opt/hf
ENV HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1
WORKDIR /work
