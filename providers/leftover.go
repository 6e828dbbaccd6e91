package providers

import "time"

// Leftover is a cloud resource that carries this gateway's ownership tags
// or labels and is not a member: a security group, a parameter or secret,
// a task definition family, a firewall rule. A cluster's members all gone,
// such resources are found by their tags alone (the scheduler's reaper
// asks providers that can list them).
type Leftover struct {
	Kind    string    // what it is, in the provider's words ("security-group", "secret", ...)
	ID      string    // what the provider deletes it by: an id, a name or an ARN
	Cluster string    // the cluster its tags name, exactly
	Created time.Time // when it was made; zero when the cloud does not say
}

// Kinds of leftovers the cloud backends list.
const (
	LeftoverSecurityGroup = "security-group"
	LeftoverParameter     = "parameter"
	LeftoverSecret        = "secret"
	LeftoverTaskDefFamily = "task-definition-family"
	LeftoverFirewall      = "firewall-rule"
)
