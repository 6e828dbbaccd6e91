package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync"
)

// SQLite's connections pass through queuedConn, which puts every write of
// this process in the writeQueue: a transaction (they begin IMMEDIATE, so
// each holds SQLite's write lock from its BEGIN) waits for its turn before
// it begins and gives the turn back when it commits or rolls back; a
// statement outside a transaction (leases, sessions, environment builds)
// waits for its turn around its execution. The turn is held over exactly
// the spans in which SQLite's own lock was, so no code that worked can
// wait on itself here; what changes is that waiters queue in order instead
// of sleeping in the busy handler. Queries outside a transaction are reads
// (WAL: they never wait for the writer) and pass at once.

type queuedConnector struct {
	dsn string
	drv driver.Driver
	q   *writeQueue
}

func (c *queuedConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &queuedConn{Conn: conn, q: c.q}, nil
}

func (c *queuedConnector) Driver() driver.Driver { return c.drv }

// queuedConn is one connection; database/sql uses a connection from one
// goroutine at a time.
type queuedConn struct {
	driver.Conn
	q       *writeQueue
	release func() // the turn of the transaction in progress, if any
}

var errNoContext = errors.New("store: the SQLite driver lacks a context method")

func (c *queuedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := c.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errNoContext
	}
	release, err := c.q.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		release()
		return nil, err
	}
	c.release = release
	return &queuedTx{Tx: tx, c: c}, nil
}

func (c *queuedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *queuedConn) endTx() {
	if c.release != nil {
		c.release()
		c.release = nil
	}
}

func (c *queuedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if c.release == nil { // a statement of its own: a write
		release, err := c.q.acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return e.ExecContext(ctx, query, args)
}

func (c *queuedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return q.QueryContext(ctx, query, args)
}

func (c *queuedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.Conn.Prepare(query)
}

func (c *queuedConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *queuedConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *queuedConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *queuedConn) Close() error {
	c.endTx() // a connection dropped in a transaction gives its turn back
	return c.Conn.Close()
}

type queuedTx struct {
	driver.Tx
	c    *queuedConn
	once sync.Once
}

func (t *queuedTx) Commit() error {
	err := t.Tx.Commit()
	t.once.Do(t.c.endTx)
	return err
}

func (t *queuedTx) Rollback() error {
	err := t.Tx.Rollback()
	t.once.Do(t.c.endTx)
	return err
}
