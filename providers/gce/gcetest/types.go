package gcetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// The types below are the JSON resources of the Compute Engine v1 and
// Secret Manager v1 REST APIs, as their references spell them (camelCase,
// int64 and uint64 values as decimal strings), restricted to the fields the
// gce provider sends or reads. Requests are decoded into them, so a field
// the client spells differently from the API is lost and a test notices.

// Int64 is an int64 or uint64 field: the APIs write them as JSON strings
// and accept strings or numbers (Go's protojson sends strings).
type Int64 int64

// MarshalJSON writes the value as a decimal string, as the APIs do.
func (n Int64) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(strconv.FormatInt(int64(n), 10))), nil
}

// UnmarshalJSON accepts "123" and 123.
func (n *Int64) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		u, uerr := strconv.ParseUint(s, 10, 64)
		if uerr != nil {
			return fmt.Errorf("not an integer: %s", b)
		}
		v = int64(u)
	}
	*n = Int64(v)
	return nil
}

// Instance is compute#instance.
type Instance struct {
	Kind                   string                  `json:"kind,omitempty"`
	ID                     Int64                   `json:"id,omitempty"`
	Name                   string                  `json:"name"`
	Description            string                  `json:"description,omitempty"`
	Zone                   string                  `json:"zone,omitempty"`
	MachineType            string                  `json:"machineType"`
	Status                 string                  `json:"status,omitempty"`
	StatusMessage          string                  `json:"statusMessage,omitempty"`
	CreationTimestamp      string                  `json:"creationTimestamp,omitempty"`
	LastStartTimestamp     string                  `json:"lastStartTimestamp,omitempty"`
	LastStopTimestamp      string                  `json:"lastStopTimestamp,omitempty"`
	SelfLink               string                  `json:"selfLink,omitempty"`
	Labels                 map[string]string       `json:"labels,omitempty"`
	LabelFingerprint       string                  `json:"labelFingerprint,omitempty"`
	Tags                   *Tags                   `json:"tags,omitempty"`
	Metadata               *Metadata               `json:"metadata,omitempty"`
	Disks                  []AttachedDisk          `json:"disks,omitempty"`
	NetworkInterfaces      []NetworkInterface      `json:"networkInterfaces,omitempty"`
	ServiceAccounts        []ServiceAccount        `json:"serviceAccounts,omitempty"`
	Scheduling             *Scheduling             `json:"scheduling,omitempty"`
	GuestAccelerators      []AcceleratorConfig     `json:"guestAccelerators,omitempty"`
	ShieldedInstanceConfig *ShieldedInstanceConfig `json:"shieldedInstanceConfig,omitempty"`
}

// MetadataValue returns the value of a metadata key and whether it is set.
func (in Instance) MetadataValue(key string) (string, bool) {
	if in.Metadata == nil {
		return "", false
	}
	for _, it := range in.Metadata.Items {
		if it.Key == key {
			return it.Value, true
		}
	}
	return "", false
}

// Tags is an instance's network tags.
type Tags struct {
	Items       []string `json:"items,omitempty"`
	Fingerprint string   `json:"fingerprint,omitempty"`
}

// Metadata is an instance's metadata.
type Metadata struct {
	Kind        string         `json:"kind,omitempty"`
	Fingerprint string         `json:"fingerprint,omitempty"`
	Items       []MetadataItem `json:"items,omitempty"`
}

// MetadataItem is one metadata key and value.
type MetadataItem struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// AttachedDisk is a disk of an instance.
type AttachedDisk struct {
	Type             string                        `json:"type,omitempty"`
	Mode             string                        `json:"mode,omitempty"`
	Boot             bool                          `json:"boot,omitempty"`
	AutoDelete       bool                          `json:"autoDelete,omitempty"`
	DeviceName       string                        `json:"deviceName,omitempty"`
	Source           string                        `json:"source,omitempty"`
	InitializeParams *AttachedDiskInitializeParams `json:"initializeParams,omitempty"`
}

