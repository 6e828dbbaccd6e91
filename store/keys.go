package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
)

// SharedKey returns the random key called name, of size bytes, that every
// replica on this database shares, making it the first time it is asked
// for. Concurrent first calls agree: one insert wins and all read it.
func (s *DB) SharedKey(ctx context.Context, name string, size int) ([]byte, error) {
	if size < 16 {
		return nil, fmt.Errorf("store: shared key %s: %d bytes is too short", name, size)
	}
	read := func() ([]byte, error) {
		var v string
		err := s.db.QueryRowContext(ctx, s.rebind(`SELECT value FROM shared_keys WHERE name = ?`), name).Scan(&v)
		if err != nil {
			return nil, err
		}
		key, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(key) < size {
			return nil, fmt.Errorf("store: shared key %s is damaged (delete its row to make a new one)", name)
		}
		return key, nil
	}
	key, err := read()
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return key, err
	}
	fresh := make([]byte, size)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("store: shared key %s: %w", name, err)
	}
	_, err = s.db.ExecContext(ctx, s.rebind(`INSERT INTO shared_keys (name, value, created_at) VALUES (?, ?, ?)`),
		name, base64.StdEncoding.EncodeToString(fresh), millis(s.now()))
	if err != nil && !isUniqueViolation(err) {
		return nil, fmt.Errorf("store: shared key %s: %w", name, err)
	}
	key, err = read()
	if err != nil {
		return nil, fmt.Errorf("store: shared key %s: %w", name, err)
	}
	return key, nil
}
