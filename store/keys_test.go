package store_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/gatewayhq/gateway/internal/testdb"
)

// TestSharedKey: replicas on one database asking for a key at once all get
// the same one, it stays the same, and other names get other keys.
func TestSharedKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		a, _ := openTestDB(t, url)
		b, _ := openTestDB(t, url)
		ctx := context.Background()
		keys := make([][]byte, 8)
		errs := make([]error, len(keys))
		var wg sync.WaitGroup
		for i := range keys {
			db := a
			if i%2 == 1 {
				db = b
			}
			wg.Go(func() { keys[i], errs[i] = db.SharedKey(ctx, "session-key", 32) })
		}
		wg.Wait()
		for i := range keys {
			if errs[i] != nil {
				t.Fatalf("SharedKey %d: %v", i, errs[i])
			}
			if len(keys[i]) != 32 || !bytes.Equal(keys[i], keys[0]) {
				t.Fatalf("replicas got different keys: %x and %x", keys[i], keys[0])
			}
		}
		again, err := b.SharedKey(ctx, "session-key", 32)
		if err != nil || !bytes.Equal(again, keys[0]) {
			t.Errorf("the key changed: %x, %v", again, err)
		}
		other, err := a.SharedKey(ctx, "other", 32)
		if err != nil || bytes.Equal(other, keys[0]) {
			t.Errorf("another name got %x, %v", other, err)
		}
		if _, err := a.SharedKey(ctx, "short", 8); err == nil || !strings.Contains(err.Error(), "too short") {
			t.Errorf("an 8-byte key: %v", err)
		}
	})
}
