// Package pyversion compares Python release numbers (PEP 440's release
// segment), for the places that read versions Python reports.
package pyversion

// CompareRelease orders two release segments ([2, 4, 2] against [3]) the
// way PEP 440 does: numerically, part by part, missing parts counting as 0.
// It returns -1, 0 or 1.
func CompareRelease(a, b []int) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
