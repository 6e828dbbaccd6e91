package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
)

//go:embed agent.py
var agentScript []byte

// ErrNoAgent is a cluster whose scheduler has no bench agent: it was
// started without the gateway's preload (images.BenchPreload), by an
// older gateway or a backend that does not add it.
var ErrNoAgent = errors.New("the cluster's scheduler has no bench agent")

// Agent reaches the bench agent of one cluster's scheduler: the door the
// gateway's scheduler preload opens under the dashboard, through which a
// suite's runner runs next to the scheduler, in the cluster's own
// software (see agent.py). Every request is signed with a key only the
// cluster's TLS key holders (the gateway and the cluster's owner) can
// derive; the gateway's dashboard proxy passes them only from the owner.
type Agent struct {
	url   string // .../clusters/<name>/gateway-bench/
	token string // the gateway's credentials for the dashboard proxy
	http  *http.Client
	key   []byte
}

// NewAgent returns the agent of the cluster whose dashboard the gateway
// serves at dashboardURL (https://gateway/clusters/<name>/), reached with
// client and token as the cluster's owner; keyPEM is the cluster's TLS
// private key.
func NewAgent(dashboardURL, token string, client *http.Client, keyPEM string) (*Agent, error) {
	key, err := agentKey(keyPEM)
	if err != nil {
		return nil, err
	}
	return &Agent{url: strings.TrimSuffix(dashboardURL, "/") + "/gateway-bench/", token: token, http: client, key: key}, nil
}

// agentKey is the signing key the scheduler preload derives from the
// cluster's TLS private key: the SHA-256 of its DER bytes, so that how
// the PEM was wrapped on the way to the machine does not matter.
func agentKey(keyPEM string) ([]byte, error) {
	rest := []byte(keyPEM)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("bench agent: the cluster's TLS key has no private key block")
		}
		if strings.Contains(b.Type, "PRIVATE KEY") {
			k := sha256.Sum256(b.Bytes)
			return k[:], nil
		}
	}
}

// MaxAgentBody is the largest request body the scheduler's bench agent
// reads (images.BenchPreload's MAX_BODY): a suite is at most twice
// schedspec.MaxSuiteBytes zipped, a third more in base64.
const MaxAgentBody = 8 << 20

// AgentWindow is how far a signed request's time may be from the
// scheduler's clock (images.BenchPreload's WINDOW); its nonce is
// remembered that long, so that a captured request is not run again.
const AgentWindow = 60 * time.Second

// sign is the X-Gateway-Bench header of a request for op with body, made
// at now with nonce (32 hex digits): the scheduler refuses it outside
// AgentWindow of its clock or when it saw the nonce before.
func sign(key []byte, op string, now time.Time, nonce string, body []byte) string {
	ts := strconv.FormatInt(now.Unix(), 10)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(op + "\n" + ts + "\n" + nonce + "\n"))
	m.Write(body)
	return "t=" + ts + ",n=" + nonce + ",s=" + hex.EncodeToString(m.Sum(nil))
}

// newNonce is a request's nonce: 128 random bits, in hex.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

// call posts one signed op and decodes its answer into out.
func (a *Agent) call(ctx context.Context, op string, body []byte, out any) error {
	if len(body) > MaxAgentBody {
		return fmt.Errorf("bench agent %s: a request of %d bytes is over the agent's %d: send a smaller suite", op, len(body), MaxAgentBody)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url+op, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Gateway-Bench", sign(a.key, op, time.Now(), newNonce(), body))
	req.Header.Set("Content-Type", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("bench agent %s: %w", op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("bench agent %s: %w", op, err)
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(data, &e)
	switch {
	case resp.StatusCode == http.StatusNotFound && e.Error == "":
		// Tornado's own 404: no handler for the path.
		return fmt.Errorf("%w (it was started before the gateway installed one): stop it and start a new one", ErrNoAgent)
	case resp.StatusCode != http.StatusOK:
		msg := e.Error
		if msg == "" {
			msg = tailString(string(data), 300)
		}
		return fmt.Errorf("bench agent %s: %s: %s", op, resp.Status, msg)
	case e.Error != "":
		return fmt.Errorf("bench agent %s: %s", op, e.Error)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("bench agent %s: unexpected answer %q: %w", op, tailString(string(data), 200), err)
		}
	}
	return nil
}

// load ships the agent to the scheduler. The same agent is kept as it is;
// another one (a newer gateway's) replaces it and stops its runners.
func (a *Agent) load(ctx context.Context) error { return a.call(ctx, "load", agentScript, nil) }

// startAgentRunner starts the runner next to the cluster's scheduler on
// the suite (a zip, as schedspec.PackSuite makes it) and waits for it to
// say it is ready. The runners' standard error goes to stderrLog when
// they end.
func startAgentRunner(ctx context.Context, a *Agent, suiteZip []byte, stderrLog io.Writer) (*runner, Listing, error) {
	p, err := a.start(ctx, suiteZip, stderrLog)
	if err != nil {
		return nil, Listing{}, err
	}
	return hello(ctx, p)
}

func (a *Agent) start(ctx context.Context, suiteZip []byte, stderrLog io.Writer) (*agentProc, error) {
	if err := a.load(ctx); err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]any{"runner": string(runnerScript), "suite": base64.StdEncoding.EncodeToString(suiteZip)})
	if err != nil {
		return nil, err
	}
	var out struct {
		Session string `json:"session"`
	}
	if err := a.call(ctx, "start", body, &out); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &agentProc{a: a, session: out.Session, lines: make(chan []byte, 4), done: make(chan struct{}), cancel: cancel, log: stderrLog}
	go p.poll(pctx)
	return p, nil
}

