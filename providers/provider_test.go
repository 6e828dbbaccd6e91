package providers

import (
	"slices"
	"testing"
)

func TestCompareMembers(t *testing.T) {
	// A cluster name that is a prefix of another sorts first, whatever
	// the member names.
	got := []Member{{Cluster: "ab", Name: "worker-1"}, {Cluster: "abc", Name: "a"}, {Cluster: "ab", Name: "scheduler"}, {Cluster: "a", Name: "z"}}
	slices.SortFunc(got, CompareMembers)
	want := []Member{{Cluster: "a", Name: "z"}, {Cluster: "ab", Name: "scheduler"}, {Cluster: "ab", Name: "worker-1"}, {Cluster: "abc", Name: "a"}}
	if !slices.Equal(got, want) {
		t.Errorf("sorted %v, want %v", got, want)
	}
}
