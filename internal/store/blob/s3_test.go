package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/testkit/s3test"
)

// flipOne damages the first byte of a body on its way.
type flipOne struct {
	io.ReadCloser
	done bool
}

func (f *flipOne) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if n > 0 && !f.done {
		p[0] ^= 0xff
		f.done = true
	}
	return n, err
}

// TestS3PutIsCheckedByTheStore: a put's body goes unsigned, so its
// integrity on the way is the CRC32C it carries: the store keeps it,
// and refuses a body damaged between the worker and itself.
func TestS3PutIsCheckedByTheStore(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	st := srv.Store("sum")
	body := bytes.Repeat([]byte("weights "), 1<<17)
	if err := st.Put(ctx, "k", bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	head, err := srv.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String("sum/k"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(head.ChecksumCRC32C) == "" {
		t.Fatalf("the store kept no CRC32C for the put (CRC64NVME %q)", aws.ToString(head.ChecksumCRC64NVME))
	}

	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // signed
		if r.In.Method == http.MethodPut {
			r.Out.Body = &flipOne{ReadCloser: r.Out.Body}
		}
	}})
	defer proxy.Close()
	o := srv.Options("sum")
	o.Endpoint, o.MaxAttempts = proxy.URL, 1
	damaged, err := blob.NewS3(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	err = damaged.Put(ctx, "bad", bytes.NewReader(body))
	if err == nil {
		t.Fatal("a body damaged on the way was stored")
	}
	if _, gerr := st.Get(ctx, "bad"); !errors.Is(gerr, blob.ErrNotFound) {
		t.Fatalf("after a refused put (%v), get = %v, want not found", err, gerr)
	}
}