// agentProc is a runner next to a cluster's scheduler. Its output is
// long-polled; a poll that fails (the cluster went away) ends it.
type agentProc struct {
	a       *Agent
	session string
	lines   chan []byte
	done    chan struct{}
	cancel  context.CancelFunc
	log     io.Writer

	mu     sync.Mutex
	errs   string
	killed bool
}

// pollWait is how long one poll waits for a line: under the dashboard
// proxy's wait for an answer's headers (60 s).
const pollWait = 20

func (p *agentProc) poll(ctx context.Context) {
	defer close(p.done)
	defer close(p.lines)
	body, _ := json.Marshal(map[string]any{"session": p.session, "wait": pollWait})
	for ctx.Err() == nil {
		var out struct {
			Line   *string `json:"line"`
			EOF    bool    `json:"eof"`
			Code   *int    `json:"code"`
			Stderr string  `json:"stderr"`
		}
		if err := p.a.call(ctx, "next", body, &out); err != nil {
			p.setErr(err.Error())
			return
		}
		switch {
		case out.Line != nil:
			select {
			case p.lines <- []byte(*out.Line):
			case <-ctx.Done():
				return
			}
		case out.EOF:
			if p.log != nil && out.Stderr != "" {
				_, _ = io.WriteString(p.log, out.Stderr)
			}
			msg := out.Stderr
			if out.Code != nil {
				msg = fmt.Sprintf("%s\n(exit status %d)", out.Stderr, *out.Code)
			}
			p.setErr(msg)
			return
		}
	}
}

func (p *agentProc) setErr(s string) {
	p.mu.Lock()
	p.errs = s
	p.mu.Unlock()
}

func (p *agentProc) send(ctx context.Context, line []byte) error {
	body, _ := json.Marshal(map[string]any{"session": p.session, "line": strings.TrimSuffix(string(line), "\n")})
	return p.a.call(ctx, "send", body, nil)
}

func (p *agentProc) closeInput(ctx context.Context) {
	body, _ := json.Marshal(map[string]any{"session": p.session, "close": true})
	_ = p.a.call(ctx, "send", body, nil)
}

func (p *agentProc) output() <-chan []byte   { return p.lines }
func (p *agentProc) exited() <-chan struct{} { return p.done }

func (p *agentProc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errs
}

func (p *agentProc) kill() {
	p.mu.Lock()
	killed := p.killed
	p.killed = true
	p.mu.Unlock()
	if killed {
		return
	}
	p.cancel()
	// The cluster stopping kills it too; this only saves the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"session": p.session})
	_ = p.a.call(ctx, "kill", body, nil)
	<-p.done
	go func() {
		for range p.lines {
		}
	}()
}

// AgentFor is the agent of a running cluster as the API describes it to
// its owner (with its TLS key), reached through the gateway's dashboard
// proxy with client and token.
func AgentFor(d *apitype.ClusterDetail, token string, client *http.Client) (*Agent, error) {
	switch {
	case d.DashboardURL == "":
		return nil, fmt.Errorf("%w: cluster %s serves no dashboard, under which the agent answers", ErrNoAgent, d.Name)
	case d.TLSKey == nil:
		return nil, fmt.Errorf("cluster %s: the gateway gave no TLS key", d.Name)
	}
	return NewAgent(strings.TrimSuffix(d.DashboardURL, "status"), token, client, *d.TLSKey)
}
