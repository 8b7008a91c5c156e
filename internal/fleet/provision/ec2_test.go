package provision

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// fakeEC2 speaks the EC2 Query protocol for the calls the provider makes
// and keeps what it was asked: instances by client token, as EC2 does.
type fakeEC2 struct {
	mu        sync.Mutex
	requests  []url.Values
	byToken   map[string]string
	tags      map[string]map[string]string
	state     map[string]string
	failFirst bool // answer the first launch with a 500 after launching
}

func (f *fakeEC2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	q := r.PostForm
	f.requests = append(f.requests, q)
	w.Header().Set("Content-Type", "text/xml")
	switch q.Get("Action") {
	case "RunInstances":
		tok := q.Get("ClientToken")
		id, ok := f.byToken[tok]
		if !ok {
			id = fmt.Sprintf("i-%017d", len(f.byToken)+1)
			f.byToken[tok] = id
			f.state[id] = "pending"
			f.tags[id] = map[string]string{}
			for i := 1; q.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Key", i)) != ""; i++ {
				f.tags[id][q.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Key", i))] = q.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Value", i))
			}
			if f.failFirst {
				f.failFirst = false
				w.WriteHeader(500)
				fmt.Fprint(w, `<Response><Errors><Error><Code>InternalError</Code><Message>lost answer</Message></Error></Errors><RequestID>r0</RequestID></Response>`)
				return
			}
		}
		fmt.Fprintf(w, `<RunInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r1</requestId><reservationId>r-1</reservationId><ownerId>1</ownerId><instancesSet><item><instanceId>%s</instanceId><instanceState><code>0</code><name>%s</name></instanceState></item></instancesSet></RunInstancesResponse>`, id, f.state[id])
	case "TerminateInstances":
		id := q.Get("InstanceId.1")
		if _, ok := f.state[id]; !ok {
			w.WriteHeader(400)
			fmt.Fprintf(w, `<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>no %s</Message></Error></Errors><RequestID>r2</RequestID></Response>`, id)
			return
		}
		f.state[id] = "terminated"
		fmt.Fprintf(w, `<TerminateInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r3</requestId><instancesSet><item><instanceId>%s</instanceId><currentState><code>32</code><name>shutting-down</name></currentState></item></instancesSet></TerminateInstancesResponse>`, id)
	case "DescribeInstances":
		var items strings.Builder
		for id, st := range f.state {
			if st == "terminated" || !f.matches(q, id) {
				continue
			}
			var tags strings.Builder
			for k, v := range f.tags[id] {
				fmt.Fprintf(&tags, `<item><key>%s</key><value>%s</value></item>`, k, v)
			}
			fmt.Fprintf(&items, `<item><reservationId>r-1</reservationId><instancesSet><item><instanceId>%s</instanceId><instanceState><code>16</code><name>running</name></instanceState><tagSet>%s</tagSet></item></instancesSet></item>`, id, tags.String())
		}
		fmt.Fprintf(w, `<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r4</requestId><reservationSet>%s</reservationSet></DescribeInstancesResponse>`, items.String())
	default:
		w.WriteHeader(400)
		fmt.Fprintf(w, `<Response><Errors><Error><Code>InvalidAction</Code><Message>%s</Message></Error></Errors><RequestID>r5</RequestID></Response>`, q.Get("Action"))
	}
}

// matches applies DescribeInstances' tag:KEY filters, as EC2 does.
func (f *fakeEC2) matches(q url.Values, id string) bool {
	for i := 1; q.Get(fmt.Sprintf("Filter.%d.Name", i)) != ""; i++ {
		key, ok := strings.CutPrefix(q.Get(fmt.Sprintf("Filter.%d.Name", i)), "tag:")
		if ok && f.tags[id][key] != q.Get(fmt.Sprintf("Filter.%d.Value.1", i)) {
			return false
		}
	}
	return true
}

func (f *fakeEC2) launches() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []url.Values
	for _, q := range f.requests {
		if q.Get("Action") == "RunInstances" {
			out = append(out, q)
		}
	}
	return out
}

