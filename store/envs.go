package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// EnvBuild is the latest build of an environment (package envs), as every
// replica sees it.
type EnvBuild struct {
	Hash  string
	Ref   string
	State string // EnvBuilding, "ready" or "failed"
	Steps []string
	Error string
	// Contents is the JSON of the environment the image holds (an
	// images.Spec).
	Contents string
	Digest   string
	// Built is false when the image was found ready (nothing was built).
	Built                            bool
	StartedAt, FinishedAt, UpdatedAt time.Time
	// Holder is the replica building it ("" once the build ended), and
	// Heartbeat when that replica last said it still is.
	Holder    string
	Heartbeat time.Time
}

// EnvBuilding is the state of a build that has not ended.
const EnvBuilding = "building"

// MaxEnvLog is how much of a build log is kept: its last MiB.
const MaxEnvLog = 1 << 20

const envBuildColumns = `hash, ref, state, steps, error, contents, digest, built, started_at, finished_at, updated_at, holder, heartbeat`

func scanEnvBuild(r scanner) (*EnvBuild, error) {
	var b EnvBuild
	var steps string
	var built int
	var started, finished, updated, beat int64
	if err := r.Scan(&b.Hash, &b.Ref, &b.State, &steps, &b.Error, &b.Contents, &b.Digest, &built, &started, &finished, &updated, &b.Holder, &beat); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(steps), &b.Steps); err != nil {
		return nil, fmt.Errorf("environment %s: steps: %w", b.Hash, err)
	}
	b.Built = built != 0
	b.StartedAt, b.FinishedAt, b.UpdatedAt, b.Heartbeat = fromMillis(started), fromMillis(finished), fromMillis(updated), fromMillis(beat)
	return &b, nil
}

// envBuildArgs are b's columns after hash, in envBuildColumns' order, with
// holder and heartbeat as given.
func envBuildArgs(b *EnvBuild, holder string, beat int64) ([]any, error) {
	steps, err := json.Marshal(nonNil(b.Steps))
	if err != nil {
		return nil, err
	}
	contents := b.Contents
	if contents == "" {
		contents = "{}"
	}
	return []any{b.Ref, b.State, text(string(steps)), text(b.Error), text(contents), b.Digest, boolInt(b.Built),
		millis(b.StartedAt), millis(b.FinishedAt), millis(b.UpdatedAt), holder, beat}, nil
}

// EnvBuild returns the stored build of an environment hash.
func (s *DB) EnvBuild(ctx context.Context, hash string) (*EnvBuild, error) {
	b, err := scanEnvBuild(s.db.QueryRowContext(ctx, s.rebind(`SELECT `+envBuildColumns+` FROM env_builds WHERE hash = ?`), hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: environment build %.16s: %w", hash, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: environment build %.16s: %w", hash, err)
	}
	return b, nil
}

// EnvBuildHashes returns up to limit stored build hashes that start with
// prefix (hex digits), in order.
func (s *DB) EnvBuildHashes(ctx context.Context, prefix string, limit int) ([]string, error) {
	return s.hashes(ctx, `SELECT hash FROM env_builds WHERE substr(hash, 1, ?) = ? ORDER BY hash LIMIT ?`, prefix, limit)
}

