package lmeval

import (
	"errors"
	"math"
	"testing"

	"github.com/mlrb/mlrb/tasks"
)

// A results file shaped as lm-eval 0.4.11 (the evaluator image's pin)
// writes it for --tasks super-glue-lm-eval-v1: that name is a tag, not a
// group, so each task stands alone with no aggregate; RTE is sglue_rte
// (plain rte is GLUE's); record reports f1/em, cb acc/f1, the others acc.
// From the harness's own task configs (lm_eval/tasks/super_glue/*/default.yaml).
const superglue = `{
  "results": {
    "boolq": {"alias": "boolq", "acc,none": 0.62, "acc_stderr,none": 0.008},
    "cb": {"alias": "cb", "acc,none": 0.41, "acc_stderr,none": 0.066, "f1,none": 0.29, "f1_stderr,none": "N/A"},
    "copa": {"alias": "copa", "acc,none": 0.6, "acc_stderr,none": 0.049},
    "multirc": {"alias": "multirc", "acc,none": 0.57, "acc_stderr,none": 0.007},
    "record": {"alias": "record", "f1,none": 0.7, "f1_stderr,none": 0.004, "em,none": 0.69, "em_stderr,none": 0.004},
    "sglue_rte": {"alias": "sglue_rte", "acc,none": 0.53, "acc_stderr,none": 0.03},
    "wic": {"alias": "wic", "acc,none": 0.5, "acc_stderr,none": 0.019},
    "wsc": {"alias": "wsc", "acc,none": 0.37, "acc_stderr,none": 0.047}
  },
  "group_subtasks": {"boolq": [], "cb": [], "copa": [], "multirc": [], "record": [], "sglue_rte": [], "wic": [], "wsc": []},
  "n-samples": {"boolq": {"original": 3270, "effective": 3270}},
  "config": {"model": "hf", "model_args": "pretrained=/m"}
}`

const mmlu = `{
  "results": {
    "mmlu": {"acc,none": 0.5512, "acc_stderr,none": 0.004, "alias": "mmlu"},
    "mmlu_humanities": {"acc,none": 0.51, "acc_stderr,none": 0.007, "alias": " - humanities"}
  },
  "groups": {"mmlu": {"acc,none": 0.5512, "acc_stderr,none": 0.004, "alias": "mmlu"}}
}`

// BLiMP as lm-eval 0.4.11 writes it: blimp is a group with an aggregate
// acc (unweighted mean of its 67 tasks), so the group row carries it.
const blimp = `{
  "results": {
    "blimp": {"acc,none": 0.7061, "acc_stderr,none": 0.0016, "alias": "blimp"},
    "blimp_adjunct_island": {"acc,none": 0.81, "acc_stderr,none": 0.0124, "alias": " - blimp_adjunct_island"},
    "blimp_anaphor_gender_agreement": {"acc,none": 0.93, "acc_stderr,none": 0.008, "alias": " - blimp_anaphor_gender_agreement"}
  },
  "groups": {"blimp": {"acc,none": 0.7061, "acc_stderr,none": 0.0016, "alias": "blimp"}},
  "group_subtasks": {"blimp": ["blimp_adjunct_island", "blimp_anaphor_gender_agreement"]}
}`

func TestScoreFullTasks(t *testing.T) {
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		task, body string
		want       float64
	}{
		{"mini_pile", superglue, (0.62 + 0.41 + 0.6 + 0.57 + 0.7 + 0.53 + 0.5 + 0.37) / 8},
		{"edge_llm_training", superglue, (0.62 + 0.41 + 0.6 + 0.57 + 0.7 + 0.53 + 0.5 + 0.37) / 8},
		{"llm_efficiency", mmlu, 0.5512},
		{"baby_lm", blimp, 0.7061},
		{"edge_llm_compression", mmlu, 0.5512},
	}
	for _, tc := range cases {
		t.Run(tc.task, func(t *testing.T) {
			spec, _ := cat.Get(tc.task)
			r, err := Parse([]byte(tc.body), "results.json")
			if err != nil {
				t.Fatal(err)
			}
			got, metrics, err := Score(r, spec.Metric)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-tc.want) > 1e-12 || metrics[spec.Metric.Name] != got {
				t.Fatalf("score %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMissingMetric(t *testing.T) {
	cat, _ := tasks.Load("")
	spec, _ := cat.Get("baby_lm")
	r, err := Parse([]byte(mmlu), "results.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Score(r, spec.Metric); !errors.Is(err, ErrNoScore) {
		t.Fatalf("err = %v, want ErrNoScore", err)
	}
}

// TestRowsOfLMEval0412: lm-eval 0.4.12's writer puts name and sample_len
// beside the "metric,filter" fields of every row; they are not metrics.
func TestRowsOfLMEval0412(t *testing.T) {
	body := []byte(`{"results": {"mmlu": {"alias": "mmlu", "name": "mmlu", "sample_len": 14042, "acc,none": 0.5523, "acc_stderr,none": 0.0041}},
		"groups": {"mmlu": {"alias": "mmlu", "name": "mmlu", "sample_len": 14042, "acc,none": 0.5523, "acc_stderr,none": 0.0041}},
		"n-samples": {"mmlu_anatomy": {"original": 135, "effective": 135}}, "lm_eval_version": "0.4.12"}`)
	r, err := Parse(body, "results.json")
	if err != nil {
		t.Fatal(err)
	}
	score, metrics, err := Score(r, tasks.Metric{Name: "mmlu_acc", Aggregate: "single", Parts: []tasks.MetricPart{{Task: "mmlu", Field: "acc,none"}}})
	if err != nil || score != 0.5523 {
		t.Fatalf("score %v, %v", score, err)
	}
	if _, ok := metrics["mmlu/sample_len"]; ok || len(metrics) != 2 {
		t.Fatalf("metrics %v: only mmlu/acc,none and the score", metrics)
	}
}
