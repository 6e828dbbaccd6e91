package build

import (
	"context"
	"reflect"

	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/gatewayhq/gateway/internal/perms"
)

// ecrAPI is every ECR API operation the builder calls: the rest of its
// work with ECR is the registry protocol (see ECRActions).
type ecrAPI interface {
	GetAuthorizationToken(ctx context.Context, in *ecr.GetAuthorizationTokenInput, opts ...func(*ecr.Options)) (*ecr.GetAuthorizationTokenOutput, error)
}

// ecrRegistryActions are the IAM actions ECR checks for the registry
// protocol requests go-containerregistry makes: pushing an image (blob
// existence checks, chunked uploads, the manifest) and reading one back
// (manifests and blobs: the cache check, published environments' labels).
func ecrRegistryActions() []string {
	return []string{
		"ecr:BatchCheckLayerAvailability", "ecr:InitiateLayerUpload", "ecr:UploadLayerPart", "ecr:CompleteLayerUpload", "ecr:PutImage",
		"ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
	}
}

// ECRActions returns the IAM actions the gateway's role needs to build
// into and read from an ECR repository (images.repository): the API calls
// and the registry protocol's. ecr:GetAuthorizationToken takes no resource;
// the others can be limited to the repository.
func ECRActions() []string {
	return perms.AWS(map[string]reflect.Type{"ecr": reflect.TypeFor[ecrAPI]()}, ecrRegistryActions()...)
}

// GoogleRegistryRole is the role the gateway's service account needs on an
// Artifact Registry repository (images.repository): it pushes and reads
// images there, nothing else.
const GoogleRegistryRole = "roles/artifactregistry.writer"
