package ec2test

// The XML shapes of EC2's answers (API version 2016-11-15), as the SDK's
// deserializers read them: lists are <item> elements inside a wrapper
// named like the field ("instancesSet", "tagSet", "groupSet").

type xTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xGroupRef struct {
	ID   string `xml:"groupId"`
	Name string `xml:"groupName,omitempty"`
}

type xMetadata struct {
	State      string `xml:"state"`
	HTTPTokens string `xml:"httpTokens"`
	HopLimit   int    `xml:"httpPutResponseHopLimit"`
	Endpoint   string `xml:"httpEndpoint"`
}

type xInstance struct {
	InstanceID    string        `xml:"instanceId"`
	ImageID       string        `xml:"imageId"`
	State         xState        `xml:"instanceState"`
	PrivateIP     string        `xml:"privateIpAddress,omitempty"`
	Reason        string        `xml:"reason"`
	InstanceType  string        `xml:"instanceType"`
	LaunchTime    string        `xml:"launchTime"`
	Zone          string        `xml:"placement>availabilityZone"`
	SubnetID      string        `xml:"subnetId,omitempty"`
	VpcID         string        `xml:"vpcId,omitempty"`
	ClientToken   string        `xml:"clientToken,omitempty"`
	Groups        []xGroupRef   `xml:"groupSet>item"`
	StateReason   *xStateReason `xml:"stateReason,omitempty"`
	Lifecycle     string        `xml:"instanceLifecycle,omitempty"`
	SpotRequestID string        `xml:"spotInstanceRequestId,omitempty"`
	Tags          []xTag        `xml:"tagSet>item"`
	Metadata      xMetadata     `xml:"metadataOptions"`
}

// xReservation is both an item of DescribeInstances' reservationSet and
// the body of RunInstances' answer.
type xReservation struct {
	ReservationID string      `xml:"reservationId"`
	OwnerID       string      `xml:"ownerId"`
	Instances     []xInstance `xml:"instancesSet>item"`
}

type xDescribeInstances struct {
	Reservations []xReservation `xml:"reservationSet>item"`
	NextToken    string         `xml:"nextToken,omitempty"`
}

type xStateChange struct {
	ID       string `xml:"instanceId"`
	Current  xState `xml:"currentState"`
	Previous xState `xml:"previousState"`
}

type xConsole struct {
	InstanceID string `xml:"instanceId"`
	Timestamp  string `xml:"timestamp"`
	Output     string `xml:"output,omitempty"`
}

type xTerminate struct {
	Items []xStateChange `xml:"instancesSet>item"`
}

type xSpotStatus struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xSpotRequest struct {
	ID         string      `xml:"spotInstanceRequestId"`
	InstanceID string      `xml:"instanceId"`
	State      string      `xml:"state"`
	Type       string      `xml:"type"`
	Status     xSpotStatus `xml:"status"`
}

type xSpotRequests struct {
	Items []xSpotRequest `xml:"spotInstanceRequestSet>item"`
}

type xSubnet struct {
	ID    string `xml:"subnetId"`
	VPC   string `xml:"vpcId"`
	Zone  string `xml:"availabilityZone"`
	CIDR  string `xml:"cidrBlock"`
	State string `xml:"state"`
	Free  int    `xml:"availableIpAddressCount"`
}

type xSubnets struct {
	Items     []xSubnet `xml:"subnetSet>item"`
	NextToken string    `xml:"nextToken,omitempty"`
}

type xImage struct {
	ID         string `xml:"imageId"`
	Arch       string `xml:"architecture"`
	RootDevice string `xml:"rootDeviceName"`
	RootType   string `xml:"rootDeviceType"`
	State      string `xml:"imageState"`
}

type xImages struct {
	Items []xImage `xml:"imagesSet>item"`
}

type xCreateGroup struct {
	Return  bool   `xml:"return"`
	GroupID string `xml:"groupId"`
	Tags    []xTag `xml:"tagSet>item"`
}

type xAuthorize struct {
	Return bool `xml:"return"`
}

type xDeleteGroup struct {
	Return  bool   `xml:"return"`
	GroupID string `xml:"groupId"`
}

type xPair struct {
	GroupID     string `xml:"groupId"`
	UserID      string `xml:"userId"`
	Description string `xml:"description,omitempty"`
}

type xRange struct {
	CIDR        string `xml:"cidrIp"`
	Description string `xml:"description,omitempty"`
}

type xRange6 struct {
	CIDR        string `xml:"cidrIpv6"`
	Description string `xml:"description,omitempty"`
}

type xPerm struct {
	Protocol string    `xml:"ipProtocol"`
	From     int       `xml:"fromPort"`
	To       int       `xml:"toPort"`
	Groups   []xPair   `xml:"groups>item"`
	V4       []xRange  `xml:"ipRanges>item"`
	V6       []xRange6 `xml:"ipv6Ranges>item"`
}

type xGroup struct {
	OwnerID     string  `xml:"ownerId"`
	ID          string  `xml:"groupId"`
	Name        string  `xml:"groupName"`
	Description string  `xml:"groupDescription"`
	VPC         string  `xml:"vpcId"`
	Ingress     []xPerm `xml:"ipPermissions>item"`
	Egress      []xPerm `xml:"ipPermissionsEgress>item"`
	Tags        []xTag  `xml:"tagSet>item"`
}

type xGroups struct {
	Items     []xGroup `xml:"securityGroupInfo>item"`
	NextToken string   `xml:"nextToken,omitempty"`
}

type xVCPU struct {
	Default int `xml:"defaultVCpus"`
}

type xMemory struct {
	MiB int64 `xml:"sizeInMiB"`
}

type xGPUMemory struct {
	MiB int `xml:"sizeInMiB"`
}

type xGPU struct {
	Name         string     `xml:"name"`
	Manufacturer string     `xml:"manufacturer"`
	Count        int        `xml:"count"`
	Memory       xGPUMemory `xml:"memoryInfo"`
}

type xGPUInfo struct {
	GPUs []xGPU `xml:"gpus>item"`
}

type xProcessor struct {
	Archs []string `xml:"supportedArchitectures>item"`
}

type xType struct {
	Name      string     `xml:"instanceType"`
	Current   bool       `xml:"currentGeneration"`
	VCPU      xVCPU      `xml:"vCpuInfo"`
	Memory    xMemory    `xml:"memoryInfo"`
	Processor xProcessor `xml:"processorInfo"`
	GPU       *xGPUInfo  `xml:"gpuInfo,omitempty"`
}

type xTypes struct {
	Items     []xType `xml:"instanceTypeSet>item"`
	NextToken string  `xml:"nextToken,omitempty"`
}
