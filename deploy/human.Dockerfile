# A person's shell for human baselines (agents/human.yaml): Debian's
# static busybox for the tools, mlrb's static helper for `task` (the
# worker's clock) and to hold the container open. Nothing is pulled.
# Build context: a directory holding `busybox` (/bin/busybox of Debian's
# busybox-static package) and the static binary `mlrb`
# (CGO_ENABLED=0 go build -o mlrb ./cmd/mlrb-agent).
FROM scratch
COPY busybox /bin/busybox
COPY mlrb /mlrb
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN ["/bin/busybox", "ln", "-s", "/mlrb", "/bin/task"]
RUN ["/bin/busybox", "ln", "-s", "/mlrb", "/bin/mlrb"]
RUN ["/bin/busybox", "mkdir", "-m", "1777", "/tmp"]
ENV PATH=/bin
WORKDIR /app
ENTRYPOINT []
# The person works through `starter attach`'s shells; this holds the
# container until its deadline, a submit or a release.
CMD ["/mlrb", "hold"]
