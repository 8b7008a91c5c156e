# The reference agent and evaluator image. Build context: a directory
# holding the static binary `mlrb` (CGO_ENABLED=0 go build -o mlrb ./cmd/mlrb-agent).
FROM scratch
COPY mlrb /mlrb
WORKDIR /app
ENTRYPOINT []
# Run as an agent with no args of its own, it is the reference agent.
CMD ["/mlrb", "reference-agent"]
