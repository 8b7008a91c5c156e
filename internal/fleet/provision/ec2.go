// EC2: an instance per attempt through the official AWS SDK, spot or on-demand.

package provision

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/mlrb/mlrb/deploy"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// Tags on mlrb's instances: the deployment that launched them, the run
// and attempt they serve.
const (
	TagDeployment = "mlrb:deployment"
	TagRun        = "mlrb:run"
	TagAttempt    = "mlrb:attempt"
)

// EC2 launches an instance per attempt whose user data starts a worker
// with the instance id as its host id.
type EC2 struct {
	Client *ec2.Client
	// InstanceTypes maps a GPU type to the instance type that has it
	// (A100-40GB: p4d.24xlarge).
	InstanceTypes  map[string]string
	AMI            string
	SubnetID       string
	SecurityGroups []string
	// Spot asks for spot capacity (one-time, terminated on interruption).
	Spot bool
	// Worker is the worker command on the AMI; its config (temporal,
	// storage) is baked into the image or its instance profile.
	Worker string
	// Deployment names this mlrb deployment (namespace/task queue): its
	// instances are tagged with it, and List sees no other's.
	Deployment string
}

// ClientToken is the idempotency token of an attempt's launch: EC2 runs
// one instance per token, so a retried request never launches twice. The
// deployment is part of it: another deployment's run of the same id is
// another instance.
func ClientToken(deployment string, h runs.Holder) string {
	sum := sha256.Sum256([]byte(deployment + "\x00" + JobName(h)))
	return "mlrb-" + hex.EncodeToString(sum[:20])
}

// UserData is the boot script (deploy/ec2-user-data.sh): it reads the
// instance id from the metadata service (IMDSv2) and starts a dedicated
// worker under it that watches for spot notices.
func (e *EC2) UserData(gpuType string, gpus int) (string, error) {
	devices := make([]string, gpus)
	for i := range devices {
		devices[i] = strconv.Itoa(i)
	}
	return render("ec2-user-data.sh", deploy.EC2UserData, struct{ GPUType, Devices, Worker string }{gpuType, strings.Join(devices, ","), e.Worker})
}

// Launch runs the attempt's instance, or finds it: the client token makes
// a repeated launch return the instance the first one started.
func (e *EC2) Launch(ctx context.Context, r Request) (Job, error) {
	itype, ok := e.InstanceTypes[r.GPUType]
	if !ok {
		return Job{}, fmt.Errorf("provision.ec2.instance_types has no instance type for GPU type %q", r.GPUType)
	}
	name := JobName(r.Holder)
	ud, err := e.UserData(r.GPUType, r.GPUCount)
	if err != nil {
		return Job{}, err
	}
	in := &ec2.RunInstancesInput{
		ImageId: aws.String(e.AMI), InstanceType: types.InstanceType(itype), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		ClientToken: aws.String(ClientToken(e.Deployment, r.Holder)),
		UserData:    aws.String(base64.StdEncoding.EncodeToString([]byte(ud))),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{
			{Key: aws.String("Name"), Value: aws.String(name)},
			{Key: aws.String(TagDeployment), Value: aws.String(e.Deployment)},
			{Key: aws.String(TagRun), Value: aws.String(r.Holder.JobKey())},
			{Key: aws.String(TagAttempt), Value: aws.String(strconv.Itoa(r.Holder.N))},
		}}},
		// The user data shuts the instance down when its worker exits,
		// and shutting down terminates it: a host whose worker is gone
		// must not bill idle.
		InstanceInitiatedShutdownBehavior: types.ShutdownBehaviorTerminate,
		// IMDSv2 only, one hop: a container on the instance (an agent's,
		// one network hop further) cannot reach the metadata service and
		// the instance role's credentials, even where its network lets
		// it try.
		MetadataOptions: &types.InstanceMetadataOptionsRequest{HttpTokens: types.HttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1),
			HttpEndpoint: types.InstanceMetadataEndpointStateEnabled},
	}
	if e.SubnetID != "" {
		in.SubnetId = aws.String(e.SubnetID)
	}
	if len(e.SecurityGroups) > 0 {
		in.SecurityGroupIds = e.SecurityGroups
	}
	if e.Spot {
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot,
			SpotOptions: &types.SpotMarketOptions{SpotInstanceType: types.SpotInstanceTypeOneTime, InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate}}
	}
	out, err := e.Client.RunInstances(ctx, in)
	if err != nil {
		return Job{}, fmt.Errorf("run instance for %s: %w", name, err)
	}
	if len(out.Instances) != 1 {
		return Job{}, fmt.Errorf("run instance for %s: %d instances in the answer", name, len(out.Instances))
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	return Job{ID: id, Name: name, HostID: id, State: string(out.Instances[0].State.Name)}, nil
}

// Stop terminates an instance; one already gone is not an error.
func (e *EC2) Stop(ctx context.Context, j Job) error {
	id := j.ID
	_, err := e.Client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "InvalidInstanceID.NotFound" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("terminate %s: %w", id, err)
	}
	return nil
}

// List lists this deployment's instances that are pending or running:
// another deployment's in the same account is never reaped.
func (e *EC2) List(ctx context.Context) ([]Job, error) {
	var jobs []Job
	p := ec2.NewDescribeInstancesPaginator(e.Client, &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("tag:" + TagDeployment), Values: []string{e.Deployment}},
		{Name: aws.String("tag-key"), Values: []string{TagRun}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe instances: %w", err)
		}
		for _, res := range page.Reservations {
			for _, in := range res.Instances {
				var run string
				attempt := 0
				for _, t := range in.Tags {
					switch aws.ToString(t.Key) {
					case TagRun:
						run = aws.ToString(t.Value)
					case TagAttempt:
						attempt, _ = strconv.Atoi(aws.ToString(t.Value))
					}
				}
				id := aws.ToString(in.InstanceId)
				state := ""
				if in.State != nil {
					state = string(in.State.Name)
				}
				jobs = append(jobs, Job{ID: id, Name: JobName(runs.ParseJobKey(run, attempt)), HostID: id, State: state})
			}
		}
	}
	return jobs, nil
}
