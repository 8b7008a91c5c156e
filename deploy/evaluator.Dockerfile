# The evaluator image of the real tasks (their evaluation.image):
# lm-evaluation-harness and what it runs, pinned, on a CUDA PyTorch base.
# The task catalog's metric keys come from this lm-eval version's own task
# configs (in 0.4.11: super-glue-lm-eval-v1 is a tag whose RTE task is
# sglue_rte; mmlu and blimp are groups carrying an aggregate acc).
#
#   docker build -f deploy/evaluator.Dockerfile -t mlrb-evaluator:lm-eval-0.4.11 deploy
#
# Build it where PyPI and Docker Hub are reachable, push it to the
# registry the GPU hosts pull from, and keep the tag: a run records the
# digest it was scored with.
# torch 2.10 or later: torch.load before it can run code from a crafted
# file even with weights_only (CVE-2025-32434 below 2.6, CVE-2026-24747
# below 2.10). The tasks load safetensors only, remote code off, in any
# case (their --model_args).
FROM pytorch/pytorch:2.10.0-cuda12.8-cudnn9-runtime
RUN pip install --no-cache-dir \
      "lm_eval[hf]==0.4.11" \
      "transformers==4.46.3" \
      "accelerate==1.1.1" \
      "datasets==3.1.0" \
      "sentencepiece==0.2.0"
# Evaluation datasets are fetched into the Hugging Face cache at first use;
# mount a shared cache (HF_HOME) on hosts that evaluate often.
ENV HF_HOME=/root/.cache/huggingface
# The tasks' entry point: lm-eval's one results file, under the name the
# worker chose ({results}).
COPY lmeval/mlrb-eval-lmeval /usr/local/bin/
WORKDIR /work
