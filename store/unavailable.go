package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrUnavailable marks an error that means the database cannot be reached
// or written right now (PostgreSQL down or restarting, SQLite's disk full):
// the same request may succeed later, and nothing of it was kept.
// ErrDiskFull, a kind of it, is SQLite's disk out of space.
var (
	ErrUnavailable = errors.New("database unavailable")
	ErrDiskFull    = fmt.Errorf("%w: disk full", ErrUnavailable)
)

// UnavailableError says why the database is unavailable, in words for the
// operator: where it is (PostgreSQL's host and port, SQLite's directory)
// and what failed, never the URL's credentials.
type UnavailableError struct {
	Msg      string
	DiskFull bool
	Err      error // the driver's error
}

func (e *UnavailableError) Error() string { return e.Msg }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) (and ErrDiskFull when the disk
// is full) hold.
func (e *UnavailableError) Is(target error) bool {
	return target == ErrUnavailable || (e.DiskFull && target == ErrDiskFull)
}

// Unavailable returns err as an *UnavailableError when it means the
// database cannot be reached or written (a refused or lost connection,
// PostgreSQL shutting down or starting, SQLite's disk full or failing),
// and nil otherwise: a request's own error, a conflict, a cancelled
// context.
func (s *DB) Unavailable(err error) error {
	if err == nil {
		return nil
	}
	var ue *UnavailableError
	if errors.As(err, &ue) {
		return ue
	}
	if errors.Is(err, context.Canceled) {
		return nil // the caller went away; the database may be fine
	}
	if s.dialect == sqlite {
		return s.sqliteUnavailable(err)
	}
	cause, ok := postgresDown(err)
	if !ok {
		return nil
	}
	return &UnavailableError{Msg: fmt.Sprintf("the database is unavailable: cannot reach PostgreSQL at %s: %s", s.where, cause), Err: err}
}

func (s *DB) sqliteUnavailable(err error) error {
	var se *msqlite.Error
	code := -1
	if errors.As(err, &se) {
		code = se.Code() & 0xff // the primary code of an extended one
	}
	switch {
	case code == sqlite3.SQLITE_FULL || errors.Is(err, syscall.ENOSPC):
		return &UnavailableError{DiskFull: true, Err: err,
			Msg: fmt.Sprintf("the database's disk is full (%s): free space there; nothing of this request was kept", s.where)}
	case code == sqlite3.SQLITE_IOERR, code == sqlite3.SQLITE_CANTOPEN, code == sqlite3.SQLITE_READONLY:
		return &UnavailableError{Err: err,
			Msg: fmt.Sprintf("the database cannot be written in %s (%s): check that disk", s.where, se.Error())}
	}
	return nil
}

// postgresDown reports whether err means PostgreSQL cannot be reached or
// is going away, with the cause in a few words.
func postgresDown(err error) (string, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exceptions; 57P01-57P03: shut down by an
		// administrator, crash shutdown, cannot connect now (starting up or
		// shutting down).
		if strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" {
			return pe.Message, true
		}
		return "", false
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && (errno == syscall.ECONNREFUSED || errno == syscall.ECONNRESET ||
		errno == syscall.EPIPE || errno == syscall.EHOSTUNREACH || errno == syscall.ENETUNREACH || errno == syscall.ETIMEDOUT) {
		return errno.Error(), true
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce) && errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "it did not answer in time", true
	case errors.As(err, &ce):
		return "cannot connect", true
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, net.ErrClosed):
		return "the connection was lost", true
	case errors.As(err, new(*net.OpError)):
		return "the connection failed", true
	}
	if msg := err.Error(); strings.HasSuffix(msg, "conn closed") {
		return "the connection was lost", true
	}
	return "", false
}

// pingTimeout bounds a health check's round trip to the database.
const pingTimeout = 2 * time.Second

// minFree is the free space under which SQLite's disk counts as full for
// health checks: a transaction's WAL frames need a few pages.
const minFree = 256 << 10

// Ping checks that the database answers (PostgreSQL) or that its disk has
// room (SQLite), within a short timeout. Its error is an
// *UnavailableError saying what is wrong.
func (s *DB) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if s.dialect == sqlite {
		if free, ok := freeBytes(s.where); ok && free < minFree {
			return &UnavailableError{DiskFull: true, Err: syscall.ENOSPC,
				Msg: fmt.Sprintf("the database's disk is full (%s): free space there (%d KiB free)", s.where, free>>10)}
		}
	}
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
	if err == nil {
		return nil
	}
	if u := s.Unavailable(err); u != nil {
		return u
	}
	if ctx.Err() != nil {
		return &UnavailableError{Err: err, Msg: fmt.Sprintf("the database is unavailable: %s did not answer within %s", s.describe(), pingTimeout)}
	}
	return &UnavailableError{Err: err, Msg: fmt.Sprintf("the database is unavailable: %s: %s", s.describe(), firstLineOf(err.Error()))}
}

func (s *DB) describe() string {
	if s.dialect == postgres {
		return "PostgreSQL at " + s.where
	}
	return "SQLite in " + s.where
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func freeBytes(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}

// sqliteWhere is the directory of SQLite's file, which the disk messages
// name.
func sqliteWhere(path string) string {
	if path == ":memory:" {
		return "memory"
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Dir(path)
	}
	return filepath.Dir(abs)
}

// postgresWhere is PostgreSQL's host:port from its URL, without user or
// password.
func postgresWhere(rawURL string) string {
	cfg, err := pgconn.ParseConfig(rawURL)
	if err != nil {
		return "database.url"
	}
	host := cfg.Host
	if strings.HasPrefix(host, "/") {
		return host // a Unix socket directory
	}
	return net.JoinHostPort(host, fmt.Sprint(cfg.Port))
}
