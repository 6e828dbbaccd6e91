package pyversion

import "testing"

func TestCompareRelease(t *testing.T) {
	for _, tc := range []struct {
		a, b []int
		want int
	}{
		{[]int{2, 4, 2}, []int{2, 4, 2}, 0},
		{[]int{2, 4}, []int{2, 4, 0}, 0},
		{[]int{2, 4, 3}, []int{2, 4, 10}, -1},
		{[]int{3}, []int{2, 99, 99}, 1},
		{nil, []int{0, 1}, -1},
	} {
		if got := CompareRelease(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareRelease(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
