package sdkhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// closingWriter takes a request as net/http writes it and, once the whole
// body has passed, closes the body: what smithy-go does when the answer's
// headers arrive, which can come before net/http's write is done.
type closingWriter struct {
	body       io.Closer
	bodyLen    int64
	head       bytes.Buffer
	inBody     bool
	bodyPassed int64
}

// WriteByte makes the writer an io.ByteWriter, which Request.Write writes
// to directly instead of through a buffer, so the body arrives as net/http
// reads it.
func (w *closingWriter) WriteByte(c byte) error { _, err := w.Write([]byte{c}); return err }

func (w *closingWriter) Write(p []byte) (int, error) {
	if !w.inBody {
		w.head.Write(p)
		w.inBody = bytes.Contains(w.head.Bytes(), []byte("\r\n\r\n"))
		return len(p), nil
	}
	w.bodyPassed += int64(len(p))
	if w.bodyPassed >= w.bodyLen {
		w.body.Close()
	}
	return len(p), nil
}

// writer is an SDK HTTP client that writes each request as net/http's
// transport would, with the body closed right after its last byte, and
// answers 500.
type writer struct{ errs []error }

func (c *writer) Do(r *http.Request) (*http.Response, error) {
	if r.ContentLength <= 0 {
		c.errs = append(c.errs, errors.New("the request has no body of known length"))
	} else {
		c.errs = append(c.errs, r.Write(&closingWriter{body: r.Body, bodyLen: r.ContentLength}))
	}
	return &http.Response{
		StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error",
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r,
	}, nil
}

// TestBodyClosedAfterItsLastByte: a request body that the SDK closes once
// net/http has written its last byte (the answer can arrive that soon)
// must not fail the write: net/http closes the connection when it does,
// under the answer being read. The unwrapped case shows the fault is real
// in the SDK version this module uses.
func TestBodyClosedAfterItsLastByte(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wrap    bool
		wantErr error
	}{
		{"the SDK's body", false, io.EOF},
		{"through Client", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &writer{}
			var hc aws.HTTPClient = w
			if tc.wrap {
				hc = Client(w)
			}
			client := ec2.New(ec2.Options{
				Region:       "us-east-1",
				BaseEndpoint: aws.String("http://127.0.0.1:1"),
				Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
				HTTPClient:   hc,
				Retryer:      aws.NopRetryer{},
			})
			// The call fails on the 500 answer; only the write matters here.
			_, _ = client.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{MaxResults: aws.Int32(1000)})
			if len(w.errs) != 1 {
				t.Fatalf("%d requests written, want 1", len(w.errs))
			}
			if err := w.errs[0]; !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("writing the request: %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestClient(t *testing.T) {
	if _, ok := Client(nil).(client); !ok {
		t.Errorf("Client(nil) is %T, want the SDK's default client wrapped", Client(nil))
	}
	w := &writer{}
	once := Client(w)
	if twice := Client(once); twice != once {
		t.Errorf("Client wrapped a wrapped client again")
	}
	// The caller's request keeps its own body.
	body := io.NopCloser(strings.NewReader("Action=DescribeInstances"))
	r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", body)
	if err != nil {
		t.Fatal(err)
	}
	r.ContentLength = int64(len("Action=DescribeInstances"))
	if _, err := once.Do(r); err != nil {
		t.Fatal(err)
	}
	if r.Body != body {
		t.Errorf("Do replaced the caller's request body")
	}
	if w.errs[0] != nil {
		t.Errorf("writing a plain body: %v", w.errs[0])
	}
}
