// S3: the store over any S3 API, through aws-sdk-go-v2.

package blob

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3Options configure an S3 (or S3-compatible) store.
type S3Options struct {
	Bucket    string
	Prefix    string
	Region    string
	Endpoint  string // empty: AWS; else e.g. http://127.0.0.1:7070
	PathStyle bool
	// Static keys for on-prem stores; empty uses the standard chain
	// (environment, shared config, instance role).
	AccessKeyID     string
	SecretAccessKey string
	// MaxAttempts bounds the SDK's retries (with backoff) of one request.
	MaxAttempts int
}

// S3 stores blobs as objects under a bucket prefix.
type S3 struct {
	c      *s3.Client
	bucket string
	prefix string
	// noConditional: the server refused If-None-Match as not implemented.
	noConditional atomic.Bool
}

// String is s3://bucket/prefix.
func (s *S3) String() string { return "s3://" + s.bucket + "/" + s.prefix }

// NewS3 builds an S3 store and checks that the bucket answers.
func NewS3(ctx context.Context, o S3Options) (*S3, error) {
	if o.Bucket == "" {
		return nil, &StoreError{Msg: "storage.s3.bucket: must be set for storage.kind s3"}
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	loads := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(o.Region)}
	if o.AccessKeyID != "" {
		loads = append(loads, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, "")))
	}
	max := o.MaxAttempts
	if max <= 0 {
		max = 8
	}
	loads = append(loads, awsconfig.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = max
			so.MaxBackoff = 10 * time.Second
		})
	}))
	cfg, err := awsconfig.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("s3 config: %w", err)
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
		// Plain HTTP endpoints of on-prem stores: no payload signing detour.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	prefix := strings.Trim(o.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	s := &S3{c: client, bucket: o.Bucket, prefix: prefix}
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(o.Bucket)}); err != nil {
		return nil, &StoreError{Msg: fmt.Sprintf("s3 bucket %q at %s is not reachable (check storage.s3.endpoint, storage.s3.bucket and the credentials): %v", o.Bucket, endpointName(o.Endpoint), err)}
	}
	return s, nil
}

func endpointName(e string) string {
	if e == "" {
		return "AWS"
	}
	return e
}

// Put uploads an object; S3 makes it visible only when complete. The body
// is read into memory so the SDK can sign and retry it: callers put chunks
// of bounded size.
func (s *S3) Put(ctx context.Context, key string, r io.Reader) error {
	return s.put(ctx, key, r, nil)
}

// Create is a conditional write (If-None-Match: *): the store refuses it
// with 412 when the key exists. A retry of a request that did create the
// object also gets 412; callers that may retry read the blob back to tell.
//
// A store that does not implement conditional writes (some older
// S3-compatible servers answer 501) gets a check before an unconditional
// put: not atomic, so two racing writers are then told apart only by the
// attempt fences the checkpoint engine keeps beside the manifests.
func (s *S3) Create(ctx context.Context, key string, r io.Reader) error {
	br, err := seekable(r)
	if err != nil {
		return fmt.Errorf("create %s: %w", key, err)
	}
	if !s.noConditional.Load() {
		err = s.put(ctx, key, br, aws.String("*"))
		var ae smithy.APIError
		switch {
		case errors.As(err, &ae) && (ae.ErrorCode() == "PreconditionFailed" || ae.ErrorCode() == "ConditionalRequestConflict"):
			return fmt.Errorf("create %s: %w", key, ErrExists)
		case errors.As(err, &ae) && ae.ErrorCode() == "NotImplemented":
			s.noConditional.Store(true)
		default:
			return err
		}
	}
	exists, err := s.Exists(ctx, key)
	if err != nil {
		return fmt.Errorf("create %s: %w", key, err)
	}
	if exists {
		return fmt.Errorf("create %s: %w", key, ErrExists)
	}
	if _, err := br.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("create %s: %w", key, err)
	}
	return s.put(ctx, key, br, nil)
}

// seekable is r as a bytes.Reader, read into memory unless it is one: a
// put's body must be rewound to be retried.
func seekable(r io.Reader) (*bytes.Reader, error) {
	if br, ok := r.(*bytes.Reader); ok {
		return br, nil
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(body), nil
}

func (s *S3) put(ctx context.Context, key string, r io.Reader, ifNoneMatch *string) error {
	br, err := seekable(r)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	sum, err := crc32c(br)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	_, err = s.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key),
		Body: br, ContentLength: aws.Int64(br.Size()), IfNoneMatch: ifNoneMatch,
		ChecksumCRC32C: aws.String(sum),
	}, unsignedPayload)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// unsignedPayload signs a put's headers but not its body. Hashing every
// body with SHA-256 (here, and again by the server to check it) costs a
// checkpoint as much CPU as compressing it; the body's CRC32C (crc32c)
// is what the store checks instead, on every S3 API that knows the
// header, and a chunk's content hash is checked again on restore.
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32c is the body's x-amz-checksum-crc32c (big-endian, base64): a
// store given one checks it rather than computing its own default
// (CRC64NVME, in software: 8 % of the machine's CPU during a checkpoint
// to a versitygw on it, by perf), and a body damaged on the way is
// refused.
func crc32c(br *bytes.Reader) (string, error) {
	h := crc32.New(castagnoli)
	if _, err := br.WriteTo(h); err != nil {
		return "", err
	}
	if _, err := br.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// Get opens an object.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if isNotFound(err) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return out.Body, nil
}

// Exists asks for an object's head.
func (s *S3) Exists(ctx context.Context, key string) (bool, error) {
	_, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("head %s: %w", key, err)
	}
	return true, nil
}

// List pages through the objects under prefix.
func (s *S3) List(ctx context.Context, prefix string) ([]Object, error) {
	var objs []Object
	p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix + prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		for _, o := range page.Contents {
			objs = append(objs, Object{Key: strings.TrimPrefix(aws.ToString(o.Key), s.prefix), Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// Delete removes an object; a missing one is not an error.
func (s *S3) Delete(ctx context.Context, key string) error {
	_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	var nk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nk) || errors.As(err, &nf) {
		return true
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "NoSuchKey" || ae.ErrorCode() == "NotFound")
}
