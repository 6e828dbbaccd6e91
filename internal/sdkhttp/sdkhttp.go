// Package sdkhttp wraps the HTTP client that the AWS SDK sends its requests
// through, to keep a request body closed by the SDK from breaking the
// connection its answer is still being read from.
//
// smithy-go closes a request's body as soon as the client's Do returns,
// which is when the answer's headers have arrived (ClientHandler.Handle).
// net/http may not be done with that body yet: after writing ContentLength
// bytes, its write loop copies the rest of the body to io.Discard to check
// that there is no more. smithy's closed body answers that copy's WriteTo
// with io.EOF, which io.Copy reports as an error, and the transport closes
// the connection, often while the SDK is still decoding the answer's body.
// The call then fails with "use of closed network connection" after the
// service did what it was asked. Under load this was a few calls in a
// thousand on loopback (the EC2 provider's TestListMembers caught it). A
// body that offers only Read avoids it: a closed body's Read returns
// io.EOF, which io.Copy takes as the end.
package sdkhttp

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Client returns next wrapped so that request bodies are read only through
// Read. A nil next is the SDK's default client.
func Client(next aws.HTTPClient) aws.HTTPClient {
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	if c, ok := next.(client); ok {
		return c
	}
	return client{next: next}
}

type client struct{ next aws.HTTPClient }

func (c client) Do(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return c.next.Do(r)
	}
	// A shallow copy: the caller's request is left as it was given.
	out := new(http.Request)
	*out = *r
	out.Body = readOnly{r.Body}
	return c.next.Do(out)
}

// readOnly hides every method of the body but Read and Close (smithy's
// body also offers WriteTo, which is what fails once closed).
type readOnly struct{ body io.ReadCloser }

func (b readOnly) Read(p []byte) (int, error) { return b.body.Read(p) }
func (b readOnly) Close() error               { return b.body.Close() }
