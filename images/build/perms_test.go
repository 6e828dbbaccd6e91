package build

import (
	"reflect"
	"testing"

	"github.com/gatewayhq/gateway/internal/perms"
)

// TestEveryOperationIsCalled: the interfaces the IAM actions are derived
// from list no operation the package does not call.
func TestEveryOperationIsCalled(t *testing.T) {
	if err := perms.CheckCalled(".", reflect.TypeFor[ecrAPI]()); err != nil {
		t.Error(err)
	}
}
