// Command testtask is a container test subject: it exits, sleeps, ignores
// SIGTERM, allocates memory or prints its environment, as told.
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Println("usage: testtask exit N | sleep S | ignore-term | alloc MB | env | serve ADDR | netprobe NAME=ADDR...")
		os.Exit(2)
	}
	arg := func() int {
		n, _ := strconv.Atoi(os.Args[2])
		return n
	}
	switch os.Args[1] {
	case "exit":
		fmt.Println("exiting with", arg())
		os.Exit(arg())
	case "sleep":
		time.Sleep(time.Duration(arg()) * time.Second)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		time.Sleep(time.Hour)
	case "mlrb-layout":
		// As MLRB's agents do: work under /app/<id>/ and leave a Hugging
		// Face style model dir there, without reporting its path.
		dir := filepath.Join("/app", "run-"+os.Getenv("TASK_NAME"), "final_model")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		_ = os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type":"mlrb-ngram","order":1,"num_parameters":1,"torch_dtype":"float32"}`), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "model.json"), []byte(`{"order":1,"lambda":0.5,"vocab":["."],"counts":{"|.":1}}`), 0o644)
		fmt.Println("model saved under", dir)
	case "model-ignore-term":
		// An agent that saves a (trivial) model, then ignores SIGTERM.
		saveModel()
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("model saved; ignoring SIGTERM")
		time.Sleep(time.Hour)
	case "breaker":
		// A model that passes every check and crashes its evaluator: an
		// n-gram config over weights the evaluator cannot load.
		saveModel()
		_ = os.WriteFile(filepath.Join(os.Getenv("MLRB_OUTPUT_DIR"), "model", "model.json"), []byte(`{"order":0,"counts":{}}`), 0o644)
		fmt.Println("model saved")
	case "bulk":
		bulk(arg())
	case "serve":
		serve(os.Args[2])
	case "netprobe":
		netprobe(os.Args[2:])
	case "gwdos":
		gwdos(arg())
	case "flood":
		flood(arg())
	case "forger":
		forger(false)
	case "pickler":
		forger(true)
	case "adversary":
		adversary(os.Args[2])
	case "empties":
		// As an agent filling the host's inodes: N empty files in DIR
		// (the container's own layer or an image's volume), then what
		// DIR is mounted as.
		empties(os.Args[2], os.Args[3])
	case "alloc":
		var keep [][]byte
		for i := 0; i < arg(); i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep), "MiB")
	case "kernel":
		// The kernel surface mlrb's seccomp profile closes, and what the
		// container sees of its host.
		var params [120]byte
		_, _, e := syscall.Syscall(425 /* io_uring_setup */, 1, uintptr(unsafe.Pointer(&params)), 0)
		fmt.Println("io_uring_setup:", errno(e))
		_, _, e = syscall.Syscall(syscall.SYS_PTRACE, syscall.PTRACE_ATTACH, 1, 0)
		fmt.Println("ptrace:", errno(e))
		cfg, _ := os.ReadFile("/proc/config.gz")
		fmt.Println("config.gz bytes:", len(cfg))
		cg, _ := os.ReadFile("/proc/self/cgroup")
		fmt.Printf("cgroup: %q\n", strings.TrimSpace(string(cg)))
	case "env":
		env := os.Environ()
		sort.Strings(env)
		for _, e := range env {
			fmt.Println(e)
		}
		fmt.Printf("running as uid %d gid %d\n", os.Getuid(), os.Getgid())
		// As `huggingface-cli login` does: the token lands in the cache,
		// beside what the agent downloads.
		if tok := os.Getenv("HUGGINGFACE_TOKEN"); tok != "" {
			cache := "/root/.cache/huggingface"
			_ = os.MkdirAll(filepath.Join(cache, "hub"), 0o755)
			_ = os.WriteFile(filepath.Join(cache, "token"), []byte(tok), 0o600)
			_ = os.WriteFile(filepath.Join(cache, "stored_tokens"), []byte("[default]\nhf_token = "+tok+"\n"), 0o600)
			_ = os.WriteFile(filepath.Join(cache, "hub", "weights.bin"), []byte("downloaded"), 0o644)
		}
	}
}

func empties(dir, count string) {
	n, _ := strconv.Atoi(count)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o644); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	fmt.Println("made", n, "empty files in", dir)
	info, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(info), "\n") {
		if f := strings.Fields(line); len(f) > 8 && f[4] == dir {
			fmt.Println("mount:", dir, f[len(f)-3], f[len(f)-1])
		}
	}
}

// saveModel submits a trivial mini-task model, as the no-op agent does.
func saveModel() {
	out := os.Getenv("MLRB_OUTPUT_DIR")
	dir := filepath.Join(out, "model")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	_ = os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type":"mlrb-ngram","order":1,"num_parameters":1,"torch_dtype":"float32"}`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "model.json"), []byte(`{"order":1,"lambda":0.5,"vocab":["."],"counts":{"|.":1}}`), 0o644)
	_ = os.WriteFile(filepath.Join(out, "submission.json"), []byte(`{"model_path":"output/model"}`), 0o644)
}

func errno(e syscall.Errno) string {
	if e == 0 {
		return "allowed"
	}
	return e.Error()
}

// bulk is a real-size agent: on its first start it writes mib MiB of
// incompressible data into its work dir and a model whose weights file is
// hardlinked into output/model, then works for a while; resumed, it
// checks what it finds and ends.
func bulk(mib int) {
	work := os.Getenv("MLRB_WORKDIR")
	data, ckpt, model := filepath.Join(work, "data", "bulk.bin"), filepath.Join(work, "ckpt"), filepath.Join(work, "output", "model")
	if os.Getenv("MLRB_RESUMED") == "1" {
		st, err := os.Stat(data)
		a, errA := os.Stat(filepath.Join(ckpt, "model.json"))
		b, errB := os.Stat(filepath.Join(model, "model.json"))
		linked := errA == nil && errB == nil && os.SameFile(a, b)
		fmt.Printf("resumed: bulk %d bytes (%v), model hardlink intact %v\n", sizeOf(st), err, linked)
		time.Sleep(3 * time.Second)
		return
	}
	for _, d := range []string{filepath.Dir(data), ckpt, model} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	f, err := os.Create(data)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	rng := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 1<<20)
	for i := 0; i < mib; i++ {
		_, _ = rng.Read(buf)
		if _, err := f.Write(buf); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	if err := f.Close(); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	_ = os.WriteFile(filepath.Join(ckpt, "model.json"), []byte(`{"order":1,"lambda":0.5,"vocab":["."],"counts":{"|.":1}}`), 0o644)
	if err := os.Link(filepath.Join(ckpt, "model.json"), filepath.Join(model, "model.json")); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	_ = os.WriteFile(filepath.Join(model, "config.json"), []byte(`{"model_type":"mlrb-ngram","order":1,"num_parameters":1,"torch_dtype":"float32"}`), 0o644)
	_ = os.WriteFile(filepath.Join(work, "output", "submission.json"), []byte(`{"model_path":"output/model"}`), 0o644)
	fmt.Printf("wrote %d MiB and a hardlinked model; working\n", mib)
	for i := 0; ; i++ {
		_ = os.WriteFile(filepath.Join(work, "progress.txt"), []byte(fmt.Sprintf("step %d\n", i)), 0o644)
		time.Sleep(time.Second)
	}
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}
