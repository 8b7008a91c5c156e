package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// adversary runs one attack of the sandbox audits, as an agent would,
// then (for the attacks the worker must simply outlast) saves a model
// and ends: the test asserts the run's outcome is the agent's own.
func adversary(mode string) {
	fmt.Println("adversary:", mode)
	switch mode {
	case "cmdline":
		// H1: processes whose command lines are megabytes each.
		cmdlines()
	case "deep":
		// H2: data below more directory levels than a walk descends.
		deepData(600, 16<<20)
	case "longpath":
		// H4, M5: a path longer than PATH_MAX, made relative to open
		// descriptors, with files below it.
		longPath(20)
	case "refused":
		// H3: calls the door refuses, as fast as it answers.
		refusedCalls(2 * time.Minute)
	case "bigrefused":
		// H2 (b76b22e): refused calls of 32 MiB of fresh bytes each and,
		// beside them, a storm of calls the door answers 429 (its
		// buffer is full of the big ones), until the attempt is stopped.
		bigRefused(10 * time.Minute)
	case "volume":
		// M4: writes under the image's VOLUME.
		fill("/scratch", 64)
	case "empties":
		// M4: inodes in the container's own layer, well over the
		// suites' limit (5,000) yet quick to make on a loaded host;
		// then it outlives any time limit, so only the limit ends it.
		empties("/tmp/empties", "8000")
		idle(10 * time.Minute)
		return
	default:
		fmt.Println("unknown mode", mode)
		os.Exit(2)
	}
	saveModel()
}

func cmdlines() {
	arg := strings.Repeat("a", 100<<10)
	args := []string{"sleep", "20"}
	for range 18 {
		args = append(args, arg)
	}
	var kids []*exec.Cmd
	for range 40 {
		c := exec.Command("/proc/self/exe", args...)
		if err := c.Start(); err != nil {
			fmt.Println("start:", err)
			break
		}
		kids = append(kids, c)
	}
	fmt.Println("started", len(kids), "processes of", len(args)*len(arg)>>20, "MiB command lines")
	for _, c := range kids {
		_ = c.Wait()
	}
}

// deepData makes a chain of levels directories with a file of bytes at
// the bottom, through descriptors.
func deepData(levels int, bytes int) {
	fd := chain(levels, "d")
	f := os.NewFile(uintptr(must(unix.Openat(fd, "data.bin", unix.O_CREAT|unix.O_WRONLY, 0o644))), "data")
	_, _ = f.Write(make([]byte, bytes))
	_ = f.Close()
	fmt.Println("wrote", bytes>>20, "MiB", levels, "levels down")
	idle(2 * time.Minute)
}

// longPath makes a chain of levels 255-byte names and files below it.
func longPath(levels int) {
	fd := chain(levels, strings.Repeat("n", 255))
	for i := range 10 {
		_ = unix.Close(must(unix.Openat(fd, "f"+strconv.Itoa(i), unix.O_CREAT|unix.O_WRONLY, 0o644)))
	}
	fmt.Println("made a path of", levels*256, "bytes")
}

func chain(levels int, name string) int {
	fd := must(unix.Open(os.Getenv("MLRB_WORKDIR"), unix.O_DIRECTORY|unix.O_RDONLY, 0))
	for range levels {
		_ = unix.Mkdirat(fd, name, 0o755)
		next := must(unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY, 0))
		_ = unix.Close(fd)
		fd = next
	}
	return fd
}

func refusedCalls(d time.Duration) {
	body := `{"model":"no-such-model","max_tokens":10,"messages":[]}`
	end := time.Now().Add(d)
	n := 0
	for time.Now().Before(end) {
		resp, err := http.Post("http://127.0.0.1:3128/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		n++
	}
	fmt.Println("refused calls:", n)
}

func bigRefused(d time.Duration) {
	end := time.Now().Add(d)
	const url = "http://127.0.0.1:3128/v1/chat/completions"
	var big, throttled atomic.Int64
	var wg sync.WaitGroup
	// Six senders of 32 MiB: the door reads two at a time (its 64 MiB of
	// request buffer) and answers the others 429 unread, which they
	// send again at once.
	for i := range 6 {
		wg.Go(func() {
			head := `{"model":"no-such-model","max_tokens":10,"messages":[{"role":"user","content":"`
			body := make([]byte, 32<<20)
			copy(body, head)
			copy(body[len(body)-4:], `"}]}`)
			fresh := rand.NewChaCha8([32]byte{byte(i)})
			for time.Now().Before(end) {
				text := body[len(head) : len(body)-4]
				_, _ = fresh.Read(text)
				for j, b := range text {
					text[j] = 'a' + b%26
				}
				status := post(url, bytes.NewReader(body))
				for ; status == http.StatusTooManyRequests && time.Now().Before(end); status = post(url, bytes.NewReader(body)) {
					throttled.Add(1)
				}
				if status >= 400 {
					big.Add(1)
				}
			}
		})
	}
	go func() {
		for time.Now().Before(end) {
			time.Sleep(5 * time.Second)
			fmt.Println("refused 32 MiB calls:", big.Load(), "answered 429:", throttled.Load())
		}
	}()
	wg.Wait()
}

// post sends body with the attempt's key (so that the door reads it)
// and returns the status (0 for no answer).
func post(url string, body io.Reader) int {
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func fill(dir string, mib int) {
	f, err := os.Create(filepath.Join(dir, "fill.bin"))
	if err != nil {
		fmt.Println(err)
		return
	}
	buf := make([]byte, 1<<20)
	for range mib {
		if _, err := f.Write(buf); err != nil {
			fmt.Println(err)
			break
		}
	}
	_ = f.Close()
	info, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(info), "\n") {
		if f := strings.Fields(line); len(f) > 8 && f[4] == dir {
			fmt.Println("mount:", dir, f[len(f)-3])
		}
	}
}

func idle(d time.Duration) {
	fmt.Println("idling")
	time.Sleep(d)
}

func must(fd int, err error) int {
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	return fd
}
