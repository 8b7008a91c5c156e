# mlrb's LLM research agent for the mini suite (agents/mlrb-researcher-*.yaml):
# Debian's static busybox for its shell tool, mlrb's static binary for the
# agent (`/mlrb researcher`) and the mini tasks' one training tool
# (`mlrb train key=value ...`). Nothing is pulled.
# Build context: a directory holding `busybox` (/bin/busybox of Debian's
# busybox-static package) and the static binary `mlrb`
# (CGO_ENABLED=0 go build -o mlrb ./cmd/mlrb-agent).
#
#   docker build -f deploy/researcher.Dockerfile -t mlrb-researcher:latest CONTEXT
FROM scratch
COPY busybox /bin/busybox
COPY mlrb /mlrb
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN ["/bin/busybox", "ln", "-s", "/mlrb", "/bin/mlrb"]
RUN ["/bin/busybox", "mkdir", "-m", "1777", "/tmp"]
ENV PATH=/bin
WORKDIR /app
ENTRYPOINT []
CMD ["/mlrb", "researcher"]