// hashes runs a query over the hashes that start with prefix (compared
// whole rather than with LIKE, so that no character of prefix is special
// and no collation matters), then the limit. Extra arguments come first.
func (s *DB) hashes(ctx context.Context, q, prefix string, limit int, first ...any) ([]string, error) {
	args := append(first, len(prefix), prefix, limit)
	rows, err := s.db.QueryContext(ctx, s.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("store: environments: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return nil, fmt.Errorf("store: environments: %w", err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// ClaimEnvBuild makes holder the replica that builds hash, atomically: it
// wins when no build of hash is stored, when the stored one ended, when
// holder holds it already, or when its holder has not beaten for stale
// (it stopped). The winner's row starts afresh as building; it returns
// true and the row as it was before (nil: there was none), which
// ReleaseEnvBuild puts back when no build starts after all. The loser gets
// false and the stored row.
func (s *DB) ClaimEnvBuild(ctx context.Context, hash, ref, holder string, stale time.Duration) (bool, *EnvBuild, error) {
	if holder == "" {
		return false, nil, errors.New("store: claim environment build: no holder")
	}
	tx, err := s.begin(ctx)
	if err != nil {
		return false, nil, fmt.Errorf("store: claim environment build: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	lock := ""
	if s.dialect == postgres {
		lock = " FOR UPDATE"
	}
	now := s.now()
	prev, err := scanEnvBuild(tx.QueryRowContext(ctx, s.rebind(`SELECT `+envBuildColumns+` FROM env_builds WHERE hash = ?`+lock), hash))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		prev = nil
	case err != nil:
		return false, nil, fmt.Errorf("store: claim environment build: %w", err)
	case prev.State == EnvBuilding && prev.Holder != "" && prev.Holder != holder && now.Sub(prev.Heartbeat) < stale:
		return false, prev, nil
	}
	fresh := &EnvBuild{Hash: hash, Ref: ref, State: EnvBuilding, Built: true, StartedAt: now, UpdatedAt: now}
	args, err := envBuildArgs(fresh, holder, millis(now))
	if err != nil {
		return false, nil, fmt.Errorf("store: claim environment build: %w", err)
	}
	if prev == nil {
		// Two first claims at once on PostgreSQL: FOR UPDATE locked
		// nothing, and the second insert fails: it lost.
		_, err = tx.ExecContext(ctx, s.rebind(`INSERT INTO env_builds (`+envBuildColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`), append([]any{hash}, args...)...)
		if isUniqueViolation(err) {
			_ = tx.Rollback()
			cur, gerr := s.EnvBuild(ctx, hash)
			if gerr != nil {
				return false, nil, gerr
			}
			return false, cur, nil
		}
	} else {
		_, err = tx.ExecContext(ctx, s.rebind(`UPDATE env_builds SET ref = ?, state = ?, steps = ?, error = ?, contents = ?, digest = ?, built = ?,
started_at = ?, finished_at = ?, updated_at = ?, holder = ?, heartbeat = ? WHERE hash = ?`), append(args, hash)...)
	}
	if err != nil {
		return false, nil, fmt.Errorf("store: claim environment build: %w", err)
	}
	if err := tx.Commit(); err != nil {
		if isUniqueViolation(err) { // SQLite may report the conflict at commit
			cur, gerr := s.EnvBuild(ctx, hash)
			if gerr != nil {
				return false, nil, gerr
			}
			return false, cur, nil
		}
		return false, nil, fmt.Errorf("store: claim environment build: %w", err)
	}
	return true, prev, nil
}

// ReleaseEnvBuild gives up holder's claim on hash when no build started:
// the row is put back as it was before the claim (prev, from
// ClaimEnvBuild), or removed when there was none. A claim holder no longer
// holds is left alone.
func (s *DB) ReleaseEnvBuild(ctx context.Context, hash, holder string, prev *EnvBuild) error {
	var err error
	if prev == nil {
		_, err = s.db.ExecContext(ctx, s.rebind(`DELETE FROM env_builds WHERE hash = ? AND holder = ?`), hash, holder)
	} else {
		var args []any
		if args, err = envBuildArgs(prev, prev.Holder, millis(prev.Heartbeat)); err == nil {
			_, err = s.db.ExecContext(ctx, s.rebind(`UPDATE env_builds SET ref = ?, state = ?, steps = ?, error = ?, contents = ?, digest = ?, built = ?,
started_at = ?, finished_at = ?, updated_at = ?, holder = ?, heartbeat = ? WHERE hash = ? AND holder = ?`), append(args, hash, holder)...)
		}
	}
	if err != nil {
		return fmt.Errorf("store: release environment build: %w", err)
	}
	return nil
}

// UpdateEnvBuild writes the status of a build that b.Holder holds, and
// beats for it; a build that ended (any state but EnvBuilding) is released
// with it. A build that b.Holder no longer holds (another replica took it
// over) is not written: ErrNotFound.
func (s *DB) UpdateEnvBuild(ctx context.Context, b *EnvBuild) error {
	now := s.now()
	b.UpdatedAt = now
	holder := b.Holder
	if b.State != EnvBuilding {
		holder = ""
	}
	args, err := envBuildArgs(b, holder, millis(now))
	if err != nil {
		return fmt.Errorf("store: environment build %.16s: %w", b.Hash, err)
	}
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE env_builds SET ref = ?, state = ?, steps = ?, error = ?, contents = ?, digest = ?, built = ?,
started_at = ?, finished_at = ?, updated_at = ?, holder = ?, heartbeat = ? WHERE hash = ? AND holder = ?`), append(args, b.Hash, b.Holder)...)
	if err != nil {
		return fmt.Errorf("store: environment build %.16s: %w", b.Hash, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: environment build %.16s is not held by %s: %w", b.Hash, b.Holder, ErrNotFound)
	}
	return nil
}

// BeatEnvBuilds says that holder still builds what it holds, and returns
// how many builds that is.
func (s *DB) BeatEnvBuilds(ctx context.Context, holder string) (int, error) {
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE env_builds SET heartbeat = ? WHERE holder = ? AND state = ?`), millis(s.now()), holder, EnvBuilding)
	if err != nil {
		return 0, fmt.Errorf("store: environment builds of %s: %w", holder, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// AbandonEnvBuilds fails the builds holder holds, with reason as their
// error (a replica starting again: its builds of before are gone), and
// returns how many there were.
func (s *DB) AbandonEnvBuilds(ctx context.Context, holder, reason string) (int, error) {
	now := millis(s.now())
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE env_builds SET state = 'failed', error = ?, finished_at = ?, updated_at = ?, holder = '', heartbeat = ?
WHERE holder = ? AND state = ?`), text(reason), now, now, now, holder, EnvBuilding)
	if err != nil {
		return 0, fmt.Errorf("store: environment builds of %s: %w", holder, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// PutEnvLog keeps the build log of hash: its last MaxEnvLog bytes, from
// the start of a line.
func (s *DB) PutEnvLog(ctx context.Context, hash string, log []byte) error {
	if len(log) > MaxEnvLog {
		log = log[len(log)-MaxEnvLog:]
		if i := strings.IndexByte(string(log), '\n'); i >= 0 && i < len(log)-1 {
			log = log[i+1:]
		}
	}
	_, err := s.db.ExecContext(ctx, s.rebind(`INSERT INTO env_build_logs (hash, log, updated_at) VALUES (?, ?, ?)
ON CONFLICT (hash) DO UPDATE SET log = excluded.log, updated_at = excluded.updated_at`), hash, text(string(log)), millis(s.now()))
	if err != nil {
		return fmt.Errorf("store: build log of %.16s: %w", hash, err)
	}
	return nil
}

// EnvLog returns the kept build log of hash.
func (s *DB) EnvLog(ctx context.Context, hash string) ([]byte, error) {
	var log string
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT log FROM env_build_logs WHERE hash = ?`), hash).Scan(&log)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: build log of %.16s: %w", hash, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: build log of %.16s: %w", hash, err)
	}
	return []byte(log), nil
}

// NoteEnvAsker records that user asked for the environment hash.
func (s *DB) NoteEnvAsker(ctx context.Context, hash, user string) error {
	now := millis(s.now())
	_, err := s.db.ExecContext(ctx, s.rebind(`INSERT INTO env_askers (hash, user_id, first_asked, last_asked) VALUES (?, ?, ?, ?)
ON CONFLICT (hash, user_id) DO UPDATE SET last_asked = excluded.last_asked`), hash, user, now, now)
	if err != nil {
		return fmt.Errorf("store: note who asked for %.16s: %w", hash, err)
	}
	return nil
}

// EnvAsked reports whether user asked for the environment hash.
func (s *DB) EnvAsked(ctx context.Context, hash, user string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM env_askers WHERE hash = ? AND user_id = ?`), hash, user).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: who asked for %.16s: %w", hash, err)
	}
	return n > 0, nil
}

// EnvAskedHashes returns up to limit hashes that user asked for and that
// start with prefix, in order.
func (s *DB) EnvAskedHashes(ctx context.Context, user, prefix string, limit int) ([]string, error) {
	return s.hashes(ctx, `SELECT hash FROM env_askers WHERE user_id = ? AND substr(hash, 1, ?) = ? ORDER BY hash LIMIT ?`, prefix, limit, user)
}

// AskedEnvBuilds returns the stored builds of the environments user asked
// for, the most recently asked first, at most limit of them.
func (s *DB) AskedEnvBuilds(ctx context.Context, user string, limit int) ([]*EnvBuild, error) {
	cols := "b." + strings.ReplaceAll(envBuildColumns, ", ", ", b.")
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT `+cols+` FROM env_askers a JOIN env_builds b ON b.hash = a.hash
WHERE a.user_id = ? ORDER BY a.last_asked DESC, a.hash LIMIT ?`), user, limit)
	if err != nil {
		return nil, fmt.Errorf("store: environment builds of %s: %w", user, err)
	}
	defer rows.Close()
	var out []*EnvBuild
	for rows.Next() {
		b, err := scanEnvBuild(rows)
		if err != nil {
			return nil, fmt.Errorf("store: environment builds of %s: %w", user, err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// EnvBuildGeneration moves whenever the build of hash, or its stored log,
// changes (on any replica): watchers of a build read it rather than the
// build. It is ErrNotFound for a hash with no build.
func (s *DB) EnvBuildGeneration(ctx context.Context, hash string) (int64, error) {
	var build, log int64
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT b.updated_at, COALESCE(l.updated_at, 0) FROM env_builds b
LEFT JOIN env_build_logs l ON l.hash = b.hash WHERE b.hash = ?`), hash).Scan(&build, &log)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("store: environment build %.16s: %w", hash, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("store: environment build %.16s: %w", hash, err)
	}
	// Both are times in milliseconds that only grow: their sum moves when
	// either does.
	return build + log, nil
}

// AskedEnvBuildsGeneration moves whenever the list AskedEnvBuilds gives
// user may change: a build of theirs changes, or they ask for one (again),
// on any replica. The console's list of a user's builds watches it. A user
// who asked for nothing is 0.
func (s *DB) AskedEnvBuildsGeneration(ctx context.Context, user string) (int64, error) {
	var asked, builds int64
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT COALESCE(MAX(a.last_asked), 0), COALESCE(SUM(b.updated_at), 0) FROM env_askers a
LEFT JOIN env_builds b ON b.hash = a.hash WHERE a.user_id = ?`), user).Scan(&asked, &builds)
	if err != nil {
		return 0, fmt.Errorf("store: environment builds of %s: %w", user, err)
	}
	// Times in milliseconds that only grow: the latest ask moves with a
	// new one (or one asked again, which moves up the list), the sum with
	// any build's change.
	return asked + builds, nil
}

// PublishedEnv is an environment an admin published at run time.
type PublishedEnv struct {
	Name        string
	Image       string
	EnvHash     string // the environment whose image it is, when published by hash
	Description string
	CreatedBy   string
	CreatedAt   time.Time
}

// PublishEnv stores a published environment and records it in the audit
// log, in one transaction. A name published already is ErrExists.
func (s *DB) PublishEnv(ctx context.Context, p *PublishedEnv, by Actor) error {
	if p.CreatedAt.IsZero() {
		p.CreatedAt = s.now()
	}
	p.CreatedBy = by.Name
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: publish %s: %w", p.Name, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	_, err = tx.ExecContext(ctx, s.rebind(`INSERT INTO env_published (name, image, env_hash, description, created_by, created_at) VALUES (?,?,?,?,?,?)`),
		p.Name, p.Image, p.EnvHash, text(p.Description), text(p.CreatedBy), millis(p.CreatedAt))
	if isUniqueViolation(err) {
		return fmt.Errorf("store: environment %q: %w", p.Name, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store: publish %s: %w", p.Name, err)
	}
	if err := s.audit(ctx, tx, AuditEntry{Actor: by.Name, ActorID: by.ID, Action: "env.publish", Target: "env:" + p.Name, After: publishedJSON(p)}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		if isUniqueViolation(err) {
			return fmt.Errorf("store: environment %q: %w", p.Name, ErrExists)
		}
		return fmt.Errorf("store: publish %s: %w", p.Name, err)
	}
	return nil
}

// UnpublishEnv removes a published environment and records it in the audit
// log. A name not published at run time is ErrNotFound.
func (s *DB) UnpublishEnv(ctx context.Context, name string, by Actor) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: unpublish %s: %w", name, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	p, err := scanPublished(tx.QueryRowContext(ctx, s.rebind(`SELECT `+publishedColumns+` FROM env_published WHERE name = ?`), name))
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: environment %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: unpublish %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM env_published WHERE name = ?`), name); err != nil {
		return fmt.Errorf("store: unpublish %s: %w", name, err)
	}
	if err := s.audit(ctx, tx, AuditEntry{Actor: by.Name, ActorID: by.ID, Action: "env.unpublish", Target: "env:" + name, Before: publishedJSON(p)}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: unpublish %s: %w", name, err)
	}
	return nil
}

// PublishedEnvs returns the environments published at run time, by name.
func (s *DB) PublishedEnvs(ctx context.Context) ([]PublishedEnv, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+publishedColumns+` FROM env_published ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: published environments: %w", err)
	}
	defer rows.Close()
	var out []PublishedEnv
	for rows.Next() {
		p, err := scanPublished(rows)
		if err != nil {
			return nil, fmt.Errorf("store: published environments: %w", err)
		}
		out = append(out, *p)
	}
	return out, rows.Err()
}

const publishedColumns = `name, image, env_hash, description, created_by, created_at`

func scanPublished(r scanner) (*PublishedEnv, error) {
	var p PublishedEnv
	var at int64
	if err := r.Scan(&p.Name, &p.Image, &p.EnvHash, &p.Description, &p.CreatedBy, &at); err != nil {
		return nil, err
	}
	p.CreatedAt = fromMillis(at)
	return &p, nil
}

func publishedJSON(p *PublishedEnv) string {
	b, _ := json.Marshal(map[string]string{"name": p.Name, "image": p.Image, "env": p.EnvHash, "description": p.Description})
	return string(b)
}
