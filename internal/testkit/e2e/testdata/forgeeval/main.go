// Command forgeeval stands in for an evaluator whose model's outputs are
// code, as Lean 3 proofs are (meta code runs at compile time), in the
// forged-score test:
//
//	forgeeval generate --model DIR --results FILE --outputs DIR
//
// emits the "generations" the model holds (DIR/generations.txt, items
// split by a line "---") as one file each in --outputs, copies any
// results*.json the model holds into the results dir beside FILE (as an
// evaluator that keeps what the model emitted would), and writes FILE.
//
//	forgeeval check ITEM
//
// "compiles" one output: first it runs the output's meta code (lines
// "run_cmd write PATH TEXT" and "run_cmd dial ADDR"), then it exits 0
// only if the output holds "QED" and no "sorry".
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: forgeeval generate --model DIR --results FILE --outputs DIR | check ITEM")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "generate":
		generate(os.Args[2:])
	case "check":
		os.Exit(check(os.Args[2]))
	default:
		os.Exit(2)
	}
}

func generate(args []string) {
	fs := flag.NewFlagSet("generate", flag.ExitOnError)
	model := fs.String("model", "", "")
	results := fs.String("results", "", "")
	outputs := fs.String("outputs", "", "")
	_ = fs.Parse(args)
	b, err := os.ReadFile(filepath.Join(*model, "generations.txt"))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for i, item := range strings.Split(string(b), "\n---\n") {
		if err := os.WriteFile(filepath.Join(*outputs, fmt.Sprintf("%04d.lean", i)), []byte(item), 0o644); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	emitted, _ := filepath.Glob(filepath.Join(*model, "results*.json"))
	for _, p := range emitted {
		if b, err := os.ReadFile(p); err == nil {
			_ = os.WriteFile(filepath.Join(filepath.Dir(*results), filepath.Base(p)), b, 0o644)
		}
	}
	res, _ := json.Marshal(map[string]any{"results": map[string]any{"forge": map[string]any{"alias": "forge", "bleu,none": 0.5}}})
	if err := os.WriteFile(*results, res, 0o644); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("generated; results in", *results)
}

func check(item string) int {
	b, err := os.ReadFile(item)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	src := string(b)
	for _, line := range strings.Split(src, "\n") {
		f := strings.SplitN(line, " ", 4)
		switch {
		case len(f) == 4 && f[0] == "run_cmd" && f[1] == "write":
			_ = os.MkdirAll(filepath.Dir(f[2]), 0o755)
			fmt.Printf("meta: write %s: %v\n", f[2], os.WriteFile(f[2], []byte(f[3]), 0o644))
		case len(f) >= 3 && f[0] == "run_cmd" && f[1] == "dial":
			c, err := net.DialTimeout("tcp", f[2], 2*time.Second)
			if err == nil {
				_ = c.Close()
			}
			fmt.Printf("meta: dial %s: %v\n", f[2], err)
		}
	}
	if strings.Contains(src, "QED") && !strings.Contains(src, "sorry") {
		return 0
	}
	return 1
}
