# math_reasoning's evaluator image (its evaluation.image): the model's
# Lean 3 outputs are scored by BLEU and ROUGE-L against the held-out
# formal proofs (mlrb-eval-autoformalization), and each is compiled by
# Lean 3 against mathlib in a sandboxed container of its own that the
# worker starts from this image (mlrb-lean-check, evaluation.check).
#
#   docker build -f deploy/autoformalization.Dockerfile -t mlrb-evaluator:autoformalization-lean3 deploy
#
# Build it where PyPI, GitHub and Docker Hub are reachable and push it to
# the registry the GPU hosts pull from. The held-out set is not in the
# image: mount it and name it in MLRB_AUTOFORMALIZATION_DATA (JSON lines
# of {"informal", "formal"}).
# torch 2.10 or later: torch.load before it can run code from a crafted
# file even with weights_only (CVE-2025-32434 below 2.6, CVE-2026-24747
# below 2.10); the evaluator loads safetensors only in any case.
FROM pytorch/pytorch:2.10.0-cuda12.8-cudnn9-runtime
RUN apt-get update && apt-get install -y --no-install-recommends curl git ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir \
      "transformers==4.46.3" \
      "accelerate==1.1.1" \
      "sentencepiece==0.2.0" \
      "sacrebleu==2.4.3" \
      "rouge-score==0.1.2" \
      "mathlibtools==1.3.2"
# Lean 3's last community release, and a project on mathlib 3 with its
# compiled cache (mathlib 3 is archived: its master no longer moves).
ENV ELAN_HOME=/opt/elan PATH=/opt/elan/bin:$PATH
RUN curl -sSfL https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh \
      | sh -s -- -y --no-modify-path --default-toolchain leanprover-community/lean:3.51.1
RUN mkdir -p /opt/lean && cd /opt/lean && leanproject new mlrb && chmod -R a+rX /opt/lean
COPY autoformalization/mlrb-eval-autoformalization autoformalization/mlrb-lean-check /usr/local/bin/
ENV HF_HOME=/root/.cache/huggingface MLRB_LEAN_PROJECT=/opt/lean/mlrb
WORKDIR /work
