# mlrb's LLM research agent for the real tasks (agents/researcher-*.yaml):
# the evaluator image (deploy/evaluator.Dockerfile: python3 3.12, torch
# 2.10, transformers, datasets, peft and accelerate, all pinned by its
# constraints file, PEP 668 handled there) with mlrb's static binary.
# Nothing is pip-installed here, so the evaluator's pins are the agent's:
# a model the agent trains loads in the evaluator that scores it.
# Build context: a directory holding the static binary `mlrb`
# (CGO_ENABLED=0 go build -o mlrb ./cmd/mlrb-agent), after the evaluator:
#
#   docker build -f deploy/researcher-torch.Dockerfile -t mlrb-researcher-torch:latest CONTEXT
#
# Build it where the evaluator image is, push both to the GPU hosts'
# registry. The agent downloads models and data through the run's door
# (gateway.allow), so the hub is online here and its cache is writable by
# the non-root user the container runs as (MLRB's own image kept it under
# a 0700 /root).
ARG EVALUATOR=mlrb-evaluator:lm-eval-0.4.12
FROM ${EVALUATOR}
COPY mlrb /mlrb
RUN ln -s /mlrb /usr/local/bin/mlrb && mkdir -m 1777 -p /var/cache/mlrb-hf
ENV HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 HF_HOME=/var/cache/mlrb-hf
WORKDIR /work
ENTRYPOINT []
CMD ["/mlrb", "researcher"]