// AttachedDiskInitializeParams makes a new disk with an instance.
type AttachedDiskInitializeParams struct {
	SourceImage string            `json:"sourceImage,omitempty"`
	DiskSizeGb  Int64             `json:"diskSizeGb,omitempty"`
	DiskType    string            `json:"diskType,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// NetworkInterface is an instance's network interface.
type NetworkInterface struct {
	Name          string         `json:"name,omitempty"`
	Network       string         `json:"network,omitempty"`
	Subnetwork    string         `json:"subnetwork,omitempty"`
	NetworkIP     string         `json:"networkIP,omitempty"`
	AccessConfigs []AccessConfig `json:"accessConfigs,omitempty"`
}

// AccessConfig gives an interface an external address.
type AccessConfig struct {
	Type  string `json:"type,omitempty"`
	Name  string `json:"name,omitempty"`
	NatIP string `json:"natIP,omitempty"`
}

// ServiceAccount is the identity an instance runs as.
type ServiceAccount struct {
	Email  string   `json:"email,omitempty"`
	Scopes []string `json:"scopes,omitempty"`
}

// Scheduling is an instance's scheduling options.
type Scheduling struct {
	AutomaticRestart          *bool  `json:"automaticRestart,omitempty"`
	OnHostMaintenance         string `json:"onHostMaintenance,omitempty"`
	Preemptible               bool   `json:"preemptible,omitempty"`
	ProvisioningModel         string `json:"provisioningModel,omitempty"`
	InstanceTerminationAction string `json:"instanceTerminationAction,omitempty"`
}

// AcceleratorConfig attaches GPUs to an instance.
type AcceleratorConfig struct {
	AcceleratorType  string `json:"acceleratorType,omitempty"`
	AcceleratorCount int32  `json:"acceleratorCount,omitempty"`
}

// ShieldedInstanceConfig is an instance's Shielded VM options.
type ShieldedInstanceConfig struct {
	EnableSecureBoot          bool `json:"enableSecureBoot,omitempty"`
	EnableVtpm                bool `json:"enableVtpm,omitempty"`
	EnableIntegrityMonitoring bool `json:"enableIntegrityMonitoring,omitempty"`
}

// Operation is compute#operation.
type Operation struct {
	Kind                string          `json:"kind,omitempty"`
	ID                  Int64           `json:"id,omitempty"`
	Name                string          `json:"name"`
	Zone                string          `json:"zone,omitempty"`
	OperationType       string          `json:"operationType,omitempty"`
	TargetLink          string          `json:"targetLink,omitempty"`
	TargetID            Int64           `json:"targetId,omitempty"`
	Status              string          `json:"status"`
	StatusMessage       string          `json:"statusMessage,omitempty"`
	User                string          `json:"user,omitempty"`
	Progress            int32           `json:"progress,omitempty"`
	InsertTime          string          `json:"insertTime,omitempty"`
	StartTime           string          `json:"startTime,omitempty"`
	EndTime             string          `json:"endTime,omitempty"`
	SelfLink            string          `json:"selfLink,omitempty"`
	Error               *OperationError `json:"error,omitempty"`
	HTTPErrorStatusCode int32           `json:"httpErrorStatusCode,omitempty"`
	HTTPErrorMessage    string          `json:"httpErrorMessage,omitempty"`
}

// OperationError lists why an operation failed.
type OperationError struct {
	Errors []OperationErrorItem `json:"errors"`
}

// OperationErrorItem is one reason an operation failed.
type OperationErrorItem struct {
	Code     string `json:"code"`
	Message  string `json:"message,omitempty"`
	Location string `json:"location,omitempty"`
}

// Firewall is compute#firewall.
type Firewall struct {
	Kind                  string         `json:"kind,omitempty"`
	ID                    Int64          `json:"id,omitempty"`
	Name                  string         `json:"name"`
	Description           string         `json:"description,omitempty"`
	Network               string         `json:"network,omitempty"`
	Priority              int32          `json:"priority,omitempty"`
	Direction             string         `json:"direction,omitempty"`
	SourceRanges          []string       `json:"sourceRanges,omitempty"`
	SourceTags            []string       `json:"sourceTags,omitempty"`
	TargetTags            []string       `json:"targetTags,omitempty"`
	SourceServiceAccounts []string       `json:"sourceServiceAccounts,omitempty"`
	TargetServiceAccounts []string       `json:"targetServiceAccounts,omitempty"`
	Allowed               []FirewallRule `json:"allowed,omitempty"`
	Denied                []FirewallRule `json:"denied,omitempty"`
	Disabled              bool           `json:"disabled,omitempty"`
	CreationTimestamp     string         `json:"creationTimestamp,omitempty"`
	SelfLink              string         `json:"selfLink,omitempty"`
}

// FirewallRule is one allowed or denied protocol and ports.
type FirewallRule struct {
	IPProtocol string   `json:"IPProtocol"`
	Ports      []string `json:"ports,omitempty"`
}

// MachineType is compute#machineType.
type MachineType struct {
	Kind         string                   `json:"kind,omitempty"`
	ID           Int64                    `json:"id,omitempty"`
	Name         string                   `json:"name"`
	Description  string                   `json:"description,omitempty"`
	Zone         string                   `json:"zone,omitempty"`
	GuestCpus    int32                    `json:"guestCpus"`
	MemoryMb     int32                    `json:"memoryMb"`
	IsSharedCpu  bool                     `json:"isSharedCpu,omitempty"`
	Accelerators []MachineTypeAccelerator `json:"accelerators,omitempty"`
	Deprecated   *Deprecation             `json:"deprecated,omitempty"`
	SelfLink     string                   `json:"selfLink,omitempty"`
}

// MachineTypeAccelerator is a GPU that comes with a machine type.
type MachineTypeAccelerator struct {
	GuestAcceleratorType  string `json:"guestAcceleratorType"`
	GuestAcceleratorCount int32  `json:"guestAcceleratorCount"`
}

// Deprecation marks a deprecated resource.
type Deprecation struct {
	State       string `json:"state,omitempty"`
	Replacement string `json:"replacement,omitempty"`
}

// AcceleratorType is compute#acceleratorType.
type AcceleratorType struct {
	Kind                    string `json:"kind,omitempty"`
	ID                      Int64  `json:"id,omitempty"`
	Name                    string `json:"name"`
	Description             string `json:"description,omitempty"`
	Zone                    string `json:"zone,omitempty"`
	MaximumCardsPerInstance int32  `json:"maximumCardsPerInstance,omitempty"`
	SelfLink                string `json:"selfLink,omitempty"`
}

// Secret is a Secret Manager secret with its versions' payloads (the
// payloads are the fake's record; the API never returns them with the
// secret).
type Secret struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Replication json.RawMessage   `json:"replication,omitempty"`
	CreateTime  string            `json:"createTime,omitempty"`
	Etag        string            `json:"etag,omitempty"`

	Versions [][]byte  `json:"-"`
	Policy   IAMPolicy `json:"-"`
}

// IAMPolicy is an IAM policy as Secret Manager's setIamPolicy takes it.
type IAMPolicy struct {
	Version  int          `json:"version,omitempty"`
	Bindings []IAMBinding `json:"bindings,omitempty"`
	Etag     string       `json:"etag,omitempty"`
}

// IAMBinding grants a role to members.
type IAMBinding struct {
	Role    string   `json:"role"`
	Members []string `json:"members"`
}
