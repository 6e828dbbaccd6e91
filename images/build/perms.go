package build

import (
	"context"
	"reflect"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/gatewayhq/gateway/internal/perms"
)

// ecrAPI is every ECR API operation the builder calls: the rest of its
// work with ECR is the registry protocol (see ECRRepositoryActions).
type ecrAPI interface {
	GetAuthorizationToken(ctx context.Context, in *ecr.GetAuthorizationTokenInput, opts ...func(*ecr.Options)) (*ecr.GetAuthorizationTokenOutput, error)
}

// ECRUnscopedActions returns the ECR API actions the builder calls, which
// AWS accepts only on the resource "*": the registry token, which is per
// account and region.
func ECRUnscopedActions() []string {
	return perms.AWS(map[string]reflect.Type{"ecr": reflect.TypeFor[ecrAPI]()})
}

// ECRRepositoryActions returns the IAM actions ECR checks for the registry
// protocol requests the builder makes to images.repository: pushing an
// environment (blob existence checks, chunked uploads, the manifest) and
// reading one back (the cache check, its labels). The test
// TestECRActionsAreTheRequestsMade pushes through the builder to a
// registry that maps each request to its action, and requires exactly
// these.
func ECRRepositoryActions() []string {
	return []string{
		"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:CompleteLayerUpload",
		"ecr:GetDownloadUrlForLayer", "ecr:InitiateLayerUpload", "ecr:PutImage", "ecr:UploadLayerPart",
	}
}

// ECRReadActions returns the IAM actions the builder needs on a repository
// it only reads: the base images' (images.bases: manifests, configs and
// layers, which a push copies or mounts into images.repository), and those
// of images users name or admins publish (their recorded versions).
// Checked the same way as ECRRepositoryActions.
func ECRReadActions() []string {
	return []string{"ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"}
}

// ECRActions returns every IAM action the gateway's role needs for
// environment images, sorted: ECRUnscopedActions on "*",
// ECRRepositoryActions on images.repository, ECRReadActions on the bases
// and other images.
func ECRActions() []string {
	out := slices.Concat(ECRUnscopedActions(), ECRRepositoryActions(), ECRReadActions())
	slices.Sort(out)
	return slices.Compact(out)
}

// GoogleRegistryRole is the role the gateway's service account needs on an
// Artifact Registry repository (images.repository): it pushes and reads
// images there, nothing else.
const GoogleRegistryRole = "roles/artifactregistry.writer"

// GoogleReadRole is the role the gateway's service account needs on an
// Artifact Registry repository it only reads: the base images' and those
// of images users name or admins publish.
const GoogleReadRole = "roles/artifactregistry.reader"
