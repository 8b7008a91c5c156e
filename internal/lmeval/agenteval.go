package lmeval

import (
	"bufio"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// agentEvalColumns maps the column titles MLRB's agent-eval prints (via
// tabulate or rich) to metric names.
var agentEvalColumns = map[string]string{
	"parameters": "parameters", "total params": "parameters", "total_params": "parameters", "params": "parameters",
	"tokens per second": "tokens_per_second", "tokens/s": "tokens_per_second", "tokens_per_second": "tokens_per_second",
	"perplexity": "perplexity", "latency": "latency_s", "latency (s)": "latency_s",
	"rouge-l": "rouge_l", "rouge_l": "rouge_l", "mmlu": "mmlu", "final score": "final_score", "final_score": "final_score",
}

var cellSplit = regexp.MustCompile(`\s*[|│┃]\s*|\s{2,}`)

// ParseAgentEvalTable reads the first table agent-eval printed in an
// evaluator's output: a header row naming known columns, then a row of
// numbers. Borders of any of tabulate's or rich's styles are skipped.
func ParseAgentEvalTable(r io.Reader) map[string]float64 {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var header []string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.Trim(line, "+-=|:━─┏┓┗┛┡┩└┘┌┐├┤┼╇╈╋┳┻│┃ ") == "" {
			continue // a border
		}
		cells := splitCells(line)
		if header == nil {
			known := 0
			for _, c := range cells {
				if _, ok := agentEvalColumns[strings.ToLower(c)]; ok {
					known++
				}
			}
			if known >= 2 {
				header = cells
			}
			continue
		}
		if len(cells) != len(header) {
			continue
		}
		out := map[string]float64{}
		for i, c := range cells {
			name, ok := agentEvalColumns[strings.ToLower(header[i])]
			if !ok {
				continue
			}
			// NaN and Inf parse but are no measurement (and JSON cannot
			// carry them into the run's result).
			if v, err := strconv.ParseFloat(strings.ReplaceAll(c, ",", ""), 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
				out[name] = v
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

func splitCells(line string) []string {
	var cells []string
	for _, c := range cellSplit.Split(strings.Trim(line, "|│┃ "), -1) {
		if c = strings.TrimSpace(c); c != "" {
			cells = append(cells, c)
		}
	}
	return cells
}
