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
# image: it is the task's evaluation.data (ProofNet's test split, by
# hash), which the worker mounts read-only from eval.data_dir and names
# as --data. It must not come from MLRB's public train split: the image
# holds that split's hashes, and the evaluator refuses items among them.
# torch 2.10 or later: torch.load before it can run code from a crafted
# file even with weights_only (CVE-2025-32434 below 2.6, CVE-2026-24747
# below 2.10); the evaluator loads safetensors only in any case.
# Every package is pinned (autoformalization/constraints.txt), pip
# installs beside the base's torch under PEP 668 (PIP_BREAK_SYSTEM_PACKAGES),
# and elan is its v4.2.3 release asset, checked by its SHA-256 (its
# install script would download "latest").
FROM pytorch/pytorch:2.10.0-cuda12.8-cudnn9-runtime
# Tools of the build, not of the score: fetching elan and mathlib.
RUN apt-get update && apt-get install -y --no-install-recommends curl git ca-certificates \
    && rm -rf /var/lib/apt/lists/*
ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_CONSTRAINT=/opt/mlrb/constraints.txt PIP_NO_CACHE_DIR=1
COPY autoformalization/constraints.txt /opt/mlrb/constraints.txt
RUN pip install \
      "transformers==4.57.1" \
      "accelerate==1.10.1" \
      "datasets==3.6.0" \
      "sentencepiece==0.2.0" \
      "sacrebleu==2.4.3" \
      "rouge-score==0.1.2" \
      "mathlibtools==1.3.2"
COPY controls/mlrb-pinned /usr/local/bin/
RUN mlrb-pinned /opt/mlrb/constraints.txt /opt/mlrb/pip-freeze.txt
# Lean 3's last community release, and a project on mathlib 3 with its
# compiled cache (mathlib 3 is archived: its master no longer moves).
ENV ELAN_HOME=/opt/elan PATH=/opt/elan/bin:$PATH
ARG ELAN_VERSION=v4.2.3
ARG ELAN_SHA256=df0b2b3a439961ffcbb3985214365ffe40f49bc871df04dff268c7d8e21ca8b2
RUN curl -sSfL -o /tmp/elan.tar.gz https://github.com/leanprover/elan/releases/download/${ELAN_VERSION}/elan-x86_64-unknown-linux-gnu.tar.gz \
    && echo "${ELAN_SHA256}  /tmp/elan.tar.gz" | sha256sum -c - \
    && tar -xzf /tmp/elan.tar.gz -C /tmp \
    && /tmp/elan-init -y --no-modify-path --default-toolchain leanprover-community/lean:3.51.1 \
    && rm -f /tmp/elan.tar.gz /tmp/elan-init
# mathlibtools fetches mathlib 3's compiled cache from a CDN that may be
# gone: a file importing mathlib must compile in seconds here, or the
# build fails (without the cache, each 2-minute check would rebuild
# mathlib and time out).
RUN mkdir -p /opt/lean && cd /opt/lean && leanproject new mlrb \
    && printf 'import data.real.basic\n\ntheorem mlrb_smoke : (2:ℝ) = 1 + 1 := by norm_num\n' > mlrb/src/mlrb_smoke.lean \
    && cd mlrb && timeout 300 lean --make src/mlrb_smoke.lean && rm src/mlrb_smoke.lean \
    && chmod -R a+rwX /opt/lean
ENV HF_HOME=/opt/hf MLRB_LEAN_PROJECT=/opt/lean/mlrb MLRB_TRAIN_HASHES=/opt/mlrb/train_hashes.txt
COPY controls/mlrb-controls autoformalization/controls.txt /opt/mlrb/
RUN python3 /opt/mlrb/mlrb-controls /opt/mlrb/controls.txt && chmod -R a+rX /opt/mlrb
COPY autoformalization/mlrb-eval-autoformalization autoformalization/mlrb-lean-check /usr/local/bin/
# MLRB's public train split, as hashes: a held-out item among them could
# have been trained on, and is refused. The build's last step: it also
# checks that the evaluator's own functions load.
RUN mkdir -p /opt/mlrb && python3 -c "import runpy, datasets; m = runpy.run_path('/usr/local/bin/mlrb-eval-autoformalization', run_name='mlrb'); \
rows = datasets.load_dataset('AlgorithmicResearchGroup/math_reasoning_autoformalization_track', revision='main', split='train'); \
open('/opt/mlrb/train_hashes.txt', 'w').write(''.join(m['item_hash'](r['formal_proof']) + '\\n' for r in rows))" \
    && test "$(wc -l < /opt/mlrb/train_hashes.txt)" -gt 3000
ENV HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1
WORKDIR /work