// TestEC2Wire: the real SDK client against an EC2 Query endpoint on
// 127.0.0.1. A spot launch carries its client token, tags naming run and
// attempt, spot market options and user data that starts a worker under
// the instance id; its answer lost (a 500 after launching), the SDK's
// retry and a second launch of the same attempt get the same instance,
// never a second one; the reaper's listing finds it by its tags; it is
// terminated, and terminating it again is no error.
func TestEC2Wire(t *testing.T) {
	f := &fakeEC2{byToken: map[string]string{}, tags: map[string]map[string]string{}, state: map[string]string{}, failFirst: true}
	srv := httptest.NewServer(f)
	defer srv.Close()
	client := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	e := &EC2{Client: client, InstanceTypes: map[string]string{"A100-40GB": "p4d.24xlarge"}, AMI: "ami-123", Spot: true, Worker: "/usr/local/bin/mlrb-worker", Deployment: "default/mlrb"}
	ctx := context.Background()
	req := Request{Holder: runs.Holder{RunID: "bench/a/t/s1", N: 3}, GPUType: "A100-40GB", GPUCount: 2}
	job, err := e.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.Launch(ctx, req)
	if err != nil || again.ID != job.ID || job.HostID != job.ID {
		t.Fatalf("second launch %+v (%v), first %+v", again, err, job)
	}
	ls := f.launches()
	if len(ls) != 3 || len(f.byToken) != 1 {
		t.Fatalf("%d RunInstances requests (want the first, the SDK's retry, the second launch), %d instances", len(ls), len(f.byToken))
	}
	q := ls[0]
	for k, want := range map[string]string{
		"ClientToken": ClientToken("default/mlrb", runs.Holder{RunID: "bench/a/t/s1", N: 3}), "ImageId": "ami-123", "InstanceType": "p4d.24xlarge", "MinCount": "1", "MaxCount": "1",
		"InstanceMarketOptions.MarketType": "spot", "InstanceMarketOptions.SpotOptions.SpotInstanceType": "one-time",
		"InstanceInitiatedShutdownBehavior": "terminate", "TagSpecification.1.ResourceType": "instance",
		"MetadataOptions.HttpTokens": "required", "MetadataOptions.HttpPutResponseHopLimit": "1",
	} {
		if q.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, q.Get(k), want)
		}
	}
	for _, l := range ls[1:] {
		if l.Get("ClientToken") != q.Get("ClientToken") {
			t.Fatalf("a retry changed the client token: %s", l.Get("ClientToken"))
		}
	}
	if tags := f.tags[job.ID]; tags[TagRun] != "bench/a/t/s1" || tags[TagAttempt] != "3" || tags["Name"] != JobName(runs.Holder{RunID: "bench/a/t/s1", N: 3}) || tags[TagDeployment] != "default/mlrb" {
		t.Fatalf("tags = %v", tags)
	}
	ud, err := base64.StdEncoding.DecodeString(q.Get("UserData"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"latest/api/token", "meta-data/instance-id", `MLRB_HOST_ID="$ID"`, "MLRB_HOST_PREEMPTION=ec2-spot", "MLRB_HOST_GPU_DEVICES='0,1'", "trap 'shutdown -h now' EXIT", "\n/usr/local/bin/mlrb-worker"} {
		if !strings.Contains(string(ud), want) {
			t.Errorf("user data lacks %q:\n%s", want, ud)
		}
	}
	// Another deployment in the account, same run id: its own instance,
	// never listed (so never reaped) by this one.
	staging := *e
	staging.Deployment = "staging/mlrb"
	other, err := staging.Launch(ctx, req)
	if err != nil || other.ID == job.ID {
		t.Fatalf("another deployment's launch: %+v, %v", other, err)
	}
	jobs, err := e.List(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].ID != job.ID {
		t.Fatalf("list = %+v, %v", jobs, err)
	}
	if h, ok := ParseJobName(jobs[0].Name); !ok || h.RunID != "bench/a/t/s1" || h.N != 3 {
		t.Fatalf("the listed instance's run: %+v", h)
	}
	if err := e.Stop(ctx, job); err != nil {
		t.Fatal(err)
	}
	if jobs, err := e.List(ctx); err != nil || len(jobs) != 0 {
		t.Fatalf("after terminate: %+v, %v", jobs, err)
	}
	if err := e.Stop(ctx, Job{ID: "i-gone"}); err != nil {
		t.Fatalf("terminating an instance that is gone: %v", err)
	}
	if _, err := e.Launch(ctx, Request{Holder: runs.Holder{RunID: "r", N: 1}, GPUType: "V100"}); err == nil || !strings.Contains(err.Error(), "provision.ec2.instance_types") {
		t.Fatalf("an unmapped GPU type: %v", err)
	}
}
